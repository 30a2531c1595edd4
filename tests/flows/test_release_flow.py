"""dp_ate_release end to end under the Prefect test harness: caching, MLflow records, ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _flowtools import Recorder, task_states

from dpcausal.ledger import BudgetExceededError, Ledger
from flows.release import run_release
from tasks import progress
from tasks.model_store import model_store_dir


def _flow_run_id(out) -> str:
    return out["release_id"].split("/")[0]


def test_fold_fits_are_reused_when_only_estimator_zeta_bounds_or_ci_change(make_config):
    seed = "estimator.fold_seed=101"  # a fold plan no other test uses: this test's own cache
    before = set(model_store_dir().glob("*.pkl"))
    first = run_release(make_config(seed))
    states = task_states(_flow_run_id(first))
    assert len(states) == 4 and set(states.values()) == {"Completed"}
    chunks = set(model_store_dir().glob("*.pkl")) - before
    assert len(chunks) == 4

    changed = make_config(seed, "estimator.estimator=g", "estimator.zeta=0.7",
                          "estimator.outcome_bounds=[-2, 2]", "estimator.propensity_clip=0.1",
                          "estimator.ci=conservative", "estimator.sigma2=tight",
                          "estimator.ci_share=0.3", "estimator.alpha=0.1")
    rec = Recorder()
    stop = progress.subscribe(rec)
    try:
        second = run_release(changed)
    finally:
        stop()
    assert set(task_states(_flow_run_id(second)).values()) == {"Cached"}
    # the progress bar is told that every fold fit came from the cache
    fits = [e for e in rec.events if e[0] == "advance"]
    assert sum(e[1] for e in fits) == sum(e[2] for e in fits) == second["release"]["n_folds"]
    assert second["release"]["estimator"] == "g" and second["release"]["privacy"]["zeta"] == 0.7

    # negative controls: another outcome model, or another fold plan, refits every chunk
    third = run_release(make_config(seed, "models.outcome.name=decision_tree",
                                    "models.outcome.params.max_depth=2"))
    assert set(task_states(_flow_run_id(third)).values()) == {"Completed"}
    fourth = run_release(make_config("estimator.fold_seed=102"))
    assert set(task_states(_flow_run_id(fourth)).values()) == {"Completed"}

    # a chunk deleted from the private store is refitted; the other chunks stay cached
    gone = sorted(chunks)[0]
    gone.unlink()
    rec = Recorder()
    stop = progress.subscribe(rec)
    try:
        fifth = run_release(make_config(seed))
    finally:
        stop()
    assert (sorted(task_states(_flow_run_id(fifth)).values())
            == ["Cached", "Cached", "Cached", "Completed"])
    assert sorted(e[2] > 0 for e in rec.events if e[0] == "advance") == [False, True, True, True]
    assert gone.exists()


def test_every_release_draws_fresh_noise_and_is_charged(make_config):
    a, b = run_release(make_config()), run_release(make_config())
    assert a["release"]["ate"] != b["release"]["ate"]
    assert a["release_id"] != b["release_id"]
    assert b["spent"]["n_charges"] == 2
    assert b["spent"]["zeta"] == pytest.approx((2 * 1.5**2) ** 0.5, rel=1e-12)  # GDP composition
    assert a["release"]["nonprivate"] is None and not a["release"]["evaluation"]


def test_mlflow_run_holds_public_params_private_metrics_and_artifacts(make_config, project):
    from mlflow import MlflowClient

    out = run_release(make_config())
    client = MlflowClient()
    run = client.get_run(out["mlflow"]["run_id"])
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == out["experiment"]
    assert exp.artifact_location.startswith((project.root / "mlartifacts").as_uri())
    tags = run.data.tags
    assert tags["prefect.flow_run_id"] == _flow_run_id(out)
    assert tags["prefect.flow_run_name"] and tags["evaluation"] == "false"
    assert tags["release_id"] == out["release_id"]
    p = run.data.params
    assert (p["estimator"], p["n_folds"], p["n"], p["fold_seed"]) == ("aipw", "20", "2000", "3")
    assert p["models.propensity.name"] == "logistic" and p["noise.sigma2_mode"] == "paper"
    assert float(p["zeta1"]) ** 2 + float(p["zeta2"]) ** 2 == pytest.approx(1.5**2)
    m = run.data.metrics
    rel = out["release"]
    assert m["ate"] == rel["ate"] and (m["ci_low"], m["ci_high"]) == tuple(rel["ci"])
    assert m["variance"] == rel["variance"] and m["sigma_ate"] == rel["noise"]["sigma_ate"]
    assert m["epsilon"] == pytest.approx(7.0514, abs=1e-3) and m["rho"] == pytest.approx(1.125)
    assert m["dataset_zeta_spent"] == pytest.approx(1.5)
    assert not any(k.startswith("nonprivate") for k in m)
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert arts == {"release.json", "release.png"}
    stored = json.loads(
        Path(client.download_artifacts(run.info.run_id, "release.json")).read_text())
    assert stored["ate"] == rel["ate"]


def test_evaluation_mode_is_tagged_and_not_charged(make_config):
    from mlflow import MlflowClient

    out = run_release(make_config("mode=evaluation", "noise_seed=5"))
    run = MlflowClient().get_run(out["mlflow"]["run_id"])
    assert run.data.tags["evaluation"] == "true"
    assert run.data.metrics["nonprivate_ate"] == out["release"]["nonprivate"]["ate"]
    assert out["spent"] is None
    again = run_release(make_config("mode=evaluation", "noise_seed=5"))
    assert again["release"]["ate"] == out["release"]["ate"]  # seeded noise, evaluation only


def test_exhausted_budget_stops_before_noise_and_charges_nothing(make_config, request):
    """Refused before any fold is fitted; the flow run ends Failed with the ledger's message and
    MLflow holds a refusal run without an estimate."""
    from mlflow import MlflowClient
    from prefect.client.orchestration import get_client

    cfg = make_config("ledger.budget=1.0")  # below the release's zeta = 1.5
    with pytest.raises(BudgetExceededError, match=r"budget exhausted for dataset .*cap"):
        run_release(cfg)
    with Ledger() as led:
        assert led.spent(cfg.ledger.dataset_id).n_charges == 0
    client = MlflowClient()
    exp = client.get_experiment_by_name(cfg.experiment_name)
    [run] = client.search_runs([exp.experiment_id])
    assert run.data.tags["refused"] == "true" and run.info.status == "FAILED"
    assert run.data.tags["refusal"].startswith(
        f"budget exhausted for dataset {cfg.ledger.dataset_id}")
    assert not run.data.metrics  # nothing was released
    flow_run_id = run.data.tags["prefect.flow_run_id"]
    assert task_states(flow_run_id) == {}  # no fold was fitted
    with get_client(sync_client=True) as prefect:
        state = prefect.read_flow_run(flow_run_id).state
    assert state.is_failed() and "budget exhausted" in state.message


def test_a_release_refused_at_reservation_is_also_recorded(make_config, monkeypatch):
    """The authoritative refusal (another release used the budget after the early check)."""
    from mlflow import MlflowClient

    from tasks import ledger_ops

    # the early check missed it
    monkeypatch.setattr(ledger_ops, "check_budget", lambda *a, **k: None)
    cfg = make_config("ledger.budget=1.0")
    with pytest.raises(BudgetExceededError):
        run_release(cfg)
    exp = MlflowClient().get_experiment_by_name(cfg.experiment_name)
    [run] = MlflowClient().search_runs([exp.experiment_id])
    assert run.data.tags["refused"] == "true" and not run.data.metrics
    # the folds were fitted (or reused from an earlier test's cache) before the reservation refused
    fits = set(task_states(run.data.tags["prefect.flow_run_id"]).values())
    assert fits and fits <= {"Completed", "Cached"}


def test_dask_runner_gives_the_same_release_as_threads(make_config):
    from distributed import LocalCluster

    # evaluation mode with a noise seed makes the two releases comparable; a spec that fits the
    # same models under another cache key makes the Dask run fit every fold itself
    threads = run_release(make_config("mode=evaluation", "noise_seed=7"))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        dask = run_release(make_config("mode=evaluation", "noise_seed=7", "runner.kind=dask",
                                       f"runner.address={cluster.scheduler_address}",
                                       "models.outcome.name=linear",
                                       "models.outcome.params.fit_intercept=true"))
    assert set(task_states(_flow_run_id(dask)).values()) == {"Completed"}
    a, b = threads["release"], dask["release"]
    assert b["nonprivate"] == a["nonprivate"]
    assert (b["ate"], b["ci"], b["variance"]) == (a["ate"], a["ci"], a["variance"])
