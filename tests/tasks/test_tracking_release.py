"""What a release logs to MLflow (params, metrics) and its plot; release mode refuses
non-private."""

import pytest
from prefect.logging import disable_run_logger

from conf.models import ReleaseConfig
from tasks.plots_release import noise_share, plot_release
from tasks.tracking import log_release, release_metrics, release_params


def _config(mode="release", **extra):
    return ReleaseConfig.model_validate({
        "data": {"path": "d.csv"}, "columns": {"treatment": "A", "outcome": "Y"},
        "ledger": {"dataset_id": "ds"}, "mode": mode, **extra})


def _release(ci=True, evaluation=False):
    return {
        "ate": 0.123456789, "ci": [0.0123, 0.2345] if ci else None,
        "variance": 0.0036 if ci else None,
        "privacy": {"zeta": 1.5, "zeta1": 1.4, "zeta2": 0.5, "epsilon": 7.05, "delta": 1e-5,
                    "rho": 1.125},
        "noise": {"sigma_ate": 0.05, "sigma_var": 0.02, "sensitivity": 0.07,
                  "sensitivity_mode": "theorem1", "sigma2_mode": "paper", "ci_mode": "paper",
                  "B_mu": 1.0, "B_pi": 5.0, "C": 576.0, "sensitivity_var": 0.01},
        "n": 5000, "n_folds": 200, "estimator": "aipw", "alpha": 0.05,
        "params": {"estimator": "aipw", "n": 5000, "outcome_bounds": [-1.0, 1.0], "zeta1": 1.4},
        "evaluation": evaluation,
        "nonprivate": {"ate": 0.0987654321, "variance": 0.00123456} if evaluation else None,
    }


def test_params_are_flat_public_strings():
    p = release_params(_config(), _release())
    assert p["outcome_bounds"] == "[-1.0, 1.0]" and p["n"] == "5000"
    assert p["models.propensity.name"] == "logistic" and p["noise.sigma2_mode"] == "paper"
    assert p["fold_seed"] == "0" and p["mode"] == "release" and "noise_seed" not in p
    assert all(isinstance(v, str) for v in p.values())


def test_metrics_release_mode_and_cumulative_spend():
    m = release_metrics(_release(), {"zeta": 2.0, "epsilon": 9.9, "delta": 1e-5, "n_charges": 2})
    assert m["ate"] == 0.123456789 and (m["ci_low"], m["ci_high"]) == (0.0123, 0.2345)
    assert m["dataset_zeta_spent"] == 2.0 and m["dataset_rho_spent"] == 2.0
    spend = (m["dataset_epsilon_spent"], m["dataset_delta"], m["dataset_n_charges"])
    assert spend == (9.9, 1e-5, 2)
    assert not any("nonprivate" in k for k in m)
    assert "ci_low" not in release_metrics(_release(ci=False), None)


def test_evaluation_metrics_carry_nonprivate_values():
    m = release_metrics(_release(evaluation=True), None)
    assert m["nonprivate_ate"] == 0.0987654321 and m["nonprivate_variance"] == 0.00123456


@pytest.mark.parametrize("rel", [_release(evaluation=True), {**_release(), "evaluation": True}])
def test_release_mode_refuses_a_result_with_nonprivate_values(rel):
    with disable_run_logger(), pytest.raises(AssertionError, match="bug: a release-mode result"):
        log_release.fn(_config(), rel, "rid", "fr", "name", None)


def test_noise_share():
    assert noise_share(_release()) == pytest.approx(0.05**2 / 0.0036)
    assert noise_share(_release(ci=False)) is None


@pytest.mark.parametrize("ci", [True, False])
def test_plot_is_written_as_png(tmp_path, ci):
    rel = _release(ci=ci)
    path = plot_release(rel, tmp_path / "r.png")
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 5000
