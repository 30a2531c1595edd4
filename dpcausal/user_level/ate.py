"""Per-stratum ATE and standard error from released cell means/variances (post-processing, free).

Spec ``user_level_clip.md`` §7.1 (derivation) and §7.6 (caveats).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CAVEATS = (
    "DP holds conditional on the public occupancy (records per unit and cell): it protects outcome "
    "values, not membership, stratum, arm or record counts (spec §7.2-1).",
    "SEs treat records as independent; with repeated measures per unit they are anti-conservative "
    "(spec §7.6). Cluster-robust SEs are out of scope.",
    "Suppression changes the estimand: each cell mean may be shifted by up to bias_mean_bound; the "
    "ATE by up to ate_bias_bound (worst case, spec §7.6).",
    "Variances are population-form (divisor c); a noisy variance below 0 is floored at 0 in "
    "the SE.",
    "SEs do not include the DP noise; noise scales are reported alongside for that purpose.",
)


def derive_ate(cells: pd.DataFrame, keys: list[str], arm: str) -> tuple[pd.DataFrame, dict]:
    """ATE_s = mu_{s,1} - mu_{s,0}, SE_s = sqrt(Var_{s,1}/c_{s,1} + Var_{s,0}/c_{s,0}): spec §7.1.

    The treated level is the larger of the two arm levels. Strata are the remaining cell keys (one
    stratum if none). The pooled ATE weights strata by their public retained counts; strata
    missing an arm get NaN and are left out of the pool.
    """
    levels = np.sort(cells[arm].unique())
    if levels.size != 2:
        raise ValueError(
            f"arm column {arm!r} must have exactly two levels to derive an ATE, "
            f"got {levels.tolist()}")
    control, treated = levels
    strata = [k for k in keys if k != arm]
    frame = cells.assign(_s=0) if not strata else cells
    by = strata or ["_s"]
    t = frame[frame[arm] == treated].set_index(by)
    c = frame[frame[arm] == control].set_index(by)
    idx = t.index.union(c.index)
    t, c = t.reindex(idx), c.reindex(idx)
    var_t = np.maximum(t["variance"].to_numpy(float), 0.0)
    var_c = np.maximum(c["variance"].to_numpy(float), 0.0)
    out = pd.DataFrame({
        "ate": t["mean"].to_numpy(float) - c["mean"].to_numpy(float),
        "se": np.sqrt(var_t / t["c"].to_numpy(float) + var_c / c["c"].to_numpy(float)),
        "ate_bias_bound": (t["bias_mean_bound"].to_numpy(float)
                           + c["bias_mean_bound"].to_numpy(float)),
        "noise_scale_ate": np.hypot(t["scale_mean"].to_numpy(float),
                                    c["scale_mean"].to_numpy(float)),
        "c_treated": t["c"].to_numpy(float),
        "c_control": c["c"].to_numpy(float),
    }, index=idx).reset_index()
    if not strata:
        out = out.drop(columns="_s")
    ok = out["ate"].notna().to_numpy()
    w = (out["c_treated"] + out["c_control"]).to_numpy(float)[ok]
    pooled = {"ate": float(np.sum(w * out["ate"].to_numpy()[ok]) / w.sum()) if ok.any() else np.nan,
              "se": float(np.sqrt(np.sum((w / w.sum()) ** 2 * out["se"].to_numpy()[ok] ** 2)))
              if ok.any() else np.nan,
              "weights": "public retained counts c_treated + c_control",
              "n_strata": int(ok.sum())}
    return out, pooled
