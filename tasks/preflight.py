"""The public checks of a release, before anything is charged (issue 18 item 3; issue 32 §3:
public checks, reservation, then the data). First the dataset's registration
(:func:`conf.registration.registered`: a run only asks about a registered dataset; evaluation
mode only where the registration allows it). In release mode, the dataset's cap, then for
every kind everything from the registration's public facts alone (n counted by the curator and
the kind's own, :attr:`conf.kinds.Kind.facts`: the core's d, the Cluster-DP groups, the
federated group sizes, the user-level occupancy): the parameters' refusals, the planned K, the
charge and the budget's headroom, with no file opened and no query run; the data are read after
the reservation (:func:`load_registered`, run inside the charged release: a source that no
longer holds the registered facts fails there, charged and generic). Evaluation mode (a source
registered synthetic or public) still reads before the charge: read the source as
its declared types, fingerprint the table and its source (keyed), keep the release's columns,
``check_input`` (every refusal decided by public facts: schema, n, parameters), the data-free
charge, then the budget (``Ledger.check``) in release mode, or in evaluation mode the refusal
of data the ledger binds to another dataset id (issue 18 item 6, issue 26 §3). Nothing is
charged and nothing is drawn here. A partitioned source in evaluation mode is checked on its
Parquet footers only.

No Prefect import: the CLI runs these before it starts (or finds) a Prefect server, then hands
its :class:`Checked` input to the flow it runs in the same process (:func:`checked_in_process`),
so the data are read once; :mod:`tasks.release` runs the checks as the flow's first task when
nothing was handed over (a deployment's run, a test calling the flow).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from conf.kinds import KINDS, kind_of_mechanism
from conf.models import DataSource, Schema
from conf.registration import EvaluationRefusedError, NotRegisteredError, registered
from dpcausal import Mechanism, Prepared
from dpcausal.accounting import PrivacyCharge
from dpcausal.ate.estimator import ATEFacts, PrivateATE
from dpcausal.ate.partitioned import plan_partitions, release_key
from dpcausal.contract import PublicFacts
from dpcausal.ledger import (
    BudgetExceededError,
    DatasetIdentityError,
    IncompatibleChargeError,
    Registration,
)
from store import content_fingerprint, fold_key, frame_identities, source_fingerprint
from tasks import ledger_ops
from tasks.data import (
    check_source_answers,
    data_file,
    parquet_footer,
    partition_files,
    partition_identity,
    read_frame,
    select,
    source_identity,
)
from tasks.sql_partitions import SqlCounted, count_sql, sql_partitions

__all__ = ["EvaluationRefusedError"]  # re-exported: the refusal is conf.registration's


class SourceChangedError(ValueError):
    """The source no longer holds the registered n records (raised after the reservation: a
    charged, generic failure; the curator's private log holds this message)."""


# Refusals by the budget: nothing is charged, nothing drawn (exit code 3 in the CLI).
BUDGET_REFUSALS = (BudgetExceededError, IncompatibleChargeError, DatasetIdentityError,
                   ledger_ops.NoCapError)


def refusal_reason(exc: BaseException) -> str | None:
    """Why a release was refused before anything was charged or drawn ("budget", or "bad input
    or configuration" for a config or public check that failed); None for any other error (a
    release that failed after its charge, ``ReleaseFailedError``, is a ``RuntimeError``)."""
    if isinstance(exc, BUDGET_REFUSALS):
        return "budget"
    if isinstance(exc, (ValueError, TypeError)):
        return "bad input or configuration"
    return None


@dataclass(frozen=True)
class Checked:
    """A checked input: the mechanism's :class:`Prepared` input (data: never shown), the keyed
    identities the ledger binds to the dataset id (:attr:`identity`: the table's order-invariant
    ``fingerprint``, None where the data never sit in one process, the partitioned path; and the
    ``source``'s), the keyed ``content`` hash of the columns fitted, in row order (the key of
    evaluation-mode fold models), the column names of the release (``schema``: public, the
    header or the footers; no dtype, which a CSV reader infers from the values), the data-free
    charge and the public parameters the planner fixed for it (``Mechanism.planned_params``:
    resolved once, here, before the charge, then carried through the release and its
    records); for a partitioned SQL source, its partitions as ``counted`` under the release's
    fold key (in memory only), which the release reads with instead of counting again. A
    release checked from its registration (:func:`check_registered`) holds the registered
    public facts as ``prepared.public``, no data, and ``load``: the read and check of the
    input, which the charged release runs after the reservation."""

    prepared: Prepared = field(repr=False)
    fingerprint: str | None
    source: str
    schema: tuple[str, ...]
    charge: PrivacyCharge
    content: str | None = None
    planned: dict[str, Any] = field(default_factory=dict)
    counted: SqlCounted | None = field(default=None, repr=False)
    sketch: tuple[str, ...] = field(default=(), repr=False)
    load: Callable[[], Prepared] | None = field(default=None, repr=False, compare=False)

    @property
    def identity(self) -> tuple[str, ...]:
        """What the ledger binds to one dataset id: the data's fingerprint, the source's, and
        the table's keyed row ``sketch``, which catches a near copy under another id as the
        library does (:mod:`dpcausal.fingerprints`; issue 32 item 7)."""
        return (*(x for x in (self.fingerprint, self.source) if x is not None), *self.sketch)


#: (config, its checked input) handed from the CLI's preflight to the flow in this context: held in
#: memory only, never a flow parameter nor a persisted result (the data never reach the server)
_CHECKED: ContextVar[tuple[Any, Checked] | None] = ContextVar("dpcausal_checked", default=None)


@contextmanager
def checked_in_process(config: Any, checked: Checked) -> Iterator[None]:
    """Within: the release of ``config`` takes ``checked`` (:func:`checked_before`) instead of
    reading and checking its data again (issue 27 §4: one read per release; the read and
    fingerprints of a second one cost 0.04 s CPU at 3,000 CSV rows and 5.4 s at 10^6, measured
    on 2 loaded cores). The charge's reservation still checks the budget, atomically."""
    token = _CHECKED.set((config, checked))
    try:
        yield
    finally:
        _CHECKED.reset(token)


def checked_before(config: Any) -> Checked | None:
    """The input :func:`checked_in_process` holds for ``config`` (an equal config), else None."""
    held = _CHECKED.get()
    return held[1] if held is not None and held[0] == config else None


def check_evaluation_allowed(dataset: str, registration: Registration | None = None) -> None:
    """The one rule of evaluation mode (a non-private read) on a named dataset, whichever path
    reads it (a release of a config, the partitioned flows): its registration (default: the
    ledger's) must allow it, which only its curator does, for a source marked synthetic or
    public; a dataset without a registration, a cap alone included, is refused
    (:class:`EvaluationRefusedError`)."""
    if registration is None:
        try:
            registration = registered(dataset)
        except NotRegisteredError:
            registration = None
    if registration is None or not registration.evaluation_allowed:
        why = ("it has no registration" if registration is None
               else "its registration does not allow it")
        raise EvaluationRefusedError(
            f"evaluation mode is refused for dataset {dataset!r}: evaluation is a non-private "
            f"read, and {why} (only its curator allows it, for a source marked synthetic or "
            "public)")


def check_release(source: DataSource, schema: Schema, mechanism: Mechanism,
                  roles: dict[str, Any], *, dataset: str, evaluation: bool,
                  cap: str, registration: Registration | None = None,
                  runner: Any = None) -> Checked:
    """Step 1 (see the module doc); raises ``ValueError``/``TypeError`` for bad input and the
    ledger's errors (``NoCapError``, ``BudgetExceededError`` ...) for a refusal, before anything
    is charged. ``schema`` is the declared types of the columns read
    (:meth:`conf.kinds.Kind.schema`); ``registration`` the dataset's (default: the ledger's,
    :func:`conf.registration.registered`). A core release is checked from the registration
    alone (:func:`check_registered`); a partitioned source in evaluation mode goes to
    :func:`check_partitioned` (footers only). ``runner`` (the config's) sizes
    ``data.sql_partitions: auto``."""
    registration = registration or registered(dataset)
    if evaluation:
        check_evaluation_allowed(dataset, registration)
    if not evaluation:
        ledger_ops.require_cap(dataset, cap)
        if isinstance(mechanism, PrivateATE) or not source.partitioned:
            return check_registered(source, schema, mechanism, roles, dataset=dataset,
                                    cap=cap, registration=registration)
    if source.path is not None:
        data_file(source.path)
    if source.partitioned:
        return check_partitioned(source, mechanism, roles, dataset=dataset,
                                 evaluation=evaluation, cap=cap, runner=runner)
    # every column, as its declared type (others as numbers), so that a release of fewer or
    # reordered columns keeps the table's identity
    table = read_frame(source, Schema(schema.columns, rest=schema.rest or "float"))
    (fingerprint, *sketch), where = (frame_identities(table),
                                     source_fingerprint(source_identity(source)))
    frame = select(table, None if schema.rest is not None else list(schema.columns))
    prepared = mechanism.check_input(frame, **roles)
    charge = mechanism.charge_of(prepared)
    check_ledger(dataset, charge, unit=mechanism.unit, identity=(fingerprint, where, *sketch),
                 evaluation=evaluation, cap=cap)
    return Checked(prepared=prepared, fingerprint=fingerprint, source=where, sketch=tuple(sketch),
                   schema=tuple(map(str, frame.columns)), charge=charge,
                   content=content_fingerprint(frame),
                   planned=mechanism.planned_params(prepared.public))


def check_registered(source: DataSource, schema: Schema, mechanism: Mechanism,
                     roles: dict[str, Any], *, dataset: str, cap: str,
                     registration: Registration) -> Checked:
    """A release checked from its registration's public facts only (issue 32 §3), for every
    kind: the mechanism's public facts and every refusal they decide
    (:attr:`conf.kinds.Kind.public`: the core's n and d, K against n; the Cluster-DP groups;
    the federated group sizes; the user-level plan of the registered occupancy), the planned
    parameters, the charge and the budget (binding the source's keyed identity); no file is
    opened and no row is read: a SQL source's database is only asked for its result's column
    names (:func:`tasks.data.check_source_answers`), so that a database that does not answer
    is refused before the charge. The input is read after the reservation, by :attr:`Checked.load`
    (:func:`load_registered`); a partitioned source's phases read it there
    (:mod:`flows.partitioned_release`)."""
    facts = kind_of_mechanism(mechanism).public(mechanism, roles, registration)
    charge = mechanism.privacy_charge(facts)
    where = source_fingerprint(source_identity(source))
    check_ledger(dataset, charge, unit=mechanism.unit, identity=(where,), evaluation=False,
                 cap=cap)
    used = [c for value in roles.values() for c in ([value] if isinstance(value, str) else
                                                    (value or []))]
    check_source_answers(source, [*([source.id_column] if source.id_column else []), *used])
    names = registration.facts.get("names") or used
    load = None if source.partitioned else (
        lambda: load_registered(source, schema, mechanism, roles, registration, facts))
    return Checked(prepared=Prepared(public=facts, data=None), fingerprint=None, source=where,
                   schema=tuple(names), charge=charge, planned=mechanism.planned_params(facts),
                   load=load)


def load_registered(source: DataSource, schema: Schema, mechanism: Mechanism,
                    roles: dict[str, Any], registration: Registration,
                    facts: PublicFacts) -> Prepared:
    """The checked input of a release reserved from its registration, read after the
    reservation: the source as its declared types, which must still hold the registered n
    records and the kind's registered public facts (:attr:`conf.kinds.Kind.facts`), then
    ``check_input``, whose warnings (of the public facts) were shown before the charge by
    :func:`check_registered` and are not raised again, and whose public ``facts`` must be the
    ones charged (a further kind's; the core's n and d are the registration's by the first
    test). A source that changed fails with :class:`SourceChangedError`: charged and generic,
    as every failure after the reservation."""
    table = read_frame(source, schema)
    kind = kind_of_mechanism(mechanism)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if len(table) != registration.n:
            raise SourceChangedError(
                f"the source holds {len(table)} records, its registration {registration.n}: "
                "the curator registers the new version (`dpcausal ledger register`)")
        counted = kind.facts(mechanism, table, roles)
        if any(registration.facts.get(k) != v for k, v in counted.items()):
            raise SourceChangedError(
                f"the source's {', '.join(counted)} differ from its registration's: the "
                "curator registers the new version (`dpcausal ledger register`)")
        prepared = mechanism.check_input(table, **roles)
    if not isinstance(mechanism, PrivateATE) and dict(prepared.public) != dict(facts):
        raise SourceChangedError(f"the source's public facts {dict(prepared.public)} differ "
                                 f"from those charged, {dict(facts)}")
    return prepared


def public_checks(config: Any) -> tuple[Checked | None, list[str], Exception | None]:
    """Every check of a release before its charge, as the flow's first step makes them, here
    before any Prefect server starts (``dpcausal run``, ``--dry-run``, ``--submit``): config,
    schema, source shape, the budget's existence and headroom (:func:`check_release`). Returns
    the checked input (None on a failure), the distinct texts of the warnings the checks raised,
    in order, then the planner's warning when the expected CI is more than 10 times the
    non-private one (:func:`tasks.planning.release_warnings`, unless the noise alone already
    fills the bounds), and the failure (not raised: its report follows the warnings)."""
    from dpcausal.validation import NoiseWiderThanBoundsWarning
    from tasks.planning import release_warnings

    kind, checked, failure = KINDS[config.kind], None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mechanism = kind.build(config)
            checked = check_release(config.data, kind.schema(config), mechanism,
                                    kind.roles(config), dataset=config.ledger.dataset_id,
                                    evaluation=config.evaluation, cap=kind.cap(config),
                                    runner=config.runner)
        except Exception as exc:  # noqa: BLE001 - reported by the caller, after the warnings
            failure = exc
    shown = list(dict.fromkeys(str(w.message) for w in caught
                               if issubclass(w.category, UserWarning)))
    if checked is not None and not any(issubclass(w.category, NoiseWiderThanBoundsWarning)
                                       for w in caught):
        shown += release_warnings(config, mechanism, checked)
    return checked, shown, failure


def charge_of(checked: Checked) -> dict[str, Any]:
    """The charge a checked release would make, as public values (``run --dry-run``): its
    mechanism, zeta, epsilon and delta where set; a Gaussian charge's zeta-GDP also as
    (epsilon, delta) (spec §1.3)."""
    from dpcausal.accounting import gdp_epsilon

    charge = {k: v for k in ("mechanism", "zeta", "epsilon", "delta")
              if (v := getattr(checked.charge, k)) is not None}
    if charge["mechanism"] == "gaussian":
        charge["epsilon"] = gdp_epsilon(charge["zeta"], charge["delta"])
    detail = checked.charge.detail
    if detail.get("prerelease") is not None:     # issue 39 item 5: facts learned in the charge
        charge.update({k: detail[k] for k in ("prerelease", "zeta_prerelease", "learns")})
    return charge


def describe_charge(charge: dict[str, Any]) -> str:
    """:func:`charge_of`'s charge in words: a Gaussian one as zeta and (epsilon, delta), and
    with a pre-release the facts it would learn (:func:`dpcausal.ate.prerelease.plan_line`)."""
    if charge["mechanism"] == "gaussian":
        learned = ""
        if charge.get("prerelease") is not None:
            from dpcausal.ate.prerelease import plan_line

            learned = f"; {plan_line(charge['zeta'], charge['prerelease'], charge['learns'])}"
        return (f"gaussian, zeta {charge['zeta']:g} (epsilon {charge['epsilon']:.3g} at delta "
                f"{charge['delta']:g}{learned})")
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else str(v) for k, v in charge.items())


