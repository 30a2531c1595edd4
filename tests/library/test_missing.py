"""The declared missing-value policy (dpcausal.missing; issue 25 §2, issue 26 §2; SPECS.md
"Missing and non-finite values"), the total release and the curator's private log."""

from __future__ import annotations

import logging
import os
import stat
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.base import clone as sk_clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.tree import DecisionTreeRegressor

import dpcausal.ate.estimator as estimator_mod
from dpcausal import Ledger, PrivateATE
from dpcausal.ate.sensitivity import (
    ate_sensitivity,
    score_bound,
    sqrt_variance_sensitivity,
)
from dpcausal.curator_log import log_private_to, private_log_path
from dpcausal.missing import FoldImputed, apply_missing
from dpcausal.validation import private_log
from tests.library.ate.test_privacy_properties import HashClassifier, HashRegressor

NAN, INF = np.nan, np.inf


# ---------------------------------------------------------------- the policy, by hand
def test_impute_fills_adds_indicators_and_marks_unusable_rows():
    X = np.array([[1.0, NAN, 5.0], [INF, 2.0, 6.0], [3.0, 4.0, 7.0], [8.0, 9.0, 1.0]])
    A = np.array([1.0, 0.0, NAN, 2.0])
    Y = np.array([0.5, -INF, 1.0, 0.2])
    done = apply_missing(X, A, Y, "impute", fill=-1.0)
    # the third covariate is complete everywhere: no indicator column for it
    assert done.X.tolist() == [[1, -1, 5, 0, 1], [-1, 2, 6, 1, 0], [3, 4, 7, 0, 0],
                               [8, 9, 1, 0, 0]]
    assert done.usable.tolist() == [True, False, False, False]
    assert done.A.tolist() == [1, 0, 0, 0] and done.Y.tolist() == [0.5, 0.0, 0.0, 0.0]
    every = apply_missing(X, A, Y, "impute", fill=-1.0, indicators="all")
    assert every.X[:, 5].tolist() == [0, 0, 0, 0]             # one column per covariate
    public = apply_missing(X, A, Y, "drop_public_count")
    assert public.X.shape == (0, 3)                            # row 3 has A = 2: none is left
    drop = apply_missing(X, A, Y, "drop", fill=-1.0)           # every row stays, none usable
    assert drop.X.tolist() == [[1, -1, 5], [-1, 2, 6], [3, 4, 7], [8, 9, 1]]
    assert not drop.usable.any() and drop.Y.tolist() == [0, 0, 0, 0]
    kept = apply_missing(X[[0, 2, 3]], np.array([1.0, 0.0, 1.0]), np.array([0.1, 0.2, 0.3]),
                         "drop_public_count")
    assert kept.X.tolist() == [[3.0, 4.0, 7.0], [8.0, 9.0, 1.0]] and kept.usable.all()
    assert kept.A.tolist() == [0, 1] and kept.Y.tolist() == [0.2, 0.3]


def test_frames_keep_their_columns_and_non_numeric_values():
    X = pd.DataFrame({"x": [1.0, NAN, 2.0], "k": pd.array([1, pd.NA, 3], dtype="Int64"),
                      "s": ["a", None, "b"]})
    done = apply_missing(X, np.array([1.0, 0.0, 1.0]), np.array([0.1, 0.2, 0.3]), "impute")
    assert list(done.X.columns) == ["x", "k", "s", "x__missing", "k__missing"]
    assert done.X["x"].tolist() == [1.0, 0.0, 2.0] and done.X["k"].tolist() == [1.0, 0.0, 3.0]
    assert done.X["s"].isna().tolist() == [False, True, False]   # left to the user's Pipeline
    assert done.X["x__missing"].tolist() == [0.0, 1.0, 0.0]
    in_folds = apply_missing(X, np.array([1.0, 0.0, 1.0]), np.array([0.1, 0.2, 0.3]), "impute",
                             indicators="in_folds")
    assert list(in_folds.X.columns) == ["x", "k", "s"] and np.isnan(in_folds.X["k"][1])


