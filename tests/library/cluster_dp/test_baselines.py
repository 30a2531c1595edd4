"""Aggregate baselines (spec cluster_dp.md §2.4, §2.5; errata E2, E3, E8)."""

import numpy as np
import pytest

from dpcausal.cluster_dp import (
    ResponseSpace,
    noisy_histogram,
    noisy_histogram_scales,
    noisy_ht,
    noisy_ht_scales,
)

SPACE = ResponseSpace(np.arange(-5, 7))
CELLS = np.array([[250, 250], [500, 500], [1000, 1000]])


def test_scales_paper_and_strict():
    np.testing.assert_allclose(noisy_ht_scales(CELLS, SPACE, 2.0, "paper"), 6 / CELLS[:, 0] / 2.0)
    np.testing.assert_allclose(noisy_ht_scales(CELLS, SPACE, 2.0, "strict"), 11 / CELLS[:, 0] / 2.0)
    np.testing.assert_allclose(noisy_histogram_scales(CELLS, 2.0, "paper"), 1 / (CELLS * 2.0))
    np.testing.assert_allclose(noisy_histogram_scales(CELLS, 2.0, "strict"), 2 / (CELLS * 2.0))


def test_sensitivity_fuzz_strict_holds_paper_fails():
    """|f(D) - f(D')| over substituted labels vs Delta_c: strict bound holds, paper's is exceeded
    (E3)."""
    rng = np.random.default_rng(0)
    c = np.repeat([0, 1], [8, 12])
    z = np.array([0, 1] * 4 + [0, 0, 1] * 4)
    n_cell = np.array([[4, 4], [8, 4]])
    worst = 0.0
    for _ in range(300):
        y = rng.choice(SPACE.values, c.size)
        i = rng.integers(c.size)
        y2 = y.copy()
        y2[i] = SPACE.values[0] if y[i] > 0 else SPACE.values[-1]
        zero = np.zeros(2)
        d = abs(
            noisy_ht(y, z, c, SPACE, 1.0, noise=zero) - noisy_ht(y2, z, c, SPACE, 1.0, noise=zero)
        )
        k = c[i]
        worst = max(worst, d / (np.sum(c == k) / c.size))  # per-cluster difference
        assert d <= np.sum(c == k) / c.size * SPACE.width / n_cell[k].min() + 1e-12
    assert worst > SPACE.B / n_cell.min(axis=1).max()  # paper's max|y|/min(n) understated


def test_values_with_given_noise_match_loops():
    rng = np.random.default_rng(1)
    c = np.repeat([0, 1], [6, 10])
    z = np.array([0, 1] * 3 + [1, 0] * 5)
    y = rng.choice(SPACE.values, c.size)
    wc = rng.laplace(size=2)
    ref = 0.0
    for k in range(2):
        t = y[(c == k) & (z == 1)]
        u = y[(c == k) & (z == 0)]
        eta = 11 / min(len(t), len(u)) / 0.5
        ref += np.mean(c == k) * (t.mean() - u.mean() + eta * wc[k])
    assert noisy_ht(y, z, c, SPACE, 0.5, noise=wc) == pytest.approx(ref, rel=1e-12)
    W = rng.laplace(size=(2, 2, 12))
    ref = 0.0
    for k in range(2):
        for a, sign in ((1, 1), (0, -1)):
            grp = y[(c == k) & (z == a)]
            eta = 2 / (len(grp) * 0.5)
            ref += (
                sign
                * np.mean(c == k)
                * sum(
                    v * (np.mean(grp == v) + W[k, a, j] * eta) for j, v in enumerate(SPACE.values)
                )
            )
    assert noisy_histogram(y, z, c, SPACE, 0.5, noise=W) == pytest.approx(ref, rel=1e-12)


def test_refusals():
    y, z, c = np.array([0.0, 1.0, 2.0]), np.array([0, 1, 0]), np.array([0, 0, 1])
    with pytest.raises(ValueError, match="every cluster needs at least one treated"):
        noisy_ht(y, z, c, SPACE, 1.0, random_state=0)
    with pytest.raises(ValueError, match="y has values outside the response space"):
        noisy_histogram(np.array([0.5, 1, 2]), z, c, SPACE, 1.0, random_state=0)
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        noisy_ht(y, z, np.array([0, 0, 0]), SPACE, 0.0, random_state=0)


def test_aggregate_charge_paper_mode_charges_the_true_cost():
    from dpcausal.cluster_dp import aggregate_charge

    assert aggregate_charge("noisy_ht", 1.0, SPACE, "strict").epsilon == 1.0
    assert aggregate_charge("noisy_ht", 1.0, SPACE, "paper").epsilon == pytest.approx(11 / 6)
    assert aggregate_charge("noisy_histogram", 1.0, SPACE, "paper").epsilon == 2.0
    nonneg = ResponseSpace([0, 1, 2])
    assert aggregate_charge("noisy_ht", 0.5, nonneg, "paper").epsilon == 0.5  # Y in [0, B]: exact
    with pytest.raises(ValueError, match="method must be 'noisy_ht' or 'noisy_histogram'"):
        aggregate_charge("ht", 1.0, SPACE)
