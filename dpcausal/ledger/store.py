"""The privacy-budget ledger: datasets, caps and every charge, with reserve -> release -> commit.

Protocol (spec privacy_testing.md "Budgets")
--------------------------------------------
1. ``reserve``: one serialisable transaction locks the dataset, composes every recorded charge (in
   any status) with the new one, refuses with :class:`BudgetExceededError` if the cap would be
   exceeded, else records the charge as ``reserved``. Only then may noise be drawn.
2. The caller draws noise and calls ``slot.commit(result_json)``: the result is stored under the
   release id, and only after that may it be returned or logged.
3. A block left by an exception marks the charge ``incomplete``; a process killed in between
   leaves it ``reserved``. Both keep their charge (conservative). The same release id never
   reserves twice: a retry gets the committed result back (no new noise) or fails with
   :class:`ReleaseInProgressError`.
"""

from __future__ import annotations

import difflib
import getpass
import json
import os
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dpcausal.accounting import DEFAULT_DELTA, PrivacyCharge
from dpcausal.fingerprints import SKETCH_PREFIX, near_copy
from dpcausal.ledger import analysts, schema
from dpcausal.ledger.analysts import Analyst, AnalystBudgetExceededError
from dpcausal.ledger.composition import (
    Cap,
    Relation,
    Spend,
    admissible,
    compose,
    headroom,
    relation_admissible,
    within_cap,
)
from dpcausal.ledger.errors import (
    BudgetExceededError,
    DatasetIdentityError,
    IncompatibleChargeError,
    ReleaseInProgressError,
)
from dpcausal.ledger.registration import Registration

_T = schema.charges
_D = schema.datasets
_F = schema.fingerprints
_C = schema.corrections
_R = schema.registrations
#: A keyed identity the ledger binds to one dataset id, several of them, or none.
Fingerprint = str | Sequence[str] | None


@dataclass
class ReleaseSlot:
    """A reserved (or already committed) release. ``result`` is the committed JSON, else None."""

    dataset: str
    release_id: str
    charge: PrivacyCharge
    spend: Spend  # the dataset's composed spend including this charge
    result: str | None = None
    _ledger: Ledger | None = field(default=None, repr=False)
    _token: str = field(default="", repr=False)

    def commit(self, result: str, detail: dict[str, Any] | None = None) -> None:
        """Store the published result under the release id; only after this may it be shown.
        ``detail``: public facts the release fixed after its charge (e.g. the estimator
        ``auto`` chose from a pre-release's facts), merged into the charge's recorded detail
        in the same transaction."""
        if not isinstance(result, str):
            raise TypeError(f"result must be a JSON string, got {type(result).__name__}; "
                            "pass e.g. release.to_json()")
        if self.result is not None:
            raise ReleaseInProgressError(f"release {self.release_id} is already committed")
        assert self._ledger is not None, "bug: a slot must come from Ledger.release"
        self._ledger._finish(self.release_id, self._token, "committed", result, detail)
        self.result = result


