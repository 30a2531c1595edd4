"""PrivateATE under the one release contract (issue 17): scikit-learn parameters and clone,
DataFrame roles or arrays, the charge from public facts, and an ATERelease that is a Release."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

from dpcausal import ATEFacts, ATERelease, Mechanism, PrivateATE, Release
from dpcausal.accounting import gdp_epsilon


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x1, x2 = rng.standard_normal(n), rng.standard_normal(n)
    a = rng.binomial(1, 0.5, n)
    y = np.clip(0.3 * a + 0.2 * x1 + rng.normal(0, 0.2, n), -1, 1)
    return pd.DataFrame({"x1": x1, "a": a, "x2": x2, "y": y})


def test_clone_and_params_follow_the_sklearn_contract():
    est = PrivateATE(estimator="g", outcome_model=LinearRegression(fit_intercept=False),
                     zeta=0.7, n_folds=5, outcome_bounds=(-1, 1))
    assert isinstance(est, Mechanism)
    twin = clone(est)
    assert twin is not est and twin.get_params().keys() == est.get_params().keys()
    assert twin.zeta == 0.7 and twin.outcome_model is not est.outcome_model
    assert twin.outcome_model.get_params() == est.outcome_model.get_params()
    assert est.get_params(deep=True)["outcome_model__fit_intercept"] is False
    est.set_params(zeta=2.0, outcome_model__fit_intercept=True)
    assert est.zeta == 2.0 and est.outcome_model.fit_intercept is True
    assert repr(PrivateATE(estimator="g", zeta=0.5)) == "PrivateATE(estimator='g', zeta=0.5)"


def test_dataframe_roles_and_arrays_give_the_same_release():
    df = _frame()
    est = PrivateATE(n_folds=4, random_state=1, outcome_bounds=(-1, 1))
    by_roles = est.fit(df, treatment="a", outcome="y", covariates=["x1", "x2"], evaluation=True)
    assert est.release_ is by_roles
    by_default = PrivateATE(n_folds=4, random_state=1,
                            outcome_bounds=(-1, 1)).fit(df, treatment="a", outcome="y",
                                                           evaluation=True)
    arrays = PrivateATE(n_folds=4, random_state=1, outcome_bounds=(-1, 1)).fit(
        df[["x1", "x2"]].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy(), evaluation=True)
    assert by_roles.nonprivate == arrays.nonprivate == by_default.nonprivate
    assert isinstance(by_roles, ATERelease) and isinstance(by_roles, Release)


@pytest.mark.parametrize("call, match", [
    (lambda e, df: e.fit(df, treatment="t", outcome="y"), r"treatment='t' is not a column"),
    (lambda e, df: e.fit(df, treatment="a", outcome="y", covariates=["x9"]),
     r"covariates=\['x9'\] is not a column|covariates='x9' is not a column"),
    (lambda e, df: e.fit(df, treatment="a"), "needs the column roles"),
    (lambda e, df: e.fit(df, df["a"], df["y"], treatment="a"), "either arrays"),
])
def test_roles_are_checked_before_anything(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call(PrivateATE(n_folds=4, outcome_bounds=(-1, 1)), _frame())


def test_privacy_charge_is_public_and_matches_the_release():
    df = _frame()
    est = PrivateATE(n_folds=4, zeta=1.2, ci_share=0.25, outcome_bounds=(-1, 1))
    prepared = est.check_input(df, treatment="a", outcome="y")
    assert prepared.public == {"n": 400, "d": 2}
    charge = est.privacy_charge(**prepared.public)
    assert isinstance(prepared.public, ATEFacts) and est.privacy_charge(prepared.public) == charge
    assert charge.mechanism == "gaussian" and charge.zeta == pytest.approx(1.2)
    assert charge.detail == {"zeta1": pytest.approx(1.2 * 0.75**0.5),
                             "zeta2": pytest.approx(0.6)}
    rel = est._private_release(prepared)
    assert rel.privacy.zeta == charge.zeta and rel.privacy.delta == charge.delta
    assert rel.privacy.epsilon == pytest.approx(gdp_epsilon(1.2, est.delta))
    assert rel.summary().loc["ATE", "epsilon"] == rel.privacy.epsilon
    # the estimator that made the release is named in its table (issue 42)
    assert list(rel.summary().columns) == ["estimator", "estimate", "se", "ci_lower",
                                           "ci_upper", "epsilon", "delta"]
    assert rel.summary().loc["ATE", "estimator"] == "aipw" == rel.estimator


def test_outcome_bounds_are_required_before_anything(monkeypatch):
    """Issue 20: no default bounds; the refusal names the argument and says why, before any
    charge or fold fit."""
    import dpcausal.ate.estimator as mod

    monkeypatch.setattr(mod.PrivateATE, "fit_folds", lambda *a, **k: pytest.fail("fitted"))
    est = PrivateATE(n_folds=4)
    assert est.outcome_bounds is None
    with pytest.raises(ValueError, match=r"outcome_bounds is required.*calibrated to them"):
        est.fit(_frame(), treatment="a", outcome="y")
    with pytest.raises(ValueError, match="outcome_bounds is required"):
        est.privacy_charge(400)


def _with_colour(n=600, seed=3):
    df = _frame(n, seed)
    rng = np.random.default_rng(seed + 1)
    df["colour"] = pd.Categorical(rng.choice(["red", "green", "blue"], n))
    df["y"] = np.clip(df["y"] + 0.4 * (df["colour"] == "red"), -1, 1)
    return df


def test_named_columns_and_categoricals_reach_a_pipeline_fold_locally():
    """Issue 20: a ColumnTransformer selecting columns by name and one-hot encoding a
    categorical column works inside each fold; with all categories in every fold the G estimate
    equals the one on a hand-made one-hot design with plain LinearRegression (sigma = 0)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    df = _with_colour()
    encode = ColumnTransformer([("num", "passthrough", ["x1", "x2"]),
                                ("cat", OneHotEncoder(), ["colour"])])
    est = PrivateATE(estimator="g", outcome_model=make_pipeline(encode, LinearRegression()),
                     n_folds=3, folds="contiguous", outcome_bounds=(-1, 1))
    # a categorical column is a covariate when named (omitted covariates are numbers only)
    rel = est.fit(df, treatment="a", outcome="y", covariates=["x1", "x2", "colour"],
                  evaluation=True)
    assert rel.nonprivate["failed_fits"] == 0
    design = pd.get_dummies(df[["x1", "x2", "colour"]], dtype=float).to_numpy()
    manual = PrivateATE(estimator="g", n_folds=3, folds="contiguous", outcome_bounds=(-1, 1),
                        outcome_model=LinearRegression()
                        ).fit(design, df["a"].to_numpy(), df["y"].to_numpy(), evaluation=True)
    assert abs(rel.nonprivate["ate"] - manual.nonprivate["ate"]) < 1e-10


def test_stacked_fast_path_only_for_numeric_input_and_plain_linear_models(monkeypatch):
    """Issue 20: numeric DataFrames with plain LinearRegression/LogisticRegression become a
    float array (one stacked product per block); any other model gets the DataFrame."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    import dpcausal.ate.estimator as mod

    seen = []
    real = mod.aggregate
    monkeypatch.setattr(mod, "aggregate",
                        lambda X, *a, **k: seen.append(type(X)) or real(X, *a, **k))
    df = _frame()
    PrivateATE(n_folds=4, outcome_bounds=(-1, 1)).fit(df, treatment="a", outcome="y",
                                                      evaluation=True)
    PrivateATE(n_folds=4, outcome_bounds=(-1, 1),
               outcome_model=make_pipeline(StandardScaler(), LinearRegression())
               ).fit(df, treatment="a", outcome="y", evaluation=True)
    assert seen == [np.ndarray, pd.DataFrame]
    with pytest.raises(ValueError, match="non-numeric columns .*Pipeline"):
        PrivateATE(n_folds=4, outcome_bounds=(-1, 1)).fit(
            _with_colour(), treatment="a", outcome="y", covariates=["x1", "x2", "colour"])
