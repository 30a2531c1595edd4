"""LPGM19 (dpcausal.ate.comparators.lpgm19): sensitivities by hand and under adversarial
neighbours, the non-private part against a hand-written loop, the exact vector noise, the
charge against dp_accounting, release-mode rules, and (slow) coverage on the seed paper's
binary design (Exp. C, App. F.2). SPECS.md "Comparators: LPGM19"."""

from __future__ import annotations

import itertools
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from scipy import stats
from scipy.stats import chi2
from sklearn.linear_model import LogisticRegression

from dpcausal.accounting import gdp_epsilon
from dpcausal.ate.comparators import lpgm19
from dpcausal.ate.comparators._mechanism import gaussian_vector, vector_noise_sd
from dpcausal.datasets import make_experiment_c

S = 1 / math.sqrt(2)


@pytest.mark.parametrize(("bounds", "eta", "want"), [
    ((0.0, 1.0), 0.1, (-10.0, 10.0)),
    ((-1.0, 1.0), 0.2, (-5.0, 5.0)),
    ((2.0, 3.0), 0.25, (-12.0, 12.0)),       # Y/pi at Y = 3, pi = 0.25
    ((-3.0, 1.0), 0.5 - 1e-9, (-6.0, 6.0)),  # |Y| <= 3, pi -> 1/2: 3/0.5
])
def test_ipw_range_by_hand(bounds, eta, want):
    assert lpgm19.ipw_range(bounds, eta) == pytest.approx(want, rel=1e-8)


def test_sensitivities_by_hand():
    s = lpgm19.sensitivities(1000, (0.0, 1.0), 0.1, 0.01)
    assert s["theta"] == pytest.approx(2 / (1000 * 0.01) * (1 + 1e-6), rel=1e-12)
    assert s["mean"] == pytest.approx(20 / 1000, rel=1e-12)
    assert s["second_moment"] == pytest.approx(100 / 1000, rel=1e-12)
    assert s["gradient"] == pytest.approx(2 * 1 * 9 / 1000, rel=1e-12)  # 2 B_mu (1-eta)/eta / n


# ------------------------------------------------------------------ adversarial neighbours
def _corner_rows(radius: float):
    """Rows at the corners: x = -/+ R (pi at the clip either way), A in {0, 1}, Y at a bound or
    0 (where Gamma^2 is 0)."""
    return [(x, a, y) for x in (-radius, radius) for a in (0.0, 1.0) for y in (-1.0, 0.0, 1.0)]


def _ipw_stats(rows, theta, eta, radius):
    X = np.array([[r[0]] for r in rows])
    A = np.array([r[1] for r in rows])
    Y = np.array([r[2] for r in rows])
    g = lpgm19.ipw_terms(lpgm19.features(X, radius), A, Y, theta, eta)
    return g.mean(), np.mean(g * g)


def test_ipw_statistics_reach_their_sensitivity_and_never_exceed_it():
    """Replace one row of a dataset by a corner row, the released propensity fixed (it is public
    post-processing): the moves reach the declared sensitivity (so a bound scaled by 0.98
    fails) and never exceed it."""
    n, eta, R = 40, 0.2, 2.0
    theta = np.array([0.0, 50.0])  # pi = 1 - eta at x = +R and eta at x = -R (clipped)
    rng = np.random.default_rng(3)
    base = [(float(x), float(a), float(y)) for x, a, y in zip(
        rng.uniform(-R, R, n - 1), rng.integers(0, 2, n - 1), rng.uniform(-1, 1, n - 1),
        strict=True)]
    sens = lpgm19.sensitivities(n, (-1.0, 1.0), eta, 1.0)
    worst = {"mean": 0.0, "second_moment": 0.0}
    corners = _corner_rows(R)
    for r, r2 in itertools.product(corners, corners):
        m1, q1 = _ipw_stats([*base, r], theta, eta, R)
        m2, q2 = _ipw_stats([*base, r2], theta, eta, R)
        worst["mean"] = max(worst["mean"], abs(m1 - m2))
        worst["second_moment"] = max(worst["second_moment"], abs(q1 - q2))
    for key, move in worst.items():
        assert move <= sens[key] * (1 + 1e-12), key
        assert move > 0.98 * sens[key], key


