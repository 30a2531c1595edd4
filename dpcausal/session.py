"""Who records a library release: the in-memory session accountant, or a persistent ledger.

Every :meth:`dpcausal.contract.Mechanism.fit` outside evaluation goes through the current
accountant (as diffprivlib's ``BudgetAccountant`` does). The default, :class:`SessionAccountant`,
remembers every release of the process by a digest of its input kept in memory only, and warns
with the composed spend when the same data are released again: repeated fits compose, so keeping
the draw one likes spends the budget of every draw. :class:`LedgerAccountant` makes fits charge a
persistent :class:`dpcausal.ledger.Ledger` instead (reserve before the noise, commit after).

Each accountant labels the releases it records with the identity of their data
(:attr:`dpcausal.Release.dataset`), which is no function of the values: the ledger's dataset
id, or for the session a random id drawn when an input is first seen (its digest never leaves
memory). :func:`dpcausal.meta.combine` pools releases of one identity as one study.
"""

from __future__ import annotations

import secrets
import uuid
import warnings
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Protocol

import joblib

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger.composition import compose

if TYPE_CHECKING:
    from dpcausal.contract import Mechanism, Prepared, Release
    from dpcausal.ledger import Ledger
    from dpcausal.ledger.store import Fingerprint


class RepeatedReleaseWarning(UserWarning):
    """The same data were released more than once in this session: the spends compose."""


class Slot(Protocol):
    def record(self, release: Release) -> Release: ...


class _Recorder:
    """Records the release of one fit, labelled with the identity of its data."""

    def __init__(self, dataset: str) -> None:
        self.dataset = dataset
        self.release: Release | None = None

    def record(self, release: Release) -> Release:
        self.release = release.of_dataset(self.dataset)
        return self.release


class SessionAccountant:
    """In-memory record of this process's releases, keyed by a digest of each input."""

    def __init__(self) -> None:
        self.charges: dict[str, list[PrivacyCharge]] = {}
        self.ids: dict[str, str] = {}  # input digest -> its random public id

    @contextmanager
    def charging(self, mechanism: Mechanism, prepared: Prepared, charge: PrivacyCharge, *,
                 evaluation: bool = False) -> Iterator[Slot]:
        key = joblib.hash(prepared.data)
        if key not in self.ids:
            self.ids[key] = f"session-{secrets.token_hex(4)}"
        slot = _Recorder(self.ids[key])
        yield slot
        if evaluation or slot.release is None:
            return
        spent = self.charges.setdefault(key, [])
        spent.append(charge)
        if len(spent) > 1:
            total = compose(spent)
            warnings.warn(
                f"release {len(spent)} of the same data in this session: the spends compose to "
                f"{total.describe()} (each fit draws new noise and spends again; use "
                "dpcausal.session.use_ledger(...) to charge a persistent budget)",
                RepeatedReleaseWarning, stacklevel=4)


class LedgerAccountant:
    """Charges every fit to ``dataset`` in a persistent ledger: reserve (in the mechanism's unit
    of privacy, binding ``fingerprint`` if given) before the noise, commit after; a refused
    reservation raises before :meth:`Mechanism.private_release` runs, so nothing is drawn."""

    def __init__(self, ledger: Ledger, dataset: str, fingerprint: Fingerprint = None) -> None:
        self.ledger = ledger
        self.dataset = dataset
        self.fingerprint = fingerprint

    @contextmanager
    def charging(self, mechanism: Mechanism, prepared: Prepared, charge: PrivacyCharge, *,
                 evaluation: bool = False) -> Iterator[Slot]:
        if evaluation:
            raise ValueError("evaluation mode is refused while fits are charged to a ledger: "
                             "it is a non-private read of the data")
        recorder = _Recorder(self.dataset)
        release_id = f"notebook/{uuid.uuid4()}"
        with self.ledger.release(self.dataset, release_id, charge, unit=mechanism.unit,
                                 fingerprint=self.fingerprint,
                                 detail={"mechanism_class": type(mechanism).__name__}) as slot:
            yield recorder
            if recorder.release is not None:
                slot.commit(recorder.release.to_json())


_current: Any = SessionAccountant()


def accountant() -> Any:
    """The accountant that records library fits (a :class:`SessionAccountant` by default)."""
    return _current


def use_accountant(acc: Any) -> Any:
    """Install ``acc`` as the current accountant; returns the previous one."""
    global _current
    previous, _current = _current, acc
    return previous


def use_ledger(ledger: Ledger, dataset: str, *, fingerprint: Fingerprint = None) -> Any:
    """Charge every following fit to ``dataset`` in ``ledger``; returns the previous
    accountant. For one block, prefer ``with ledger.charging(dataset): ...``."""
    return use_accountant(LedgerAccountant(ledger, dataset, fingerprint))


def reset() -> None:
    """Forget this session's releases (a fresh :class:`SessionAccountant`)."""
    use_accountant(SessionAccountant())
