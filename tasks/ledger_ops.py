"""Every ledger call of the release flow (reserve -> noise -> commit), in one place."""

from __future__ import annotations

import json
from typing import Any, Callable

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Cap, Ledger


def open_ledger(budget: float | None = None, dataset: str | None = None) -> Ledger:
    """The project ledger (DPCAUSAL_LEDGER_URL). It is never created here and no cap is ever set
    here: a dataset must have been given its cap explicitly (`dpcausal ledger set-budget`, or
    :func:`set_initial_budget` for the demo's own data). ``budget`` (a config's
    ``ledger.budget``) only names the cap to suggest when ``dataset`` has none."""
    led = Ledger()
    if dataset is not None and not led.has_dataset(dataset):
        led.close()
        cap = f"--zeta {budget:g}" if budget is not None else "--zeta Z"
        raise ValueError(_no_cap(dataset, cap))
    return led


def _no_cap(dataset: str, cap: str) -> str:
    return (f"dataset {dataset!r} has no privacy budget in the ledger; its curator sets it "
            f"explicitly: `dpcausal ledger set-budget {dataset} {cap}` (a config never creates "
            "a cap: a new dataset id must not start with a fresh budget)")


def set_initial_budget(dataset: str, *, zeta: float | None = None, rho: float | None = None,
                       epsilon: float | None = None, delta: float | None = None,
                       unit: str = "row", fingerprint: str | None = None) -> Cap:
    """Give ``dataset`` its cap (per ``unit``, binding ``fingerprint`` if given) if it has none
    yet, creating the ledger if needed; else keep the cap it has. For a project's own data only
    (the demo): every other dataset gets its cap from its curator through `dpcausal ledger
    set-budget`."""
    with Ledger(create=True) as led:
        if led.has_dataset(dataset):
            return led.cap(dataset)
        return led.set_budget(dataset, zeta=zeta, rho=rho, epsilon=epsilon, delta=delta,
                              unit=unit, fingerprint=fingerprint)


def ensure_epsilon_cap(dataset: str, epsilon: float | None, delta: float) -> None:
    """Refuse (ValueError) a dataset without a cap; ``epsilon``/``delta`` (an (epsilon, delta)
    mechanism's config) only name the cap to suggest. Never creates a ledger or a cap."""
    cap = f"--epsilon {epsilon:g} --delta {delta:g}" if epsilon is not None else "--epsilon E"
    with Ledger() as led:
        if not led.has_dataset(dataset):
            raise ValueError(_no_cap(dataset, cap))


def check_budget(dataset: str, charge: PrivacyCharge, *, budget: float | None = None,
                 unit: str, fingerprint: str | None = None) -> None:
    """Refuse now what the reservation would refuse (BudgetExceededError, IncompatibleChargeError,
    DatasetIdentityError, or no cap at all) before any model is fitted. ``unit`` is the charge's
    unit of privacy, ``fingerprint`` the data's keyed fingerprint. The reservation at release time
    stays authoritative."""
    with open_ledger(budget, dataset) as led:
        led.check(dataset, charge, unit=unit, fingerprint=fingerprint)


def charged_release(dataset: str, release_id: str, charge: PrivacyCharge,
                    draw: Callable[[], dict[str, Any]], *, budget: float | None = None,
                    run_url: str | None = None, unit: str, fingerprint: str | None = None,
                    detail: dict[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
    """Reserve ``charge`` (per ``unit``), call ``draw`` (which draws the noise once), commit its
    JSON. ``detail`` says what the release was (estimator, K, bounds ...) for `ledger history`.

    Returns ``(release, reused)``: a release id committed before returns its stored release
    (no new noise). Raises before ``draw`` when the ledger refuses the charge.
    """
    with open_ledger(budget, dataset) as led:
        with led.release(dataset, release_id, charge, run_url=run_url, unit=unit,
                         fingerprint=fingerprint, detail=detail) as slot:
            if slot.result is not None:
                return json.loads(slot.result), True
            out = draw()
            slot.commit(json.dumps(out))
    return out, False


def budgeted_as(dataset: str | None = None, *, fingerprint: str | None = None) -> str | None:
    """The dataset id under which ``dataset`` has a cap or its data's keyed ``fingerprint`` is
    bound in the project ledger, else None (also when there is no ledger file yet). The flow
    refuses evaluation mode (a non-private read) whenever this is not None."""
    if not Ledger.exists():
        return None
    with Ledger() as led:
        return led.known(dataset, fingerprint=fingerprint)


def spent(dataset: str) -> dict[str, Any]:
    """The dataset's cumulative spend (zeta if all charges are Gaussian, rho if all have a zCDP
    bound, epsilon at delta, n_charges) and what one more release could spend (``next_zeta``,
    ``next_epsilon`` at delta, ``next_pure_epsilon``; dpcausal.ledger.composition.headroom)."""
    with Ledger() as led:
        s, left = led.spent(dataset), led.headroom(dataset)
    return {"zeta": s.zeta, "rho": s.rho, "epsilon": s.epsilon, "delta": s.delta,
            "n_charges": s.n_charges, **left}