def test_gradient_neighbours_reach_their_sensitivity_and_never_exceed_it():
    """A row at ||z|| = 1 whose propensity sits just inside the clip (0.2001 for eta = 0.2),
    treated, its outcome moved from +1 to -1: the mean gradient moves by 2 (1-eta)/eta ||z|| / n
    up to 0.06 %, so the test fails at 0.98x."""
    n, eta, R = 25, 0.2, 1.0
    u = math.log(0.2001 / 0.7999)                 # logit of the propensity at z = (s, s)
    theta = np.array([u / (2 * S), u / (2 * S)])
    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, (n, 1))
    A = rng.integers(0, 2, n).astype(float)
    Y = rng.uniform(-1, 1, n)
    sens = lpgm19.sensitivities(n, (-1.0, 1.0), eta, 1.0)["gradient"]
    worst = 0.0
    for (x1, a1, y1), (x2, a2, y2) in itertools.product(_corner_rows(R), _corner_rows(R)):
        X[0], A[0], Y[0] = x1, a1, y1
        g1 = lpgm19.ipw_gradients(lpgm19.features(X, R), A, Y, theta, eta).mean(axis=0)
        X[0], A[0], Y[0] = x2, a2, y2
        g2 = lpgm19.ipw_gradients(lpgm19.features(X, R), A, Y, theta, eta).mean(axis=0)
        worst = max(worst, float(np.linalg.norm(g1 - g2)))
    assert worst <= sens * (1 + 1e-12)
    assert worst > 0.98 * sens


def test_random_neighbours_never_exceed_the_ipw_sensitivities():
    rng = np.random.default_rng(5)
    n, eta, R = 30, 0.1, 1.5
    sens = lpgm19.sensitivities(n, (0.0, 1.0), eta, 1.0)
    for _ in range(300):
        theta = rng.normal(0, 5, 3)
        X = rng.normal(0, 2, (n, 2))
        A = rng.integers(0, 2, n).astype(float)
        Y = rng.uniform(0, 1, n)
        g = lpgm19.ipw_terms(lpgm19.features(X, R), A, Y, theta, eta)
        X2, A2, Y2 = X.copy(), A.copy(), Y.copy()
        X2[0], A2[0], Y2[0] = rng.normal(0, 9, 2), 1 - A[0], rng.choice([0.0, 1.0])
        g2 = lpgm19.ipw_terms(lpgm19.features(X2, R), A2, Y2, theta, eta)
        assert abs(g.mean() - g2.mean()) <= sens["mean"] * (1 + 1e-12)
        assert abs(np.mean(g * g) - np.mean(g2 * g2)) <= sens["second_moment"] * (1 + 1e-12)
        G = lpgm19.ipw_gradients(lpgm19.features(X, R), A, Y, theta, eta).mean(axis=0)
        G2 = lpgm19.ipw_gradients(lpgm19.features(X2, R), A2, Y2, theta, eta).mean(axis=0)
        assert np.linalg.norm(G - G2) <= sens["gradient"] * (1 + 1e-12)


def test_propensity_neighbours_never_exceed_the_dp_erm_bound():
    """Chaudhuri et al.'s 2/(n lambda) over corner neighbours (||z|| = 1, labels flipped).

    The bound is a proven upper bound that logistic loss does not attain (|l'| < 1, and a row
    cannot be misclassified both ways at once): the best attack here reaches about half of it,
    so no 0.98x control exists for this statistic (SPECS.md "Comparators: LPGM19")."""
    best = 0.0
    for n, lam in itertools.product((2, 5, 20), (1.0, 0.1, 0.01, 1e-3)):
        sens = lpgm19.sensitivities(n, (0.0, 1.0), 0.1, lam)["theta"]
        base = np.array([[S, S]] * (n - 1))
        for other_a, x1, x2, a1, a2 in itertools.product((0.0, 1.0), (-1, 0, 1), (-1, 1),
                                                         (0.0, 1.0), (0.0, 1.0)):
            Ab = np.full(n - 1, other_a)
            t1 = lpgm19.fit_logistic(np.vstack([base, [S, S * x1]]), np.append(Ab, a1), lam,
                                     lpgm19.grad_tolerance(n))
            t2 = lpgm19.fit_logistic(np.vstack([base, [S, S * x2]]), np.append(Ab, a2), lam,
                                     lpgm19.grad_tolerance(n))
            move = float(np.linalg.norm(t1 - t2))
            assert move <= sens
            best = max(best, move / sens)
    assert best > 0.45  # the attack is effective (0.49 measured)