def test_fold_imputed_uses_its_own_rows_only():
    """Indicators for the covariates missing in the rows it was fitted on; the identity on
    complete data (the fitted model is the user's model on the same X)."""
    X = np.array([[1.0, 2.0], [NAN, 1.0], [3.0, 0.0], [4.0, 5.0]])
    y = np.array([1.0, 2.0, 3.0, 5.0])
    m = FoldImputed(LinearRegression(), fill=0.0).fit(X, y)
    assert m.indicate_.tolist() == [True, False]
    assert m.model_.n_features_in_ == 3
    clean = FoldImputed(LinearRegression()).fit(X[[0, 2, 3]], y[[0, 2, 3]])
    ref = LinearRegression().fit(X[[0, 2, 3]], y[[0, 2, 3]])
    assert clean.model_.n_features_in_ == 2
    np.testing.assert_allclose(clean.predict(X[[0, 2]]), ref.predict(X[[0, 2]]))
    assert np.isfinite(clean.predict(X)).all()                # NaN at prediction: the fill


@pytest.mark.parametrize("bad", [("missing", "x"), ("impute", float("nan")), ("impute", True)])
def test_bad_policy_parameters_are_refused(bad):
    missing, fill = bad
    X, A, Y = _data(60, seed=1)
    with pytest.raises(ValueError, match="missing"):
        PrivateATE(outcome_bounds=(-1, 1), n_folds=3, missing=missing,
                   missing_fill=fill).fit(X, A, Y)


def test_policy_is_a_public_parameter():
    est = PrivateATE(outcome_bounds=(-1, 1), missing="drop", missing_fill=2.0)
    assert est.get_params()["missing"] == "drop" and sk_clone(est).missing_fill == 2.0
    X, A, Y = _data(120, seed=2)
    rel = PrivateATE(outcome_bounds=(-1, 1), n_folds=4).fit(X, A, Y)
    assert rel.params["missing"] == "impute" and rel.params["missing_fill"] == 0.0
    rel = PrivateATE(outcome_bounds=(-1, 1), n_folds=4, missing="drop").fit(X, A, Y)
    assert rel.params["missing"] == "drop" and rel.params["missing_fill"] is None


