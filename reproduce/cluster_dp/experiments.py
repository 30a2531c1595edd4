"""Experiments 1-7 of spec cluster_dp.md §4 as pure functions returning DataFrames.

Repetition counts are parameters (the paper uses R = 500 and 50 sub-populations; the flow that
writes the report uses fewer and says so). Every function takes a ``seed`` for the GMM
super-population and a ``rng_seed`` from which one independent stream per experiment part is
spawned (spec §5 RNG).
Results from :func:`make_youtube_like` are "YouTube-like synthetic", never "YouTube".

Two variance read-outs are used:
* Monte Carlo (``simulate``): sample variance over R repetitions of (z, Laplace noise, resampling);
* analytic (``analytic_var``, spec §3.4): Var_z[tau_hat_NoDP] (A.2) + the mean over R draws of
  (z, w) of the exact conditional DP variance; no resampling, so far less Monte Carlo noise.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from dpcausal.cluster_dp.baselines import noisy_histogram_scales, noisy_ht_scales
from dpcausal.cluster_dp.calibration import eps1, eps_total, lam_for, uniform_lam
from dpcausal.cluster_dp.data import (
    Population,
    assign_balanced,
    draw_subpopulation,
    make_gmm,
    make_youtube_like,
)
from dpcausal.cluster_dp.estimation import stratified_dim, unit_weights
from dpcausal.cluster_dp.mechanisms import apply_resampling, group_counts, noisy_priors, qtilde
from dpcausal.cluster_dp.theory import (
    exact_cond_var,
    phi,
    thm35_bound,
    uniform_var_exact,
    var_nodp_exact,
)
from reproduce.cluster_dp.simulate import simulate

SUB_SIZES = (500, 1000, 2000)
BETAS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 4.9)


def _streams(rng_seed: int, k: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(rng_seed).spawn(k)]


def _n1c(pop: Population) -> np.ndarray:
    return np.bincount(pop.cidx, minlength=pop.C) // 2


def _fixed_picks(pop: Population, rng: np.random.Generator) -> np.ndarray:
    """Indices of one default sub-population (500/1000/2000 per cluster), reused across beta
    (CRN)."""
    return np.sort(
        np.concatenate(
            [
                rng.choice(np.flatnonzero(pop.cidx == c), s, replace=False)
                for c, s in enumerate(SUB_SIZES)
            ]
        )
    )


def var_nodp(pop: Population) -> float:
    """Var_z[tau_hat_NoDP] under balanced within-cluster assignment (A.2, spec §1.1)."""
    return var_nodp_exact(pop.y0, pop.y1, pop.cidx, _n1c(pop))


def analytic_var(
    pop: Population,
    mechanism: str,
    lam: float,
    gamma: float,
    sigma: float,
    draws: int,
    rng: np.random.Generator,
    strata: str = "clusters",
) -> float:
    """Var_{DP,z}[tau_hat_Q] = Var_z[NoDP] + E_z E_w[Var_DP(tau_hat | z, q_t)] (spec §3.4, §3.5).

    Uniform-Prior uses the closed form of Theorem A.5 / Cor. A.6 (exact, no draws). Under balanced
    within-cluster assignment the stratified and unstratified non-private estimators coincide.
    """
    if mechanism == "uniform":
        if strata == "clusters":
            return uniform_var_exact(pop.y0, pop.y1, pop.cidx, _n1c(pop), pop.space, lam)
        zero = np.zeros_like(pop.cidx)
        return uniform_var_exact(pop.y0, pop.y1, zero, np.array([_n1c(pop).sum()]), pop.space, lam)
    space, cidx, C = pop.space, pop.cidx, pop.C
    z = assign_balanced(rng, cidx, draws)
    y_idx = np.where(z == 1, space.index(pop.y1), space.index(pop.y0))
    pooled = mechanism == "cluster_free"
    g = z if pooled else 2 * cidx + z
    q = noisy_priors(group_counts(y_idx, g, 2 if pooled else 2 * C, space.K), gamma, sigma, rng)
    s, S = (cidx, C) if strata == "clusters" else (np.zeros_like(cidx), 1)
    cond = exact_cond_var(space.values[y_idx], g, unit_weights(s, z, S), q, lam, space)
    return var_nodp(pop) + float(cond.mean())


# ---- Experiment 1: privacy-variance trade-off (Fig. 2 1.a, 1.b) ----------------------------------
def exp1a(
    seed: int = 1,
    reps: int = 500,
    n_subpops: int = 50,
    rng_seed: int = 11,
    eps: float = 0.2,
    delta: float = 1e-4,
    sigma: float = 10.0,
    gamma_k: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
) -> pd.DataFrame:
    """Fig. 2(1.a): Monte Carlo variance vs gamma at eps = 0.2, delta = 1e-4 (paper accounting;
    spec §4.3).

    Strict accounting is infeasible here (2/sigma = eps), so only paper mode is run. Rows:
    subpop, mechanism, gamma_k, lam, var, var_nodp.
    """
    pop = make_gmm(seed)
    rng_sub, rng_sim = _streams(rng_seed, 2)
    K = pop.space.K
    lam_u = uniform_lam(eps, K, delta)
    rows = []
    for s_i in range(n_subpops):
        sub = draw_subpopulation(rng_sub, pop, SUB_SIZES)
        v0 = var_nodp(sub)
        for gk in gamma_k:
            lam = lam_for(eps, delta, gk / K, sigma, mode="paper")
            for mech, strata in (("cluster", "clusters"), ("cluster_free", "none")):
                tau, _ = simulate(sub, mech, lam, gk / K, sigma, reps, rng_sim, strata=strata)
                rows.append((s_i, mech, gk, lam, tau.var(ddof=1), v0))
        for name, strata in (("uniform_stratified", "clusters"), ("uniform_unstratified", "none")):
            tau, _ = simulate(sub, "uniform", lam_u, 0, 0, reps, rng_sim, strata=strata)
            for gk in gamma_k:
                rows.append((s_i, name, gk, lam_u, tau.var(ddof=1), v0))
    return pd.DataFrame(rows, columns=["subpop", "mechanism", "gamma_k", "lam", "var", "var_nodp"])


def exp1b(
    seed: int = 1,
    draws: int = 200,
    n_subpops: int = 5,
    rng_seed: int = 12,
    delta: float = 1e-4,
    eps_grid: tuple[float, ...] = (0.2, 0.5, 1, 2, 3, 4, 5, 6, 8),
    sigmas: tuple[float, ...] = (10.0, 20.0, math.inf),
    gamma_k: tuple[float, ...] = (0.01, 0.1, 1.0),
    mode: str = "paper",
) -> pd.DataFrame:
    """Fig. 2(1.b): minimum analytic variance over the (sigma, gamma) grid per eps (spec §4.3).

    Returns the full grid (one row per feasible cell) with column ``best`` marking each minimum;
    infeasible cells (eps_t <= 0) are skipped, sigma = inf only with gamma = 1/K.
    """
    pop = make_gmm(seed)
    K = pop.space.K
    rng_sub, rng_sim = _streams(rng_seed, 2)
    rows = []
    for s_i in range(n_subpops):
        sub = draw_subpopulation(rng_sub, pop, SUB_SIZES)
        for eps in eps_grid:
            lam_u = uniform_lam(eps, K, delta)
            for name, strata in (
                ("uniform_stratified", "clusters"),
                ("uniform_unstratified", "none"),
            ):
                rows.append(
                    (
                        s_i,
                        name,
                        eps,
                        math.inf,
                        1.0,
                        lam_u,
                        eps,
                        analytic_var(sub, "uniform", lam_u, 1 / K, math.inf, 0, rng_sim, strata),
                    )
                )
            for sigma in sigmas:
                for gk in gamma_k:
                    if math.isinf(sigma) and gk != 1.0:
                        continue
                    if eps - eps1(sigma, gk / K, mode) <= 0:
                        continue
                    lam = lam_for(eps, delta, gk / K, sigma, mode=mode)
                    for mech, strata in (("cluster", "clusters"), ("cluster_free", "none")):
                        v = analytic_var(sub, mech, lam, gk / K, sigma, draws, rng_sim, strata)
                        rows.append(
                            (s_i, mech, eps, sigma, gk, lam, eps - eps1(sigma, gk / K, mode), v)
                        )
    df = pd.DataFrame(
        rows, columns=["subpop", "mechanism", "eps", "sigma", "gamma_k", "lam", "eps_t", "var"]
    )
    best = df.groupby(["subpop", "mechanism", "eps"])["var"].transform("min")
    return df.assign(best=df["var"] == best)


# ---- Experiment 2: cluster quality (Fig. 2 1.c) --------------------------------------------------
def exp2(
    seeds: tuple[int, ...] = (1,),
    draws: int = 500,
    rng_seed: int = 13,
    betas: tuple[float, ...] = BETAS,
    lams: tuple[float, ...] = (0.5, 0.8),
    gamma: float = 0.02,
    sigma: float = 10.0,
) -> pd.DataFrame:
    """Fig. 2(1.c): Var[Cluster-DP]/Var[Cluster-Free-DP] at equal (lambda, gamma, sigma) vs beta
    (§4.4).

    Common random numbers: per super-population seed, the same mu_c, w_i, sub-population and (z, w)
    stream for every beta. Both use the stratified estimator; variances are analytic (§3.4). Several
    ``seeds`` give the seed sensitivity that spec §4.1/A8 asks for.
    """
    rows = []
    for seed in seeds:
        rng_sub, rng_sim = _streams(rng_seed + 1000 * seed, 2)
        picks = _fixed_picks(make_gmm(seed, beta=0.0), rng_sub)
        crn = int(rng_sim.integers(2**63))
        for beta in betas:
            sub = make_gmm(seed, beta=beta).subset(picks)
            p0, p1 = phi(sub.y0, sub.y1, sub.cidx, _n1c(sub))
            for lam in lams:
                v = {
                    m: analytic_var(sub, m, lam, gamma, sigma, draws, np.random.default_rng(crn))
                    for m in ("cluster", "cluster_free")
                }
                rows.append(
                    (
                        seed,
                        beta,
                        lam,
                        v["cluster"],
                        v["cluster_free"],
                        v["cluster"] / v["cluster_free"],
                        p0 + p1,
                        var_nodp(sub),
                    )
                )
    return pd.DataFrame(
        rows,
        columns=[
            "seed",
            "beta",
            "lam",
            "var_cluster",
            "var_cluster_free",
            "ratio",
            "phi_sum",
            "var_nodp",
        ],
    )


# ---- Experiment 3 and 7: YouTube-like synthetic (Fig. 2 1.d, Fig. 7) -----------------------------
def exp3(
    seed: int = 0,
    reps: int = 500,
    rng_seed: int = 14,
    lams: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    gamma: float = 0.0125,
    sigma: float = 5.0,
) -> pd.DataFrame:
    """Fig. 2(1.d) on YouTube-like synthetic data: Cluster-DP vs Cluster-Free-DP, both stratified
    (§4.5)."""
    pop = make_youtube_like(seed)
    (rng,) = _streams(rng_seed, 1)
    v0 = var_nodp(pop)
    rows = []
    for lam in lams:
        e = eps_total(lam, gamma, sigma, mode="paper")
        for mech in ("cluster", "cluster_free"):
            tau, _ = simulate(pop, mech, lam, gamma, sigma, reps, rng, strata="clusters", chunk=25)
            rows.append((lam, e, mech, tau.var(ddof=1), v0, tau.mean()))
    return pd.DataFrame(rows, columns=["lam", "eps_paper", "mechanism", "var", "var_nodp", "mean"])


def exp7(
    seed: int = 0,
    reps: int = 500,
    rng_seed: int = 17,
    lam: float = 0.8,
    gamma: float = 0.0125,
    sigma: float = 5.0,
) -> pd.DataFrame:
    """Fig. 7: tau_hat - tau over realisations of (outcome noise w_i, z, DP) on YouTube-like data
    (§4.8)."""
    (rng,) = _streams(rng_seed, 1)
    rows = []
    for r in range(reps):
        pop = make_youtube_like(seed, noise_seed=r)
        tau_true = float(np.mean(pop.y1 - pop.y0))
        tau, _ = simulate(pop, "cluster", lam, gamma, sigma, 1, rng)
        rows.append((r, tau[0], tau_true))
    df = pd.DataFrame(rows, columns=["rep", "tau_hat", "tau"])
    return df.assign(err=df["tau_hat"] - df["tau"])


# ---- Experiment 4: bias and Gaussianity (Figs. 3, 4) ---------------------------------------------
def exp4(
    seed: int = 1,
    reps: int = 500,
    rng_seed: int = 15,
    lam: float = 0.8,
    gamma: float = 0.02,
    sigma: float = 10.0,
) -> pd.DataFrame:
    """Figs. 3/4: tau_hat_Q - tau over R realisations of (z, DP) on one default sub-population
    (§4.6)."""
    rng_sub, rng = _streams(rng_seed, 2)
    sub = draw_subpopulation(rng_sub, make_gmm(seed), SUB_SIZES)
    tau, vhat = simulate(sub, "cluster", lam, gamma, sigma, reps, rng)
    return pd.DataFrame({"rep": np.arange(reps), "err": tau - 1.0, "vhat": vhat})


def normality_summary(err: np.ndarray) -> dict[str, float]:
    """Mean, sd, |mean|/(sd/sqrt R) and Shapiro-Wilk p-value of errors (spec §3.8 item 12); the
    p-value is NaN below the test's minimum of 3 repetitions."""
    err = np.asarray(err, float)
    sd = float(err.std(ddof=1))
    return {
        "mean": float(err.mean()),
        "sd": sd,
        "z_mean": float(abs(err.mean()) / (sd / np.sqrt(err.size))),
        "shapiro_p": float(stats.shapiro(err).pvalue) if err.size >= 3 else float("nan"),
        "reps": int(err.size),
    }