# ------------------------------------------------------------------ non-private part by hand
def _reference_ipw(X, A, Y, theta, eta, radius):
    """A loop over rows: z = (1, x/R projected)/sqrt 2, pi clipped, Gamma summed."""
    total, total2 = 0.0, 0.0
    for x, a, y in zip(X, A, Y, strict=True):
        x = [v / radius for v in x]
        norm = math.sqrt(sum(v * v for v in x))
        x = [v / max(norm, 1.0) for v in x]
        z = [S] + [S * v for v in x]
        u = sum(t * v for t, v in zip(theta, z, strict=True))
        pi = min(max(1 / (1 + math.exp(-u)), eta), 1 - eta)
        g = a * y / pi - (1 - a) * y / (1 - pi)
        total += g
        total2 += g * g
    return total / len(A), total2 / len(A)


def test_non_private_part_matches_a_hand_written_reference():
    X, A, Y, _ = make_experiment_c(3000, random_state=0)
    R, lam, eta = 4.8, 0.01, 0.1
    Z = lpgm19.features(X, R)
    theta = lpgm19.fit_logistic(Z, A, lam, lpgm19.grad_tolerance(3000))
    # scikit-learn's objective C sum(loss) + ||w||^2/2 is n C times ours at lambda = 1/(n C)
    sk = LogisticRegression(C=1 / (3000 * lam), fit_intercept=False, tol=1e-12,
                            max_iter=10_000).fit(Z, A)
    np.testing.assert_allclose(theta, sk.coef_.ravel(), atol=1e-6)
    rel = lpgm19._release(X, A, Y, zeta=1.5, outcome_bounds=(0, 1), covariate_radius=R,
                         propensity_clip=eta, regularization=lam,
                         rng=np.random.default_rng(1), evaluation=True)
    mean, second = _reference_ipw(X, A, Y, rel.params["theta"], eta, R)
    assert rel.nonprivate["ate"] == pytest.approx(mean, rel=1e-9)
    assert rel.nonprivate["second_moment"] == pytest.approx(second, rel=1e-9)


# ------------------------------------------------------------------ noise and charge
def test_vector_noise_has_the_calibrated_scale_and_mis_scaled_ones_are_caught():
    rng = np.random.default_rng(11)
    sens, zeta, p = 0.3, 0.7, 4
    draws = np.concatenate([gaussian_vector(np.zeros(p), sens, zeta, rng) for _ in range(2000)])
    sd = vector_noise_sd(sens, zeta, p)
    assert sd == pytest.approx(sens / zeta, rel=1e-5)
    assert stats.kstest(draws / sd, "norm").pvalue > 1e-3
    for wrong in (0.8, 1.25):
        assert stats.kstest(draws / (wrong * sd), "norm").pvalue < 1e-6


def test_the_charge_composes_to_zeta_and_its_epsilon_matches_dp_accounting():
    X, A, Y, _ = make_experiment_c(600, random_state=2)
    rel = lpgm19._release(X, A, Y, zeta=1.5, outcome_bounds=(0, 1), covariate_radius=4.8,
                         rng=np.random.default_rng(0), evaluation=True)
    assert rel.charge.mechanism == "gaussian" and rel.charge.zeta == pytest.approx(1.5)
    assert lpgm19.charge_of(1.5) == rel.charge  # the data-free charge a wrapper reserves first
    assert lpgm19.charge_of(1.5).detail["zetas"] == rel.charge.detail["zetas"]
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    for z in rel.charge.detail["zetas"]:
        acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / z))
    assert gdp_epsilon(rel.charge.zeta, 1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=2e-3)
    assert gdp_epsilon(rel.charge.zeta, 1e-5) == pytest.approx(7.05, abs=0.01)


