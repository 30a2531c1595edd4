"""The ATT of the AIPW ensemble (issue 39 item 7; SPECS.md "The ATT of the ensemble").

Its score and release against a hand-written loop, its sensitivity against an exhaustive corner
search and adversarial neighbours on the real estimator (full ensemble and blocks) that reach
the stated bound (so a bound 0.98x as large would be violated), the treated count's neighbours,
the CI's covariance bound, the count's noise against T's at the defaults (a small treated
arm), the refusals before the charge, and DoubleML's IRM "ATTE" estimate as the non-private
reference.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.linear_model import LinearRegression, LogisticRegression

from dpcausal import PrivateATE
from dpcausal.ate.aggregation import EnsembleNuisances, aggregate
from dpcausal.ate.blocks import layout_of
from dpcausal.ate.complete_cases import count_sigma, ratio_variance, split_zeta
from dpcausal.ate.nuisance import FoldModels
from dpcausal.ate.partitioned import plan_partitions
from dpcausal.ate.scores import ate_and_variance, scores
from dpcausal.ate.sensitivity import (
    ate_sensitivity,
    calibrate,
    sqrt_variance_sensitivity,
    theorem1_constant,
    tight_constants,
)
from tests.library.ate.test_privacy_properties import HashClassifier, HashRegressor


def _att_constants(B_mu: float, B_pi: float) -> tuple[float, float]:
    """By hand (SPECS.md): Delta_= = 4 B_mu (B_pi - 1), kappa = 2 B_mu (R + B_pi - 1)."""
    R = B_pi - B_pi / (B_pi - 1)
    return 4 * B_mu * (B_pi - 1), 2 * B_mu * (R + B_pi - 1)


# ------------------------------------------------------------------ constants
def test_att_constants_by_hand():
    """B_mu = 1, eta = 0.2 (R = 3.75): (16, 15.5); eta = 0.1 (R = 80/9), B_mu = 0.5:
    (18, 80/9 + 9); Theorem 1's C is the larger constant squared, so its form bounds the
    tight one, and the tight sigma2 bounds nothing smaller than the paper's."""
    assert tight_constants("aipw_att", 1.0, 5.0) == pytest.approx((16.0, 15.5), rel=1e-15)
    assert tight_constants("aipw_att", 0.5, 10.0) == pytest.approx((18.0, 80 / 9 + 9),
                                                                   rel=1e-15)
    for B_pi in (2.0, 3.0, 5.0, 20.0, 100.0):
        d_eq, kappa = tight_constants("aipw_att", 1.0, B_pi)
        assert kappa <= d_eq == pytest.approx(math.sqrt(theorem1_constant("aipw_att", 1, B_pi)))
        for n, K in ((100, 2), (5000, 50), (10**6, 2000)):
            assert (ate_sensitivity("aipw_att", n, K, 1.0, B_pi, "tight")
                    <= ate_sensitivity("aipw_att", n, K, 1.0, B_pi, "theorem1"))
            assert (sqrt_variance_sensitivity("aipw_att", n, K, 1.0, B_pi, "tight")
                    <= sqrt_variance_sensitivity("aipw_att", n, K, 1.0, B_pi, "paper"))


def test_att_calibration_spends_what_the_count_leaves():
    """T gets zeta sqrt(0.99) of the release, split by ci_share; the estimator's noise is the
    hand-written sigma1 = (16/n + 15.5/(K-1)) B_mu / zeta1."""
    n, K = 10_000, 100
    est = PrivateATE(estimator="aipw", estimand="att", n_folds=K, outcome_bounds=(0, 2),
                     propensity_clip=0.2, zeta=2.0, ci_share=0.1, sigma2="tight")
    cal = est.calibration(n)
    zeta_t = 2.0 * math.sqrt(0.99)
    assert cal.zeta == pytest.approx(zeta_t, rel=1e-15) and cal.estimand == "att"
    assert cal.sigma_ate == pytest.approx((16 / n + 15.5 / (K - 1)) / (zeta_t * math.sqrt(0.9)),
                                          rel=1e-12)
    charge = est.privacy_charge(n)
    assert charge.zeta == pytest.approx(2.0, rel=1e-12)
    assert charge.detail["zeta_count"] == pytest.approx(0.2, rel=1e-12)