class Ledger:
    """A privacy-budget ledger on a SQLAlchemy database.

    Parameters
    ----------
    url : str, optional
        SQLAlchemy URL. None uses ``DPCAUSAL_LEDGER_URL``, else ``sqlite:///<data>/ledger.db``
        with ``<data>`` from :func:`dpcausal.location.data_dir` (``DPCAUSAL_DATA``; the same
        rule as the CLI's).
        ``postgresql://`` URLs use the psycopg 3 driver.
    create : bool, default False
        Create the ledger if its SQLite file does not exist (or a PostgreSQL database has no ledger
        tables). An existing file is never replaced, whatever this says.
    """

    def __init__(self, url: str | None = None, *, create: bool = False) -> None:
        if url is None:
            schema.check_moved_default()
        self.url = url if url is not None else schema.default_url()
        self.engine = schema.open_engine(self.url, create)

    @property
    def where(self) -> str:
        """Where this ledger is: its SQLite file, or its URL without the password (every
        refusal names it; so does the CLI after every release)."""
        return schema.where(self.engine)

    def __repr__(self) -> str:
        """``Ledger('<where>')``: a notebook shows which ledger its releases are charged to."""
        return f"Ledger({self.where!r})"

    def close(self) -> None:
        self.engine.dispose()

    def __del__(self) -> None:
        # a ledger a notebook never closes returns its pooled connections when collected
        # (Python 3.13 warns of every unclosed sqlite3 connection)
        engine = self.__dict__.get("engine")
        if engine is not None:
            engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ budgets
    def set_budget(self, dataset: str, *, zeta: float | None = None, rho: float | None = None,
                   epsilon: float | None = None, delta: float | None = None, unit: str = "row",
                   public: str | list[str] | None = None, fingerprint: Fingerprint = None) -> Cap:
        """Set (or change) a dataset's cap: exactly one of ``zeta``, ``rho``, ``epsilon``+``delta``.

        A cap below what is already spent, or one a recorded charge cannot count against, is
        refused; so is a fingerprint already bound to another dataset id.

        Parameters
        ----------
        dataset : str
            The dataset id.
        zeta, rho, epsilon : float, optional
            The cap as a GDP zeta, a zCDP rho or an (epsilon, delta) pair; exactly one.
        delta : float, optional
            With ``epsilon``, the cap's delta; for zeta/rho caps, the delta at which the
            cumulative epsilon is reported (default 1e-5).
        unit : str
            The unit of privacy the cap protects (row, user, label, client).
        public : str or list of str, optional
            What the cap's neighbouring relation holds public besides n (default: the unit's
            mechanisms' relation, :class:`composition.Relation`).
        fingerprint : str or sequence of str, optional
            The data's keyed fingerprint, or several keyed identities (the data's and their
            source's), bound to this dataset id.

        Returns
        -------
        Cap
            The cap now recorded.
        """
        _check_name(dataset)
        relation = Relation.of(unit, public)
        fingerprints = _fingerprints(fingerprint)
        given = {k: v for k, v in {"zeta": zeta, "rho": rho, "epsilon": epsilon}.items()
                 if v is not None}
        if len(given) != 1:
            raise ValueError(f"give exactly one of zeta, rho or epsilon (with delta), got "
                             f"{sorted(given) or 'none'}; e.g. set_budget('{dataset}', zeta=1.5)")
        kind, value = next(iter(given.items()))
        if kind == "epsilon" and delta is None:
            raise ValueError("an epsilon cap needs delta too, got delta=None; "
                             "e.g. epsilon=3.0, delta=1e-5")
        cap = Cap(kind, value, DEFAULT_DELTA if delta is None else delta)
        now = datetime.now(UTC)
        with self.engine.begin() as conn:
            row = _lock_dataset(conn, dataset)
            _check_fingerprints(conn, dataset, fingerprints, lock=True, ledger=self.where)
            recorded = _charges_of(conn, dataset)
            reasons = [r for r in (relation_admissible(rel, relation)
                                   for rel in set(_relations_of(conn, dataset).values()))
                       if r is not None]
            reasons += [r for r in (admissible(c, cap) for c in recorded) if r is not None]
            if reasons:
                raise ValueError(f"cannot set the cap of dataset {dataset} to {cap.describe()}: "
                                 f"{reasons[0]}, and that charge is already recorded.")
            ok, spend = within_cap(recorded, cap)
            if not ok:
                raise ValueError(
                    f"cannot set the cap of dataset {dataset} to {cap.describe()}: it has already "
                    f"spent {spend.describe()}, more than that cap. A cap cannot go below what is "
                    "spent; give a cap at least as large.")
            values = dict(cap_kind=cap.kind, cap_value=float(cap.value),
                          cap_delta=float(cap.delta), unit=unit, public=relation.text,
                          updated_at=now)
            if row is None:
                conn.execute(_D.insert().values(name=dataset, created_at=now, **values))
            else:
                conn.execute(_D.update().where(_D.c.name == dataset).values(**values))
            _bind_fingerprints(conn, dataset, fingerprints)
        return cap

    # ------------------------------------------------------------------ registrations
    def register(self, dataset: str, *, source: dict[str, Any], columns: dict[str, Any], n: int,
                 dtypes: dict[str, str] | None = None, missing: dict[str, Any] | None = None,
                 facts: dict[str, Any] | None = None, evaluation_allowed: bool = False,
                 origin: str | None = None, zeta: float | None = None,
                 fingerprint: Fingerprint = None) -> Registration:
        """Register ``dataset`` (its curator, once; again for a new version of the source):
        bind to the id what a run may only ask about (issue 32 §1,
        :mod:`dpcausal.ledger.registration`). Each registration is kept (:meth:`registrations`);
        the latest holds; registering the same values again records nothing new.

        Parameters
        ----------
        dataset : str
            The dataset id.
        source : dict
            Where the records are: file path(s), the partition list, or the SQL query text with
            its database block and id column (public text, no secret).
        columns : dict
            The column roles (treatment, outcome, covariates ...).
        n : int
            The number of records, counted by the curator now; public from here on.
        dtypes, missing : dict, optional
            The declared column types and the missing-value policy.
        facts : dict, optional
            The unit of privacy (``unit``, default ``"row"``) and what its neighbouring relation
            holds public (``public``), and other public facts (e.g. ``d``).
        evaluation_allowed : bool
            Allow evaluation mode (a non-private read): only with ``origin``.
        origin : {"synthetic", "public"}, optional
            The curator's mark of the source; None for a private source.
        zeta : float, optional
            Also set the dataset's cap (:meth:`set_budget`) in the registration's unit.
        fingerprint : str or sequence of str, optional
            The data's and the source's keyed identities: refused if bound to another dataset
            id, bound to this one once it has a cap.

        Returns
        -------
        Registration
            The registration now recorded.
        """
        _check_name(dataset)
        facts = {"unit": "row", **(facts or {})}
        Relation.of(facts["unit"], facts.get("public"))  # refuses an unknown unit or fact
        fingerprints = _fingerprints(fingerprint)
        reg = Registration(dataset, dict(source), dict(columns), n, dict(dtypes or {}),
                           dict(missing or {}), facts, evaluation_allowed, origin)
        if zeta is not None:
            self.set_budget(dataset, zeta=zeta, unit=facts["unit"], public=facts.get("public"),
                            fingerprint=fingerprints)
        by, now = f"{getpass.getuser()}@{socket.gethostname()}", datetime.now(UTC)
        with self.engine.begin() as conn:
            has_cap = _lock_dataset(conn, dataset) is not None
            _check_fingerprints(conn, dataset, fingerprints, lock=True, ledger=self.where)
            if has_cap:
                _bind_fingerprints(conn, dataset, fingerprints)
            latest = conn.execute(sa.select(_R).where(_R.c.dataset == dataset)
                                  .order_by(_R.c.version.desc()).limit(1)).mappings().first()
            if latest is not None and latest["registration"] == reg.to_json():
                return _registration_of(latest)  # the same registration again: no change
            last = 0 if latest is None else latest["version"]
            conn.execute(_R.insert().values(
                dataset=dataset, version=last + 1, registration=reg.to_json(), n=n,
                evaluation_allowed=evaluation_allowed, by=by, at=now))
        return replace(reg, version=last + 1, by=by, at=now)

    def registration(self, dataset: str) -> Registration | None:
        """The latest registration of ``dataset``, None if it was never registered."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(_R).where(_R.c.dataset == dataset)
                               .order_by(_R.c.version.desc()).limit(1)).mappings().first()
        return None if row is None else _registration_of(row)

    def registrations(self, dataset: str) -> list[Registration]:
        """Every registration of ``dataset``, oldest first: the record of each change."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(_R).where(_R.c.dataset == dataset)
                                .order_by(_R.c.version)).mappings().all()
        return [_registration_of(r) for r in rows]

    def known(self, dataset: str | None = None, *, fingerprint: Fingerprint = None) -> str | None:
        """The dataset id under which ``dataset`` has a cap or ``fingerprint`` (any of them, if
        several) is bound, else None.

        For refusing a non-private evaluation read of budgeted data (it would leak what the budget
        protects): a caller
        refuses evaluation mode whenever this is not None.

        The curator's call (README "Two seats"): asked about data of one's choosing, the keyed
        row sketch answers whether a row belongs to a registered dataset, so whoever may call it
        holds the ledger and its key already. Analysts ask through the gateway, which never
        calls it.
        """
        fingerprints = _fingerprints(fingerprint)
        if dataset is None and not fingerprints:
            raise ValueError("give a dataset id, a fingerprint or both")
        with self.engine.connect() as conn:
            if (owner := _other_owner(conn, None, fingerprints)) is not None:
                return owner
            if dataset is not None and _read_dataset(conn, dataset) is not None:
                return dataset
        return None

    @staticmethod
    def exists(url: str | None = None) -> bool:
        """Whether there is a ledger to open at ``url`` (default as :class:`Ledger`): False only
        for a SQLite file that does not exist; a server database is assumed to exist."""
        return schema.exists(url if url is not None else schema.default_url())

    def unit(self, dataset: str) -> str:
        """The unit of privacy of the dataset's cap (ValueError for an unknown dataset)."""
        return self.relation(dataset).unit

    def relation(self, dataset: str) -> Relation:
        """The neighbouring relation the dataset's cap protects (ValueError if unknown)."""
        with self.engine.connect() as conn:
            return _relation_of(_require(conn, dataset, _read_dataset(conn, dataset)))

    def has_dataset(self, dataset: str) -> bool:
        """Whether the dataset has a cap in this ledger."""
        with self.engine.connect() as conn:
            return _read_dataset(conn, dataset) is not None

    def cap(self, dataset: str) -> Cap:
        """The dataset's cap.

        Parameters
        ----------
        dataset : str

        Returns
        -------
        Cap

        Raises
        ------
        ValueError
            For an unknown dataset.
        """
        with self.engine.connect() as conn:
            return _cap_of(_require(conn, dataset, _read_dataset(conn, dataset)))

    def spent(self, dataset: str) -> Spend:
        """Composed spend of every recorded charge of ``dataset``.

        Parameters
        ----------
        dataset : str

        Returns
        -------
        Spend
            zeta if every charge is Gaussian, and epsilon at the cap's delta.
        """
        with self.engine.connect() as conn:
            cap = _cap_of(_require(conn, dataset, _read_dataset(conn, dataset)))
            return compose(_charges_of(conn, dataset), cap.delta)

    def headroom(self, dataset: str) -> dict[str, float | None]:
        """What one more release on ``dataset`` could spend.

        Parameters
        ----------
        dataset : str

        Returns
        -------
        dict
            :func:`composition.headroom`'s figures (None where a measure does not apply).
        """
        with self.engine.connect() as conn:
            row = _require(conn, dataset, _read_dataset(conn, dataset))
            return _headroom(_charges_of(conn, dataset), row, _relations_of(conn, dataset))

    def budgets(self) -> pd.DataFrame:
        """One row per dataset: unit, cap, charges by status, composed spend, and what one more
        release could spend (``next_*``, rounded down; :func:`composition.headroom`)."""
        read: list[tuple[dict[str, Any], list[PrivacyCharge], dict[str, int],
                         dict[str, Relation]]] = []
        with self.engine.begin() as conn:  # read only; the composition runs after the lock
            _mark_dead_reservations(conn)
            for dset in conn.execute(sa.select(_D).order_by(_D.c.name)).mappings():
                statuses = conn.execute(
                    sa.select(_T.c.status, sa.func.count()).where(_T.c.dataset == dset["name"])
                    .group_by(_T.c.status)).all()
                read.append((dict(dset), _charges_of(conn, dset["name"]),
                             {status: count for status, count in statuses},
                             _relations_of(conn, dset["name"])))
        rows = []
        for d, recorded, counts, relations in read:
            cap = _cap_of(d)
            spend = compose(recorded, cap.delta)
            rows.append({
                "dataset": d["name"], "unit": d["unit"], "public": d["public"],
                "cap": cap.describe(),
                "delta": cap.delta,
                "charges": spend.n_charges, "committed": counts.get("committed", 0),
                "unfinished": counts.get("reserved", 0) + counts.get("incomplete", 0),
                "spent_zeta": spend.zeta, "spent_rho": spend.rho,
                "spent_epsilon": spend.epsilon, **_headroom(recorded, d, relations),
                "composition": spend.method,
            })
        columns = ["dataset", "unit", "public", "cap", "delta", "charges", "committed",
                   "unfinished", "spent_zeta", "spent_rho", "spent_epsilon", "next_zeta",
                   "next_epsilon", "next_pure_epsilon", "composition"]
        return pd.DataFrame(rows, columns=columns)

    def history(self, dataset: str) -> pd.DataFrame:
        """Every charge of a dataset in reservation order.

        Reservations whose process (on this host) is gone are marked ``incomplete`` first.

        Parameters
        ----------
        dataset : str

        Returns
        -------
        pandas.DataFrame
            One row per charge: status, mechanism, unit, the charge's own (epsilon, delta)
            (Gaussian and RDP charges at the dataset's delta), what the release was
            (``detail``), its run link and the analyst who asked (None: the curator).
        """
        with self.engine.begin() as conn:
            cap = _cap_of(_require(conn, dataset, _read_dataset(conn, dataset)))
            _mark_dead_reservations(conn, dataset)
            rows = conn.execute(sa.select(_T).where(_T.c.dataset == dataset).order_by(_T.c.id))
            records = [dict(r) for r in rows.mappings()]
        columns = ["release_id", "status", "mechanism", "unit", "public", "zeta", "epsilon",
                   "delta", "detail", "reserved_at", "finished_at", "run_url", "analyst"]
        if not records:
            return pd.DataFrame(columns=columns)
        guarantees = [_guarantee(_row_charge(r), cap.delta) for r in records]
        frame = pd.DataFrame(records)
        frame["epsilon"] = [g[0] for g in guarantees]
        frame["delta"] = [g[1] for g in guarantees]
        frame["detail"] = [json.loads(d) for d in frame["detail"]]
        return frame[columns]

    def committed(self, release_id: str) -> tuple[str, str] | None:
        """The dataset and the published result (the release's JSON) of the committed charge
        ``release_id``, or None when no charge with that id was committed (unknown, reserved or
        incomplete): what was released, as it was released.

        Parameters
        ----------
        release_id : str

        Returns
        -------
        (str, str) or None
        """
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(_T.c.dataset, _T.c.result).where(
                _T.c.release_id == release_id, _T.c.status == "committed")).first()
        return None if row is None else (row.dataset, row.result)

    def correct_unit(self, release_id: str, unit: str, *, public: str | list[str] | None = None,
                     reason: str) -> Relation:
        """Correct the neighbouring relation a recorded charge is stated under (its curator's
        repair of a mislabelled charge), logged in the ledger with ``reason``, who and when.

        ``unit``/``public`` as in :meth:`release`. The charge keeps its parameters and keeps
        counting; if its new relation does not bound its dataset's cap, the dataset admits no
        further release until its cap is set under a relation every charge bounds
        (README "Units and neighbouring relations"). Returns the new relation.
        """
        relation = Relation.of(unit, public)
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("reason must say why the unit is corrected (it is logged), e.g. "
                             "reason='user-level release recorded per row by migration 0002'")
        with self.engine.begin() as conn:
            old = conn.execute(sa.select(_T).where(_T.c.release_id == release_id)
                               ).mappings().first()
            if old is None:
                raise ValueError(f"no charge with release_id {release_id!r}; see "
                                 "`dpcausal ledger history DATASET` for the release ids")
            _lock_dataset(conn, old["dataset"])
            conn.execute(_T.update().where(_T.c.release_id == release_id)
                         .values(unit=relation.unit, public=relation.text))
            conn.execute(_C.insert().values(
                release_id=release_id, old_unit=old["unit"], old_public=old["public"],
                new_unit=relation.unit, new_public=relation.text, reason=reason.strip(),
                by=f"{getpass.getuser()}@{socket.gethostname()}", at=datetime.now(UTC)))
        return relation

    def corrections(self, dataset: str) -> pd.DataFrame:
        """Every correction of the relation of one of ``dataset``'s charges, oldest first
        (:meth:`correct_unit`, and those schema migration 0003 derived from stored details)."""
        columns = ["release_id", "old_unit", "old_public", "new_unit", "new_public", "reason",
                   "by", "at"]
        with self.engine.connect() as conn:
            _require(conn, dataset, _read_dataset(conn, dataset))
            rows = conn.execute(
                sa.select(*(_C.c[c] for c in columns)).join(_T, _T.c.release_id == _C.c.release_id)
                .where(_T.c.dataset == dataset).order_by(_C.c.id)).mappings().all()
        return pd.DataFrame([dict(r) for r in rows], columns=columns)

    # ------------------------------------------------------------------ analysts
    def add_analyst(self, name: str, datasets: Sequence[str], *,
                    zeta: float | None = None) -> tuple[Analyst, str]:
        """Admit a remote analyst (issue 40; :mod:`dpcausal.ledger.analysts`): ``name`` may ask
        about ``datasets`` (each must have a cap), with their own zeta-GDP cap ``zeta`` on each
        (within each dataset's cap; None: the dataset's cap only).

        Returns
        -------
        (Analyst, str)
            The analyst recorded and their token: shown once, stored only as a salted hash.
        """
        analysts.check_name(name)
        wanted = [datasets] if isinstance(datasets, str) else list(datasets)
        if not wanted or not all(isinstance(d, str) and d.strip() for d in wanted):
            raise ValueError(f"datasets must name at least one dataset id, got {datasets!r}")
        by = f"{getpass.getuser()}@{socket.gethostname()}"
        with self.engine.begin() as conn:
            caps = {d: _cap_of(_require(conn, d, _lock_dataset(conn, d)))
                    for d in dict.fromkeys(wanted)}
            token = analysts.add(conn, name, list(caps), zeta, caps, by)
            return analysts.read(conn, name)[0], token

    def analysts(self) -> list[Analyst]:
        """Every analyst ever admitted (revoked ones too), by name."""
        with self.engine.connect() as conn:
            return analysts.read(conn)

    def revoke_analyst(self, name: str) -> Analyst:
        """Revoke analyst ``name``: their token is refused from now on (their charges stay)."""
        with self.engine.begin() as conn:
            return analysts.revoke(conn, name)

    def authenticate(self, token: str) -> Analyst:
        """The active analyst holding ``token``
        (:class:`~dpcausal.ledger.analysts.AnalystRefusedError` otherwise)."""
        with self.engine.connect() as conn:
            return analysts.authenticate(conn, token)

    def asked_by(self, name: str, prefix: str | None = None) -> list[dict[str, Any]]:
        """Analyst ``name``'s charges, oldest first (release ids starting with ``prefix``, if
        given): ``release_id``, ``dataset``, ``status``, ``reserved_at``, ``finished_at`` and
        the committed ``result`` (the release's JSON; None until committed)."""
        with self.engine.connect() as conn:
            return analysts.asked_by(conn, name, prefix)

    def analyst_spent(self, name: str, dataset: str) -> Spend:
        """The composed spend of analyst ``name``'s charges on ``dataset`` (at its cap's
        delta)."""
        with self.engine.connect() as conn:
            cap = _cap_of(_require(conn, dataset, _read_dataset(conn, dataset)))
            return analysts.spent(conn, name, dataset, cap.delta)

    # ------------------------------------------------------------------ notebooks
    @contextmanager
    def charging(self, dataset: str, *, fingerprint: Fingerprint = None) -> Iterator[Ledger]:
        """Charge every library fit inside the block to ``dataset``: reserve -> fit -> commit.

        ``with led.charging("trial-A"): est.fit(df, ...)``. Each fit reserves its charge (in the
        mechanism's unit) before drawing any noise and commits the release before returning it;
        past the cap it raises BudgetExceededError and draws nothing. Evaluation fits are
        refused. Only fits of this thread (or context) are charged; the previous accountant
        (:mod:`dpcausal.session`) is restored on exit.

        Parameters
        ----------
        dataset : str
            The dataset id to charge; it must have a cap.
        fingerprint : str or sequence of str, optional
            Further keyed identities, bound to ``dataset`` on first use; each fit also binds
            its input's own (:class:`dpcausal.session.LedgerAccountant`), so the same data, or a
            near copy, are refused under another id.

        Yields
        ------
        Ledger
            This ledger.
        """
        from dpcausal import session

        _check_name(dataset)
        with session.charging_to(session.LedgerAccountant(self, dataset, fingerprint)):
            yield self

    def fit(self, dataset: str, mechanism: Any, data: Any, *args: Any,
            fingerprint: Fingerprint = None, **roles: Any) -> Any:
        """One charged release in one line: ``led.fit("trial-A", PrivateATE(...), df,
        treatment="A", outcome="Y")`` is ``mechanism.fit(...)`` inside :meth:`charging`.

        Parameters
        ----------
        dataset : str
            The dataset id to charge.
        mechanism : Mechanism
            Any mechanism (:class:`dpcausal.PrivateATE`, ``ClusterDP``, ...).
        data, *args, **roles
            What ``mechanism.fit`` takes.
        fingerprint : str or sequence of str, optional
            As in :meth:`charging`.

        Returns
        -------
        Release
            The mechanism's release, committed to the ledger.
        """
        with self.charging(dataset, fingerprint=fingerprint):
            return mechanism.fit(data, *args, **roles)

    # ------------------------------------------------------------------ releases
    def check(self, dataset: str, charge: PrivacyCharge, *, unit: str,
              public: str | list[str] | None = None, fingerprint: Fingerprint = None) -> None:
        """Raise now what :meth:`release` would raise for ``charge`` per ``unit`` today
        (BudgetExceededError, IncompatibleChargeError, DatasetIdentityError).

        Advisory and read-only, so a flow can refuse before hours of model fitting; only the
        reservation in :meth:`release` is authoritative (another release may land in between).

        Parameters
        ----------
        dataset : str
        charge : PrivacyCharge
            The data-free charge of the planned release.
        unit, public, fingerprint
            As in :meth:`release`.

        Returns
        -------
        None
            Returns only when the release would be admitted today.
        """
        with self.engine.connect() as conn:
            row = _require(conn, dataset, _read_dataset(conn, dataset))
            _check_fingerprints(conn, dataset, _fingerprints(fingerprint), ledger=self.where)
            recorded = _charges_of(conn, dataset)
            refusal, _ = _admit(dataset, charge, Relation.of(unit, public, charge.detail),
                                recorded, row, _relations_of(conn, dataset))
        if refusal is not None:
            raise _with_most(refusal, recorded, _cap_of(row), self.where)

    @contextmanager
    def release(self, dataset: str, release_id: str, charge: PrivacyCharge,
                run_url: str | None = None, *, unit: str, public: str | list[str] | None = None,
                fingerprint: Fingerprint = None, detail: dict | None = None,
                analyst: str | None = None) -> Iterator[ReleaseSlot]:
        """Reserve ``charge`` for ``release_id`` before any noise; commit inside the block.

        Parameters
        ----------
        dataset : str
            The dataset id to charge.
        release_id : str
            The release's id: a retried id that was committed hands back its release.
        charge : PrivacyCharge
            The data-free charge.
        run_url : str, optional
            The run that records the release.
        unit : str
            The charge's unit of privacy (row, user, label, client).
        public : str or list of str, optional
            What its neighbouring relation holds public besides n (default: the unit's
            mechanisms' relation; :class:`composition.Relation`).
        fingerprint : str or sequence of str, optional
            The released data's keyed fingerprint, or several keyed identities (the data's and
            their source's), each bound to ``dataset`` on first use.
        detail : dict, optional
            What the release was (mechanism, estimator, K, bounds ...), stored with
            ``charge.detail``.
        analyst : str, optional
            The remote analyst who asked (recorded with the charge; None: the curator). The
            same transaction refuses an unknown or revoked analyst, a dataset they are not
            admitted to, and a charge over their own cap (:mod:`dpcausal.ledger.analysts`).

        Yields
        ------
        ReleaseSlot
            The reservation (``result`` holds the committed JSON of a retried id); commit the
            release with ``slot.commit(text)`` inside the block.

        Raises
        ------
        BudgetExceededError
            The cap would be exceeded (nothing recorded; draw no noise).
        IncompatibleChargeError
            The cap can never admit this charge (its mechanism or its neighbouring relation), or
            a recorded charge's relation does not bound the cap's (nothing recorded).
        DatasetIdentityError
            A ``fingerprint`` is already bound to another dataset id (nothing recorded).
        ReleaseInProgressError
            The release id was reserved before and never committed (its charge stays recorded).
        """
        if detail:
            charge = replace(charge, detail={**charge.detail, **detail})
        slot = self._reserve(dataset, release_id, charge, run_url, unit, public, fingerprint,
                             analyst)
        if slot.result is not None:  # committed before: hand it back, draw nothing
            yield slot
            return
        try:
            yield slot
        except BaseException:
            self._finish(release_id, slot._token, "incomplete", None)
            raise
        if slot.result is None:
            self._finish(release_id, slot._token, "incomplete", None)
            raise ReleaseInProgressError(
                f"release {release_id} left its block without slot.commit(result); its charge "
                "stays recorded (status incomplete) and nothing may be published under it.")

    def _reserve(self, dataset: str, release_id: str, charge: PrivacyCharge,
                 run_url: str | None, unit: str, public: str | list[str] | None,
                 fingerprint: Fingerprint, analyst: str | None = None) -> ReleaseSlot:
        _check_name(dataset)
        fingerprints = _fingerprints(fingerprint)
        if not isinstance(release_id, str) or not release_id.strip():
            raise ValueError(f"release_id must be a non-empty string, got {release_id!r}; "
                             "use '<prefect flow-run id>/<release name>'")
        if not isinstance(charge, PrivacyCharge):
            raise TypeError(f"charge must be a dpcausal.accounting.PrivacyCharge, got "
                            f"{type(charge).__name__}")
        relation = Relation.of(unit, public, charge.detail)
        outcome: ReleaseSlot | Exception
        with self.engine.begin() as conn:
            row = _require(conn, dataset, _lock_dataset(conn, dataset))
            recorded = _charges_of(conn, dataset)
            same_id = sa.select(_T).where(_T.c.release_id == release_id)
            old = conn.execute(same_id).mappings().first()
            if old is not None:
                outcome = _retry(conn, old, dataset, charge, relation, recorded, _cap_of(row))
            elif analyst is not None and (refused := analysts.admit(
                    conn, analyst, dataset, charge, _cap_of(row).delta, self.where)) is not None:
                outcome = refused
            elif (owner := _other_owner(conn, dataset, fingerprints, lock=True)) is not None:
                outcome = DatasetIdentityError(dataset, owner, self.where)
            else:
                outcome = self._insert(conn, dataset, release_id, charge, run_url, recorded, row,
                                       relation, fingerprints, analyst)
        # raised after the transaction commits, so that an "incomplete" mark made by a retry stays
        if isinstance(outcome, Exception):
            raise _with_most(outcome, recorded, _cap_of(row), self.where)
        return outcome

    def _insert(self, conn: Connection, dataset: str, release_id: str, charge: PrivacyCharge,
                run_url: str | None, recorded: list[PrivacyCharge], row: sa.RowMapping,
                relation: Relation, fingerprints: tuple[str, ...],
                analyst: str | None = None) -> ReleaseSlot | Exception:
        refusal, spend = _admit(dataset, charge, relation, recorded, row,
                                _relations_of(conn, dataset))
        if refusal is not None:
            return refusal
        _bind_fingerprints(conn, dataset, fingerprints)
        token = uuid.uuid4().hex
        conn.execute(_T.insert().values(
            release_id=release_id, dataset=dataset, status="reserved", token=token,
            owner=f"{socket.gethostname()}:{os.getpid()}", run_url=run_url, unit=relation.unit,
            public=relation.text, fingerprint=",".join(_split_sketch(fingerprints)[0]) or None,
            reserved_at=datetime.now(UTC), analyst=analyst, **_charge_row(charge)))
        return ReleaseSlot(dataset, release_id, charge, spend, None, self, token)

    def _finish(self, release_id: str, token: str, status: str, result: str | None,
                detail: dict[str, Any] | None = None) -> None:
        with self.engine.begin() as conn:
            mine = (_T.c.release_id == release_id, _T.c.token == token,
                    _T.c.status == "reserved")
            values: dict[str, Any] = {"status": status, "result": result,
                                      "finished_at": datetime.now(UTC)}
            if detail:
                held = conn.execute(sa.select(_T.c.detail).where(*mine)).scalar()
                if held is not None:
                    values["detail"] = json.dumps({**json.loads(held), **detail}, default=str,
                                                  sort_keys=True)
            done = conn.execute(_T.update().where(*mine).values(**values))
            if done.rowcount != 1 and status == "committed":
                raise ReleaseInProgressError(
                    f"release {release_id} can no longer be committed (it was marked incomplete "
                    "by a retry); nothing is published, its charge stays recorded.")


