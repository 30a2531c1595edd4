"""dp_release (core kind) end to end under the Prefect test harness: fold-fit store, MLflow
records, ledger, artifacts, refusals."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from _flowtools import Recorder, artifacts_of, flow_logs, params_disagreeing

from dpcausal.ledger import BudgetExceededError, Ledger
from flows import progress
from flows.release import run_release
from store import model_store_dir


def _flow_run_id(out) -> str:
    return out["release_id"].split("/")[0]


def _chunks() -> set[Path]:
    return set(model_store_dir().glob("*.pkl"))


def _recorded(config):
    rec = Recorder()
    stop = progress.subscribe(rec)
    try:
        return run_release(config), rec
    finally:
        stop()


def _fits(rec):
    fits = [e for e in rec.events if e[0] == "advance"]
    return sum(e[1] for e in fits), sum(e[2] for e in fits)


def test_evaluation_fold_fits_are_reused_when_only_estimator_zeta_bounds_or_ci_change(
        make_config):
    """Evaluation mode keys the stored fits on the keyed data fingerprint and the seeded folds."""
    ev = ("mode=evaluation", "estimator.fold_seed=101")
    before = _chunks()
    first, rec = _recorded(make_config(*ev))
    assert _fits(rec) == (20, 0)
    chunks = _chunks() - before
    assert len(chunks) == 4
    for path in chunks:  # the private store: 0600 files in a 0700 folder
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(model_store_dir().stat().st_mode) == 0o700

    second, rec = _recorded(make_config(
        *ev, "estimator.estimator=g", "estimator.zeta=0.7", "estimator.outcome_bounds=[-2, 2]",
        "estimator.propensity_clip=0.1", "estimator.ci=conservative", "estimator.sigma2=tight",
        "estimator.ci_share=0", "estimator.alpha=0.1"))  # G releases no CI (issue 26 §6)
    assert _fits(rec) == (20, 20)  # every fold fit came from the store
    assert second["release"]["estimator"] == "g" and second["release"]["privacy"]["zeta"] == 0.7
    assert _chunks() - before == chunks

    # negative controls: another outcome model, or another fold seed, refits every chunk
    _, rec = _recorded(make_config(*ev, "models.outcome.name=decision_tree",
                                   "models.outcome.params.max_depth=2"))
    assert _fits(rec) == (20, 0)
    _, rec = _recorded(make_config("mode=evaluation", "estimator.fold_seed=102"))
    assert _fits(rec) == (20, 0)

    # a chunk deleted from the store is refitted; the other chunks are reused
    gone = sorted(chunks)[0]
    gone.unlink()
    _, rec = _recorded(make_config(*ev))
    assert _fits(rec) == (20, 15) and gone.exists()


def test_release_mode_keeps_its_fits_in_memory(make_config):
    """Secret folds, drawn afresh by every release: two releases of the same data share no fit,
    so no cache state tells whether the data changed (issue 18 item 10), and no fold model is
    written to disk, where no later run could read it (issue 41 §2: pickling them cost a
    10^6-row release seconds)."""
    before = _chunks()
    _, rec1 = _recorded(make_config())
    _, rec2 = _recorded(make_config())
    assert _fits(rec1) == _fits(rec2) == (20, 0)
    assert _chunks() == before


def test_a_pickle_writable_by_others_is_refused(make_config, tmp_path):
    from store import load_chunk, save_chunk

    save_chunk(tmp_path, "k", [1, 2])
    assert load_chunk(tmp_path, "k") == [1, 2]
    os.chmod(tmp_path / "k.pkl", 0o666)
    with pytest.raises(PermissionError, match="writable by nobody else"):
        load_chunk(tmp_path, "k")


def test_every_release_draws_fresh_noise_and_is_charged(make_config):
    a, b = run_release(make_config()), run_release(make_config())
    assert a["release"]["ate"] != b["release"]["ate"]
    assert a["release_id"] != b["release_id"]
    assert b["spent"]["n_charges"] == 2
    assert b["spent"]["zeta"] == pytest.approx((2 * 1.5**2) ** 0.5, rel=1e-12)  # GDP composition
    assert a["release"]["nonprivate"] is None and not a["release"]["evaluation"]
    assert "covers both the sampling error and the privacy noise" in a["text"]


def test_mlflow_run_holds_public_params_released_metrics_lineage_and_links(make_config,
                                                                           project):
    from mlflow import MlflowClient

    config = make_config()
    out = run_release(config)
    client = MlflowClient()
    run = client.get_run(out["mlflow"]["run_id"])
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == out["experiment"] == config.experiment_name
    assert exp.artifact_location.startswith((project.root / "mlartifacts").as_uri())
    tags = run.data.tags
    assert tags["prefect.flow_run_id"] == _flow_run_id(out)
    assert tags["prefect.flow_run_url"].endswith(_flow_run_id(out))
    assert tags["evaluation"] == "false" and tags["release_id"] == out["release_id"]
    assert tags["mlflow.user"] and tags["dpcausal_version"] and tags["kind"] == "ate"
    assert len(tags["mlflow.source.git.commit"]) == 40
    p = run.data.params
    assert (p["estimator.estimator"], p["estimator.n_folds"]) == ("aipw", "20")
    assert "estimator.fold_seed" not in p   # it seeds folds in evaluation only (issue 42)
    assert p["models.propensity.name"] == "quadratic" and p["mode"] == "release"  # issue 39
    assert params_disagreeing(p, out["release"]) == []  # what the release used (issue 34)
    assert (p["estimator.sigma2"], p["estimator.ci"], p["estimator.delta"]) == (
        out["release"]["params"]["sigma2"], "conservative", "1e-05")
    m = run.data.metrics
    rel = out["release"]
    assert m["ate"] == rel["ate"] and (m["ci_low"], m["ci_high"]) == tuple(rel["ci"])
    assert m["se"] == rel["se"] and m["variance"] == rel["variance"]
    assert m["epsilon"] == pytest.approx(7.0514, abs=1e-3) and m["rho"] == pytest.approx(1.125)
    assert m["dataset_zeta_spent"] == pytest.approx(1.5)
    assert not any(k.startswith("nonprivate") for k in m)
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert arts == {"release.json", "release.png", "config.json"}
    stored = json.loads(
        Path(client.download_artifacts(run.info.run_id, "release.json")).read_text())
    assert stored["ate"] == rel["ate"]
    [inp] = run.inputs.dataset_inputs
    assert inp.dataset.name == config.ledger.dataset_id
    assert inp.dataset.source == config.data.path
    assert [c["name"] for c in json.loads(inp.dataset.schema)["mlflow_colspec"]] == [
        "X1", "A", "Y"]
    with Ledger() as led:
        [charge] = led.history(config.ledger.dataset_id).to_dict("records")
        bound_to = led.known(None, fingerprint=inp.dataset.digest)
    assert bound_to is None  # the digest is a random id, not the keyed fingerprint (issue 26 §4)
    assert charge["run_url"] == out["mlflow"]["url"] == f"runs:/{run.info.run_id}"


def test_release_table_and_link_artifacts(make_config):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    out = run_release(make_config(dataset="Trial A/2026"))
    assert out["artifact"] == "release-trial-a-2026"
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[_flow_run_id(out)])))
    by_key = {a.key: a for a in arts}
    table = by_key["release-trial-a-2026"]
    assert table.type == "table"
    [row] = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert float(row["estimate"]) == pytest.approx(out["release"]["ate"], rel=1e-5)
    assert row["release_id"] == out["release_id"] and float(row["zeta"]) == 1.5
    assert "remaining_next_zeta" in row and row["releases"] == 1
    link = by_key["mlflow-trial-a-2026"]
    assert out["mlflow"]["url"] in link.data


def test_evaluation_mode_own_experiment_not_charged_and_seeded(make_config):
    from mlflow import MlflowClient

    config = make_config("mode=evaluation", "noise_seed=5")
    out = run_release(config)
    run = MlflowClient().get_run(out["mlflow"]["run_id"])
    assert run.data.tags["evaluation"] == "true"
    assert out["experiment"].endswith("/evaluation")
    assert run.data.metrics["nonprivate_ate"] == out["release"]["nonprivate"]["ate"]
    assert out["spent"] is None
    with Ledger() as led:
        assert not led.has_dataset(config.ledger.dataset_id)
    again = run_release(make_config("mode=evaluation", "noise_seed=5"))
    assert again["release"]["ate"] == out["release"]["ate"]  # seeded noise, evaluation only


def test_evaluation_is_refused_for_data_the_ledger_knows(make_config, request):
    import shutil

    from tasks.preflight import EvaluationRefusedError

    capped = make_config()  # the dataset has a cap and a private registration
    with pytest.raises(EvaluationRefusedError, match="registration does not allow it"):
        run_release(make_config("mode=evaluation", register=False))  # a run only asks
    # the same data put where a synthetic source was registered under another id: the ledger
    # binds their fingerprint to the capped id, and a release charged them
    run_release(capped)
    renamed = make_config("mode=evaluation", dataset=f"{request.node.name}-renamed")
    shutil.copyfile(capped.data.path, renamed.data.path)
    known = f"the ledger knows these data \\(as '{capped.ledger.dataset_id}'\\)"
    with pytest.raises(EvaluationRefusedError, match=known):
        run_release(renamed)


def test_exhausted_budget_stops_before_any_fit_and_charges_nothing(make_config):
    """Refused before any fold is fitted; the flow run ends Failed with the ledger's message;
    MLflow holds a refusal run without an estimate; a markdown artifact says why."""
    from mlflow import MlflowClient
    from prefect.client.orchestration import get_client

    before = _chunks()
    cfg = make_config(cap=1.0)  # below the release's zeta = 1.5
    with pytest.raises(BudgetExceededError, match=r"budget exhausted for dataset .*cap"):
        run_release(cfg)
    assert _chunks() == before
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
    with get_client(sync_client=True) as prefect:
        state = prefect.read_flow_run(flow_run_id).state
    arts = artifacts_of([flow_run_id])
    assert state.is_failed() and "budget exhausted" in state.message
    [md] = [a for a in arts if str(a.flow_run_id) == flow_run_id and a.type == "markdown"]
    assert md.key.startswith("refused-") and "Nothing was charged" in md.data


def test_a_release_refused_at_reservation_is_also_recorded(make_config, monkeypatch):
    """The authoritative refusal (another release used the budget after the early check)."""
    from mlflow import MlflowClient

    from tasks import ledger_ops

    monkeypatch.setattr(ledger_ops, "check_budget", lambda *a, **k: None)  # the check missed it
    cfg = make_config(cap=1.0)
    with pytest.raises(BudgetExceededError):
        run_release(cfg)
    exp = MlflowClient().get_experiment_by_name(cfg.experiment_name)
    [run] = MlflowClient().search_runs([exp.experiment_id])
    assert run.data.tags["refused"] == "true" and not run.data.metrics
    assert run.info.status == "FAILED"


def test_a_nan_covariate_releases_through_the_declared_policy(make_config, project):
    """Issue 26 §2 (on main one NaN covariate failed the reserved release: exit 1, Prefect
    Failed, ledger incomplete): the flow completes with a finite release, the ledger commits,
    the policy is public (release parameters, MLflow params, ledger detail) and what it did is
    in the curator's private log only."""
    import numpy as np
    import pandas as pd
    from mlflow import MlflowClient

    from flows.release import dp_release

    cfg = make_config(dataset="nan-covariate")
    frame = pd.read_csv(cfg.data.path)
    frame.loc[7, "X1"] = np.nan
    frame.to_csv(cfg.data.path, index=False)
    state = dp_release(config=cfg, return_state=True)
    assert state.is_completed()
    out = state.result()
    rel = out["release"]
    assert np.isfinite([rel["ate"], rel["se"], *rel["ci"]]).all() and rel["n"] == len(frame)
    assert rel["params"]["missing"] == "impute" and rel["params"]["missing_fill"] == 0.0
    with Ledger() as led:
        [charge] = led.history("nan-covariate").to_dict("records")
    assert charge["status"] == "committed" and charge["detail"]["missing"] == "impute"
    params = MlflowClient().get_run(out["mlflow"]["run_id"]).data.params
    assert params["data.missing"] == "impute"
    log = (project.root / "private" / "errors.log").read_text()
    assert "1 rows with a missing covariate" in log
    assert not [m for m in flow_logs(_flow_run_id(out)) if "missing covariate" in m]