# ------------------------------------------------------------------ corner search
def _best_att_corner(K: int, eta: float) -> tuple[float, tuple]:
    """Exhaustive search over the extreme model outputs (pi in {eta, 1-eta}, mu0 in {-1, 1}),
    for a row outside fold 0 in either arm with outcome y: the other K-2 models at one corner,
    fold 0's model switching between two; returns the largest |dGamma| (the ATT score is
    multilinear in the models' odds and mu0, so the extremes are at the corners)."""
    corners = list(itertools.product([eta, 1 - eta], [-1.0, 1.0]))

    def gamma(base, c, y, a):
        r = ((K - 2) * base[0] / (1 - base[0]) + c[0] / (1 - c[0])) / (K - 1)
        m0 = ((K - 2) * base[1] + c[1]) / (K - 1)
        return (y - m0) if a == 1 else -r * (y - m0)

    return max(((abs(gamma(b, c2, y, a) - gamma(b, c1, y, a)), (b, c1, c2, y, a))
                for b, c1, c2, y, a in itertools.product(corners, corners, corners,
                                                         [-1.0, 1.0], [0, 1])),
               key=lambda t: t[0])


@pytest.mark.parametrize("eta", [0.05, 0.2, 0.4])
def test_att_kappa_bounds_the_corner_search_and_is_nearly_attained(eta):
    """At every K the per-point change is within kappa/(K-1); at K = 5,000 it reaches 99.5%
    of it; a control row attains it (a treated row moves by 2 B_mu/(K-1) only)."""
    kappa = tight_constants("aipw_att", 1.0, 1 / eta)[1]
    for K in (3, 20, 500, 5000):
        per_point, config = _best_att_corner(K, eta)
        assert per_point * (K - 1) <= kappa + 1e-9
    assert per_point * (K - 1) >= 0.995 * kappa
    assert config[-1] == 0