def _admit(dataset: str, charge: PrivacyCharge, relation: Relation,
           recorded: list[PrivacyCharge], row: Mapping[Any, Any],
           relations: dict[str, Relation]) -> tuple[ValueError | None, Spend]:
    """(the refusal of ``charge`` under ``relation`` on top of ``recorded`` (whose relations by
    release id are ``relations``) under the dataset ``row``'s cap, or None; the spend with
    ``charge`` included). Each charge counts at its own parameters, and only if its relation
    bounds the cap's (README "Units and neighbouring relations")."""
    cap = _cap_of(row)
    reason = (relation_admissible(relation, _relation_of(row)) or admissible(charge, cap)
              or _void(relations, row))
    if reason is not None:
        return IncompatibleChargeError(dataset, reason), compose(recorded, cap.delta)
    ok, spend = within_cap([*recorded, charge], cap)
    if ok:
        return None, spend
    return BudgetExceededError(dataset, compose(recorded, cap.delta).describe(),
                               _describe(charge), cap.describe(), spend.describe()), spend


def _with_most(refusal: Exception, recorded: list[PrivacyCharge], cap: Cap,
               ledger: str) -> Exception:
    """A refusal naming the ``ledger`` it was refused by; a budget refusal also with the most one
    more release could spend: computed after the transaction, so the bisection never holds the
    ledger's lock."""
    if isinstance(refusal, AnalystBudgetExceededError):
        return refusal  # the analyst's own cap: the dataset's headroom is not theirs to read
    if isinstance(refusal, BudgetExceededError):
        return BudgetExceededError(refusal.dataset, refusal.spent, refusal.requested,
                                   refusal.cap, refusal.total, _most(recorded, cap), ledger)
    if isinstance(refusal, IncompatibleChargeError):
        return IncompatibleChargeError(refusal.dataset, refusal.reason, ledger)
    if isinstance(refusal, DatasetIdentityError):
        return DatasetIdentityError(refusal.dataset, refusal.original, ledger)
    return refusal