def check_data(config: Any) -> Any:
    """``dpcausal check-data``: a NON-PRIVATE look at the values of ``config``'s data (issue 25
    §2), read as the release reads them (:func:`tasks.data.read_frame`), by its mechanism's
    ``check_data``; charges nothing and records nothing. The core estimator holds its outcome
    bounds; the further mechanisms are given the config's. For the curator only (issue 32 §8):
    a ValueError, before anything is read, unless the curator's key file of the private store
    is readable (:func:`store.curator_key_file`), and for a ``data.url_block`` (a database
    the runner reaches through its block, not the caller)."""
    from conf.settings import data_dir
    from store import curator_key_file

    if curator_key_file() is None:
        raise ValueError(f"check-data is for the dataset's curator only: it prints non-private "
                         f"counts, and needs the curator's key file (fingerprint.key or fold.key "
                         f"under {data_dir() / 'private'}) readable, which it is not for this "
                         "user; ask the curator, or release privately with `dpcausal run`")
    if config.data.url_block is not None:
        raise ValueError(f"check-data does not read data.url_block {config.data.url_block!r}: "
                         "that database is reached through a block the runner holds, not the "
                         "caller; the curator checks it with data.url and their own credentials")
    kind = KINDS[config.kind]
    frame = read_frame(config.data, kind.schema(config))
    roles = {k: v for k, v in kind.roles(config).items() if v is not None}
    if config.kind != "ate":
        bounds = kind.detail(config).get("bounds")
        roles["outcome_bounds"] = tuple(bounds) if bounds else None
    return kind.build(config).check_data(frame, **roles)


