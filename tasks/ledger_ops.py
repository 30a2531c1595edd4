"""Every ledger call of the release flow (reserve -> noise -> commit), in one place."""

from __future__ import annotations

import json
from typing import Any, Callable

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Ledger


def open_ledger(budget: float | None = None, dataset: str | None = None) -> Ledger:
    """The project ledger (DPCAUSAL_LEDGER_URL); a config budget creates it and sets the cap of a
    dataset seen for the first time (later caps are managed with `dpcausal ledger set-budget`)."""
    led = Ledger(create=budget is not None)
    if budget is not None and dataset is not None and not led.has_dataset(dataset):
        led.set_budget(dataset, zeta=budget)
    return led


def ensure_epsilon_cap(dataset: str, epsilon: float | None, delta: float) -> None:
    """Create the ledger if needed and give a dataset seen for the first time its (epsilon,
    delta) cap (the ``ledger`` block of an (epsilon, delta) mechanism's config)."""
    with Ledger(create=True) as led:
        if epsilon is not None and not led.has_dataset(dataset):
            led.set_budget(dataset, epsilon=epsilon, delta=delta)


def check_budget(dataset: str, charge: PrivacyCharge, *, budget: float | None = None) -> None:
    """Refuse now (BudgetExceededError) a charge that would not fit under the dataset's cap:
    before any model is fitted. The reservation at release time stays authoritative."""
    with open_ledger(budget, dataset) as led:
        led.check(dataset, charge)


def charged_release(dataset: str, release_id: str, charge: PrivacyCharge,
                    draw: Callable[[], dict[str, Any]], *, budget: float | None = None,
                    run_url: str | None = None) -> tuple[dict[str, Any], bool]:
    """Reserve ``charge``, call ``draw`` (which draws the noise once), commit its JSON.

    Returns ``(release, reused)``: a release id committed before returns its stored release
    (no new noise). Raises BudgetExceededError before ``draw`` when the cap would be exceeded.
    """
    with open_ledger(budget, dataset) as led:
        with led.release(dataset, release_id, charge, run_url=run_url) as slot:
            if slot.result is not None:
                return json.loads(slot.result), True
            out = draw()
            slot.commit(json.dumps(out))
    return out, False


def spent(dataset: str) -> dict[str, Any]:
    """The dataset's cumulative spend: zeta (None unless all charges are Gaussian), epsilon at
    delta."""
    with Ledger() as led:
        s = led.spent(dataset)
    return {"zeta": s.zeta, "epsilon": s.epsilon, "delta": s.delta, "n_charges": s.n_charges}