# ---------------------------------------------------------------- against an independent route
def _data(n, seed, d=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    A = rng.binomial(1, 0.5, n).astype(float)
    A[:2] = [0, 1]
    Y = np.clip(0.3 * A + 0.2 * X[:, 0] + rng.normal(0, 0.3, n), -1, 1)
    return X, A, Y


@pytest.mark.parametrize("estimator", ["g", "ipw", "aipw"])
@pytest.mark.parametrize("models", ["linear", "tree"])
def test_rows_without_treatment_or_outcome_score_zero(estimator, models):
    """tau_hat(impute) = (n_u / n) tau_hat(complete cases) and V_hat follows from the complete
    cases' sums, on the same public folds: the rows without a usable treatment or outcome train
    no model and score exactly 0 (SPECS.md)."""
    n, K = 240, 6
    X, A, Y = _data(n, seed=3)
    A[[5, 17, 40]] = NAN
    Y[[6, 18, 90, 91]] = [NAN, INF, -INF, NAN]
    A[100] = 3.0
    folds = np.arange(n) % K
    kw = dict(estimator=estimator, n_folds=K, outcome_bounds=(-1, 1))
    if models == "tree":
        kw.update(propensity_model=LogisticRegression(C=0.5, solver="liblinear"),
                  outcome_model=DecisionTreeRegressor(max_depth=2, random_state=0))
    rel = PrivateATE(folds=folds, **kw).fit(X, A, Y, evaluation=True)
    use = np.isin(A, (0, 1)) & np.isfinite(Y)
    n_u = int(use.sum())
    assert n_u == n - 8
    cc = PrivateATE(folds=folds[use], **kw).fit(X[use], A[use], Y[use], evaluation=True)
    tau_cc, v_cc = cc.nonprivate["ate"], cc.nonprivate["variance"]
    s1 = n_u * tau_cc
    s2 = v_cc * n_u * (n_u - 1) + n_u * tau_cc ** 2
    tau = s1 / n
    assert rel.n == n
    assert rel.nonprivate["ate"] == pytest.approx(tau, rel=1e-9, abs=1e-12)
    assert rel.nonprivate["variance"] == pytest.approx((s2 - n * tau ** 2) / (n * (n - 1)),
                                                       rel=1e-9)


def test_drop_public_count_releases_on_the_complete_cases_with_their_count_as_n():
    n, K = 200, 5
    X, A, Y = _data(n, seed=4)
    X[3, 1], A[8], Y[9] = NAN, NAN, INF
    rel = PrivateATE(n_folds=K, outcome_bounds=(-1, 1), missing="drop_public_count",
                     folds="contiguous", random_state=0).fit(X, A, Y, evaluation=True)
    keep = np.ones(n, bool)
    keep[[3, 8, 9]] = False
    ref = PrivateATE(n_folds=K, outcome_bounds=(-1, 1), folds="contiguous", random_state=0
                     ).fit(X[keep], A[keep], Y[keep], evaluation=True)
    assert rel.n == ref.n == n - 3 and rel.params["n"] == n - 3
    assert rel.nonprivate["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-12)


# ---------------------------------------------------------------- "drop": no public count
def _quiet_fit(est, *data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*data, **kw)


def test_drop_publishes_nothing_that_tells_whether_a_row_is_complete():
    """Issue 32 Why 3, the old leak: an attacker who knows every other record told from the
    released n whether the target's outcome is missing (40 of 40 trials). Now the public facts,
    the charge and every published parameter are the same for the two neighbours, and n is all
    rows."""
    n = 300
    X, A, Y = _data(n, seed=5)
    Y[40] = NAN                                 # someone else's missing outcome
    Y2 = Y.copy()
    Y2[17] = NAN                                # the target's
    est = PrivateATE(outcome_bounds=(-1, 1), n_folds=6, missing="drop")
    p1, p2 = est.check_input(X, A, Y), est.check_input(X, A, Y2)
    assert p1.public == p2.public and p1.public.n == n
    assert est.charge_of(p1) == est.charge_of(p2)
    r1, r2 = _quiet_fit(est, X, A, Y), _quiet_fit(est, X, A, Y2)
    assert r1.n == r2.n == n
    assert r1.params == r2.params and r1.n_folds == r2.n_folds
    assert r1.privacy == r2.privacy and r1.noise == r2.noise


def test_drop_is_the_complete_case_mean_and_charges_the_count():
    """Evaluation: the pre-noise estimate is the complete cases' mean score S/C over folds laid
    out on all n rows (checked against "impute" on the same folds, whose S/n it rescales), and
    the charge is the GDP composition of the estimate's zeta and the count's."""
    n, K = 240, 6
    X, A, Y = _data(n, seed=6)
    X[3, 0], A[8], Y[9], Y[10] = NAN, NAN, INF, NAN
    folds = np.arange(n) % K
    kw = dict(n_folds=K, outcome_bounds=(-1, 1), folds=folds, zeta=2.0)
    rel = PrivateATE(missing="drop", **kw).fit(X, A, Y, evaluation=True)
    X2 = X.copy()
    keep = np.ones(n, bool)
    keep[[3, 8, 9, 10]] = False
    Y2 = np.where(keep, Y, NAN)                 # row 3 incomplete under "impute" too
    imp = PrivateATE(**kw).fit(X2, A, Y2, evaluation=True)
    assert rel.n == n and rel.nonprivate["complete_cases"] == n - 4
    assert rel.nonprivate["score_mean"] == pytest.approx(imp.nonprivate["ate"], rel=1e-12)
    assert rel.nonprivate["ate"] == pytest.approx(imp.nonprivate["ate"] * n / (n - 4),
                                                  rel=1e-12)
    charge = PrivateATE(missing="drop", **kw).privacy_charge(n, 2)
    assert charge.zeta == pytest.approx(2.0, rel=1e-12)
    assert charge.detail["zeta_count"] == pytest.approx(2.0 * 0.1, rel=1e-12)
    assert rel.privacy.zeta == pytest.approx(2.0, rel=1e-12)


def test_drop_ci_is_the_delta_method_by_hand(monkeypatch):
    """The ratio and its CI (complete_cases.py Notes), with the count's noise replaced by 0:
    V_R = (V_T + R^2 (c(1-c)/n + sigma_c^2/n^2)) / c^2, by hand."""
    from scipy.stats import norm

    import dpcausal.ate.complete_cases as cc
    from dpcausal.ate.release import ATERelease
    from dpcausal.contract import Privacy

    monkeypatch.setattr(cc, "gaussian_mechanism", lambda value, sigma, sens, rng: value)
    base = ATERelease(ate=0.12, ci=(0.0, 0.24), se=0.05, level=0.95, n=1000, evaluation=False,
                      privacy=Privacy(epsilon=1.0, delta=1e-5, unit="row",
                                      mechanism="gaussian", zeta=1.2),
                      variance=0.0025, noise={"sigma_ate": 0.01}, n_folds=10, estimator="aipw",
                      params={"p1": 0.01})
    rel = cc.count_ratio_release(base, 800, 0.5, np.random.default_rng(0))
    c, r, sigma_c = 0.8, 0.12 / 0.8, 1 / 0.5
    v = (0.0025 + r * r * (c * (1 - c) / 1000 + (sigma_c / 1000) ** 2)) / c ** 2
    half = norm.ppf(1 - 0.05 / 2 + 0.01 / 2) * np.sqrt(v)
    assert rel.ate == pytest.approx(r, rel=1e-12)
    assert rel.variance == pytest.approx(v, rel=1e-12)
    assert rel.ci == pytest.approx((r - half, r + half), rel=1e-12)
    assert rel.privacy.zeta == pytest.approx(np.hypot(1.2, 0.5), rel=1e-12)


def _toggle(rng, X, A, Y, i, kind):
    """Row i's neighbour under the replace-one relation of "drop": it goes from complete to
    incomplete (a blanked role), or back (restored at a corner: the extreme outcome of the
    other sign and the other arm), or to the opposite corner while staying complete."""
    X2, A2, Y2 = X.copy(), A.copy(), Y.copy()
    if kind == "back":
        X2[i], A2[i], Y2[i] = rng.standard_normal(X.shape[1]), 1 - A[i], -np.sign(Y[i] or 1)
    elif kind == "corner":
        A2[i], Y2[i] = 1 - A[i], -np.sign(Y[i] or 1)
    else:
        return _missing_neighbour(rng, X, A, Y, i, kind)
    return X2, A2, Y2


@pytest.mark.parametrize("estimator", ["g", "ipw", "aipw"])
@pytest.mark.parametrize("n, K", [(50, 3), (60, 7)])
def test_drop_count_and_score_sum_keep_their_sensitivities(estimator, n, K):
    """SPECS.md "drop": the score mean S/n moves by at most the "impute" Delta_tau and the
    complete-case count by at most 1 when one row switches between complete and incomplete
    (either way, at the corners), with models whose outputs jump between the clip bounds. The
    count's bound is met exactly, so a count sensitivity of 0.98 would be caught."""
    rng = np.random.default_rng(n * 100 + K)
    eta = 0.2
    est = PrivateATE(estimator=estimator, propensity_model=HashClassifier(),
                     outcome_model=HashRegressor(), n_folds=K, folds=np.arange(n) % K,
                     propensity_clip=eta, outcome_bounds=(-1, 1), missing="drop")
    B_mu = est.calibration(n).B_mu
    d_tau = ate_sensitivity(estimator, n, K, B_mu, 1 / eta, "tight")
    worst_tau = worst_count = 0.0
    for kind in ("outcome", "treatment", "covariates", "all", "back", "corner"):
        for _ in range(2):
            X = rng.standard_normal((n, 2))
            A = rng.binomial(1, 0.5, n).astype(float)
            Y = rng.choice([-1.0, 1.0], n)
            i = int(rng.integers(0, n))
            if kind == "back":
                Y[i] = NAN                       # incomplete in D, complete in D'
            r1 = _quiet_fit(est, X, A, Y, evaluation=True).nonprivate
            r2 = _quiet_fit(est, *_toggle(rng, X, A, Y, i, kind), evaluation=True).nonprivate
            worst_tau = max(worst_tau, abs(r1["score_mean"] - r2["score_mean"]) / d_tau)
            worst_count = max(worst_count, abs(r1["complete_cases"] - r2["complete_cases"]))
    assert worst_tau <= 1 + 1e-12
    assert worst_count == 1.0 > 0.98


def test_a_public_complete_case_count_needs_a_cap_that_holds_it(tmp_path):
    """"drop_public_count" publishes completeness exactly: its charge holds the relation fact
    complete_cases public, so a ledger refuses it under a cap whose relation does not, and
    admits it where the curator declared it."""
    from dpcausal.ledger import IncompatibleChargeError

    X, A, Y = _data(400, seed=7)
    Y[3] = NAN
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}", create=True)
    led.set_budget("plain", zeta=5.0)
    led.set_budget("declared", zeta=5.0, public="complete_cases")
    est = PrivateATE(outcome_bounds=(-1, 1), n_folds=8, missing="drop_public_count")
    with pytest.raises(IncompatibleChargeError, match="complete_cases"):
        _quiet_fit_ledger(led, "plain", est, X, A, Y)
    assert led.history("plain").empty
    rel = _quiet_fit_ledger(led, "declared", est, X, A, Y)
    assert rel.n == 399
    X, A, Y = _data(400, seed=8)                # other data: a copy is bound to "declared"
    Y[3] = NAN
    drop = PrivateATE(outcome_bounds=(-1, 1), n_folds=8, missing="drop")
    assert _quiet_fit_ledger(led, "plain", drop, X, A, Y).n == 400


def _quiet_fit_ledger(led, dataset, est, *data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return led.fit(dataset, est, *data)


# ---------------------------------------------------------------- sensitivity (Prop. 2)
def _pre_noise(est, X, A, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = est.fit(X, A, Y, evaluation=True)
    return rel.nonprivate["ate"], rel.nonprivate["variance"]


def _missing_neighbour(rng, X, A, Y, i, kind):
    X2, A2, Y2 = X.copy(), A.copy(), Y.copy()
    if kind == "outcome":
        Y2[i] = NAN
    elif kind == "treatment":
        A2[i] = NAN
    elif kind == "covariates":
        X2[i] = NAN
    else:                         # everything missing
        X2[i], A2[i], Y2[i] = NAN, NAN, NAN
    return X2, A2, Y2


@pytest.mark.parametrize("estimator", ["g", "ipw", "aipw"])
@pytest.mark.parametrize("n, K", [(50, 3), (60, 7), (203, 20)])
def test_missing_values_keep_every_sensitivity_bound(estimator, n, K):
    """Adversarial neighbours that make one row's outcome, treatment or covariates missing,
    with models whose outputs jump between the clip bounds when their fold changes: |d tau| <=
    Delta (Theorem 1 and Lemma), |d sqrt V| <= the tight Delta_V (spec §2.4)."""
    rng = np.random.default_rng(n * 10 + K)
    eta = 0.2
    folds = np.arange(n) % K
    est = PrivateATE(estimator=estimator, propensity_model=HashClassifier(),
                     outcome_model=HashRegressor(), n_folds=K, folds=folds,
                     propensity_clip=eta, outcome_bounds=(-1, 1))
    B_mu, B_pi = est.calibration(n).B_mu, 1 / eta
    d_lemma = ate_sensitivity(estimator, n, K, B_mu, B_pi, "lemma")
    d_thm1 = ate_sensitivity(estimator, n, K, B_mu, B_pi, "theorem1")
    d_tight = ate_sensitivity(estimator, n, K, B_mu, B_pi, "tight")   # the default
    dv = sqrt_variance_sensitivity(estimator, n, K, B_mu, B_pi, "tight")
    worst = 0.0
    for kind in ("outcome", "treatment", "covariates", "all"):
        for _ in range(2):
            X = rng.standard_normal((n, 2))
            A = rng.binomial(1, 0.5, n).astype(float)
            Y = rng.choice([-1.0, 1.0], n) * rng.random(n)
            i = int(rng.integers(0, n))
            tau, v = _pre_noise(est, X, A, Y)
            tau2, v2 = _pre_noise(est, *_missing_neighbour(rng, X, A, Y, i, kind))
            worst = max(worst, abs(tau - tau2))
            assert abs(tau - tau2) <= min(d_lemma, d_thm1, d_tight) + 1e-12
            assert abs(np.sqrt(v) - np.sqrt(v2)) <= dv + 1e-12
    assert worst > 0


def test_a_constant_score_outside_the_score_bound_is_caught(monkeypatch):
    """Negative control (privacy_testing.md): scoring a missing row far outside |Gamma| <= M
    breaks the bound, and the test above's attack sees it."""
    n, K, eta = 60, 7, 0.2
    est = PrivateATE(estimator="g", propensity_model=HashClassifier(),
                     outcome_model=HashRegressor(), n_folds=K, folds=np.arange(n) % K,
                     propensity_clip=eta, outcome_bounds=(-1, 1))
    M = score_bound("g", 1.0, 1 / eta)
    monkeypatch.setattr(estimator_mod, "MISSING_SCORE", 50 * M)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    A = rng.binomial(1, 0.5, n).astype(float)
    Y = rng.random(n)
    tau, _ = _pre_noise(est, X, A, Y)
    tau2, _ = _pre_noise(est, *_missing_neighbour(rng, X, A, Y, 4, "outcome"))
    assert abs(tau - tau2) > ate_sensitivity("g", n, K, 1.0, 1 / eta, "theorem1")


# ---------------------------------------------------------------- models that raise anything
MARK = 99.0


class ExitsWhenTrainedOnMark(RegressorMixin, BaseEstimator):
    """Ends the process (SystemExit) if its training rows hold the marked record."""

    def __init__(self, where="fit", exc=SystemExit):
        self.where = where
        self.exc = exc

    def fit(self, X, y):
        self.marked_ = bool(np.any(np.asarray(X)[:, 1] == MARK))
        if self.marked_ and self.where == "fit":
            raise self.exc("trained on the mark")
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, X):
        if self.marked_:
            raise self.exc("predicting after the mark")
        return np.full(len(X), self.mean_)


@pytest.mark.parametrize("where", ["fit", "predict"])
def test_a_model_raising_system_exit_falls_back(where):
    """Issue 26 §2 (ended the reserved release with the model's text before): SystemExit from
    a fold model on one record takes the §2.7 fallback, in both modes."""
    X, A, Y = _data(200, seed=5)
    X[5, 1] = MARK
    est = PrivateATE(n_folds=4, outcome_bounds=(-1, 1), outcome_model=ExitsWhenTrainedOnMark(where))
    rel = est.fit(X, A, Y)
    assert np.isfinite([rel.ate, rel.se, *rel.ci]).all()
    rel = est.fit(X, A, Y, evaluation=True)
    assert rel.nonprivate["failed_fits"] == (1 if where == "fit" else 0)


def test_an_interrupt_still_stops_the_release():
    X, A, Y = _data(200, seed=5)
    X[5, 1] = MARK
    est = PrivateATE(n_folds=4, outcome_bounds=(-1, 1),
                     outcome_model=ExitsWhenTrainedOnMark(exc=KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, A, Y)


# ---------------------------------------------------------------- check_data
def test_check_data_counts_by_hand_and_charges_nothing(tmp_path):
    df = pd.DataFrame({"x1": [0.1, NAN, 0.3, 0.4, INF, 0.6, 0.7, 0.8],
                       "x2": [1.0] * 8,
                       "a": [1, 0, 1, NAN, 0, 1, 2, 0],
                       "y": [0.5, 3.0, NAN, 0.1, -2.0, 0.2, 0.3, 0.4]})
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", create=True)
    led.set_budget("d", zeta=1.0)
    with led.charging("d"):
        check = PrivateATE(outcome_bounds=(-1, 1), n_folds=2).check_data(
            df, treatment="a", outcome="y")
    table = check.to_frame().set_index("column")
    assert table.loc["x1", ["missing", "non_finite"]].tolist() == [1, 1]
    assert table.loc["a", ["missing", "out_of_range"]].tolist() == [1, 1]
    assert table.loc["y", ["missing", "out_of_range"]].tolist() == [1, 2]
    assert table.loc["y", "out_of_range_share"] == pytest.approx(2 / 8)
    f = check.facts
    assert (f["rows"], f["treated"], f["control"]) == (8, 3, 3)
    assert f["rows with a missing covariate"] == 2
    assert f["rows without a usable treatment or outcome"] == 3        # NaN A, A = 2, NaN Y
    assert f["n of the release"] == 8 and f["rows per fold"] == 4
    assert f["share of rows scored 0 (bias toward 0)"] == pytest.approx(3 / 8)
    public = PrivateATE(outcome_bounds=(-1, 1), n_folds=2, missing="drop_public_count"
                        ).check_data(df, treatment="a", outcome="y", covariates=["x1", "x2"])
    assert public.facts["n of the release"] == 3 and public.facts["rows dropped"] == 5
    drop = PrivateATE(outcome_bounds=(-1, 1), n_folds=2, missing="drop").check_data(
        df, treatment="a", outcome="y", covariates=["x1", "x2"])
    assert drop.facts["n of the release"] == 8
    assert drop.facts["complete cases (released noisy)"] == 3
    assert "NON-PRIVATE" in str(check) and "<table" in check._repr_html_()
    assert led.history("d").empty
    assert led.spent("d").zeta == 0
    led.close()


# ---------------------------------------------------------------- the private log
@pytest.fixture
def default_log():
    log_private_to(None)
    yield
    for h in list(private_log.handlers):
        if isinstance(h, logging.FileHandler):
            private_log.removeHandler(h)
            h.close()


def test_the_private_log_lies_beside_the_ledger_0600(tmp_path, default_log):
    X, A, Y = _data(120, seed=6)
    X[3, 0] = NAN
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", create=True)
    led.set_budget("d", zeta=5.0)
    with led.charging("d"):
        PrivateATE(outcome_bounds=(-1, 1), n_folds=4).fit(X, A, Y)
    path = tmp_path / "private" / "errors.log"
    assert private_log_path(led.url) == path
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert "1 rows with a missing covariate" in path.read_text()
    led.close()


def test_the_private_log_goes_where_the_user_points_it(tmp_path, default_log, monkeypatch):
    target = tmp_path / "mine" / "curator.log"
    log_private_to(target)
    X, A, Y = _data(120, seed=6)

    def broken(gamma):
        raise ValueError("secret detail 42")

    monkeypatch.setattr(estimator_mod, "ate_and_variance", broken)
    with pytest.raises(RuntimeError, match=str(target)):     # the message names the file
        PrivateATE(outcome_bounds=(-1, 1), n_folds=4).fit(X, A, Y)
    assert "secret detail 42" in target.read_text()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600


def test_indicator_columns_do_not_change_the_planned_k():
    """The planner's K (and block layout) follow the declared d, not the covariates plus their
    missing-value indicators."""
    n = 3000
    X, A, Y = _data(n, seed=8, d=3)
    X[:40, 0] = NAN
    X[40:80, 1] = INF
    est = PrivateATE(outcome_bounds=(-1, 1))
    rel = est.fit(X, A, Y, evaluation=True)
    assert rel.n_folds == est.resolved_n_folds(n, 3) != est.resolved_n_folds(n, 5)
    assert np.isfinite(rel.nonprivate["ate"])


def test_an_orchestrators_interrupt_passes_through_the_fallbacks():
    """A class given to treat_as_interrupt (the Prefect tasks give SIGTERM's TerminationSignal)
    stops the release like KeyboardInterrupt; any other BaseException still falls back."""
    from dpcausal.validation import _INTERRUPTS, guarded, treat_as_interrupt

    class Signal(BaseException):
        pass

    assert guarded(Signal()) and guarded(SystemExit()) and not guarded(KeyboardInterrupt())
    treat_as_interrupt(Signal)
    try:
        assert not guarded(Signal()) and guarded(SystemExit())
    finally:
        _INTERRUPTS.remove(Signal)


def test_check_data_gives_each_arm_per_fold_and_warns_under_the_floor():
    """Issue 42 friction 4: check-data showed `treated 185` beside `rows per fold 72.22`
    (K = 224) and did not say that the ensemble then has under one treated row per fold. It
    gives each arm's rows per fold and warns below d + 1 (the rows a linear model of one arm
    needs in a fold: fewer and most folds fall back to a constant), naming the K that fits."""
    rng = np.random.default_rng(5)
    n = 2000
    df = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                       "a": (np.arange(n) < 40).astype(int), "y": rng.uniform(0, 1, n)})
    check = PrivateATE(outcome_bounds=(0, 1), n_folds=50).check_data(
        df, treatment="a", outcome="y")
    f = check.facts
    assert (f["treated rows per fold"], f["control rows per fold"]) == (0.8, 39.2)
    assert f["warning"] == ("under 3 treated rows per fold (d + 1 for d = 2 covariates): most "
                            "folds' models of the treated arm fall back to a constant; K <= 13 "
                            "keeps 3 (estimator.n_folds)")
    assert "warning" in str(check)
    fine = PrivateATE(outcome_bounds=(0, 1), n_folds=10).check_data(
        df, treatment="a", outcome="y")
    assert fine.facts["treated rows per fold"] == 4.0 and "warning" not in fine.facts
