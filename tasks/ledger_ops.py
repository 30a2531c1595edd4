"""Ledger reads of the release pipeline (budget checks, spend, evaluation refusal) and the
demo's own cap. Reserving and committing a charge happens in one place only:
:func:`tasks.release.charged_release`."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import BudgetExceededError, Cap, IncompatibleChargeError, Ledger, schema
from dpcausal.ledger.composition import EPSILON_CAP_CALL
from dpcausal.ledger.store import Fingerprint


def open_ledger(dataset: str | None = None, cap: str = "--zeta Z") -> Ledger:
    """The project ledger (DPCAUSAL_LEDGER_URL). It is never created here and no cap is ever set
    here: a dataset must have been given its cap explicitly (`dpcausal ledger set-budget`, or
    :func:`set_initial_budget` for the demo's own data). ``cap`` (from the config) only names the
    cap to suggest when ``dataset`` has none (:class:`NoCapError`)."""
    if not Ledger.exists():
        raise NoCapError(_no_cap(dataset or "?", cap, schema.where(schema.default_url())))
    led = Ledger()
    if dataset is not None and not led.has_dataset(dataset):
        led.close()
        raise NoCapError(_no_cap(dataset, cap, led.where))
    return led


def require_cap(dataset: str, cap: str = "--zeta Z") -> None:
    """Refuse a dataset without a cap (:class:`NoCapError`) before any of its values is read, so
    that the refusal cannot depend on them (issue 26 §1)."""
    open_ledger(dataset, cap).close()


class NoCapError(ValueError):
    """The dataset has no cap in the ledger (a refusal by the budget)."""


def _no_cap(dataset: str, cap: str, ledger: str) -> str:
    return (f"dataset {dataset!r} has no privacy budget in the ledger at {ledger}; its curator "
            f"sets it explicitly: `dpcausal ledger set-budget {dataset} {cap}` (a config never "
            "creates a cap: a new dataset id must not start with a fresh budget)")


@contextmanager
def in_cli_words(dataset: str, cap: str) -> Iterator[None]:
    """Within: a budget refusal names the CLI's command that raises the cap (``dpcausal ledger
    set-budget DATASET --zeta Z``, its flags those of ``cap`` with placeholders), and a charge
    the cap can never admit the one that gives an (epsilon, delta) cap, instead of the library's
    Python calls: the orchestration is run from the CLI (issue 34 §6)."""
    try:
        yield
    except BudgetExceededError as exc:
        flags = re.sub(r"--(\w+) \S+", lambda m: f"--{m[1]} {m[1][0].upper()}", cap)
        raise exc.in_words_of(f"dpcausal ledger set-budget {dataset} {flags}") from None
    except IncompatibleChargeError as exc:
        reason = exc.reason.replace(
            EPSILON_CAP_CALL, f"dpcausal ledger set-budget {dataset} --epsilon E --delta D")
        raise IncompatibleChargeError(exc.dataset, reason, exc.ledger) from None


def set_initial_budget(dataset: str, *, zeta: float | None = None, rho: float | None = None,
                       epsilon: float | None = None, delta: float | None = None,
                       unit: str = "row", fingerprint: Fingerprint = None) -> Cap:
    """Give ``dataset`` its cap (per ``unit``, binding ``fingerprint`` if given) if it has none
    yet, creating the ledger if needed; else keep the cap it has. For a project's own data only
    (the demo): every other dataset gets its cap from its curator through `dpcausal ledger
    set-budget`."""
    with Ledger(create=True) as led:
        if led.has_dataset(dataset):
            return led.cap(dataset)
        return led.set_budget(dataset, zeta=zeta, rho=rho, epsilon=epsilon, delta=delta,
                              unit=unit, fingerprint=fingerprint)


def check_budget(dataset: str, charge: PrivacyCharge, *, unit: str,
                 fingerprint: Fingerprint = None, cap: str = "--zeta Z") -> None:
    """Refuse now what the reservation would refuse (BudgetExceededError, IncompatibleChargeError,
    DatasetIdentityError, or no cap at all) before any model is fitted. ``unit`` is the charge's
    unit of privacy, ``fingerprint`` the keyed identities of the data and of their source. The
    reservation at release time stays authoritative."""
    with in_cli_words(dataset, cap), open_ledger(dataset, cap) as led:
        led.check(dataset, charge, unit=unit, fingerprint=fingerprint)


def budgeted_as(dataset: str | None = None, *, fingerprint: Fingerprint = None) -> str | None:
    """The dataset id under which ``dataset`` has a cap or one of the keyed identities
    ``fingerprint`` (of the data or of their source) is bound in the project ledger, else None
    (also when there is no ledger file yet). The flow refuses evaluation mode (a non-private
    read) whenever this is not None."""
    if not Ledger.exists():
        return None
    with Ledger() as led:
        return led.known(dataset, fingerprint=fingerprint)


def committed_release(release_id: str) -> tuple[str, str] | None:
    """(dataset, released JSON) of a committed release of the project ledger, else None
    (:meth:`dpcausal.ledger.Ledger.committed`)."""
    if not Ledger.exists():
        return None
    with Ledger() as led:
        return led.committed(release_id)


def spent(dataset: str) -> dict[str, Any]:
    """The dataset's cumulative spend (zeta if all charges are Gaussian, rho if all have a zCDP
    bound, epsilon at delta, n_charges), what one more release could spend (``next_zeta``,
    ``next_epsilon`` at delta, ``next_pure_epsilon``; dpcausal.ledger.composition.headroom) and
    where the ledger is (``ledger``)."""
    with Ledger() as led:
        s, left, where = led.spent(dataset), led.headroom(dataset), led.where
    return {"zeta": s.zeta, "rho": s.rho, "epsilon": s.epsilon, "delta": s.delta,
            "n_charges": s.n_charges, **left, "ledger": where}


def bounds_checked(dataset: str, bounds: tuple[float, float]) -> bool:
    """Whether the ledger's history of ``dataset`` holds a committed private bounds check
    (:class:`dpcausal.bounds_check.BoundsCheck`, charged through the library) of exactly these
    outcome bounds."""
    if not Ledger.exists():
        return False
    with Ledger() as led:
        if not led.has_dataset(dataset):
            return False
        history = led.history(dataset)
    wanted = [float(bounds[0]), float(bounds[1])]
    return any(status == "committed" and detail.get("kind") == "bounds_check"
               and [float(b) for b in detail.get("bounds", [])] == wanted
               for status, detail in zip(history["status"], history["detail"], strict=True))


def bounds_notice(config: Any) -> str | None:
    """The notice of a core release whose outcome bounds the ledger has never seen privately
    checked (issue 19 §1), with the charged library call that checks them; None when they were
    checked, or when the outcome is declared binary (``data.dtypes`` gives it ``bool``: its
    reader makes any value but 0/1 missing, so nothing is clipped). Bounds [0, 1] alone declare
    nothing, as they are easily copied onto a continuous outcome (issue 34 §2); with them the
    notice also names that free declaration (issue 42)."""
    bounds, dataset = config.estimator.outcome_bounds, config.ledger.dataset_id
    outcome = config.columns.outcome
    if bounds is None or config.data.dtypes.get(outcome) == "bool" or \
            bounds_checked(dataset, tuple(bounds)):
        return None
    free = (f" If {outcome} is a 0/1 outcome, its curator can declare it instead, at no cost: "
            f"`data.dtypes: {{{outcome}: bool}}` in the registered config (any other value is "
            "then read as missing, so nothing is clipped)."
            if [float(b) for b in bounds] == [0.0, 1.0] else "")
    return (f"Notice: the outcome bounds [{bounds[0]:g}, {bounds[1]:g}] have never been checked "
            f"on dataset {dataset!r}; outcomes outside them are clipped and bias the release. A "
            "private check costs a small stated budget (zeta=0.1 under a zeta or rho cap, "
            "epsilon=0.1 under an epsilon cap), charged to the ledger from Python: "
            f"`with dpcausal.Ledger().charging({dataset!r}): "
            f"BoundsCheck(outcome_bounds=({bounds[0]:g}, {bounds[1]:g}), zeta=0.1)"
            f".fit(df, outcome={outcome!r})` (dpcausal.bounds_check)" + free)