def check_partitioned(source: DataSource, mechanism: Mechanism, roles: dict[str, Any], *,
                      dataset: str, evaluation: bool, cap: str, runner: Any = None) -> Checked:
    """Step 1 for a partitioned source (issue 19 §3), reading the Parquet footers only (rows and
    schema: public, no value), or a SQL source's column names and partitions (one aggregate
    query over the id column: :func:`tasks.sql_partitions.count_sql`, P sized by ``runner``
    for ``auto``, under the release's fold key, drawn here; the release reads with them,
    :attr:`Checked.counted`): :func:`check_footers`, then
    the ledger, which binds the source (the partition list and footers, or the database,
    query, id and P), not the data (no process reads every value)."""
    if not isinstance(mechanism, PrivateATE) or source.id_column is None:
        raise TypeError("data.partitions needs the core release (PrivateATE) and data.id_column")
    parts: list[Any]
    identity, counted = None, None
    if source.sql_partitions is not None:
        sql = sql_partitions(source, runner)
        counted = count_sql(sql, fold_key() if source.fold_key == "curator" else release_key(),
                            roles)
        parts, footers, identity = list(counted.parts), list(counted.footers), sql.identity()
    else:
        parts = partition_files(str(source.partitions))
        footers = [parquet_footer(p) for p in parts]
    checked = replace(check_footers(parts, footers, mechanism, id_column=source.id_column,
                                    treatment=roles["treatment"], outcome=roles["outcome"],
                                    covariates=roles.get("covariates"), evaluation=evaluation,
                                    identity=identity), counted=counted)
    check_ledger(dataset, checked.charge, unit=mechanism.unit, identity=checked.identity,
                 evaluation=evaluation, cap=cap)
    return checked