def _retry(conn: Connection, old: sa.RowMapping, dataset: str, charge: PrivacyCharge,
           relation: Relation, recorded: list[PrivacyCharge], cap: Cap) -> ReleaseSlot | Exception:
    """A release id seen before: its committed result, or the error to raise (no new noise)."""
    rid = old["release_id"]
    if (old["dataset"] != dataset or not _same_charge(_row_charge(old), charge)
            or _relation_of(old) != relation):
        return ValueError(
            f"release_id {rid} is already recorded for dataset {old['dataset']} with charge "
            f"{_describe(_row_charge(old))}; a release id names one release: use a new id for "
            f"a different release (got dataset {dataset}, charge {_describe(charge)}).")
    if old["status"] == "committed":
        return ReleaseSlot(dataset, rid, charge, compose(recorded, cap.delta), old["result"])
    status = old["status"]
    if status == "reserved" and _owner_dead(old["owner"]):
        conn.execute(_T.update().where(_T.c.id == old["id"], _T.c.status == "reserved")
                     .values(status="incomplete"))
        status = "incomplete"
    return ReleaseInProgressError(
        f"release {rid} on dataset {dataset} was reserved at {old['reserved_at']} by "
        f"{old['owner']} and never committed (status {status}). Its charge stays recorded and "
        "no new noise is drawn for this id; if that run is dead, start a new release id.")