def test_the_corner_attack_through_the_package_matches_the_search():
    """The corner configuration run through the package's aggregation and ATT scores gives
    per_point (n - n_0)/n, as the search says (every row a control with outcome y)."""
    K, n, eta = 50, 5000, 0.2
    per_point, (base, before, after, y, a) = _best_att_corner(K, eta)
    X, fold_ids, A = np.zeros((n, 1)), np.repeat(np.arange(K), n // K), np.full(n, a)
    taus = []
    for fold0 in (before, after):
        models = [FoldModels(k, (fold0 if k == 0 else base)[0], 0.0,
                             (fold0 if k == 0 else base)[1]) for k in range(K)]
        nuis = aggregate(X, fold_ids, models, estimator="aipw", outcome_bounds=(-1.0, 1.0),
                         propensity_clip=eta)
        taus.append(ate_and_variance(scores("aipw_att", A, np.full(n, y), nuis))[0])
    assert abs(taus[1] - taus[0]) == pytest.approx(per_point * (n - n // K) / n, rel=1e-9)


def test_att_delta_eq_is_attained_by_the_replaced_row():
    """A control row with odds B_pi - 1 spans [-Delta_=/2, Delta_=/2] (its own nuisances move
    with its covariates): Y - mu0 = 2 B_mu, then -2 B_mu; a treated row spans 4 B_mu only."""
    B_pi = 5.0

    def nuis(mu0):
        return EnsembleNuisances(mu1=np.array([0.0]), mu0=np.array([mu0]),
                                 inv_pi1=np.array([B_pi]), inv_pi0=np.array([B_pi]))
    control = np.array([0])
    hi = scores("aipw_att", control, np.array([-1.0]), nuis(1.0))[0]
    lo = scores("aipw_att", control, np.array([1.0]), nuis(-1.0))[0]
    assert hi - lo == pytest.approx(tight_constants("aipw_att", 1.0, B_pi)[0], rel=1e-15)


def test_att_score_is_the_hand_written_loop():
    """Gamma_i = A (Y - mu0) - (1 - A) (1/(1 - pi) - 1) (Y - mu0), with a centre shift."""
    rng = np.random.default_rng(1)
    n = 50
    A = rng.integers(0, 2, n)
    Y = rng.uniform(2, 4, n)
    mu0, pi = rng.uniform(2, 4, n), rng.uniform(0.2, 0.8, n)
    nuis = EnsembleNuisances(mu1=rng.uniform(2, 4, n), mu0=mu0, inv_pi1=1 / pi,
                             inv_pi0=1 / (1 - pi))
    expected = [Y[i] - mu0[i] if A[i] == 1 else -pi[i] / (1 - pi[i]) * (Y[i] - mu0[i])
                for i in range(n)]
    assert scores("aipw_att", A, Y, nuis, centre=3.0) == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------ adversarial neighbours
class TriggerClassifier(ClassifierMixin, BaseEstimator):
    """P(A=1|x) = 1 - 1e-6 (clipped to 1 - eta), except at x = 0 for a model whose training
    rows hold x = -1: then 1e-6 (clipped to eta)."""

    def fit(self, X, y):
        self.classes_ = np.array([0, 1])
        self.triggered_ = bool(np.any(np.asarray(X)[:, 0] == -1))
        return self

    def predict_proba(self, X):
        x = np.asarray(X)[:, 0]
        p = np.where(self.triggered_ & (x == 0), 1e-6, 1 - 1e-6)
        return np.column_stack([1 - p, p])


class TriggerRegressor(RegressorMixin, BaseEstimator):
    """mu0(x) = -5 (clipped to -1), +5 at x = -1, and +5 at x = 0 for a triggered model."""

    def fit(self, X, y):
        self.triggered_ = bool(np.any(np.asarray(X)[:, 0] == -1))
        return self

    def predict(self, X):
        x = np.asarray(X)[:, 0]
        return np.where((x == -1) | (self.triggered_ & (x == 0)), 5.0, -5.0)


def _trigger_pair(n: int, K: int):
    """Row 0 (fold 0) a control at x = +1, Y = 1 in D; at x = -1, Y = -1 in D'; every other
    row x = 0, Y = 1, a control, except one treated row per fold at x = 2 (so each fold's
    propensity model is fitted; the trigger leaves its mu0 alone, since a treated row's score
    moves against a control's). D' triggers fold 0's models only."""
    ids = np.arange(n) % K
    X, A, Y = np.zeros((n, 1)), np.zeros(n, dtype=int), np.ones(n)
    A[K:2 * K], X[K:2 * K] = 1, 2.0     # one treated row per fold
    X[0] = 1.0
    X2, Y2 = X.copy(), Y.copy()
    X2[0], Y2[0] = -1.0, -1.0
    return ids, (X, A, Y), (X2, A.copy(), Y2)


def _score_mean(est, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # few rows per arm and fold
        rel = est.fit(*data, evaluation=True)
    return rel.nonprivate["score_mean"], rel.nonprivate["variance"], rel


@pytest.mark.parametrize("K, kb", [(200, None), (400, 200)])
def test_trigger_neighbours_reach_the_att_sensitivity(K, kb):
    """The real estimator (fit, evaluation mode) on neighbours that move the replaced row's
    score by Delta_= and every other row of its block by about kappa/(K'-1): |dT| is what the
    hand count says, within Delta_T, and above 0.98 Delta_T (a sensitivity 0.98x as large is
    violated); |d sqrt(V)| within the tight sigma2's sensitivity. n = 40,000, eta = 0.2."""
    n, eta = 40_000, 0.2
    B_pi = 1 / eta
    ids, D, D2 = _trigger_pair(n, K)
    est = PrivateATE(estimator="aipw", estimand="att", propensity_model=TriggerClassifier(),
                     outcome_model=TriggerRegressor(), n_folds=K, block_folds=kb, folds=ids,
                     propensity_clip=eta, outcome_bounds=(-1, 1), zeta=1.0, noise_seed=0)
    kb = kb or K
    cal = est.calibration(n)
    layout = layout_of(ids, K, kb) if kb != K else None
    d_eq, kappa = _att_constants(1.0, B_pi)
    block_rows = n if layout is None else layout.block_rows
    d_t = d_eq / n + kappa * block_rows / (n * (kb - 1))
    assert cal.sensitivity == pytest.approx(d_t, rel=1e-12)
    t1, v1, _ = _score_mean(est, D)
    t2, v2, _ = _score_mean(est, D2)
    r, r2 = B_pi - 1, ((kb - 2) * (B_pi - 1) + 1 / (B_pi - 1)) / (kb - 1)
    control_move = 2 * r - r2 * (2 - 2 / (kb - 1))
    moved_rows = block_rows - n // K             # the block's rows outside fold 0
    treated = kb - 1                             # one in each other fold of the block
    expected = (d_eq + (moved_rows - treated) * control_move) / n
    gap = abs(t2 - t1)
    assert gap == pytest.approx(expected, rel=1e-9)
    assert gap <= d_t
    assert gap > 0.98 * d_t
    assert abs(math.sqrt(v1) - math.sqrt(v2)) <= cal.sensitivity_var + 1e-12


@pytest.mark.parametrize("n, K", [(50, 3), (203, 7), (203, 20)])
def test_hash_neighbours_stay_within_the_att_bounds(n, K):
    """Random neighbours (one row replaced: covariates, arm and outcome) with models that jump
    between the clip bounds by a hash of their training fold: |dT| <= Delta_T, |d sqrt V| <=
    Delta_V (tight), |Gamma| <= Delta_=/2, the treated count moves by at most 1."""
    rng = np.random.default_rng(n + K)
    eta = 0.2
    est = PrivateATE(estimator="aipw", estimand="att", propensity_model=HashClassifier(),
                     outcome_model=HashRegressor(), n_folds=K, folds="shuffle", random_state=K,
                     propensity_clip=eta, outcome_bounds=(-1, 1), sigma2="tight")
    cal = est.calibration(n)
    worst = 0.0
    for _ in range(6):
        X = rng.standard_normal((n, 2))
        A = rng.binomial(1, 0.5, n)
        A[:2] = [0, 1]
        Y = rng.uniform(-1, 1, n)
        i = int(rng.integers(2, n))
        X2, A2, Y2 = X.copy(), A.copy(), Y.copy()
        X2[i] = rng.choice([-3.0, 3.0], 2)
        A2[i], Y2[i] = 1 - A[i], rng.choice([-1.0, 1.0])
        t1, v1, r1 = _score_mean(est, (X, A, Y))
        t2, v2, r2 = _score_mean(est, (X2, A2, Y2))
        worst = max(worst, abs(t1 - t2))
        assert abs(t1 - t2) <= cal.sensitivity + 1e-12
        assert abs(math.sqrt(v1) - math.sqrt(v2)) <= cal.sensitivity_var + 1e-12
        assert abs(r1.nonprivate["treated"] - r2.nonprivate["treated"]) == 1
    assert worst > 0


def test_the_treated_count_neighbours_reach_one():
    """Flipping one row's arm moves the released count's input by exactly 1 (its
    sensitivity): a count sensitivity of 0.98 would be violated. Under missing="drop" a row
    losing its outcome leaves the count of complete treated rows, also by 1."""
    rng = np.random.default_rng(4)
    n = 400
    X, Y = rng.standard_normal((n, 2)), rng.uniform(-1, 1, n)
    A = rng.binomial(1, 0.4, n)
    est = PrivateATE(estimator="aipw", estimand="att", n_folds=4, outcome_bounds=(-1, 1),
                     propensity_model=LogisticRegression(), outcome_model=LinearRegression(),
                     noise_seed=1)
    i = int(np.flatnonzero(A == 1)[0])
    A2 = A.copy()
    A2[i] = 0
    counts = [_score_mean(est, (X, a, Y))[2].nonprivate["treated"] for a in (A, A2)]
    assert counts[0] - counts[1] == 1 > 0.98
    assert counts[0] == A.sum()
    drop = est.set_params(missing="drop")
    Y3 = Y.copy()
    Y3[i] = np.nan
    counts = [_score_mean(drop, (X, A, y))[2].nonprivate["treated"] for y in (Y, Y3)]
    assert counts[0] - counts[1] == 1


# ------------------------------------------------------------------ release and CI
def test_the_att_release_is_the_ratio_with_the_covariance_bound():
    """In evaluation mode: nonprivate ATT = sum Gamma / sum A; the released CI uses
    (sqrt(V_T) + |R| sqrt(V_c))^2 / c^2 (checked from the released figures by hand); the text
    and the table name the ATT."""
    rng = np.random.default_rng(2)
    n = 3000
    X = rng.standard_normal((n, 2))
    A = (rng.uniform(size=n) < 1 / (1 + np.exp(-X[:, 0]))).astype(int)
    Y = np.clip(X[:, 0] + A * (0.1 + 0.2 * X[:, 0]) + rng.normal(0, 0.3, n), -3, 3)
    est = PrivateATE(estimator="aipw", estimand="att", outcome_bounds=(-3, 3), zeta=4.0,
                     propensity_model=LogisticRegression(), outcome_model=LinearRegression(),
                     n_folds=20, noise_seed=5)
    rel = _score_mean(est, (X, A, Y))[2]
    np_ = rel.nonprivate
    assert np_["ate"] == pytest.approx(np_["score_mean"] * n / A.sum(), rel=1e-12)
    assert np_["treated"] == A.sum()
    assert rel.params["estimand"] == "att" and rel.estimand == "att"
    assert rel.summary().index.tolist() == ["ATT"]
    text = str(rel)
    assert "ATT " in text and "non-private ATT" in text and "\nATE " not in text
    assert rel.privacy.zeta == pytest.approx(4.0, rel=1e-12)
    # the CI from the released figures: T~ = R~ c~, with T's private variance V_T
    z = rel.noise
    assert z["sensitivity_count"] == 1.0
    assert z["sigma_count"] == pytest.approx(1 / split_zeta(4.0)[1], rel=1e-12)


def test_ratio_variance_bound_by_hand():
    """(sqrt(V_T) + |R| sqrt(V_c))^2 / c^2 for the treated count; V_T + R^2 V_c over c^2 for
    complete cases (whose covariance term is known to be >= 0)."""
    v_t, R, c, sigma_c, n = 0.04, -0.5, 0.2, 10.0, 1000
    v_c = c * (1 - c) / n + (sigma_c / n) ** 2
    assert ratio_variance(v_t, R, c, sigma_c, n, "treated") == pytest.approx(
        (0.2 + 0.5 * math.sqrt(v_c)) ** 2 / c**2, rel=1e-15)
    assert ratio_variance(v_t, R, c, sigma_c, n, "complete_cases") == pytest.approx(
        (v_t + 0.25 * v_c) / c**2, rel=1e-15)
    with pytest.raises(ValueError, match="count must be one of"):
        ratio_variance(v_t, R, c, sigma_c, n, "rows")


def test_the_counts_noise_is_a_small_part_of_ts_at_the_defaults():
    """SPECS.md "The ATT of the ensemble", "A small treated arm": the noisy treated count enters
    the CI's coverage event only through ATT (c~ - c), of sd at most (hi - lo) sigma_C/n
    whatever the treated count; at the defaults (auto K, at least 100 rows a fold; auto
    eta <= 0.2, so Delta_= >= 16 B_mu and kappa >= 15.5 B_mu) that is below
    20/(16 + 15.5 * 100) = 0.0128 of T's noise sigma_1 (measured at most 0.0123). A count
    given a smaller share of zeta^2, or a T sensitivity half as large, would fail it."""
    bound = 20 / (16 + 15.5 * 100)
    for d, n, zeta in itertools.product((2, 10), (200, 2_000, 20_000, 10**6),
                                        (0.1, 1.0, 4.0, 64.0)):
        est = PrivateATE(estimand="att", outcome_bounds=(-1.0, 2.0), zeta=zeta,
                         covariate_bounds=[(-1.0, 1.0)] * d)
        assert est.resolved_estimator(n, d) == "aipw"
        sigma_c = count_sigma(split_zeta(zeta)[1])
        assert sigma_c == pytest.approx(10 / zeta, rel=1e-12)   # sensitivity 1, 1% of zeta^2
        assert 3.0 * sigma_c / n <= bound * est.calibration(n, d).sigma_ate, (d, n, zeta)


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("estimator", ["g", "ipw"])
def test_g_and_ipw_refuse_the_att_before_any_charge(estimator, accountant):
    X = np.random.default_rng(0).standard_normal((200, 2))
    A, Y = np.tile([0, 1], 100), np.zeros(200)
    est = PrivateATE(estimator=estimator, estimand="att", outcome_bounds=(-1, 1))
    with pytest.raises(ValueError, match=r"estimand='att' is not available for estimator="):
        est.fit(X, A, Y)
    with pytest.raises(ValueError, match="estimand"):
        est.privacy_charge(200, 2)
    with pytest.raises(ValueError, match="estimand must be one of"):
        PrivateATE(estimand="atc", outcome_bounds=(-1, 1)).fit(X, A, Y)
    with pytest.raises(ValueError, match="released_code"):
        PrivateATE(estimand="att", sensitivity="released_code", outcome_bounds=(-1, 1)).fit(
            X, A, Y)
    assert accountant.charges == []


def test_the_partitioned_path_refuses_the_att_before_the_charge():
    schema = {"id": "int64", "A": "int8", "Y": "double", "x1": "double"}
    est = PrivateATE(estimand="att", outcome_bounds=(-1, 1), n_folds=4)
    with pytest.raises(ValueError, match="estimand='att'.*partitioned path"):
        plan_partitions([(500, schema), (500, schema)], est, id_column="id", treatment="A",
                        outcome="Y", covariates=None, evaluation=False)


# ------------------------------------------------------------------ DoubleML reference
@pytest.mark.parametrize("eta", [0.01, 0.1])
def test_nonprivate_att_equals_doubleml_atte(eta):
    """Evaluation mode, K = 2 on the same two folds (DoubleML's external sample splitting),
    the same models (plain logistic, fitted to convergence, and per-arm least squares), and
    eta = DoubleML's clipping threshold (both clip pi to [eta, 1 - eta]: ``np.clip`` in
    DoubleML's PSProcessor; calibration off): the non-private ATT equals DoubleML IRM's ATTE
    point estimate to 1e-6. Wide outcome bounds leave every outcome and prediction unclipped.
    At eta = 0.1 about a fifth of the propensities are clipped."""
    import doubleml as dml
    from doubleml.utils import PSProcessorConfig

    rng = np.random.default_rng(7)
    n = 2000
    X = rng.standard_normal((n, 3))
    pi = 1 / (1 + np.exp(-(-0.3 + 1.5 * X[:, 0] - 0.5 * X[:, 1])))
    A = (rng.uniform(size=n) < pi).astype(int)
    Y = 1 + X[:, 0] + 0.5 * X[:, 2] + A * (0.3 + 0.4 * X[:, 0]) + rng.normal(0, 0.5, n)
    folds = rng.permutation(np.arange(n) % 2)
    logistic = LogisticRegression(solver="newton-cholesky", tol=1e-12, max_iter=1000)
    est = PrivateATE(estimator="aipw", estimand="att", n_folds=2, folds=folds,
                     propensity_model=logistic, outcome_model=LinearRegression(),
                     propensity_clip=eta, outcome_bounds=(-100, 100), noise_seed=0)
    ours = _score_mean(est, (X, A, Y))[2].nonprivate["ate"]

    data = dml.DoubleMLData.from_arrays(X, Y, A)
    model = dml.DoubleMLIRM(data, ml_g=LinearRegression(), ml_m=logistic, score="ATTE",
                            n_folds=2, ps_processor_config=PSProcessorConfig(
                                clipping_threshold=eta))
    idx = np.arange(n)
    model.set_sample_splitting([[(idx[folds == 1], idx[folds == 0]),
                                 (idx[folds == 0], idx[folds == 1])]])
    model.fit()
    assert ours == pytest.approx(float(model.coef[0]), abs=1e-6)
    if eta == 0.1:
        m_hat = model.predictions["ml_m"][:, 0, 0]
        assert np.mean((m_hat == eta) | (m_hat == 1 - eta)) > 0.05


# ------------------------------------------------------------------ planning and auto
def test_the_plan_of_the_att_is_the_noise_of_t_over_the_treated_share():
    """The planned ATT half-width is the ensemble's with T's sigma1 and sigma2 (at zeta
    sqrt(0.99), ATT constants) divided by the treated share, by hand from the conservative CI
    form, widened by the count's term of the covariance bound, 1 + sqrt(2/pi) s_c/p; the stated
    treated_share is used, else 1/2; the release's eta is the plan's."""
    from scipy.special import ndtri

    from dpcausal.ate.planner import nonprivate_variance, recommended

    n, d, zeta = 20_000, 2, 1.0
    for share in (None, 0.1):
        est = PrivateATE(estimator="aipw", estimand="att", outcome_bounds=(0, 1), zeta=zeta,
                         treated_share=share)
        row = recommended(est.plan(n, d))
        assert row["estimand"] == "att"
        p = 0.5 if share is None else share
        cal = calibrate("aipw", n, int(row["n_folds"]), (0, 1), float(row["propensity_clip"]),
                        zeta * math.sqrt(0.99), float(row["ci_share"]), "tight",
                        str(row["sigma2"]), None, "att")
        z, c = float(ndtri(0.99)), float(ndtri(1 - 0.05 / 2 + 0.01 / 2))
        v = nonprivate_variance(n, (0, 1), None, p)
        s_c = math.sqrt(p * (1 - p) / n + (10 / zeta / n) ** 2)   # count sd 1/(0.1 zeta)
        half = c * math.sqrt((math.sqrt(v) + z * cal.sigma_var / p) ** 2
                             + (cal.sigma_ate / p) ** 2) * (1 + math.sqrt(2 / math.pi) * s_c / p)
        assert row["halfwidth"] == pytest.approx(half, rel=1e-12)
        assert est.resolved_propensity_clip(n, d) == pytest.approx(row["propensity_clip"])
    ate = recommended(PrivateATE(estimator="aipw", outcome_bounds=(0, 1), zeta=zeta,
                                 treated_share=0.1).plan(n, d))
    assert half > 5 * ate["halfwidth"]       # the ATT at 10% treated: noise over 0.1


def test_auto_compares_att_halfwidths():
    """In a randomized design auto compares the candidates' ATT half-widths: the ensemble's
    comparison row is its ATT plan's, and the release states the estimand."""
    from dpcausal.ate.planner import recommended

    n, d = 5000, 2
    plain = dict(propensity_model=LogisticRegression(), outcome_model=LinearRegression(),
                 outcome_bounds=(0, 1), zeta=1.0, treated_share=0.2, estimand="att")
    est = PrivateATE(design="randomized", **plain)
    table = est.compare_estimators(n, d)
    ens = float(table.loc[table["estimator"] == "aipw", "halfwidth"].iloc[0])
    plan_att = recommended(PrivateATE(estimator="aipw", **plain).plan(n, d))
    ate = recommended(PrivateATE(estimator="aipw", **{**plain, "estimand": "ate"}).plan(n, d))
    assert ens > 3 * float(ate["halfwidth"])
    assert ens == pytest.approx(float(plan_att["halfwidth"]), rel=1e-12)
    assert est.public_params(n, d)["estimand"] == "att"
