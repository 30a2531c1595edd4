"""``aggregate`` and ``release``: NON-PRIVATE inputs, never persisted, cached or retried.

Only the private ATERelease (as a dict) leaves ``release``; in release mode it goes through the
ledger first (reserve -> draw noise once -> commit), under ``release_id``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from conf.models import ReleaseConfig
from dpcausal.aggregation import EnsembleNuisances
from tasks import ledger_ops
from tasks.build import build_estimator
from tasks.data import LoadedData
from tasks.fit import FoldPlan
from tasks.model_store import load_chunk

_PRIVATE_TASK = dict(persist_result=False, cache_policy=NO_CACHE, retries=0)


@task(name="check_budget", cache_policy=NO_CACHE, persist_result=False, retries=0)
def check_budget(config: ReleaseConfig, n: int) -> None:
    """Refuse an over-budget release before any fold is fitted (release mode; data-free: the
    charge depends on the public n and parameters only)."""
    if not config.evaluation:
        ledger_ops.check_budget(config.ledger.dataset_id,
                                build_estimator(config).privacy_charge(n),
                                budget=config.ledger.budget)


@task(name="aggregate", **_PRIVATE_TASK)
def aggregate(config: ReleaseConfig, data: LoadedData, plan: FoldPlan, keys: list[str],
              store: str) -> EnsembleNuisances:
    """Out-of-fold ensemble nuisances from the stored fold models (in fold order)."""
    fold_models = [fm for key in keys for fm in load_chunk(store, key)]
    return build_estimator(config).aggregate(data.X, plan.fold_ids, fold_models)


@task(name="release", **_PRIVATE_TASK)
def release(config: ReleaseConfig, data: LoadedData, nuisances: EnsembleNuisances,
            release_id: str, run_url: str | None = None) -> dict[str, Any]:
    """Draw the noise once; return ``{"release": ATERelease dict, "reused", "spent"}``.

    Release mode: the charge is reserved in the ledger before the noise is drawn, from a fresh
    OS-entropy generator (never from the public fold seed); a release id committed before returns
    its stored release. Evaluation mode: no ledger, ``noise_seed`` allowed, non-private values kept.
    """
    est = build_estimator(config)
    logger = get_run_logger()
    if config.evaluation:
        rng = np.random.default_rng(config.noise_seed)
        rel = est.release(data.A, data.Y, nuisances, random_state=rng, evaluation=True, d=data.d)
        logger.warning("EVALUATION mode: this output is not differentially private")
        return {"release": rel.to_dict(), "reused": False, "spent": None}

    charge = est.privacy_charge(data.n)

    def draw() -> dict[str, Any]:
        rng = np.random.default_rng()  # OS entropy
        return est.release(data.A, data.Y, nuisances, random_state=rng, evaluation=False,
                           d=data.d).to_dict()

    out, reused = ledger_ops.charged_release(
        config.ledger.dataset_id, release_id, charge, draw, budget=config.ledger.budget,
        run_url=run_url)
    logger.info("released %s (zeta=%.4g)%s", release_id, charge.zeta,
                " - returned the committed release, no new noise" if reused else "")
    return {"release": out, "reused": reused,
            "spent": ledger_ops.spent(config.ledger.dataset_id)}
