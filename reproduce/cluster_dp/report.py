"""Reproduction report for Cluster-DP: deterministic targets T1-T8 and qualitative claims Q1-Q7.

Pure text (markdown) from the experiment DataFrames of :mod:`reproduce.cluster_dp`;
spec cluster_dp.md §4.9. Each claim is judged by an explicit, stated criterion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from dpcausal.cluster_dp.calibration import eps_total, lam_for, uniform_eps, uniform_lam
from dpcausal.cluster_dp.data import make_gmm
from dpcausal.cluster_dp.spaces import ResponseSpace
from dpcausal.cluster_dp.theory import a_term, lemma_a12_bound, thm35_bound
from reproduce.cluster_dp.experiments import normality_summary

GMM_SPACE = ResponseSpace(np.arange(-5, 7))


@dataclass(frozen=True)
class Check:
    """One reproduction target: what the spec prints, what we computed, and the verdict."""

    id: str
    quantity: str
    printed: str
    computed: str
    reproduced: bool
    reason: str = ""


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def targets() -> list[Check]:
    """T1-T8 and T10 of spec §4.9, recomputed from the library and compared at the printed
    digits."""
    out: list[Check] = []

    def add(tid: str, quantity: str, printed: list[str], values: list[float], digits: int) -> None:
        got = [_fmt(v, digits) for v in values]
        ok = got == printed
        out.append(
            Check(
                tid,
                quantity,
                " / ".join(printed),
                " / ".join(got),
                ok,
                "matches at the printed digits" if ok else "differs at the printed digits",
            )
        )

    add(
        "T1",
        "eps of default Cluster-DP (lambda=0.8, gamma=0.02, sigma=10), paper / strict",
        ["2.702690", "2.802690"],
        [eps_total(0.8, 0.02, 10, mode="paper"), eps_total(0.8, 0.02, 10, mode="strict")],
        6,
    )
    add(
        "T2",
        "eps of Uniform-Prior, K=12, lambda=0.8 / 0.5",
        ["1.386294", "2.564949"],
        [uniform_eps(0.8, 12), uniform_eps(0.5, 12)],
        6,
    )
    add(
        "T3",
        "Exp. 1.a lambda, gamma*K = 0.1/0.2/0.25/0.5/0.75/1.0 (paper mode)",
        ["0.999024", "0.998150", "0.997714", "0.995537", "0.993370", "0.991213"],
        [lam_for(0.2, 1e-4, gk / 12, 10, mode="paper") for gk in (0.1, 0.2, 0.25, 0.5, 0.75, 1.0)],
        6,
    )
    add(
        "T4",
        "Exp. 1.a Uniform lambda (eps=0.2, K=12), delta=1e-4 / pure",
        ["0.981786", "0.981884"],
        [uniform_lam(0.2, 12, 1e-4), uniform_lam(0.2, 12)],
        6,
    )
    add(
        "T5",
        "A(250) / A(500) / A(1000) at the defaults",
        ["48384.01", "29905.86", "23342.35"],
        [a_term(x, GMM_SPACE, 0.8, 0.02, 10) for x in (250, 500, 1000)],
        2,
    )
    cells = np.array([[250, 250], [500, 500], [1000, 1000]])
    add(
        "T6",
        "Theorem 3.5 second term, default 3,500-unit design",
        ["32.9086"],
        [thm35_bound(cells, 0.0, 0.0, GMM_SPACE, 0.8, 0.02, 10)[1]],
        4,
    )
    add(
        "T7",
        "Lemma A.12 bound, K=12, n=250, gamma=0.02, sigma=10",
        ["1.0623"],
        [lemma_a12_bound(12, 250, 0.02, 10)],
        4,
    )
    add(
        "T8",
        "YouTube eps(lambda), gamma=0.0125, sigma=5, lambda=0.5/0.8/0.9 (paper)",
        ["4.5944", "3.2445", "2.4914"],
        [eps_total(lam, 0.0125, 5, mode="paper") for lam in (0.5, 0.8, 0.9)],
        4,
    )
    pop = make_gmm(1)
    ok = (
        pop.space.K == 12
        and pop.space.values.tolist() == list(range(-5, 7))
        and float(np.mean(pop.y1 - pop.y0)) == 1.0
    )
    out.append(
        Check(
            "T10",
            "GMM outcome space and ATE",
            "K=12, Y={-5..6}, ATE=1",
            f"K={pop.space.K}, Y={{{int(pop.space.values[0])}..{int(pop.space.values[-1])}}}, "
            f"ATE={np.mean(pop.y1 - pop.y0):g}",
            ok,
            "exact",
        )
    )
    return out


def claims(r: dict[str, pd.DataFrame]) -> list[Check]:
    """Q1-Q7 from the experiment frames (keys exp1a, exp1b, exp2, exp3, exp4, exp5, exp6, exp7)."""
    out = []
    # Q1: Fig. 2(1.a)
    a = r["exp1a"].groupby(["mechanism", "gamma_k"])["var"].mean().unstack(0)
    g0, g1 = a.index.min(), a.index.max()
    uni = min(a.loc[g0, "uniform_stratified"], a.loc[g0, "uniform_unstratified"])
    small = a.loc[g0, "cluster"] < uni
    at_one = (
        min(a.loc[g1, "uniform_stratified"], a.loc[g1, "uniform_unstratified"])
        <= a.loc[g1, "cluster"]
    )
    out.append(
        Check(
            "Q1",
            "Fig. 2(1.a): Cluster-DP lowest at small gamma; Uniform lowest at gamma=1/K",
            "Cluster-DP << Uniform at gamma K = 0.1",
            f"gamma K={g0:g}: Cluster-DP {a.loc[g0, 'cluster']:.4g}, Cluster-Free "
            f"{a.loc[g0, 'cluster_free']:.4g}, Uniform {uni:.4g}; gamma K={g1:g}: Cluster-DP "
            f"{a.loc[g1, 'cluster']:.4g} vs Uniform {a.loc[g1, 'uniform_stratified']:.4g}",
            bool(small and at_one),
            "criterion: mean variance over sub-populations, Cluster-DP < Uniform at the smallest "
            "gamma. As spec §3.7 predicts, the dominant term of Cluster-DP is never below "
            "Uniform's at equal eps, so the ordering does not reproduce"
            if not small
            else "Cluster-DP below Uniform at small gamma",
        )
    )
    # Q2: Fig. 2(1.b)
    b = r["exp1b"][r["exp1b"]["best"]].groupby(["eps", "mechanism"])["var"].mean().unstack()
    b = b.assign(uniform=b[["uniform_stratified", "uniform_unstratified"]].min(axis=1))
    order = (b["cluster"] < 0.99 * b["cluster_free"]) & (b["cluster_free"] < 0.99 * b["uniform"])
    chosen = r["exp1b"][r["exp1b"]["best"] & (r["exp1b"]["mechanism"] == "cluster")]
    uni_share = float(np.mean(np.isinf(chosen["sigma"]) | (chosen["gamma_k"] == 1.0)))
    out.append(
        Check(
            "Q2",
            "Fig. 2(1.b): Cluster-DP < Cluster-Free-DP < Uniform along the eps curve",
            "strict ordering at every eps",
            f"ordering (1% margin) holds at {int(order.sum())} of "
            f"{len(order)} eps values; the optimiser picked gamma = 1/K for Cluster-DP in "
            f"{100 * uni_share:.0f}% of (sub-population, eps) cells",
            bool(order.all()),
            "criterion: mean over sub-populations of the minimum analytic "
            "variance over the (sigma, gamma) grid; curves coincide where the optimiser chooses "
            "the uniform prior (spec §3.7, A1)",
        )
    )
    # Q3: Fig. 2(1.c), per seed
    verdicts = []
    for seed, d in r["exp2"].groupby("seed"):
        p = d.pivot_table(index="beta", columns="lam", values="ratio")
        falls = all(stats.spearmanr(p.index, p[c]).statistic < -0.8 for c in p.columns)
        lower = p.iloc[-1][p.columns.min()] < p.iloc[-1][p.columns.max()]
        verdicts.append(
            (seed, falls and lower, p.iloc[0].round(3).tolist(), p.iloc[-1].round(3).tolist())
        )
    n_ok = sum(v[1] for v in verdicts)
    detail = "; ".join(
        f"seed {s}: {'yes' if ok else 'no'} (ratio at beta min {lo}, at beta max {hi})"
        for s, ok, lo, hi in verdicts
    )
    out.append(
        Check(
            "Q3",
            "Fig. 2(1.c): Var ratio falls with beta, lower at lambda=0.5",
            "monotone decrease; ratio(0.5) < ratio(0.8) at high beta",
            f"holds on {n_ok} of {len(verdicts)} super-population seeds: {detail}",
            n_ok == len(verdicts),
            "criterion per seed: Spearman(beta, ratio) < -0.8 for both "
            "lambdas and ratio(0.5) < ratio(0.8) at the largest beta; seed-dependent (spec A8): "
            "with weakly separated cluster means mu_c the ratio stays near 1",
        )
    )
    # Q4: Fig. 2(1.d)
    c = r["exp3"].pivot_table(index="lam", columns="mechanism", values="var")
    below = c["cluster"] < c["cluster_free"]
    out.append(
        Check(
            "Q4",
            "Fig. 2(1.d): Cluster-DP below Cluster-Free-DP (YouTube-like synthetic)",
            "below at every eps",
            f"below at {int(below.sum())} of {len(below)} lambda values "
            f"(ratio range {np.min(c['cluster'] / c['cluster_free']):.2f}-"
            f"{np.max(c['cluster'] / c['cluster_free']):.2f})",
            bool(below.all()),
            "criterion: Monte Carlo variance, stratified estimator for both; synthetic stand-in "
            "for the unavailable SNAP data",
        )
    )
    # Q5: Figs. 3/4/7
    s4, s7 = normality_summary(r["exp4"]["err"]), normality_summary(r["exp7"]["err"])
    ok5 = all(s["z_mean"] < 3 and s["shapiro_p"] > 0.01 for s in (s4, s7))
    out.append(
        Check(
            "Q5",
            "Figs. 3/4/7: tau_hat - tau centred at 0 and approximately Gaussian",
            "unbiased, Gaussian",
            f"GMM: mean {s4['mean']:.4f}, |mean|/se {s4['z_mean']:.2f}, "
            f"Shapiro p {s4['shapiro_p']:.3f} (R={s4['reps']}); "
            f"YouTube-like: mean {s7['mean']:.4f}, "
            f"|mean|/se {s7['z_mean']:.2f}, Shapiro p {s7['shapiro_p']:.3f} (R={s7['reps']})",
            ok5,
            "criterion: |mean| < 3 se and Shapiro-Wilk p > 0.01 for both",
        )
    )
    # Q6: Fig. 5
    e = r["exp5"]
    upper = bool((e["gap"] <= e["bound"]).all())
    lower_strict = int((e["gap"] >= e["first_term"]).sum())
    lower_mc = bool((e["gap"] >= e["first_term"] - 2 * e["gap_se"]).all())
    out.append(
        Check(
            "Q6",
            "Fig. 5: first term <= gap <= Theorem 3.5 bound",
            "gap inside the band",
            f"gap <= bound at every beta: {upper} (bound ~{e['bound'].mean():.1f} vs "
            f"gap {e['gap'].min():.3f}-{e['gap'].max():.3f}); "
            f"gap >= first term at {lower_strict} of "
            f"{len(e)} beta values, and within 2 MC s.e. at all: {lower_mc}",
            upper and lower_mc,
            "the upper edge is a theorem (and ~300x loose); the lower edge is only observed "
            "(spec §3.8 item 10), judged within 2 Monte Carlo standard errors",
        )
    )
    # Q7: Fig. 6
    f = (
        r["exp6"]
        .assign(abs_bias=lambda d: d["bias"].abs())
        .pivot_table(index="eps", columns="mechanism", values="abs_bias", aggfunc="mean")
    )
    smallest = f.idxmin(axis=1)
    ok7 = bool((smallest == "cluster_dp").all())
    out.append(
        Check(
            "Q7",
            "Fig. 6: Cluster-DP has the smallest one-shot conditional bias",
            "smallest at every eps",
            "mean |bias| per eps: "
            + "; ".join(
                f"eps {k:g}: " + ", ".join(f"{m} {f.loc[k, m]:.4f}" for m in f.columns)
                for k in f.index
            ),
            ok7,
            "criterion: mean over DP seeds of |mean over sub-populations of tau_hat - 1|. "
            "Under spec §4.8's protocol the resampling coins are fixed per super-population unit, "
            "so overlapping sub-populations share them and Cluster-DP's resampling noise does not "
            "average out, while Noisy-HT's bias is sum_c (n_c/n) eta_c W_c, small at n_{a,c} >= 250"
            if not ok7
            else "Cluster-DP smallest at every eps",
        )
    )
    return out


def _df_md(df: pd.DataFrame, fmt: str = ".4g", index: bool = True) -> str:
    """A DataFrame as a markdown table (no tabulate dependency)."""
    d = df.reset_index() if index else df
    head = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in d.columns]
    head = [h.strip(" /") or "-" for h in head]
    rows = [
        [format(v, fmt) if isinstance(v, (float, np.floating)) else str(v) for v in rec]
        for rec in d.itertuples(index=False)
    ]
    return _md_table(rows, head)


def _md_table(rows: list[list[str]], head: list[str]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render(
    results: dict[str, pd.DataFrame],
    figures: dict[str, str],
    settings: dict[str, object],
    timings: dict[str, float] | None = None,
) -> str:
    """The markdown report: settings, T-targets, Q-claims, figure links and the key tables."""
    t, q = targets(), claims(results)
    mark = {True: "reproduced", False: "NOT reproduced"}
    parts = [
        "# Cluster-DP reproduction (Javanmard, Mirrokni, Pouget-Abadie, ICML 2025)",
        "",
        (
            "Generated by `flows/reproduce_cluster_dp.py` (`dpcausal reproduce cluster-dp`) from "
            "`reproduce.cluster_dp`; spec `cluster_dp.md` §4. YouTube results use the "
            "**YouTube-like synthetic** stand-in (spec §4.2): the SNAP data cannot be fetched here."
        ),
        "",
        "## Settings",
        "",
        _md_table([[k, str(v)] for k, v in settings.items()], ["setting", "value"]),
        "",
        (
            f"## Deterministic targets (spec §4.9): {sum(c.reproduced for c in t)} of {len(t)} "
            "reproduced"
        ),
        "",
        _md_table(
            [[c.id, c.quantity, c.printed, c.computed, mark[c.reproduced]] for c in t],
            ["id", "quantity", "spec", "computed", "verdict"],
        ),
        "",
        f"## Qualitative claims: {sum(c.reproduced for c in q)} of {len(q)} reproduced",
        "",
        "The spec expects Q1 and Q2 not to reproduce (§3.7, §6 A1).",
        "",
        _md_table(
            [[c.id, c.quantity, c.computed, mark[c.reproduced], c.reason] for c in q],
            ["id", "claim", "what we measured", "verdict", "criterion / reason"],
        ),
        "",
        "## Figures",
        "",
    ]
    parts += [f"- {name}: ![{name}]({path})" for name, path in figures.items()]
    r = results
    a = r["exp1a"].groupby(["gamma_k", "mechanism"])["var"].agg(["mean", "std"]).unstack()
    b = r["exp1b"][r["exp1b"]["best"]].groupby(["eps", "mechanism"])["var"].mean().unstack()
    parts += [
        "",
        "## Data",
        "",
        "### Exp. 1.a (mean variance over sub-populations; paper accounting)",
        "",
        a["mean"].pipe(_df_md, ".4g"),
        "",
        "### Exp. 1.b (minimum analytic variance over the grid, mean over sub-populations)",
        "",
        b.pipe(_df_md, ".4g"),
        "",
        "Configurations chosen for Cluster-DP:",
        "",
        r["exp1b"][r["exp1b"]["best"] & (r["exp1b"]["mechanism"] == "cluster")][
            ["subpop", "eps", "sigma", "gamma_k", "lam", "eps_t", "var"]
        ].pipe(_df_md, ".4g", False),
        "",
        "### Exp. 2 (variance ratio Cluster-DP / Cluster-Free-DP)",
        "",
        r["exp2"]
        .pivot_table(index="beta", columns=["seed", "lam"], values="ratio")
        .pipe(_df_md, ".3f"),
        "",
        "### Exp. 3 (YouTube-like synthetic)",
        "",
        r["exp3"]
        .pivot_table(index=["lam", "eps_paper"], columns="mechanism", values="var")
        .assign(var_nodp=r["exp3"].groupby("lam")["var_nodp"].first().to_numpy())
        .pipe(_df_md, ".3g"),
        "",
        "### Exp. 5 (Theorem 3.5)",
        "",
        r["exp5"].pipe(_df_md, ".4g", False),
        "",
        "### Exp. 6 (signed one-shot bias: mean and sd over DP seeds)",
        "",
        r["exp6"]
        .groupby(["eps", "mechanism"])["bias"]
        .agg(["mean", "std"])
        .unstack()
        .pipe(_df_md, ".4f"),
    ]
    if timings:
        parts += [
            "",
            "## Run time (s)",
            "",
            _md_table([[k, f"{v:.1f}"] for k, v in timings.items()], ["part", "seconds"]),
        ]
    parts += [
        "",
        "## Spec errata applied",
        "",
        (
            "- E1/E7: strict accounting charges 2/sigma for the published q_tilde (the paper's "
            "1/sigma assumes sensitivity 1/n; substitution moves mass between two bins). "
            "Exp. 1.a is infeasible under strict accounting (2/sigma = eps = 0.2) and is run in "
            "paper mode only."
        ),
        (
            "- E2/E3: Noisy-Histogram and Noisy-HT use the paper's scales here (paper mode, for "
            "the figure); the library defaults to the strict scales."
        ),
        (
            "- E5: A(x) uses the appendix product form; the Lemma A.11 constant is "
            "(lambda sqrt K + 1)/(1-lambda)."
        ),
        "",
    ]
    return "\n".join(parts)