def test_a_failure_after_the_charge_is_generic_and_logged_privately(make_config, project,
                                                                     monkeypatch):
    """A failure after the charge (now only a bug: values cannot fail a release) is charged,
    and nothing data-dependent reaches the exception, the Prefect logs or MLflow (issue 18
    item 3); the message names the private log."""
    import dpcausal.ate.estimator as estimator_mod
    from dpcausal.validation import ReleaseFailedError

    def broken(gamma):
        raise ValueError(f"values such as {gamma[:3].tolist()}")

    monkeypatch.setattr(estimator_mod, "ate_and_variance", broken)
    cfg = make_config(dataset="generic-failure")
    with pytest.raises(ReleaseFailedError) as info:
        run_release(cfg)
    text = str(info.value)
    log = project.root / "private" / "errors.log"
    assert "budget is spent" in text and "values such as" not in text and str(log) in text
    with Ledger() as led:
        [charge] = led.history("generic-failure").to_dict("records")
    assert charge["status"] == "incomplete"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "values such as" in log.read_text()  # the details: the curator's private log only
    flow_run = charge["release_id"].split("/")[0]
    assert not [m for m in flow_logs(flow_run) if "values such as" in m]


def test_dask_runner_gives_the_same_release_as_threads(make_config):
    from distributed import LocalCluster

    # evaluation with a noise seed makes the two comparable; another fold seed's store key
    # makes the Dask run fit every fold itself
    plain = ("models.propensity.name=logistic", "models.outcome.name=linear")   # as before 39
    threads = run_release(make_config("mode=evaluation", "noise_seed=7",
                                      "estimator.fold_seed=55", *plain))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster:
        dask, rec = _recorded(make_config("mode=evaluation", "noise_seed=7",
                                          "estimator.fold_seed=55", "runner.kind=dask",
                                          f"runner.address={cluster.scheduler_address}",
                                          *plain, "models.outcome.params.fit_intercept=true"))
    assert _fits(rec) == (20, 0)
    a, b = threads["release"], dask["release"]
    assert b["nonprivate"] == pytest.approx(a["nonprivate"], rel=1e-9)
    assert [b["ate"], *b["ci"]] == pytest.approx([a["ate"], *a["ci"]], rel=1e-9)
