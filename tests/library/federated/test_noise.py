"""Noise-path distribution tests (privacy_testing.md §3, §6) with negative controls."""

import numpy as np
from scipy.stats import binom, chisquare, kstest, norm

from dpcausal.federated import central_gaussian_ate, central_gaussian_scales, pbm_encode


def _binomial_fit_pvalue(z, m, p):
    counts = np.bincount(z, minlength=m + 1)
    expected = binom.pmf(np.arange(m + 1), m, p) * z.size
    keep = expected > 5
    return chisquare(counts[keep],
                     expected[keep] * counts[keep].sum() / expected[keep].sum()).pvalue


def test_pbm_reports_follow_the_claimed_binomial():
    """The encoder's reports are Binom(m, 1/2 + theta x/R); theta x 0.8 or 1.25 is rejected."""
    rng = np.random.default_rng(0)
    m, theta, R = 32, 0.2, 1.0
    z = pbm_encode(np.full(200_000, R), R, m, theta, rng)  # worst-case input x = R
    assert _binomial_fit_pvalue(z, m, 0.5 + theta) > 1e-3
    assert _binomial_fit_pvalue(z, m, 0.5 + 0.8 * theta) < 1e-10
    assert _binomial_fit_pvalue(z, m, 0.5 + 1.25 * theta) < 1e-10


def test_central_gaussian_noise_scale_ks():
    """Baseline noise on the difference is N(0, sigma^2); sigma x 0.7 and x 1.3 fail the KS test."""
    rng = np.random.default_rng(1)
    x = np.zeros(10)
    t = np.arange(10) < 5
    scales = central_gaussian_scales(5, 5, 1.0, 1.0, 1e-6, "difference")
    draws = np.array([central_gaussian_ate(x, t, scales, 1.0, rng) for _ in range(4000)])
    sigma = scales.sigma[0]
    assert kstest(draws, norm(scale=sigma).cdf).pvalue > 1e-3
    assert kstest(draws, norm(scale=0.7 * sigma).cdf).pvalue < 1e-6
    assert kstest(draws, norm(scale=1.3 * sigma).cdf).pvalue < 1e-6