def _same_charge(a: PrivacyCharge, b: PrivacyCharge) -> bool:
    """Same mechanism and parameters as stored (``detail`` is descriptive, not compared)."""
    strip = ("detail",)
    return ({k: v for k, v in _charge_row(a).items() if k not in strip}
            == {k: v for k, v in _charge_row(b).items() if k not in strip})


def _mark_dead_reservations(conn: Connection, dataset: str | None = None) -> None:
    """Mark ``reserved`` charges whose owning process (on this host) is gone as ``incomplete``."""
    stmt = sa.select(_T.c.id, _T.c.owner).where(_T.c.status == "reserved")
    if dataset is not None:
        stmt = stmt.where(_T.c.dataset == dataset)
    dead = [row.id for row in conn.execute(stmt) if _owner_dead(row.owner)]
    if dead:
        conn.execute(_T.update().where(_T.c.id.in_(dead), _T.c.status == "reserved")
                     .values(status="incomplete"))


def _owner_of(conn: Connection, fingerprint: str, lock: bool = False) -> str | None:
    """The dataset id a keyed fingerprint is bound to, if any. ``lock`` (before binding it):
    on PostgreSQL a transaction advisory lock on the fingerprint, so two datasets racing to bind
    the same new fingerprint are serialised (SQLite's BEGIN IMMEDIATE already is)."""
    if lock and conn.engine.url.get_backend_name() == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(
            sa.func.hashtextextended(fingerprint, 0))))
    return conn.execute(sa.select(_F.c.dataset).where(_F.c.fingerprint == fingerprint)).scalar()


