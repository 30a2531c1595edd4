"""A stand-in for the served stack behind the gateway: :class:`LedgerRuns` runs each asked
release as the flow's charged task does (the real ledger's reservation for the analyst, a
release committed under ``<subflow run id>/<config name>``) and reports the flow run's state as
Prefect would; a refusal by the ledger becomes a Failed run whose message names the exception."""

from __future__ import annotations

import asyncio
import uuid
from functools import cache
from typing import Any

import yaml

from conf.settings import PROJECT_ROOT
from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Ledger

A, B = "demo-experiment-a", "trial-dim-demo"  # datasets of two registered configs


@cache
def release_json() -> str:
    """A real core release (2,000 rows of experiment A), as the ledger commits it."""
    from dpcausal import PrivateATE
    from dpcausal.datasets import make_experiment_a

    X, T, Y, _ = make_experiment_a(n=2000, random_state=3)
    return PrivateATE(outcome_bounds=(-1.0, 1.0), zeta=1.0, n_folds=4).fit(X, T, Y).to_json()


def labelled(dataset: str) -> str:
    """:func:`release_json` labelled with ``dataset``, as the charged release labels it."""
    from dpcausal import Release

    return Release.from_json(release_json()).of_dataset(dataset).to_json()


def curator_setup(url: str) -> dict[str, str]:
    """The curator's ledger: datasets A (cap 3) and B (cap 2) registered, analysts alice (A,
    own cap 1.5), bob (B) and carol (A, revoked); their tokens by name."""
    from conf.kinds import load_any
    from conf.registration import registration_values

    with Ledger(url, create=True) as led:
        for dataset, config, cap in ((A, "demo", 3.0), (B, "trial_dim", 2.0)):
            # the curator half of the registered config, as `ledger register` binds it (n and
            # d stated here: the gateway reads no data, so none are written)
            values = registration_values(load_any(PROJECT_ROOT / f"conf/release/{config}.yaml"))
            led.register(dataset, **values, n=2000, facts={"d": 1}, zeta=cap)
        tokens = {"alice": led.add_analyst("alice", [A], zeta=1.5)[1],
                  "bob": led.add_analyst("bob", [B])[1],
                  "carol": led.add_analyst("carol", [A])[1]}
        led.revoke_analyst("carol")
    return tokens


class LedgerRuns:
    """:class:`gateway.service.Runs` without Prefect (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.submitted: list[tuple[str, dict[str, Any], str]] = []
        self.runs: dict[str, dict[str, Any]] = {}

    def submit(self, config: str, overrides: dict[str, Any], analyst: str) -> str:
        _outside_event_loop()
        self.submitted.append((config, dict(overrides), analyst))
        raw = yaml.safe_load((PROJECT_ROOT / config).read_text())
        request, sub = str(uuid.uuid4()), str(uuid.uuid4())
        zeta = float(overrides.get("estimator.zeta", 1.0))
        state, message = "COMPLETED", ""
        try:
            with Ledger(self.url) as led, led.release(
                    raw["ledger"]["dataset_id"], f"{sub}/{raw['name']}",
                    PrivacyCharge("gaussian", zeta=zeta), unit="row", analyst=analyst) as slot:
                slot.commit(labelled(raw["ledger"]["dataset_id"]))
        except ValueError as exc:
            state = "FAILED"
            message = f"Flow run encountered an exception: {type(exc).__name__}: {exc}"
        self.runs[request] = {"state": state, "message": message, "analyst": analyst,
                              "release_runs": [sub]}
        return request

    def state(self, request_id: str) -> dict[str, Any] | None:
        _outside_event_loop()
        return self.runs.get(request_id)


def _outside_event_loop() -> None:
    """Prefect's client (``run_deployment``) returns a coroutine instead of running when it is
    called on a thread with a running event loop: the gateway must call it from a worker
    thread, never from an ``async`` route."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise AssertionError("bug: the gateway called Prefect's client inside the event loop")
