"""What a release logs to MLflow (metrics) and its plot, for any kind; release mode refuses
non-private values; artifact keys."""

import pytest
from prefect.logging import disable_run_logger

from dpcausal import Release
from plots.figures import pyplot, save
from tasks.artifacts import artifact_key, release_table
from tasks.tracking import TrackedRun, log_release, release_metrics


def _release(ci=True, evaluation=False):
    return {
        "kind": "ate", "ate": 0.123456789, "ci": [0.0123, 0.2345] if ci else None,
        "se": 0.06 if ci else None, "variance": 0.0036 if ci else None, "level": 0.95,
        "privacy": {"zeta": 1.5, "epsilon": 7.05, "delta": 1e-5, "rho": 1.125, "unit": "row",
                    "mechanism": "gaussian", "detail": {"zeta1": 1.4, "zeta2": 0.5}},
        "noise": {"sigma_ate": 0.05}, "n": 5000, "n_folds": 200, "estimator": "aipw",
        "evaluation": evaluation, "noise_share": 0.69,
        "nonprivate": {"ate": 0.0987654321, "variance": 0.00123456} if evaluation else None,
    }


def test_metrics_release_mode_and_cumulative_spend():
    m = release_metrics(_release(), {"zeta": 2.0, "epsilon": 9.9, "delta": 1e-5, "n_charges": 2})
    assert m["ate"] == 0.123456789 and (m["ci_low"], m["ci_high"]) == (0.0123, 0.2345)
    assert m["se"] == 0.06 and m["zeta1"] == 1.4 and m["epsilon"] == 7.05
    assert m["dataset_zeta_spent"] == 2.0
    spend = (m["dataset_epsilon_spent"], m["dataset_delta"], m["dataset_n_charges"])
    assert spend == (9.9, 1e-5, 2)
    assert not any("nonprivate" in k for k in m)
    assert "ci_low" not in release_metrics(_release(ci=False), None)


def test_evaluation_metrics_carry_nonprivate_values():
    m = release_metrics(_release(evaluation=True), None)
    assert m["nonprivate_ate"] == 0.0987654321 and m["nonprivate_variance"] == 0.00123456


def test_release_mode_refuses_a_result_with_nonprivate_values():
    run = TrackedRun("r", "e", "sqlite:///nowhere.db", "runs:/r")
    rel = Release.from_dict(_release(evaluation=True))
    with disable_run_logger(), pytest.raises(AssertionError, match="bug: a release-mode result"):
        log_release.fn(run, rel, False, None)


@pytest.mark.parametrize("ci", [True, False])
def test_the_release_draws_its_own_png(tmp_path, ci):
    """``log_release`` saves ``release.plot()``: the one renderer, from the released values."""
    pyplot()
    path = save(Release.from_dict(_release(ci=ci)).plot().figure, tmp_path / "r.png", dpi=100)
    with open(path, "rb") as f:
        blob = f.read()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 5000


def test_artifact_key_and_table():
    assert artifact_key("release", "Trial A/2026 (v2)") == "release-trial-a-2026-v2"
    [row] = release_table(_release(), "fr/x", {"epsilon": 9.9, "zeta": 2.0, "n_charges": 2,
                                                 "next_zeta": 1.0, "next_epsilon": 5.0})
    assert row["estimate"] == "0.123457" and row["zeta"] == "1.5" and row["releases"] == 2
    assert row["remaining_next_zeta"] == "1" and row["release_id"] == "fr/x"


def test_experiments_are_model_development_experiments(tmp_path, monkeypatch):
    """Issue 25 §5: MLflow 3 opens an experiment without a kind in its GenAI view ("Evaluation
    runs"); the tag makes it open in the model-training runs view, also for an old experiment."""
    import mlflow

    from tasks.tracking import ensure_experiment

    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    old = client.create_experiment("made-before", artifact_location=(tmp_path / "a").as_uri())
    new = ensure_experiment("dpcausal-new", uri)
    assert ensure_experiment("made-before", uri) == old
    for exp_id in (new, old):
        assert client.get_experiment(exp_id).tags["mlflow.experimentKind"] == \
            "custom_model_development"