def _fingerprints(fingerprint: Fingerprint) -> tuple[str, ...]:
    """The keyed identities given (None, one string or several), each a non-empty string."""
    given = () if fingerprint is None else (
        (fingerprint,) if isinstance(fingerprint, str) else tuple(fingerprint))
    for fp in given:
        if not isinstance(fp, str) or not fp.strip() or "," in fp:
            raise ValueError(f"fingerprint must be a non-empty string, got {fingerprint!r}; "
                             "give one keyed fingerprint or a sequence of them (no commas)")
    return given


def _other_owner(conn: Connection, dataset: str | None, fingerprints: tuple[str, ...],
                 lock: bool = False) -> str | None:
    """The first dataset id other than ``dataset`` that one of ``fingerprints`` is bound to, or
    whose row sketch says these data are a near copy of its own
    (:func:`dpcausal.fingerprints.near_copy`)."""
    exact, sketch = _split_sketch(fingerprints)
    for fp in exact:
        if (owner := _owner_of(conn, fp, lock)) not in (None, dataset):
            return owner
    if not sketch:
        return None
    is_sketch = _F.c.fingerprint.like(f"{SKETCH_PREFIX}%")
    shared = conn.execute(
        sa.select(_F.c.dataset, sa.func.count()).where(_F.c.fingerprint.in_(sketch))
        .where(_F.c.dataset != (dataset or "")).group_by(_F.c.dataset)).all()
    for other, count in sorted(shared, key=lambda r: -r[1]):
        theirs = conn.execute(sa.select(sa.func.count()).where(_F.c.dataset == other)
                              .where(is_sketch)).scalar() or 0
        if near_copy(len(sketch), theirs, count):
            return str(other)
    return None


