"""Tasks of the meta-analysis flow: read released estimates, pool them (free post-processing),
log the pooled result with a forest plot.

Releases named by their ledger release ids are read from the ledger's committed results: what
was released, as it was released (:func:`released_study`).

Only released metrics are read from MLflow: a release's private ``ate`` and total ``se`` (any
kind), its ``epsilon``/``zeta``, public ``n`` and ``noise_share`` (the public noise variance over
the released variance), and the tags that identify it (``dataset_id``: releases of one dataset
are pooled as one study by :func:`dpcausal.meta.combine`, the same rule as in Python).
Evaluation-mode runs (whose non-private values exist in MLflow) are refused when named and
skipped when a query selects them; so are refused releases and runs that released no ATE with
its se.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from conf.meta import SOURCES, MetaConfig
from dpcausal.meta import MetaResult, combine
from tasks.tracking import ensure_experiment

# the only metrics a study contributes
RELEASED = ("ate", "se", "epsilon", "zeta", "n", "noise_share")


def _client(config: MetaConfig) -> Any:
    import mlflow

    return mlflow.MlflowClient(tracking_uri=config.tracking_uri or mlflow.get_tracking_uri())


def _unusable(run: Any) -> str | None:
    """Why a run cannot be pooled, or None."""
    tags, m = run.data.tags, run.data.metrics
    if tags.get("evaluation") == "true":
        return "is an evaluation-mode run (not differentially private)"
    if tags.get("refused") == "true":
        return "is a refused release (nothing was released)"
    if "release_id" not in tags:
        return f"is not a release (kind {tags.get('kind')!r})"
    if "ate" not in m or "se" not in m:
        return "released no ATE with its standard error (e.g. ci_share=0), which pooling needs"
    return None


def _study(run: Any) -> dict[str, Any]:
    m = run.data.metrics
    tags, params = run.data.tags, run.data.params
    study = {k: m[k] for k in RELEASED if k in m}
    k = params.get("estimator.n_folds")
    what = [tags.get("dataset_id"), tags.get("kind"),
            params.get("estimator.estimator"),
            params.get("estimator.design"), k not in (None, "None") and f"K={k}",
            params.get("estimator.outcome_bounds")
            and f"bounds {params['estimator.outcome_bounds']}"]
    return study | {"label": " ".join(x for x in what if x) + f" ({run.info.run_id[:8]})",
                    "dataset": tags.get("dataset_id"), "run_id": run.info.run_id}


def released_study(release_id: str) -> dict[str, Any]:
    """The study of a committed release of the ledger (its released numbers only, the same as
    its MLflow run's :data:`RELEASED` metrics); ValueError when no committed release has that
    id or it released no ATE with its standard error."""
    from dpcausal import Release
    from tasks.ledger_ops import committed_release

    found = committed_release(release_id)
    if found is None:
        raise ValueError(f"release {release_id!r} is not a committed release of the ledger "
                         "(`dpcausal ledger history DATASET` lists them); only released "
                         "estimates can be pooled")
    dataset, text = found
    out = Release.from_json(text).to_dict()
    if out.get("ate") is None or out.get("se") is None:
        raise ValueError(f"release {release_id} released no ATE with its standard error (e.g. "
                         "ci_share=0), which pooling needs; it cannot be pooled")
    privacy = out.get("privacy") or {}
    study = {k: v for k in RELEASED if (v := out.get(k, privacy.get(k))) is not None}
    return study | {"label": f"{dataset} {out['kind']} ({release_id})", "dataset": dataset,
                    "release_id": release_id}


@task(name="read_released_studies", cache_policy=NO_CACHE, persist_result=False, retries=1)
def read_released_studies(config: MetaConfig) -> tuple[pd.DataFrame, list[str]]:
    """One row per study (label, ate, variance, zeta, n, run_id or release_id) and notes on
    skipped runs."""
    if config.releases:
        return pd.DataFrame([released_study(r) for r in config.releases]), []
    if config.csv:
        path = Path(config.csv)
        if not path.is_file():
            raise ValueError(f"csv {str(path)!r} does not exist; give a CSV of published "
                             "estimates with columns ate, se or variance[, n, zeta, label]")
        return pd.read_csv(path), []
    client = _client(config)
    notes: list[str] = []
    if config.runs:
        runs = []
        for run_id in config.runs:
            try:
                run = client.get_run(run_id)
            except Exception:  # noqa: BLE001 - MLflow raises several types for a bad id
                raise ValueError(f"MLflow run {run_id!r} was not found at "
                                 f"{client.tracking_uri}") from None
            why = _unusable(run)
            if why:
                raise ValueError(f"run {run_id} {why}; it cannot be pooled")
            runs.append(run)
    else:
        ids = [e.experiment_id for e in client.search_experiments()]
        found = client.search_runs(ids, config.query, max_results=10_000) if ids else []
        runs = []
        for run in found:
            why = _unusable(run)
            if why:
                notes.append(f"skipped run {run.info.run_id}: {why}")
            else:
                runs.append(run)
        if not runs:
            raise ValueError(f"the query {config.query!r} selects no pooled-able release "
                             f"({len(found)} run(s) matched)")
    return pd.DataFrame([_study(r) for r in runs]), notes


@task(name="pool_studies", cache_policy=NO_CACHE, persist_result=False, retries=0)
def pool_studies(config: MetaConfig, studies: pd.DataFrame) -> MetaResult:
    """``dpcausal.meta.combine`` on released numbers only (spec dp_ate_ensemble.md §4)."""
    labels = studies["label"].astype(str).tolist() if "label" in studies else []
    ids = next((studies[c] for c in ("run_id", "release_id") if c in studies), None)
    by_run = dict(zip(ids, labels, strict=True)) if ids is not None else {}
    shared = labels if "*" in config.shared else [by_run.get(s, s) for s in config.shared]
    columns = [c for c in ("label", "ate", "se", "variance", "zeta", "n", "dataset",
                           "noise_share") if c in studies]
    return combine(studies[columns], weights=config.weights, model=config.model,
                   level=config.level, shared_people=shared or None)


def meta_metrics(result: MetaResult) -> dict[str, float]:
    m = {"pooled_ate": result.ate, "pooled_variance": result.variance, "pooled_se": result.se,
         "ci_low": result.ci[0], "ci_high": result.ci[1], "n_studies": result.n_studies,
         "tau2": result.tau2, "q": result.q, "i2": result.i2, "additional_zeta": 0.0,
         "composed_zeta": result.privacy.get("composed_zeta"),
         "max_individual_zeta": result.privacy.get("max_individual_zeta")}
    return {k: float(v) for k, v in m.items() if v is not None and math.isfinite(float(v))}


@task(name="log_meta_analysis", cache_policy=NO_CACHE, persist_result=False, retries=1)
def log_meta_analysis(config: MetaConfig, result: MetaResult, studies: pd.DataFrame,
                      notes: list[str], flow_run_id: str) -> dict[str, str]:
    """One MLflow run: sources and weighting as params, pooled figures as metrics, the forest
    plot and the study table as artifacts, the privacy position as tags."""
    from mlflow.entities import Metric, Param

    from plots.meta import forest_plot

    client = _client(config)
    exp_id = ensure_experiment(config.experiment, client.tracking_uri)
    source = next(name for name in SOURCES if getattr(config, name))
    params = {"source": source, "weights": config.weights, "model": config.model,
              "level": str(config.level), "critical": result.critical,
              "source_runs": ",".join(studies.get("run_id", []))[:6000],
              "source_releases": ",".join(studies.get("release_id", []))[:6000],
              "query": config.query or "", "csv": config.csv or "",
              "shared": ",".join(config.shared)[:6000]}
    tags = {"kind": "meta", "prefect.flow_run_id": flow_run_id, "evaluation": "false",
            "privacy_cost": "0 (post-processing of released values)"}
    run_id = client.create_run(exp_id, run_name=f"meta-{result.n_studies}-studies",
                               tags=tags).info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(run_id, params=[Param(k, v) for k, v in params.items()],
                         metrics=[Metric(k, v, now, 0) for k, v in meta_metrics(result).items()])
        client.log_dict(run_id, {"privacy": result.privacy, "notes": notes}, "privacy.json")
        with tempfile.TemporaryDirectory() as tmp:
            table = Path(tmp) / "studies.csv"
            result.studies.to_csv(table, index=False)
            client.log_artifact(run_id, str(table))
            client.log_artifact(run_id, str(forest_plot(result, Path(tmp) / "forest.png")))
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    return {"run_id": run_id, "experiment_id": exp_id, "tracking_uri": str(client.tracking_uri)}