def check_footers(parts: list[Any], footers: list[tuple[int, dict[str, str]]],
                  estimator: PrivateATE, *, id_column: str, treatment: str, outcome: str,
                  covariates: list[str] | None, evaluation: bool,
                  identity: dict[str, Any] | None = None) -> Checked:
    """The checked input of a partitioned source from its partition list and their footers
    (wherever they were read): every public refusal
    (:func:`dpcausal.ate.partitioned.plan_partitions`) and the charge; its data is the plan, its
    identity the keyed partition list with footers, or ``identity`` (a SQL source's:
    :meth:`tasks.sql_partitions.SqlPartitions.identity`)."""
    plan = plan_partitions(footers, estimator, id_column=id_column, treatment=treatment,
                           outcome=outcome, covariates=covariates, evaluation=evaluation)
    return Checked(prepared=Prepared(public=ATEFacts(plan.n, plan.d), data=plan),
                   fingerprint=None,
                   source=source_fingerprint(identity or partition_identity(parts, footers)),
                   schema=tuple(plan.schema), charge=plan.estimator.privacy_charge(plan.n, plan.d),
                   planned=_with_eta(estimator.planned_params(plan.n, plan.d), plan.estimator))


def _with_eta(planned: dict[str, Any], planned_estimator: PrivateATE) -> dict[str, Any]:
    """``planned`` with the eta the partitioned plan resolved (from its own block layout,
    :func:`dpcausal.ate.partitioned.plan_partitions`) where the planner chose eta."""
    if "propensity_clip" not in planned:
        return planned
    return {**planned, "propensity_clip": planned_estimator.propensity_clip}


def check_ledger(dataset: str | None, charge: PrivacyCharge, *, unit: str,
                 identity: tuple[str, ...], evaluation: bool, cap: str) -> None:
    """The budget check of a release (``Ledger.check``, also refusing an ``identity`` bound to
    another dataset id), or in evaluation mode (which the registration allowed) the refusal of
    data the ledger binds to another dataset id (to any, for ``dataset`` None), by the data's
    keyed fingerprint or by its source's: a copy of budgeted data put where a synthetic source
    was registered."""
    if evaluation:
        known = ledger_ops.budgeted_as(fingerprint=identity) if identity else None
        if known not in (None, dataset):
            raise EvaluationRefusedError(
                f"evaluation mode is refused for dataset {dataset!r}: the ledger knows these "
                f"data (as {known!r}), and evaluation is a non-private read of them; release "
                "them with mode: release, or evaluate on synthetic data")
    elif dataset is None:
        raise ValueError("a release needs dataset_id (its budget in the ledger)")
    else:
        ledger_ops.check_budget(dataset, charge, unit=unit, fingerprint=identity, cap=cap)
