"""Who records a library release, and the one function that charges a release to a ledger.

Every :meth:`dpcausal.contract.Mechanism.fit` goes through the current accountant (as
diffprivlib's ``BudgetAccountant`` does). The default, :class:`SessionAccountant`, remembers every
release of the process by a digest of its input kept in memory only, and warns with the composed
spend when the same data are released again: repeated fits compose, so keeping the draw one likes
spends the budget of every draw. :class:`LedgerAccountant` makes fits charge a persistent
:class:`dpcausal.ledger.Ledger` instead, through :func:`charged_release`, the project's one
reserve -> draw -> commit path (the Prefect task ``tasks.release.charged_release`` calls it too).

The current accountant is a :class:`contextvars.ContextVar`, as scikit-learn keeps
``config_context`` local to a thread: ``with ledger.charging("trial-A"):`` charges the fits of
this thread (and of tasks it starts with a copy of its context), never a fit another thread runs
meanwhile on its own data.

Each accountant labels the releases it records with the identity of their data
(:attr:`dpcausal.Release.dataset`), which is no function of the values: the ledger's dataset
id, or for the session a random id drawn when an input is first seen (its digest never leaves
memory). :func:`dpcausal.meta.combine` pools releases of one identity as one study.
"""

from __future__ import annotations

import secrets
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import joblib

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger.composition import compose
from dpcausal.validation import ReleaseFailedError, guarded, private_log, private_log_file

if TYPE_CHECKING:
    from dpcausal.contract import Mechanism, Prepared, Release
    from dpcausal.ledger import Ledger
    from dpcausal.ledger.store import Fingerprint

#: A release's noise-drawing computation, run once after the charge is reserved.
Draw = Callable[[], "Release"]


class RepeatedReleaseWarning(UserWarning):
    """The same data were released more than once in this session: the spends compose."""


class Accountant(Protocol):
    """Runs ``draw`` (by default the mechanism's noise-drawing phase) once, charged."""

    def release(self, mechanism: Mechanism, prepared: Prepared, charge: PrivacyCharge, *,
                evaluation: bool = False, draw: Draw | None = None) -> Release: ...


def _draw_of(mechanism: Mechanism, prepared: Prepared, evaluation: bool,
             draw: Draw | None) -> Draw:
    if draw is not None:
        return draw
    return lambda: mechanism._private_release(prepared, evaluation=evaluation)


class SessionAccountant:
    """In-memory record of this process's releases, keyed by a digest of each input."""

    def __init__(self) -> None:
        self.charges: dict[str, list[PrivacyCharge]] = {}
        self.ids: dict[str, str] = {}  # input digest -> its random public id

    def release(self, mechanism: Mechanism, prepared: Prepared, charge: PrivacyCharge, *,
                evaluation: bool = False, draw: Draw | None = None) -> Release:
        """Draw once, labelled with the random public id of its input (drawn when the input
        is first seen); outside evaluation, record ``charge`` and warn when the same data were
        released before in this process (the spends compose)."""
        key = joblib.hash(prepared.data)
        dataset = self.ids.setdefault(key, f"session-{secrets.token_hex(4)}")
        release = _draw_of(mechanism, prepared, evaluation, draw)().of_dataset(dataset)
        if evaluation:
            return release
        spent = self.charges.setdefault(key, [])
        spent.append(charge)
        if len(spent) > 1:
            total = compose(spent)
            warnings.warn(
                f"release {len(spent)} of the same data in this session: the spends compose to "
                f"{total.describe()} (each fit draws new noise and spends again; use "
                "`with ledger.charging(dataset):` to charge a persistent budget)",
                RepeatedReleaseWarning, stacklevel=4)
        return release


class LedgerAccountant:
    """Charges every fit to ``dataset`` in a persistent ledger through :func:`charged_release`
    (in the mechanism's unit of privacy); a refused reservation raises before anything is drawn.

    Each fit binds the keyed identities of its checked input, computed here as the CLI does
    (:func:`dpcausal.fingerprints.identities` under the key beside the ledger: the exact
    order-invariant fingerprint and the row sketch that catches a near copy), with
    ``fingerprint`` if given; so the same data, shuffled or a few rows apart, are refused under
    another dataset id. An input that is not a table or arrays of one length binds only
    ``fingerprint``."""

    def __init__(self, ledger: Ledger, dataset: str, fingerprint: Fingerprint = None) -> None:
        self.ledger = ledger
        self.dataset = dataset
        self.fingerprint = fingerprint

    def release(self, mechanism: Mechanism, prepared: Prepared, charge: PrivacyCharge, *,
                evaluation: bool = False, draw: Draw | None = None) -> Release:
        if evaluation:
            raise ValueError("evaluation mode is refused while fits are charged to a ledger: "
                             "it is a non-private read of the data")
        given = () if self.fingerprint is None else (
            (self.fingerprint,) if isinstance(self.fingerprint, str) else tuple(self.fingerprint))
        return charged_release(
            self.ledger, self.dataset, f"notebook/{uuid.uuid4()}", mechanism, prepared, charge,
            fingerprint=(*given, *_identities(prepared.data, self.ledger.url)),
            detail={"mechanism_class": type(mechanism).__name__}, draw=draw).release


