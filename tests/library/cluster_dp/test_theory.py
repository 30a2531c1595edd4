"""Deterministic theory (spec cluster_dp.md §3.2-3.5, §4.9 T5-T7) against loops and printed
digits."""

import math

import numpy as np
import pytest

from dpcausal.cluster_dp import (
    ResponseSpace,
    a_term,
    exact_cond_var,
    lemma_a12_bound,
    phi,
    thm35_bound,
    uniform_var_exact,
    unit_weights,
    var_nodp_exact,
)

from ._reference import s2, var_nodp_loop

GMM = ResponseSpace(np.arange(-5, 7))
DESIGN = np.array([[250, 250], [500, 500], [1000, 1000]])


def test_gmm_space_constants():
    assert (GMM.K, GMM.B, GMM.l2sq) == (12, 6.0, 146.0)
    assert GMM.values.mean() == 0.5 and round((GMM.values**2).mean(), 4) == 12.1667


def test_t5_a_of_x():
    assert round(a_term(250, GMM, 0.8, 0.02, 10), 2) == 48384.01
    assert round(a_term(500, GMM, 0.8, 0.02, 10), 2) == 29905.86
    assert round(a_term(1000, GMM, 0.8, 0.02, 10), 2) == 23342.35


def test_t6_theorem_3_5_second_term():
    first, second = thm35_bound(DESIGN, 0.3, 0.2, GMM, 0.8, 0.02, 10)
    assert round(second, 4) == 32.9086
    assert first == pytest.approx((1 / 0.04 - 1) * 0.5)


def test_t7_lemma_a12_bound():
    assert round(lemma_a12_bound(12, 250, 0.02, 10), 4) == 1.0623


def test_a12_bracket_limits():
    assert lemma_a12_bound(12, 250, 0.02, math.inf) == 24.0
    assert lemma_a12_bound(12, 250, 0.02, 0.0) == pytest.approx(24 * 0.02)


def _pop(rng, sizes=(8, 12, 20)):
    c = np.repeat(np.arange(len(sizes)), sizes)
    y0 = rng.integers(-5, 6, c.size).astype(float)
    y1 = np.clip(y0 + rng.integers(0, 2, c.size), -5, 6)
    return y0, y1, c


def test_var_nodp_and_phi_match_loops():
    rng = np.random.default_rng(0)
    y0, y1, c = _pop(rng)
    n1c = np.array([4, 6, 10])
    assert var_nodp_exact(y0, y1, c, n1c) == pytest.approx(var_nodp_loop(y0, y1, c, n1c), rel=1e-12)
    p0, p1 = phi(y0, y1, c, n1c)
    n = c.size
    ref0 = sum(
        (np.sum(c == k) / n) ** 2 * s2(list(y0[c == k])) / (np.sum(c == k) - n1c[k])
        for k in range(3)
    )
    ref1 = sum((np.sum(c == k) / n) ** 2 * s2(list(y1[c == k])) / n1c[k] for k in range(3))
    assert (p0, p1) == pytest.approx((ref0, ref1), rel=1e-12)


def test_exact_cond_var_matches_eq_26_with_explicit_inverse():
    """Spec §3.4: sum_i w_i^2 Var(y_hat_i) equals the sum over units of w_i^2
    (Q^{-T}y)^2-moments."""
    rng = np.random.default_rng(1)
    K, lam = 5, 0.7
    space = ResponseSpace(np.arange(K) - 2.0)
    s = np.repeat([0, 1], 6)
    z = np.tile([0, 1], 6)
    g = 2 * s + z
    y_idx = rng.integers(0, K, 12)
    q = rng.dirichlet(np.ones(K), (1, 4))
    w = unit_weights(s, z, 2)[0]
    got = exact_cond_var(space.values[y_idx], g, w, q, lam, space)[0]
    ref = 0.0
    for i in range(12):
        Q = (1 - lam) * np.eye(K) + lam * np.outer(q[0, g[i]], np.ones(K))
        coef = space.values @ np.linalg.inv(Q)  # y_hat value per output
        p = Q[:, y_idx[i]]
        ref += w[i] ** 2 * (p @ coef**2 - (p @ coef) ** 2)
    assert got == pytest.approx(ref, rel=1e-10)


def test_uniform_var_binary_matches_eq_9():
    """Eq. (9): for Y = {0,1}, C = 1: Var = Var_NoDP + n/(n0 n1) (lam/2)(1-lam/2)/(1-lam)^2."""
    rng = np.random.default_rng(2)
    n = 40
    y0 = rng.integers(0, 2, n).astype(float)
    y1 = rng.integers(0, 2, n).astype(float)
    c = np.zeros(n, int)
    lam = 0.6
    got = uniform_var_exact(y0, y1, c, np.array([15]), ResponseSpace([0, 1]), lam)
    # eq. (9) is stated for Y = {0, 1}; the cluster-mean terms it absorbs are exactly the ones below
    base = var_nodp_exact(y0, y1, c, np.array([15]))
    n1, n0 = 15, 25
    extra = n / (n0 * n1) * (lam / 2) * (1 - lam / 2) / (1 - lam) ** 2
    mean_terms = lam / (1 - lam) * (y0.mean() / n0 + y1.mean() / n1) - 2 * lam * 0.5 / (1 - lam) * (
        y0.mean() / n0 + y1.mean() / n1
    )
    assert got == pytest.approx(base + extra + mean_terms, rel=1e-12)
    assert mean_terms == pytest.approx(
        0.0, abs=1e-15
    )  # for Y = {0,1}: y2bar_c = ybar_c, ybar = 1/2
