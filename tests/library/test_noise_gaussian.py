"""The exact discrete Gaussian sampler (privacy_testing.md, 'Exact noise on a lattice'):
its pmf against the exact pmf by chi-square, with a mis-scaled control that must be rejected."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from dpcausal.noise import (
    gaussian_lattice_step,
    gaussian_mechanism,
    gaussian_sigma_for,
    sample_discrete_gaussian,
    secure_rng,
)


def _exact_pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    wide = np.arange(-200, 201)
    mass = np.exp(-wide.astype(float) ** 2 / (2 * sigma2))
    mass /= mass.sum()
    return mass[np.searchsorted(wide, support)]


def _chi2_pvalue(draws: np.ndarray, sigma2: float) -> float:
    support = np.arange(-8, 9)
    counts = np.array([np.count_nonzero(draws == z) for z in support], dtype=float)
    tail = draws.size - counts.sum()
    pmf = _exact_pmf(sigma2, support)
    expected = np.append(pmf, 1 - pmf.sum()) * draws.size
    return float(chisquare(np.append(counts, tail), expected).pvalue)


@pytest.fixture(scope="module")
def draws() -> np.ndarray:
    rng = np.random.default_rng(7)
    return np.array([sample_discrete_gaussian(Fraction(4), rng) for _ in range(20_000)])


def test_pmf_matches_the_exact_discrete_gaussian(draws):
    assert _chi2_pvalue(draws, 4.0) > 1e-3


@pytest.mark.parametrize("wrong_sigma2", [4.0 * 0.9**2, 4.0 * 1.1**2])
def test_mis_scaled_pmf_is_rejected(draws, wrong_sigma2):
    assert _chi2_pvalue(draws, wrong_sigma2) < 1e-6


def test_outputs_lie_on_the_lattice_and_differ_across_secure_generators():
    step = gaussian_lattice_step(0.3)
    a = gaussian_mechanism(0.123456789, 0.3, 0.01, secure_rng())
    b = gaussian_mechanism(0.123456789, 0.3, 0.01, secure_rng())
    for v in (a, b):
        assert (v / step) == math.floor(v / step)
    assert a != b


def test_sigma_inflation_keeps_the_sensitivity_to_noise_ratio():
    sigma, delta = 0.25, 0.01
    inflated = gaussian_sigma_for(sigma, delta)
    step = gaussian_lattice_step(sigma)
    assert (delta + step) / inflated == pytest.approx(delta / sigma, rel=1e-12)
    assert step <= sigma * 2**-20
