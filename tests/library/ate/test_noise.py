"""The noise path: distribution, calibration and the approximate-DP histogram test.

Spec §5 item 5 and privacy_testing.md items 3-4 and 6 (negative controls must be caught).
"""

import math

import numpy as np
import pytest
from scipy.stats import kstest, norm

from dpcausal.accounting import gdp_epsilon
from dpcausal.ate.release import draw_release
from dpcausal.ate.sensitivity import calibrate

CAL = calibrate("g", 5000, 200, (-1, 1), 0.2, zeta=1.5, ci_share=0.1)


def _release_noise(n_draws, seed, v_hat=1.0):
    rng = np.random.default_rng(seed)
    out = [draw_release(0.0, v_hat, CAL, rng) for _ in range(n_draws)]
    ate = np.array([r.ate for r in out])
    # the conservative CI (spec §3): variance = (max(0, r) + z sigma_var)^2 + sigma_ate^2 with
    # r = sqrt(V_hat) + noise; r > 0 here (sqrt(V_hat) = 1 is 75 sigma_var above 0)
    z = 2.3263478740408408
    r = np.sqrt(np.array([r.variance for r in out]) - CAL.sigma_ate**2) - z * CAL.sigma_var
    return ate, r - math.sqrt(v_hat)


@pytest.mark.slow
def test_noise_variances_within_3_percent():
    """The 3% claim needs 20,000 releases (the variance ratio's sd is 1%): ``./dev slow``; the
    KS test below checks both noises at their scale, with controls, in the library tier."""
    ate_noise, var_noise = _release_noise(20_000, seed=1)
    assert np.var(ate_noise) == pytest.approx(CAL.sigma_ate**2, rel=0.03)
    assert np.var(var_noise) == pytest.approx(CAL.sigma_var**2, rel=0.03)


def test_noise_is_gaussian_at_the_calibrated_scale():
    """KS, for the ATE's noise and the variance's: the true sigma passes, 0.7 sigma and
    1.3 sigma are rejected."""
    ate_noise, var_noise = _release_noise(5000, seed=2)
    for noise, sigma in ((ate_noise, CAL.sigma_ate), (var_noise, CAL.sigma_var)):
        assert kstest(noise, norm(scale=sigma).cdf).pvalue > 1e-3
        for wrong in (0.7, 1.3):
            assert kstest(noise, norm(scale=wrong * sigma).cdf).pvalue < 1e-3


def _histogram_delta(sigma, sensitivity, epsilon, rng, n=10**6):
    """Empirical delta of N(0, s^2) vs N(Delta, s^2) at epsilon, on bins of width sigma/4."""
    a = rng.normal(0.0, sigma, n)
    b = rng.normal(sensitivity, sigma, n)
    edges = np.arange(min(a.min(), b.min()), max(a.max(), b.max()) + sigma / 4, sigma / 4)
    ca, _ = np.histogram(a, edges)
    cb, _ = np.histogram(b, edges)
    e = math.exp(epsilon)
    return max(np.maximum(0, ca - e * cb).sum() / n, np.maximum(0, cb - e * ca).sum() / n)


@pytest.mark.parametrize("factor, should_pass", [(1.0, True), (0.8, False)])
def test_approximate_dp_histogram_test(factor, should_pass):
    """Google's histogram test: at zeta=1 (delta=1e-3) the calibrated sigma passes, 0.8 sigma fails.

    sigma comes from the package's calibration (Delta/zeta1) at a point-estimate-only release.
    The bound is tight (true delta = 1e-3 exactly), and e^eps = 23 amplifies tail-count noise,
    so the tolerance is 5e-4; the broken variant's true delta is 9.9e-3.
    """
    cal = calibrate("aipw", 5000, 200, (-1, 1), 0.2, zeta=1.0, ci_share=0.0)
    delta = 1e-3
    eps = gdp_epsilon(cal.zeta1, delta)
    rng = np.random.default_rng(3)
    votes = [
        _histogram_delta(factor * cal.sigma_ate, cal.sensitivity, eps, rng) <= delta + 5e-4
        for _ in range(9)
    ]
    assert (sum(votes) >= 5) == should_pass


def test_one_draw_per_release_whatever_the_split(monkeypatch):
    """The release makes exactly two exact discrete-Gaussian draws, with or without a CI
    (constant shape), each on the lattice of its own scale."""
    import dpcausal.ate.release as release_mod

    point_only = calibrate("g", 5000, 200, (-1, 1), 0.2, zeta=1.5, ci_share=0.0)
    real = release_mod.gaussian_mechanism
    for cal in (CAL, point_only):
        scales = []
        monkeypatch.setattr(release_mod, "gaussian_mechanism",
                            lambda v, s, d, rng, seen=scales:
                            seen.append((s, d)) or real(v, s, d, rng))
        draw_release(0.1, 1e-4, cal, np.random.default_rng(5))
        assert len(scales) == 2
        assert scales[0] == (cal.sigma_ate, cal.sensitivity)
