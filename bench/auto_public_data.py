r"""Issue 39, "Done when" 4 and 5: on public data at zeta = 1, ``auto``'s released CI against the
narrowest among the estimators it may take, and ``plan``'s predicted half-width for its choice
against the median released one.

Per data set (public bounds as in ``bench/small_n_public_data.py``, fixed from the variables'
definitions), each candidate ``auto`` may take for the declared design and assumptions is
released ``RELEASES`` times (evaluation mode, seeded exact noise): its median released
half-width, ``auto``'s choice (:meth:`dpcausal.PrivateATE.resolved_estimator`), the ratio of the
choice's median to the narrowest candidate's (target <= 1.25), and ``plan``'s expected
half-width for the choice (``compare_estimators``) over its median released one (target within
0.70-1.30). The facts stated, as a user would: ``treated_share`` from the design (a trial's
assignment share; the observational data's published counts: 185 NSW treated beside 15,992 CPS
controls, 403 quitters of 1,566 in NHEFS, 2,053 of 3,010 near a college); ``outcome_sd`` the
data's own pooled within-arm sd, an oracle: the most a pre-release could learn. Needs
``causaldata`` (dev group). Run: ``.venv/bin/python bench/auto_public_data.py [releases]``.

Measured 7 Dec 2026 (load average 3.9 -> 6.0 on the 2 shared cores, which changes no
figure); each cell: median released half-width (plan's expected one):

| data (n, d, treated share, outcome sd) | released (plan) | auto | /narrowest | plan/rel. |
|---|---|---|---|---|
| NSW + CPS, observational (16,177, 8, 0.011, 9.63) | aipw 33.3 (33.4) | aipw | 1.00 | 1.00 |
| the same, assume_linear | aipw 33.3 (33.4), lin 46.5 (7.88) | aipw | 1.00 | 1.00 |
| HIV incentive, randomized (2,829, 3, 0.780, 0.423) | aipw 0.686 (0.716), dim 0.0415 \
  (0.0378), lin 0.0441 (0.0387) | dim | 1.00 | 0.91 |
| insurance, randomized (1,395, 5, 0.488, 0.498) | aipw 1 (3.85), dim 0.0529 (0.0525), \
  lin 0.057 (0.0546) | dim | 1.00 | 0.99 |
| NHEFS, assume_linear (1,566, 18, 0.257, 7.8) | aipw 100 (1.9e+03), lin 12.2 (11.7) | lin \
  | 1.00 | 0.96 |
| Card, assume_linear (3,010, 5, 0.682, 0.438) | aipw 3.32 (5.08), lin 0.0528 (0.0533) | lin \
  | 1.00 | 1.01 |

With ``assume_linear`` on NSW + CPS, lin's plan at the planned imbalance (7.88) is 0.17x its
releases (the arms' covariates differ by a median 1.1 sds); at the large imbalance auto also
weighs (``robust_halfwidth``) it is 105, so auto takes the ensemble. An ensemble's released CI
is clamped to the effects the bounds allow (insurance: 1; NHEFS: 100), its plan is not.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pandas as pd
from causaldata import close_college, cps_mixtape, nsw_mixtape, social_insure, thornton_hiv
from small_n_public_data import nhefs_design  # bench/ is the script's folder

from dpcausal import PrivateATE

RELEASES = 40
NSW_COVARIATES = ["age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75"]
NSW_BOUNDS = [(16, 60), (0, 18), (0, 1), (0, 1), (0, 1), (0, 1), (0, 40), (0, 40)]


def job_training() -> tuple[pd.DataFrame, str, str, list[str], tuple, list]:
    """NSW treated units beside the CPS comparison group (earnings in $1000)."""
    nsw = nsw_mixtape.load_pandas().data
    df = pd.concat([nsw[nsw.treat == 1], cps_mixtape.load_pandas().data])
    df = df.assign(re74=df.re74 / 1000, re75=df.re75 / 1000, re78=df.re78 / 1000)
    return df, "treat", "re78", NSW_COVARIATES, (0, 61), NSW_BOUNDS


def hiv() -> tuple:
    return (thornton_hiv.load_pandas().data, "any", "got", ["age", "distvct", "hiv2004"], (0, 1),
            [(0, 100), (0, 10), (-1, 1)])


def insurance() -> tuple:
    return (social_insure.load_pandas().data, "intensive", "takeup_survey",
            ["age", "agpop", "ricearea_2010", "disaster_prob", "male"], (0, 1),
            [(15, 100), (1, 20), (0, 100), (0, 100), (0, 1)])


def schooling() -> tuple:
    return (close_college.load_pandas().data, "nearc4", "lwage",
            ["educ", "black", "smsa", "south", "exper"], (4.5, 8.0),
            [(0, 20), (0, 1), (0, 1), (0, 1), (0, 25)])


def smoking() -> tuple:
    nh, covs, bounds = nhefs_design()
    return nh, "qsmk", "wt82_71", covs, (-50, 50), bounds


#: (name, loader, design, assume_linear)
DESIGNS = [
    ("job training, NSW + CPS (observational)", job_training, "observational", False),
    ("job training, NSW + CPS, assume_linear", job_training, "observational", True),
    ("HIV incentive, Thornton (randomized)", hiv, "randomized", False),
    ("insurance information (randomized)", insurance, "randomized", False),
    ("smoking cessation, NHEFS, assume_linear", smoking, "observational", True),
    ("schooling, Card, assume_linear", schooling, "observational", True),
]


def measure(name: str, loader, design: str, assume_linear: bool, releases: int) -> dict:
    df, a, y, covs, ybounds, cbounds = loader()
    df = df[[a, y, *covs]].dropna()
    X, A, Y = df[covs].to_numpy(float), df[a].to_numpy(int), df[y].to_numpy(float)
    n, d = X.shape
    share = float(A.mean())
    sd = float(np.sqrt((Y[A == 1].var() * A.sum() + Y[A == 0].var() * (n - A.sum())) / n))
    kw = dict(design=design, assume_linear=assume_linear, outcome_bounds=ybounds,
              covariate_bounds=cbounds, zeta=1.0, treated_share=share, outcome_sd=sd)
    auto = PrivateATE(estimator="auto", **kw)
    table = auto.compare_estimators(n, d)
    chosen = auto.resolved_estimator(n, d)
    medians, predicted = {}, {}
    for est in table.loc[table["selectable"], "estimator"]:
        halves = [np.diff(PrivateATE(estimator=est, noise_seed=r, random_state=r, **kw)
                          .fit(X, A, Y, evaluation=True).ci)[0] / 2 for r in range(releases)]
        medians[est] = float(np.median(halves))
        predicted[est] = float(table.loc[table["estimator"] == est, "halfwidth"].iloc[0])
    narrowest = min(medians.values())
    return {"data": name, "n": n, "d": d, "share": share, "sd": sd, "medians": medians,
            "predicted": predicted, "auto": chosen, "ratio": medians[chosen] / narrowest,
            "plan_over_released": predicted[chosen] / medians[chosen]}


def main() -> None:
    warnings.simplefilter("ignore")
    releases = int(sys.argv[1]) if len(sys.argv) > 1 else RELEASES
    print(f"load average {os.getloadavg()[0]:.1f}; {releases} releases per candidate, zeta = 1")
    print("| data | n, d, treated share, outcome sd | median released half-width (plan) per "
          "candidate | auto | auto / narrowest | plan / released (auto's) |")
    print("|---|---|---|---|---|---|")
    for name, loader, design, assume_linear in DESIGNS:
        r = measure(name, loader, design, assume_linear, releases)
        cells = ", ".join(f"{k} {v:.3g} ({r['predicted'][k]:.3g})"
                          for k, v in r["medians"].items())
        print(f"| {r['data']} | {r['n']:,}, {r['d']}, {r['share']:.3f}, {r['sd']:.3g} | {cells} "
              f"| {r['auto']} | {r['ratio']:.2f} | {r['plan_over_released']:.2f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