def _split_sketch(fingerprints: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the exact identities, the row-sketch entries) among ``fingerprints``."""
    sketch = tuple(fp for fp in fingerprints if fp.startswith(SKETCH_PREFIX))
    return tuple(fp for fp in fingerprints if not fp.startswith(SKETCH_PREFIX)), sketch


def _check_fingerprints(conn: Connection, dataset: str, fingerprints: tuple[str, ...],
                        lock: bool = False, ledger: str = "") -> None:
    if (owner := _other_owner(conn, dataset, fingerprints, lock)) is not None:
        raise DatasetIdentityError(dataset, owner, ledger)


def _bind_fingerprints(conn: Connection, dataset: str, fingerprints: tuple[str, ...]) -> None:
    """Bind each of ``fingerprints`` to ``dataset`` (a no-op for one already bound; callers
    checked none is bound elsewhere, under the dataset's lock)."""
    for fp in fingerprints:
        if _owner_of(conn, fp) is None:
            conn.execute(_F.insert().values(fingerprint=fp, dataset=dataset,
                                            created_at=datetime.now(UTC)))


def _check_name(dataset: object) -> None:
    if not isinstance(dataset, str) or not dataset.strip():
        raise ValueError(f"dataset must be a non-empty string, got {dataset!r}")


def _read_dataset(conn: Connection, dataset: str) -> sa.RowMapping | None:
    return conn.execute(sa.select(_D).where(_D.c.name == dataset)).mappings().first()


def _lock_dataset(conn: Connection, dataset: str) -> sa.RowMapping | None:
    # FOR UPDATE on PostgreSQL; SQLite compiles it away (BEGIN IMMEDIATE already serialises)
    stmt = sa.select(_D).where(_D.c.name == dataset).with_for_update()
    return conn.execute(stmt).mappings().first()


def _require(conn: Connection, dataset: str, row: sa.RowMapping | None) -> sa.RowMapping:
    if row is None:
        known = conn.execute(sa.select(_D.c.name).order_by(_D.c.name)).scalars().all()
        close = difflib.get_close_matches(dataset, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown dataset {dataset!r} (known: {', '.join(known) or 'none'}); "
                         f"{hint}set its budget first: `Ledger.set_budget({dataset!r}, zeta=...)` "
                         f"(ledger: {schema.where(conn.engine)})")
    return row


def _registration_of(row: Mapping[Any, Any]) -> Registration:
    bound, at = json.loads(row["registration"]), row["at"]
    return Registration(row["dataset"], **bound, version=row["version"], by=row["by"],
                        at=at if at.tzinfo is not None else at.replace(tzinfo=UTC))


def _cap_of(row: Mapping[Any, Any]) -> Cap:
    return Cap(row["cap_kind"], row["cap_value"], row["cap_delta"])


def _relation_of(row: Mapping[Any, Any]) -> Relation:
    """The stored relation of a cap or charge row."""
    return Relation.of(row["unit"], row["public"])


def _relations_of(conn: Connection, dataset: str) -> dict[str, Relation]:
    """The relation of each recorded charge of ``dataset``, by release id."""
    rows = conn.execute(sa.select(_T.c.release_id, _T.c.unit, _T.c.public)
                        .where(_T.c.dataset == dataset)).mappings()
    return {r["release_id"]: _relation_of(r) for r in rows}


def _void(relations: dict[str, Relation], row: Mapping[Any, Any]) -> str | None:
    """Why the dataset's cap can admit nothing more: a recorded charge's relation does not
    bound the cap's (recorded under older rules, or its unit corrected since), so the cap's
    guarantee no longer holds; None otherwise."""
    cap = _relation_of(row)
    for release_id, rel in relations.items():
        reason = relation_admissible(rel, cap)
        if reason is not None:
            return f"recorded charge {release_id}: {reason}"
    return None


def _headroom(charges: list[PrivacyCharge], row: Mapping[Any, Any],
              relations: dict[str, Relation]) -> dict[str, float | None]:
    """:func:`composition.headroom`; nothing when a recorded charge voids the cap (``_void``)."""
    cap = _cap_of(row)
    if _void(relations, row) is not None:
        return {"next_zeta": 0.0, "next_epsilon": 0.0,
                "next_pure_epsilon": None if cap.kind == "zeta" else 0.0}
    return headroom(charges, cap)


def _charges_of(conn: Connection, dataset: str) -> list[PrivacyCharge]:
    rows = conn.execute(sa.select(_T).where(_T.c.dataset == dataset).order_by(_T.c.id))
    return [_row_charge(r) for r in rows.mappings()]


def _charge_row(c: PrivacyCharge) -> dict:
    return dict(
        mechanism=c.mechanism, zeta=c.zeta, epsilon=c.epsilon, delta=float(c.delta),
        rdp_orders=None if c.rdp_orders is None else json.dumps([float(a) for a in c.rdp_orders]),
        rdp_epsilons=(None if c.rdp_epsilons is None
                      else json.dumps([float(e) for e in c.rdp_epsilons])),
        detail=json.dumps(c.detail, default=str, sort_keys=True),
    )


def _row_charge(r: Mapping[Any, Any]) -> PrivacyCharge:
    def curve(text: str | None) -> tuple[float, ...] | None:
        return None if text is None else tuple(json.loads(text))

    return PrivacyCharge(r["mechanism"], zeta=r["zeta"], epsilon=r["epsilon"], delta=r["delta"],
                         rdp_orders=curve(r["rdp_orders"]), rdp_epsilons=curve(r["rdp_epsilons"]),
                         detail=json.loads(r["detail"]))


def _guarantee(c: PrivacyCharge, delta: float) -> tuple[float, float]:
    """One charge's own (epsilon, delta): pure/Laplace (eps, 0), approx (eps, its delta),
    Gaussian and RDP their epsilon at ``delta`` (spec §1.3; CKS 2020 via dp_accounting)."""
    if c.mechanism in {"pure", "laplace", "approx"}:
        return float(c.epsilon), float(c.delta)  # type: ignore[arg-type]
    return compose([c], delta).epsilon, delta


def _most(charges: list[PrivacyCharge], cap: Cap) -> str:
    """The most one more release could still spend, in words (for refusals)."""
    left = headroom(charges, cap)
    if not left["next_zeta"]:
        return "nothing: the budget is used up"
    text = (f"zeta={left['next_zeta']:.6g} Gaussian (epsilon={left['next_epsilon']:.6g} at "
            f"delta={cap.delta:g})")
    if left["next_pure_epsilon"]:
        text += f", or a pure epsilon={left['next_pure_epsilon']:.6g}"
    return text


def _describe(c: PrivacyCharge) -> str:
    if c.mechanism == "gaussian":
        return f"zeta={c.zeta:.6g} (gaussian)"
    if c.mechanism == "rdp":
        return f"an RDP curve over {len(c.rdp_orders or ())} orders"
    text = f"epsilon={c.epsilon:.6g}"
    return f"{text}, delta={c.delta:g} ({c.mechanism})" if c.delta else f"{text} ({c.mechanism})"


def _owner_dead(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's process: cannot tell, leave it reserved
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


__all__ = ["Ledger", "ReleaseSlot"]
