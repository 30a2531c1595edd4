"""``propensity_clip="auto"`` (issue 39 §4; SPECS.md "The propensity clip for the release at
hand"): eta = min(0.2, max(0.01, 2 sqrt((1/n + w) / zeta))), a pure function of public
parameters, published like K; and the default degree-2 models (SPECS.md "Default nuisance
models"): their fast path equals the generic pipeline path."""

from __future__ import annotations

import math

import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, PolynomialFeatures

from dpcausal import PrivateATE
from dpcausal.ate.features import default_outcome_model, default_propensity_model
from dpcausal.ate.planner import auto_propensity_clip, layout_for, plan
from dpcausal.datasets import NONLINEAR_OUTCOME_BOUNDS, make_quadratic


@pytest.mark.parametrize("n, K, zeta, expected", [
    # 2 sqrt((1/n + 1/(K-1)) / zeta), by hand
    (20_000, 200, 4.0, math.sqrt(1 / 20_000 + 1 / 199)),
    (20_000, 200, 1.0, 2 * math.sqrt(1 / 20_000 + 1 / 199)),
    (3_000, 30, 4.0, math.sqrt(1 / 3_000 + 1 / 29)),
    (20_000, 95, 4.0, math.sqrt(1 / 20_000 + 1 / 94)),
    (1_000, 10, 1.0, 0.2),                 # 2 sqrt(0.112) = 0.67: capped at 0.2
    (10**7, 100_000, 16.0, 0.01),          # 2 sqrt(1.01e-5 / 16) = 0.0016: floor 0.01
])
def test_auto_clip_exact_values(n, K, zeta, expected):
    assert auto_propensity_clip(n, K, zeta) == pytest.approx(expected, rel=1e-15)


def test_auto_clip_exact_figures_of_the_issue_designs():
    """The values SPECS.md quotes, as literals."""
    assert auto_propensity_clip(20_000, 200, 4.0) == pytest.approx(0.0712399, abs=1e-7)
    assert auto_propensity_clip(20_000, 200, 1.0) == pytest.approx(0.1424798, abs=1e-7)
    assert auto_propensity_clip(3_000, 30, 4.0) == pytest.approx(0.1865907, abs=1e-7)
    assert auto_propensity_clip(20_000, 95, 4.0) == pytest.approx(0.1033842, abs=1e-7)


def test_auto_clip_with_blocks_uses_the_layouts_weight():
    layout = layout_for(1_000_000, 2_000, 125)      # B = 16 blocks of 125 folds, 62,500 rows
    w = 62_500 / (1_000_000 * 124)
    assert auto_propensity_clip(1_000_000, 2_000, 1.0, layout) == pytest.approx(
        2 * math.sqrt(1e-6 + w), rel=1e-15)


