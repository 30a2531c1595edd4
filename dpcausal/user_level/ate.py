"""Per-stratum and pooled ATE with total standard errors and CIs from released cell statistics.

Post-processing of the noisy cell means/variances and public scales (free): spec
``user_level_clip.md`` §7.1 (derivation) and §7.6 (caveats), with the Laplace noise added to the
standard error, so the CI covers the noise as well as the sampling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

CAVEATS = (
    "DP holds conditional on the public occupancy (records per unit and cell): it protects outcome "
    "values, not membership, stratum, arm or record counts (spec §7.2-1).",
    "se is the total standard error: the sampling SE and the sd of the Laplace noise on both "
    "arms' means (sqrt(2) x scale each); the CI is ate +- z * se.",
    "The sampling SE treats records as independent; with repeated measures per unit it is "
    "anti-conservative (spec §7.6). Cluster-robust SEs are out of scope.",
    "Suppression changes the estimand: each cell mean may be shifted by up to bias_mean_bound; the "
    "ATE by up to ate_bias_bound (worst case, spec §7.6), which the CI does not cover.",
    "Variances are population-form (divisor c); a noisy variance below 0 is floored at 0 in "
    "the SE; without a released variance the SE uses the public bound U^2/4.",
)


def derive_ate(cells: pd.DataFrame, keys: list[str], arm: str, treated: Any, control: Any,
               level: float = 0.95, variance_bound: float | None = None
               ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """ATE_s = mu_{s,1} - mu_{s,0} with its total SE and CI: spec §7.1 plus the DP noise.

    Parameters
    ----------
    cells : DataFrame
        Released cells: the ``keys`` columns, ``mean``, ``variance``, ``c``, ``scale_mean``
        (effective Laplace scale of the mean) and ``bias_mean_bound``.
    keys : list of str
        Cell key columns; the strata are the keys other than ``arm`` (one stratum if none).
    arm, treated, control : str, level, level
        The arm column and its treated and control levels (never guessed from the labels).
    level : float
        Coverage of the normal CIs.
    variance_bound : float, optional
        Public bound on a cell's variance (``U^2/4``), used when no variance was released.

    Returns
    -------
    strata : DataFrame
        One row per stratum: ``ate``, ``se`` (total), ``ci_lower``, ``ci_upper``,
        ``se_sampling``, ``se_noise``, ``ate_bias_bound``, ``c_treated``, ``c_control``; a
        stratum missing an arm gets NaN.
    pooled : dict
        The pooled ATE (public weights ``c_treated + c_control``) with the same fields.

    Notes
    -----
    .. math::
        se_s^2 = \\frac{V_{s,1}}{c_{s,1}} + \\frac{V_{s,0}}{c_{s,0}}
                 + 2 (b_{s,1}^2 + b_{s,0}^2),\\qquad
        se^2 = \\sum_s (w_s / W)^2 se_s^2

    A Laplace variable of scale ``b`` has variance ``2 b^2``; strata and noise draws are
    independent. The exact lattice noise has a variance at most ``2 b^2`` for the effective
    scale ``b``.
    """
    strata = [k for k in keys if k != arm]
    frame = cells.assign(_s=0) if not strata else cells
    by = strata or ["_s"]
    t = frame[frame[arm] == treated].set_index(by)
    c = frame[frame[arm] == control].set_index(by)
    idx = t.index.union(c.index)
    t, c = t.reindex(idx), c.reindex(idx)
    c_t, c_c = t["c"].to_numpy(float), c["c"].to_numpy(float)
    if variance_bound is None:
        var_t = np.maximum(t["variance"].to_numpy(float), 0.0)
        var_c = np.maximum(c["variance"].to_numpy(float), 0.0)
    else:
        var_t = var_c = np.full(len(idx), float(variance_bound))
    se_sampling = np.sqrt(var_t / c_t + var_c / c_c)
    se_noise = np.sqrt(2.0 * (t["scale_mean"].to_numpy(float) ** 2
                              + c["scale_mean"].to_numpy(float) ** 2))
    z = float(norm.ppf(0.5 + level / 2))
    ate = t["mean"].to_numpy(float) - c["mean"].to_numpy(float)
    se = np.hypot(se_sampling, se_noise)
    out = pd.DataFrame({
        "ate": ate, "se": se, "ci_lower": ate - z * se, "ci_upper": ate + z * se,
        "se_sampling": se_sampling, "se_noise": se_noise,
        "ate_bias_bound": (t["bias_mean_bound"].to_numpy(float)
                           + c["bias_mean_bound"].to_numpy(float)),
        "c_treated": c_t, "c_control": c_c,
    }, index=idx).reset_index()
    if not strata:
        out = out.drop(columns="_s")
    ok = out["ate"].notna().to_numpy()
    w = (c_t + c_c)[ok]
    w = w / w.sum()
    pooled_ate = float(np.sum(w * ate[ok]))
    pooled_se = float(np.sqrt(np.sum(w**2 * se[ok] ** 2)))
    pooled = {"ate": pooled_ate, "se": pooled_se,
              "ci_lower": pooled_ate - z * pooled_se, "ci_upper": pooled_ate + z * pooled_se,
              "se_sampling": float(np.sqrt(np.sum(w**2 * se_sampling[ok] ** 2))),
              "se_noise": float(np.sqrt(np.sum(w**2 * se_noise[ok] ** 2))),
              "weights": "public retained counts c_treated + c_control",
              "n_strata": int(ok.sum())}
    return out, pooled