def _identities(data: Any, ledger_url: str) -> tuple[str, ...]:
    """The keyed identities of a checked input (:class:`LedgerAccountant`), () for an input that
    is not a table or arrays of one length."""
    from dpcausal.fingerprints import as_frame, fingerprint_key, identities

    try:
        frame = as_frame(data)
    except (TypeError, ValueError):
        return ()
    return identities(frame, key=fingerprint_key(ledger_url))


@dataclass(frozen=True)
class Charged:
    """A charged release: the :class:`~dpcausal.contract.Release`, and whether it is the one
    committed earlier under the same release id (then nothing was drawn now)."""

    release: Release
    reused: bool = False


def charged_release(ledger: Ledger, dataset: str, release_id: str, mechanism: Mechanism,
                    prepared: Prepared | Callable[[], Prepared], charge: PrivacyCharge, *,
                    fingerprint: Fingerprint = None, run_url: str | None = None,
                    detail: dict[str, Any] | None = None, draw: Draw | None = None,
                    analyst: str | None = None) -> Charged:
    """One release charged to ``dataset``: reserve, draw once, commit, then return.

    The reservation (:meth:`dpcausal.ledger.Ledger.release`, per ``mechanism.unit``, binding
    ``fingerprint``) comes before any noise: a refusal raises and nothing is drawn. A release id
    committed before returns its committed release, rebuilt by
    :meth:`dpcausal.contract.Release.from_json`, and draws nothing. Then ``draw`` (default: the
    mechanism's noise-drawing phase on ``prepared``) runs once. ``prepared`` may be a function
    that reads and checks the input: it then runs after the reservation, as part of the draw
    (an orchestrator that reserved from a registration's public facts reads nothing before the
    charge, issue 32 §3). Any failure there depends on the data, so it becomes a generic
    :class:`~dpcausal.validation.ReleaseFailedError` (its details go to
    :data:`~dpcausal.validation.private_log` only) and the charge stays recorded. The release's
    JSON is committed before this function returns it: nothing is visible earlier.
    ``analyst`` (a remote analyst who asked, :mod:`dpcausal.ledger.analysts`) is checked and
    recorded by the same reservation.
    """
    from dpcausal.contract import Release

    if callable(prepared):
        load = prepared
        run = draw or (lambda: mechanism._private_release(load(), evaluation=False))
    else:
        run = _draw_of(mechanism, prepared, False, draw)
    with ledger.release(dataset, release_id, charge, run_url, unit=mechanism.unit,
                        fingerprint=fingerprint, detail=detail, analyst=analyst) as slot:
        if slot.result is not None:
            return Charged(Release.from_json(slot.result), reused=True)
        try:
            release = run().of_dataset(dataset)
        except ReleaseFailedError:
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure is generic (SystemExit too)
            if not guarded(exc):
                raise
            private_log.error("release %s failed after its charge", release_id, exc_info=exc)
            raise ReleaseFailedError(
                "the release failed after its charge for a reason that may depend on the data; "
                f"its budget is spent; the curator's private log {private_log_file()} holds the "
                "details") from None
        if release.evaluation:
            raise AssertionError("bug: a charged release must not be an evaluation release")
        slot.commit(release.to_json(), detail=release.ledger_detail())
    return Charged(release)


def evaluation_release(mechanism: Mechanism, prepared: Prepared) -> Release:
    """An evaluation release (not private, marked so, charged nowhere) of checked input: what
    ``fit(..., evaluation=True)`` draws, for an orchestrator that ran the public checks itself.
    Callers refuse it for any budgeted source first (it is a non-private read of the data)."""
    return _draw_of(mechanism, prepared, True, None)()


_session = SessionAccountant()
_current: ContextVar[Accountant | None] = ContextVar("dpcausal_accountant", default=None)


def accountant() -> Accountant:
    """The accountant of the current context (thread or task): the one installed by
    :func:`charging_to`/:func:`use_accountant`, else the process's :class:`SessionAccountant`."""
    current = _current.get()
    return _session if current is None else current


@contextmanager
def charging_to(acc: Accountant) -> Iterator[Accountant]:
    """Within the block, fits of this context go through ``acc``; restored on exit."""
    token = _current.set(acc)
    try:
        yield acc
    finally:
        _current.reset(token)


def use_accountant(acc: Accountant | None) -> Accountant | None:
    """Install ``acc`` (None: the session accountant) in the current context until changed
    again; returns what was installed before (None: the session accountant). Prefer the block
    form, :func:`charging_to` or ``with ledger.charging(dataset):``."""
    previous = _current.get()
    _current.set(acc)
    return previous


def use_ledger(ledger: Ledger, dataset: str, *, fingerprint: str | None = None
               ) -> Accountant | None:
    """Charge every following fit of this context to ``dataset`` in ``ledger``; returns the
    previous accountant. For one block, prefer ``with ledger.charging(dataset): ...``."""
    return use_accountant(LedgerAccountant(ledger, dataset, fingerprint))


def reset() -> None:
    """Forget this process's session releases (a fresh :class:`SessionAccountant`)."""
    global _session
    _session = SessionAccountant()