# ---- Experiment 5: Theorem 3.5 (Fig. 5) ----------------------------------------------------------
def exp5(
    seed: int = 1,
    reps: int = 500,
    rng_seed: int = 16,
    betas: tuple[float, ...] = BETAS,
    lam: float = 0.8,
    gamma: float = 0.02,
    sigma: float = 10.0,
) -> pd.DataFrame:
    """Fig. 5: empirical gap Var_hat_{DP,z} - Var_z[NoDP] against Theorem 3.5's band, beta swept
    (§4.7)."""
    rng_sub, rng = _streams(rng_seed, 2)
    picks = _fixed_picks(make_gmm(seed, beta=0.0), rng_sub)
    rows = []
    for beta in betas:
        sub = make_gmm(seed, beta=beta).subset(picks)
        n1c = _n1c(sub)
        tau, _ = simulate(sub, "cluster", lam, gamma, sigma, reps, rng)
        v0 = var_nodp(sub)
        emp_nodp = simulate(sub, "none", 0.0, 0.0, 0.0, reps, rng)[0].var(ddof=1)
        cells = np.column_stack([np.bincount(sub.cidx) - n1c, n1c])
        first, second = thm35_bound(
            cells, *phi(sub.y0, sub.y1, sub.cidx, n1c), sub.space, lam, gamma, sigma
        )
        v = tau.var(ddof=1)
        rows.append(
            (beta, v, v0, emp_nodp, v - v0, v * np.sqrt(2 / (reps - 1)), first, first + second)
        )
    return pd.DataFrame(
        rows,
        columns=[
            "beta",
            "var_dp",
            "var_nodp",
            "var_nodp_empirical",
            "gap",
            "gap_se",
            "first_term",
            "bound",
        ],
    )


