"""Monte Carlo checks of unbiasedness and the variance formulas (spec cluster_dp.md §3.8 items 5-8,
10-12).

Marked slow: run with ``pytest -m slow tests/service/cluster_dp``.
"""

import numpy as np
import pytest
from scipy import stats

from dpcausal.cluster_dp import (
    ResponseSpace,
    exact_cond_var,
    lemma_a12_bound,
    noisy_histogram,
    noisy_histogram_var,
    noisy_ht,
    noisy_ht_var,
    phi,
    qtilde,
    thm35_bound,
    uniform_var_exact,
    unit_weights,
    var_nodp_exact,
)
from dpcausal.cluster_dp.data import Population, assign_balanced, draw_subpopulation, make_gmm
from dpcausal.cluster_dp.estimation import debias, stratified_dim
from dpcausal.cluster_dp.mechanisms import group_counts, noisy_priors, resample
from reproduce.cluster_dp.simulate import simulate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sub():
    return draw_subpopulation(np.random.default_rng(0), make_gmm(1))


def _fixed_z_prior(sub, rng, lam=0.8, gamma=0.02, sigma=10.0):
    z = assign_balanced(rng, sub.cidx)[0]
    y_idx = np.where(z == 1, sub.space.index(sub.y1), sub.space.index(sub.y0))
    g = 2 * sub.cidx + z
    q = noisy_priors(group_counts(y_idx, g, 6, 12), gamma, sigma, rng)
    return z, y_idx, g, q


