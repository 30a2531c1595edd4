"""Lattice Laplace sampler (spec §1.4 Thm II.1, §7.3; privacy_testing.md items 1, 3, 4, 6)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpcausal.noise import (
    effective_scale,
    laplace_mechanism,
    lattice_sensitivity,
    lattice_step,
    sample_discrete_laplace,
)


@pytest.mark.parametrize("delta", [1e-6, 0.3, 1.0, 23.2143, 970.0255, 4096.0])
def test_lattice_step_and_effective_scale_exact(delta):
    step = lattice_step(delta)
    assert math.frexp(step)[0] == 0.5                                # a power of two
    assert delta * 2.0**-21 < step <= delta * 2.0**-20
    assert lattice_sensitivity(delta) == math.floor(delta / step) + 1
    eff = effective_scale(delta, 0.5)
    assert delta / 0.5 < eff <= delta / 0.5 * (1 + 2.0**-19)


def test_zero_sensitivity_is_released_as_is_and_bad_inputs_refused():
    rng = np.random.default_rng(0)
    assert laplace_mechanism(0.0, 0.0, 1.0, rng) == 0.0 and effective_scale(0.0, 1.0) == 0.0
    with pytest.raises(ValueError, match="epsilon"):
        laplace_mechanism(1.0, 1.0, 0.0, rng)
    with pytest.raises(ValueError, match="sensitivity"):
        lattice_step(-1.0)
    with pytest.raises(ValueError, match="scale"):
        sample_discrete_laplace(Fraction(0), rng)


def test_outputs_lie_on_the_lattice_and_rng_is_injectable():
    delta = 3.7
    step = lattice_step(delta)
    a = [laplace_mechanism(1.2345, delta, 0.9, np.random.default_rng(5)) for _ in range(3)]
    assert a[0] == a[1] == a[2]                                       # same seed, same draw
    g = np.random.default_rng(5)
    b = [laplace_mechanism(1.2345, delta, 0.9, g) for _ in range(50)]
    assert b[0] == a[0] and len(set(b)) > 40                          # the generator advances
    assert all(float(x / step).is_integer() for x in b)


def _pmf(z, scale):
    q = math.exp(-1 / scale)
    return (1 - q) / (1 + q) * q ** np.abs(z)


@pytest.mark.parametrize("scale", [Fraction(3, 2), Fraction(7, 10)])
def test_discrete_laplace_matches_its_pmf_with_negative_controls(scale):
    rng = np.random.default_rng(1)
    z = np.array([sample_discrete_laplace(scale, rng) for _ in range(10000)])
    support = np.arange(-6, 7)

    def pvalue(s):
        expected = _pmf(support, s) * z.size
        observed = np.array([(z == k).sum() for k in support])
        tail_obs = z.size - observed.sum()
        tail_exp = z.size - expected.sum()
        chi = np.sum((observed - expected) ** 2 / expected) + (tail_obs - tail_exp) ** 2 / tail_exp
        return stats.chi2.sf(chi, df=support.size)

    assert pvalue(float(scale)) > 1e-3
    assert pvalue(float(scale) * 0.7) < 1e-6 and pvalue(float(scale) * 1.3) < 1e-6


def test_mechanism_noise_is_laplace_KS_with_negative_controls():
    rng = np.random.default_rng(2)
    delta, eps = 1.0, 1.0
    x = np.array([laplace_mechanism(0.0, delta, eps, rng) for _ in range(6000)])
    b = delta / eps
    assert stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > 1e-3
    assert stats.kstest(x, stats.laplace(scale=0.7 * b).cdf).pvalue < 1e-6
    assert stats.kstest(x, stats.laplace(scale=1.3 * b).cdf).pvalue < 1e-6
    assert np.mean(np.abs(x)) == pytest.approx(b, rel=0.05)          # E|Lap(b)| = b (§1.4)


def _max_log_ratio(eps_claim, eps_used, n=100_000, seed=3):
    """Histogram test on witness neighbours f(D)=0, f(D')=Delta (privacy_testing.md item 4)."""
    rng = np.random.default_rng(seed)
    delta = 1.0
    x0 = np.array([laplace_mechanism(0.0, delta, eps_used, rng) for _ in range(n)])
    x1 = np.array([laplace_mechanism(delta, delta, eps_used, rng) for _ in range(n)])
    edges = np.arange(-4.0, 5.0, 0.25) / eps_claim
    c0, _ = np.histogram(x0, edges)
    c1, _ = np.histogram(x1, edges)
    ok = (c0 > 2000) & (c1 > 2000)
    # one-sided 4-sigma margin on each count: a lower bound on the realised privacy loss
    lo0, hi1 = c0 - 4 * np.sqrt(c0), c1 + 4 * np.sqrt(c1)
    lo1, hi0 = c1 - 4 * np.sqrt(c1), c0 + 4 * np.sqrt(c0)
    return float(np.max(np.maximum(np.log(lo0[ok] / hi1[ok]), np.log(lo1[ok] / hi0[ok]))))


@pytest.mark.slow
def test_histogram_privacy_loss_with_negative_control_P11():
    eps = 1.0
    assert _max_log_ratio(eps, eps) <= eps
    # noise x0.8 (epsilon inflated by 1.25) must be caught
    assert _max_log_ratio(eps, eps * 1.25) > eps