# ---- Experiment 6: one-shot conditional bias (Fig. 6) --------------------------------------------
def exp6(
    seed: int = 1,
    n_dp_seeds: int = 50,
    n_subpops: int = 500,
    rng_seed: int = 18,
    eps_grid: tuple[float, ...] = (0.5, 1, 2, 3, 4, 5),
    gamma: float = 0.02,
    sigma: float = 10.0,
    mode: str = "paper",
) -> pd.DataFrame:
    """Fig. 6: bias of a one-shot release (DP randomness fixed) over sub-populations and z (§4.8).

    Per DP seed: standard Laplace W_c (Noisy-HT) and W_{a,c,y} (Noisy-Histogram and Cluster-DP),
    and per super-population unit a resampling coin and a uniform, all drawn once. Rows: dp_seed,
    eps, mechanism, bias (mean over sub-populations of tau_hat - 1).
    """
    pop = make_gmm(seed)
    space, K, C = pop.space, pop.space.K, pop.C
    vals = space.values
    rng_sub, rng_dp = _streams(rng_seed, 2)
    subs = np.stack([_fixed_picks(pop, rng_sub) for _ in range(n_subpops)])
    cidx = pop.cidx[subs[0]]  # same cluster layout in every sub-population
    z = assign_balanced(rng_sub, cidx, n_subpops)  # (P, n)
    y_idx = np.where(z == 1, space.index(pop.y1)[subs], space.index(pop.y0)[subs])
    g = 2 * cidx + z
    counts = group_counts(y_idx, g, 2 * C, K)  # (P, G, K)
    n_g = counts.sum(-1)
    p_hat = counts / n_g[..., None]
    cells = n_g[0].reshape(C, 2)
    wc = cells.sum(1) / cells.sum()
    tau_nodp, _ = stratified_dim(vals[y_idx], cidx, z, C)
    hist_means = (p_hat @ vals).reshape(n_subpops, C, 2)
    rows = []
    for d in range(n_dp_seeds):
        W = rng_dp.laplace(size=(2 * C, K))
        Wc = rng_dp.laplace(size=C)
        u_keep = rng_dp.random(pop.n)
        u_draw = rng_dp.random(pop.n)
        for eps in eps_grid:
            lam = lam_for(eps, 0.0, gamma, sigma, mode=mode)
            q = qtilde(p_hat, W[None] * (sigma / n_g[..., None]), gamma)
            yt = apply_resampling(y_idx, g, q, u_keep[subs] >= lam, u_draw[subs])
            m = np.take_along_axis(q @ vals, g, axis=1)
            t_cdp, _ = stratified_dim((vals[yt] - lam * m) / (1 - lam), cidx, z, C)
            eta_ht = noisy_ht_scales(cells, space, eps, mode)
            t_ht = tau_nodp + np.sum(wc * eta_ht * Wc)
            eta_h = noisy_histogram_scales(cells, eps, mode)  # (C, 2)
            noise_means = (W.reshape(C, 2, K) @ vals) * eta_h
            t_hist = np.sum(
                wc
                * (
                    (hist_means[..., 1] + noise_means[:, 1])
                    - (hist_means[..., 0] + noise_means[:, 0])
                ),
                axis=1,
            )
            for name, t in (("cluster_dp", t_cdp), ("noisy_ht", t_ht), ("noisy_histogram", t_hist)):
                rows.append((d, eps, name, float(np.mean(t) - 1.0)))
    return pd.DataFrame(rows, columns=["dp_seed", "eps", "mechanism", "bias"])