def test_conditional_unbiasedness_and_exact_conditional_variance(sub):
    """Items 5 and 6: z and w fixed, 2e4 resampling runs."""
    rng = np.random.default_rng(1)
    lam, R = 0.8, 20_000
    z, y_idx, g, q = _fixed_z_prior(sub, rng, lam)
    vals = sub.space.values
    taus = []
    for _ in range(R // 1000):
        yt = resample(y_idx, g, np.repeat(q, 1000, axis=0), lam, rng)
        m = np.repeat(q, 1000, axis=0) @ vals
        taus.append(stratified_dim(debias(vals[yt], m[:, g], lam), sub.cidx, z, 3)[0])
    tau = np.concatenate(taus)
    tau_nodp = stratified_dim(vals[y_idx], sub.cidx, z, 3)[0][0]
    se = tau.std(ddof=1) / np.sqrt(R)
    assert abs(tau.mean() - tau_nodp) < 4 * se
    exact = exact_cond_var(vals[y_idx], g, unit_weights(sub.cidx, z, 3), q, lam, sub.space)[0]
    assert tau.var(ddof=1) == pytest.approx(exact, rel=0.05)


def test_total_variance_and_thm35_bound(sub):
    """Var_{DP,z} = Var_NoDP + E[exact cond var] (§3.4) and item 10: gap <= Theorem 3.5 bound."""
    rng = np.random.default_rng(2)
    lam, gamma, sigma = 0.8, 0.02, 10.0
    tau, vhat = simulate(sub, "cluster", lam, gamma, sigma, 20_000, rng)
    n1c = np.bincount(sub.cidx) // 2
    v_nodp = var_nodp_exact(sub.y0, sub.y1, sub.cidx, n1c)
    # analytic: E_z E_w of the exact conditional variance, by MC over (z, w) only
    z = assign_balanced(rng, sub.cidx, 2000)
    y_idx = np.where(z == 1, sub.space.index(sub.y1), sub.space.index(sub.y0))
    g = 2 * sub.cidx + z
    q = noisy_priors(group_counts(y_idx, g, 6, 12), gamma, sigma, rng)
    cond = exact_cond_var(
        sub.space.values[y_idx], g, unit_weights(sub.cidx, z, 3), q, lam, sub.space
    )
    assert tau.var(ddof=1) == pytest.approx(v_nodp + cond.mean(), rel=0.05)
    assert abs(tau.mean() - 1.0) < 4 * tau.std() / np.sqrt(tau.size)  # E_{DP,z} = tau = 1
    gap = tau.var(ddof=1) - v_nodp
    first, second = thm35_bound(
        np.column_stack([np.bincount(sub.cidx) - n1c, n1c]),
        *phi(sub.y0, sub.y1, sub.cidx, n1c),
        sub.space,
        lam,
        gamma,
        sigma,
    )
    assert 0 <= gap <= first + second
    # V_hat (§3.6) is conservative on average and CIs cover
    assert vhat.mean() >= tau.var(ddof=1) * 0.95
    cover = np.mean(np.abs(tau - 1.0) <= 1.959963984540054 * np.sqrt(vhat))
    assert cover >= 0.94


def test_uniform_variance_formula_and_eq9():
    """Item 7: Uniform-Prior MC variance over (z, DP) vs §3.5; binary case eq. (9)."""
    rng = np.random.default_rng(3)
    sub = draw_subpopulation(rng, make_gmm(2), sizes=(100, 200, 300))
    n1c = np.bincount(sub.cidx) // 2
    for lam in (0.5, 0.8):
        tau, _ = simulate(sub, "uniform", lam, 0, 0, 40_000, rng, chunk=2000)
        assert tau.var(ddof=1) == pytest.approx(
            uniform_var_exact(sub.y0, sub.y1, sub.cidx, n1c, sub.space, lam), rel=0.05
        )
    n = 200
    y0 = rng.integers(0, 2, n).astype(float)
    binary = Population(
        y0, np.maximum(y0, rng.integers(0, 2, n)), np.zeros(n, np.int64), ResponseSpace([0, 1])
    )
    lam = 0.6
    tau, _ = simulate(binary, "uniform", lam, 0, 0, 40_000, rng, chunk=4000)
    eq9 = (
        var_nodp_exact(binary.y0, binary.y1, binary.cidx, np.array([100]))
        + (n / (100 * 100)) * (lam / 2) * (1 - lam / 2) / (1 - lam) ** 2
    )
    assert tau.var(ddof=1) == pytest.approx(eq9, rel=0.05)


@pytest.mark.parametrize("mode", ["paper", "strict"])
def test_aggregate_baseline_variances(sub, mode):
    """Item 8: Noisy-HT / Noisy-Histogram MC variance over (z, noise) vs §2.4 / §2.5."""
    rng = np.random.default_rng(4)
    R, eps = 4000, 1.0
    z_all = assign_balanced(rng, sub.cidx, R)
    ht, hist = np.empty(R), np.empty(R)
    for r in range(R):
        y = np.where(z_all[r] == 1, sub.y1, sub.y0)
        ht[r] = noisy_ht(y, z_all[r], sub.cidx, sub.space, eps, mode, random_state=rng)
        hist[r] = noisy_histogram(y, z_all[r], sub.cidx, sub.space, eps, mode, random_state=rng)
    n1c = np.bincount(sub.cidx) // 2
    cells = np.column_stack([np.bincount(sub.cidx) - n1c, n1c])
    v0 = var_nodp_exact(sub.y0, sub.y1, sub.cidx, n1c)
    assert ht.var(ddof=1) == pytest.approx(noisy_ht_var(v0, cells, sub.space, eps, mode), rel=0.07)
    assert hist.var(ddof=1) == pytest.approx(
        noisy_histogram_var(v0, cells, sub.space, eps, mode), rel=0.07
    )
    assert abs(ht.mean() - 1) < 4 * ht.std() / np.sqrt(R)


def test_lemma_a12_monte_carlo_below_bound():
    """Item 11: E_w ||q_t - p_hat||_1 <= Lemma A.12 bound (K=12, n=250, gamma=0.02, sigma=10)."""
    rng = np.random.default_rng(5)
    p_hat = np.bincount(rng.integers(0, 12, 250), minlength=12) / 250
    w = rng.laplace(0, 10 / 250, (20_000, 12))
    l1 = np.abs(qtilde(p_hat, w, 0.02) - p_hat).sum(axis=1).mean()
    assert l1 <= lemma_a12_bound(12, 250, 0.02, 10)


def test_exp4_unbiased_and_gaussian(sub):
    """Item 12: |mean| < 3 sd/sqrt(R); normality p-value computed (reported, not asserted)."""
    rng = np.random.default_rng(6)
    tau, _ = simulate(sub, "cluster", 0.8, 0.02, 10.0, 500, rng)
    err = tau - 1.0
    assert abs(err.mean()) < 3 * err.std(ddof=1) / np.sqrt(err.size)
    assert 0 <= stats.shapiro(err).pvalue <= 1
