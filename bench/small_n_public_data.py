"""Issue 33's public data sets: the private CI over the non-private one at zeta = 1, for
``estimator="auto"`` (its choice shown), the AIPW ensemble and, in randomized trials, ``lin``.

The reference is the non-private difference-in-means CI (Welch) in randomized trials and Lin's
regression-adjusted CI (OLS with treatment x centred-covariate interactions, HC2) in
observational data. Public bounds are fixed from the variables' definitions, not their values.
Each figure is the median over 40 releases (3 for the ensemble), evaluation mode with seeded
exact noise. Needs ``causaldata`` (bench/requirements.txt). Measured (load average 14 on 2
cores, which changes no figure):

| data (design, n, d) | auto | ratio | AIPW ensemble | lin |
|---|---|---|---|---|
| HIV incentive, Thornton (randomized, 2,829, 3; got the result) | dim | 1.00x | 6.1x | 1.05x |
| insurance information (randomized, 1,395, 5; take-up) | dim | 1.00x | 12.1x | 1.06x |
| NSW job training (randomized, 445, 8; earnings in $1000, [0, 61]) | dim | 1.31x | 46x | 6.0x |
| schooling, Card (observational, 3,010, 5; log wage) | lin | 1.58x | 36x | |
| smoking cessation, NHEFS (observational, 1,566, 18; weight change) | lin | 13.8x | 105x | |

(NHEFS: mean 18.1x over the 40 releases; its CI width varies with the noise of the covariate
scatter.) Run: ``.venv/bin/python bench/small_n_public_data.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import statsmodels.api as sm
from causaldata import close_college, nhefs_complete, nsw_mixtape, social_insure, thornton_hiv

from dpcausal import PrivateATE

Z = 1.959964


def dim_half(A: np.ndarray, Y: np.ndarray) -> float:
    y1, y0 = Y[A == 1], Y[A == 0]
    return float(Z * np.sqrt(y1.var(ddof=1) / len(y1) + y0.var(ddof=1) / len(y0)))


def lin_half(X: np.ndarray, A: np.ndarray, Y: np.ndarray) -> float:
    Xc = X - X.mean(0)
    design = np.column_stack([np.ones(len(A)), A, Xc, A[:, None] * Xc])
    return float(Z * sm.OLS(Y, design).fit(cov_type="HC2").bse[1])


def measure(name: str, df: pd.DataFrame, a: str, y: str, covs: list[str],
            ybounds: tuple[float, float], cbounds: list[tuple[float, float]], design: str,
            reps: int = 40) -> None:
    df = df[[a, y, *covs]].dropna()
    X, A, Y = df[covs].to_numpy(float), df[a].to_numpy(int), df[y].to_numpy(float)
    ref = dim_half(A, Y) if design == "randomized" else lin_half(X, A, Y)
    print(f"{name}: n={len(Y)} d={X.shape[1]} {design}; non-private half-width {ref:.4g}")
    for est in ("auto", "aipw") + (("lin",) if design == "randomized" else ()):
        ratios, chosen = [], set()
        for r in range(reps if est != "aipw" else 3):
            rel = PrivateATE(estimator=est, design=design, outcome_bounds=ybounds,
                             covariate_bounds=cbounds, zeta=1.0, noise_seed=r,
                             random_state=r).fit(X, A, Y, evaluation=True)
            ratios.append((rel.ci[1] - rel.ci[0]) / (2 * ref))
            chosen.add(rel.estimator)
        print(f"   {est:5s} -> {','.join(sorted(chosen)):5s} median {np.median(ratios):.2f}x "
              f"mean {np.mean(ratios):.2f}x")


def main() -> None:
    warnings.simplefilter("ignore")
    measure("HIV incentive (Thornton)", thornton_hiv.load_pandas().data, "any", "got",
            ["age", "distvct", "hiv2004"], (0, 1), [(0, 100), (0, 10), (-1, 1)], "randomized")
    measure("insurance information", social_insure.load_pandas().data, "intensive",
            "takeup_survey", ["age", "agpop", "ricearea_2010", "disaster_prob", "male"], (0, 1),
            [(15, 100), (1, 20), (0, 100), (0, 100), (0, 1)], "randomized")
    nsw = nsw_mixtape.load_pandas().data
    nsw = nsw.assign(re74=nsw.re74 / 1000, re75=nsw.re75 / 1000, re78=nsw.re78 / 1000)
    measure("NSW job training (earnings, $1000)", nsw, "treat", "re78",
            ["age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75"], (0, 61),
            [(16, 60), (0, 18), (0, 1), (0, 1), (0, 1), (0, 1), (0, 40), (0, 40)],
            "randomized")
    measure("schooling (Card)", close_college.load_pandas().data, "nearc4", "lwage",
            ["educ", "black", "smsa", "south", "exper"], (4.5, 8.0),
            [(0, 20), (0, 1), (0, 1), (0, 1), (0, 25)], "observational")
    nh, covs, bounds = nhefs_design()
    measure("smoking cessation (NHEFS)", nh, "qsmk", "wt82_71", covs, (-50, 50), bounds,
            "observational")


def nhefs_design() -> tuple[pd.DataFrame, list[str], list[tuple[float, float]]]:
    """NHEFS with dummies and squares of its confounders, the covariates and their bounds."""
    nh = nhefs_complete.load_pandas().data
    dummies = {f"ed{k}": nh.education == k for k in (2, 3, 4, 5)}
    dummies |= {f"ex{k}": nh.exercise == k for k in (1, 2)}
    dummies |= {f"ac{k}": nh.active == k for k in (1, 2)}
    nh = nh.assign(age2=nh.age**2, si2=nh.smokeintensity**2, sy2=nh.smokeyrs**2,
                   wt2=nh.wt71**2, **{k: v.astype(int) for k, v in dummies.items()})
    covs = ["sex", "race", "age", "age2", "ed2", "ed3", "ed4", "ed5", "smokeintensity", "si2",
            "smokeyrs", "sy2", "ex1", "ex2", "ac1", "ac2", "wt71", "wt2"]
    bounds = [(0, 1), (0, 1), (20, 80), (400, 6400), (0, 1), (0, 1), (0, 1), (0, 1), (0, 80),
              (0, 6400), (0, 70), (0, 4900), (0, 1), (0, 1), (0, 1), (0, 1), (30, 160),
              (900, 25600)]
    return nh, covs, bounds


if __name__ == "__main__":
    main()