def test_release_mode_draws_from_os_entropy_and_refuses_a_seed():
    X, A, Y, _ = make_experiment_c(600, random_state=2)
    kw = {"zeta": 1.0, "outcome_bounds": (0, 1), "covariate_radius": 4.8}
    with pytest.raises(ValueError, match="rng is for evaluation mode only"):
        lpgm19._release(X, A, Y, rng=np.random.default_rng(0), **kw)
    a, b = lpgm19._release(X, A, Y, **kw), lpgm19._release(X, A, Y, **kw)
    assert a.ate != b.ate and a.nonprivate is None
    assert a.ci[0] < a.ate < a.ci[1]


@pytest.mark.parametrize(("kw", "match"), [
    ({"zeta": 0.0}, "zeta must be a finite number > 0"),
    ({"covariate_radius": -1.0}, "covariate_radius must be a finite number > 0"),
    ({"propensity_clip": 0.5}, r"propensity_clip must be in \(0, 0.5\)"),
    ({"outcome_bounds": (1, 0)}, "outcome_bounds must be finite with low < high"),
    ({"regularization": 0.0}, "regularization must be a finite number > 0"),
    ({"shares": (0.5, 0.5)}, "shares must give four shares"),
    ({"shares": (0.5, 0.4, 0.1, 0.1)}, "summing to 1"),
])
def test_bad_public_parameters_are_refused_by_name(kw, match):
    X, A, Y, _ = make_experiment_c(200, random_state=2)
    args = {"zeta": 1.0, "outcome_bounds": (0, 1), "covariate_radius": 4.8, **kw}
    with pytest.raises(ValueError, match=match):
        lpgm19._release(X, A, Y, **args)


def test_expected_halfwidth_by_hand():
    # worst case E[Y^2] = 1 on [0, 1]; sigma_1 = (20/n) / (1.5 sqrt(0.4)); c = 2.0537;
    # sigma_theta = (2/(n lambda)) (1 + 1e-6) / (1.5 sqrt(0.45)) with lambda = 0.2/sqrt(n)
    n = 2000
    c = stats.norm.ppf(1 - 0.025 + 0.005)
    sigma = 20 / n / (1.5 * math.sqrt(0.4))
    theta = 2 / (n * 0.2 / math.sqrt(n)) * (1 + 1e-6) / (1.5 * math.sqrt(0.45))
    got = lpgm19.expected_halfwidth(n, 3, zeta=1.5, outcome_bounds=(0, 1))
    assert got == pytest.approx(c * math.sqrt(4 / n + sigma ** 2 + theta ** 2), rel=1e-12)
    sd = lpgm19.expected_halfwidth(n, 3, zeta=1.5, outcome_bounds=(0, 1), outcome_sd=0.3)
    m2 = 0.09 + 0.25
    assert sd == pytest.approx(c * math.sqrt(4 * m2 / n + sigma ** 2 + theta ** 2 * m2),
                               rel=1e-12)
    assert lpgm19.valid_for(design="observational", binary_outcome=False)


# ------------------------------------------------------------------ slow: coverage
@pytest.mark.slow
@pytest.mark.timeout(3600)  # 500 releases at n = 50,000: longer than the suite's 600 s default
def test_coverage_on_the_seed_papers_binary_design():
    """Exp. C (n = 50,000, d = 10, true ATE 0.1) at zeta = 1.5, R the 99 % radius of N(0, I_10)
    (public: the DGP's), eta = 0.1: 500 releases. Measured 2026-11-27: coverage 0.970, mean
    half-width 0.0367 (0.55 before the CI had the propensity-noise term), 990 s at load 9-23."""
    R = float(np.sqrt(chi2.ppf(0.99, 10)))
    rng = np.random.default_rng(2025)
    hits, widths = [], []
    for rep in range(500):
        X, A, Y, _ = make_experiment_c(50_000, random_state=[42, rep])
        rel = lpgm19._release(X, A, Y, zeta=1.5, outcome_bounds=(0, 1), covariate_radius=R,
                             rng=rng, evaluation=True)
        hits.append(rel.ci[0] <= 0.1 <= rel.ci[1])
        widths.append(rel.ci[1] - rel.ci[0])
    coverage = float(np.mean(hits))
    print(f"LPGM19 coverage {coverage:.3f}, mean half-width {np.mean(widths) / 2:.4f}")
    assert coverage >= 0.93