def test_auto_clip_falls_as_n_zeta_and_k_grow():
    etas = [auto_propensity_clip(n, max(2, n // 100), z)
            for n, z in ((5_000, 1.0), (20_000, 1.0), (20_000, 4.0), (200_000, 4.0))]
    assert etas == sorted(etas, reverse=True) and etas[0] == 0.2 and etas[-1] < 0.05


def test_a_release_publishes_and_uses_the_auto_clip():
    X, A, Y, _ = make_quadratic(4_000, "strong", random_state=0)
    est = PrivateATE(estimator="aipw", outcome_bounds=NONLINEAR_OUTCOME_BOUNDS, zeta=4.0,
                     random_state=0, noise_seed=0)
    rel = est.fit(X, A, Y, evaluation=True)
    K = rel.params["n_folds"]
    assert K == 40          # d = 2: p = 5 degree-2 features, floor max(100, 60) = 100 rows
    eta = math.sqrt(1 / 4_000 + 1 / 39)
    assert rel.params["propensity_clip"] == pytest.approx(eta, rel=1e-15)
    assert rel.params["B_pi"] == pytest.approx(1 / eta, rel=1e-15)
    assert "propensity_clip" in rel.params["planned"].split(",")
    assert est.planned_params(4_000, 2)["propensity_clip"] == pytest.approx(eta, rel=1e-15)
    assert est.calibration(4_000, 2).B_pi == pytest.approx(1 / eta, rel=1e-15)
    # the plan's row for that K carries the same eta
    table = est.plan(4_000, 2)
    row = table[(table["estimator"] == "aipw") & (table["n_folds"] == K)].iloc[0]
    assert row["propensity_clip"] == pytest.approx(eta, rel=1e-15)


def test_an_explicit_clip_is_kept():
    X, A, Y, _ = make_quadratic(2_000, "mild", random_state=1)
    est = PrivateATE(estimator="aipw", outcome_bounds=NONLINEAR_OUTCOME_BOUNDS, zeta=4.0,
                     propensity_clip=0.2, random_state=0, noise_seed=0)
    rel = est.fit(X, A, Y, evaluation=True)
    assert rel.params["propensity_clip"] == 0.2 and rel.params["B_pi"] == 5.0
    assert "propensity_clip" not in rel.params["planned"].split(",")
    assert "propensity_clip" not in est.planned_params(2_000, 2)


def test_the_auto_clip_changes_the_estimate_as_an_explicit_one_would():
    """The release at "auto" is the release at the explicit eta it resolves to (same folds,
    models and noise)."""
    X, A, Y, _ = make_quadratic(3_000, "strong", random_state=2)
    kw = {"estimator": "aipw", "outcome_bounds": NONLINEAR_OUTCOME_BOUNDS, "zeta": 4.0,
          "random_state": 3, "noise_seed": 3}
    auto = PrivateATE(**kw).fit(X, A, Y, evaluation=True)
    fixed = PrivateATE(**kw, propensity_clip=auto.params["propensity_clip"]).fit(
        X, A, Y, evaluation=True)
    assert auto.nonprivate["ate"] == fixed.nonprivate["ate"] and auto.ate == fixed.ate
    other = PrivateATE(**kw, propensity_clip=0.2).fit(X, A, Y, evaluation=True)
    assert other.nonprivate["ate"] != auto.nonprivate["ate"]


def test_plan_resolves_auto_per_k():
    table = plan(20_000, 2, outcome_bounds=(0, 1), zeta=4.0, n_folds=[50, 200])
    for K in (50, 200):
        got = table.loc[table["n_folds"] == K, "propensity_clip"].unique()
        assert got == pytest.approx([math.sqrt(1 / 20_000 + 1 / (K - 1))], rel=1e-15)


def test_bad_clip_is_refused_naming_auto():
    est = PrivateATE(estimator="aipw", outcome_bounds=(0, 1), propensity_clip="tight")
    with pytest.raises(ValueError, match="propensity_clip .* or 'auto'"):
        est.privacy_charge(1_000, 2)


def test_default_models_are_the_declared_degree_2_pair():
    est = PrivateATE(estimator="aipw", outcome_bounds=(0, 1))
    params = est.public_params(5_000, 3)
    assert "PolynomialFeatures" in params["propensity_model"]
    assert "LogisticRegression(C=10000.0)" in params["propensity_model"]
    assert "LinearRegression" in params["outcome_model"]


def _opaque(model: Pipeline) -> Pipeline:
    """The same model with an identity step inserted: no fast path recognises it."""
    features, inner = model.steps[0][1], model.steps[1][1]
    return Pipeline([("id", FunctionTransformer()), ("features", clone(features)),
                     ("model", clone(inner))])


def test_the_default_models_fast_path_equals_the_pipeline_path():
    X, A, Y, _ = make_quadratic(3_000, "strong", random_state=4)
    kw = {"estimator": "aipw", "outcome_bounds": NONLINEAR_OUTCOME_BOUNDS, "zeta": 4.0,
          "n_folds": 12, "random_state": 5, "noise_seed": 5}
    fast = PrivateATE(**kw).fit(X, A, Y, evaluation=True)
    # the generic path: sklearn's Newton solver to convergence, fitted and predicted model by
    # model, at the default's C = 10^4 written out
    converged = Pipeline([("features", PolynomialFeatures(2, include_bias=False)),
                          ("model", LogisticRegression(C=1e4, solver="newton-cholesky",
                                                       tol=1e-12, max_iter=1000))])
    slow = PrivateATE(**kw, propensity_model=_opaque(converged),
                      outcome_model=_opaque(default_outcome_model())).fit(
        X, A, Y, evaluation=True)
    assert fast.nonprivate["ate"] == pytest.approx(slow.nonprivate["ate"], abs=1e-8)
    assert fast.nonprivate["variance"] == pytest.approx(slow.nonprivate["variance"], rel=1e-6)


def test_a_feature_map_followed_by_another_model_is_not_fast_pathed():
    from dpcausal.ate.features import shared_features, split_features

    assert split_features(default_propensity_model())[0] is not None
    assert split_features(_opaque(default_propensity_model()))[0] is None
    plain = LogisticRegression()
    assert split_features(plain)[0] is None and split_features(plain)[1] is plain
    other = Pipeline([("features", PolynomialFeatures(3, include_bias=False)),
                      ("model", LinearRegression())])
    assert shared_features([default_propensity_model(), other])[0] is None
