"""Experiment flows A-D (spec §6) on a tiny scale: structure, finite summaries near the truth,
progress events, the MLflow run with its plots, the cache per (experiment, rep, group, K) and
the parent flow's report. The full comparison is ``tests/service/reproduce/test_ate.py -m slow``."""

from __future__ import annotations

import numpy as np
import pytest
from _flowtools import Recorder

from reproduce.ate import experiments as ex

SMALL = {"A": 1500, "B": 1500, "C": 1500, "D": 1500}
MAX_FOLDS = 3


def _run_flow(letter, tmp_path, reps=2):
    from flows import experiments as fx
    from flows import progress

    rec = Recorder()
    stop = progress.subscribe(rec)
    try:
        out = fx.FLOWS[letter](reps=reps, n=SMALL[letter], max_folds=MAX_FOLDS,
                               out_dir=str(tmp_path))
    finally:
        stop()
    return out, rec


@pytest.mark.parametrize("letter", ["A", "B", "C", "D"])
def test_experiment_flow_smoke(letter, tmp_path):
    import mlflow

    out, rec = _run_flow(letter, tmp_path)
    exp = ex.EXPERIMENTS[letter]
    # progress: one phase of `reps` repetitions, advanced once per finished repetition
    assert rec.events == [("phase", f"experiment {letter}", 2),
                          ("advance", 1, 0), ("advance", 1, 0)]  # computed, none from cache
    if letter == "A":  # a rerun takes both repetitions from the cache and says so
        _, again = _run_flow(letter, tmp_path)
        assert again.events[1:] == [("advance", 1, 1), ("advance", 1, 1)]
    est = out["estimates"]
    assert sorted(est["rep"].unique()) == [0, 1]
    assert set(est["method"]) == {m.name for m in exp.methods}
    assert (est["n"] == SMALL[letter]).all() and est["n_folds"].max() <= MAX_FOLDS
    nonprivate = out["tables"]["nonprivate"].set_index("method")
    assert np.isfinite(nonprivate[["mean", "bias", "rmse", "q05", "q95"]].to_numpy()).all()
    # a well-behaved method lands near the truth even at n = 1500
    well = {"A": "AIPW clip=0.2", "B": "AIPW_correct", "C": "AIPW_log", "D": "AIPW_log K=2"}
    assert abs(nonprivate.loc[well[letter], "mean"] - exp.true_ate) < 0.15
    private = out["tables"]["private"]
    own = {ex.OWN_RELEASE} if letter != "D" else set()  # the comparators' own releases
    assert set(private["mode"]) == {"theorem1", "lemma", ex.NOT_A_CLAIM} | own
    comparators = out["tables"]["comparators"]
    assert set(comparators["method"]) == {m.name for m in exp.methods if m.comparator}
    assert ex.ORACLE not in set(private["method"])
    cov = out["tables"]["coverage"]
    assert set(zip(cov["ci_mode"], cov["sigma2_mode"], strict=True)) == set(ex.CI_MODES) | (
        {("own", "own")} if own else set())  # a comparator's own CI
    assert cov["coverage"].between(0, 1).all() and (cov["ci_width"] > 0).all()
    # figures on disk under <out_dir>/figures/ate_*.png
    figs = {k: tmp_path / "figures" / p.split("/figures/")[-1] for k, p in out["figures"].items()}
    assert figs["violin"].name == f"ate_{letter}.png" and figs["violin"].stat().st_size > 5000
    assert ("k_sweep" in figs) == (letter == "D")
    # the MLflow run: evaluation=true, settings as params, per-method metrics, plots + CSV
    run = mlflow.get_run(out["mlflow"]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["evaluation"] == "true" and run.data.tags["experiment"] == letter
    assert "not a valid privacy claim" in run.data.tags["note"]
    assert run.data.params["n"] == str(SMALL[letter]) and run.data.params["reps"] == "2"
    from tasks.experiments import metric_key

    assert run.data.metrics[metric_key("nonprivate", well[letter], "mean")] == pytest.approx(
        nonprivate.loc[well[letter], "mean"])
    assert run.data.metrics["targets_total"] >= 1
    for row in comparators.to_dict("records"):
        assert run.data.metrics[metric_key("comparators", row["method"], "ours")] == (
            pytest.approx(row["ours"]))
    names = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert f"ate_{letter}.png" in names and f"experiment_{letter}_reps.csv" in names
    exp_name = mlflow.get_experiment(run.info.experiment_id).name
    assert exp_name.startswith("dpcausal/reproduce-fig")


def test_repetitions_are_cached_per_group_and_reused(tmp_path):
    from prefect import flow

    from tasks.experiments import run_group

    group = ["logistic", "linear", MAX_FOLDS]

    @flow
    def twice():
        first = run_group(experiment="A", rep=5, group=group, n=600, max_folds=MAX_FOLDS,
                          return_state=True)
        second = run_group(experiment="A", rep=5, group=group, n=600, max_folds=MAX_FOLDS,
                           return_state=True)
        other = run_group(experiment="A", rep=6, group=group, n=600, max_folds=MAX_FOLDS,
                          return_state=True)
        return first, second, other

    first, second, other = twice()
    assert first.name == "Completed" and second.name == "Cached" and other.name == "Completed"
    assert first.result() == second.result()
    assert first.result()[0]["tau_hat"] != other.result()[0]["tau_hat"]


def test_parent_flow_writes_the_report(tmp_path):
    from flows.experiments import reproduce_experiments

    path = reproduce_experiments(which=["A", "D"], reps=2, out_dir=str(tmp_path), n=1200,
                                 max_folds=MAX_FOLDS)
    assert path == str(tmp_path / "reproduction.md")
    text = (tmp_path / "reproduction.md").read_text()
    for needle in ("## Experiment A", "## Experiment D", "§6.8(a)", "not a valid privacy claim",
                   "Total run time", "![violin](figures/ate_A.png)",
                   "![k_sweep](figures/ate_D_ksweep.png)", "CI coverage",
                   "our implementations beside the authors' arrays", "LPGM19 clip=0.2"):
        assert needle in text, needle
    assert "## Experiment B" not in text


@pytest.mark.parametrize(("kwargs", "match"), [({"which": ["E"]}, "which must list"),
                                               ({"which": []}, "which must list"),
                                               ({"which": ["A"], "reps": 1}, "reps must be")])
def test_parent_flow_refuses_bad_parameters(kwargs, match, tmp_path):
    from flows.experiments import reproduce_experiments

    with pytest.raises(ValueError, match=match):
        reproduce_experiments(out_dir=str(tmp_path), **kwargs)
