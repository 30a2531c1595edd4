"""Figure of one release of any kind, from its released values only: each estimate with its CI,
and the share of the total variance that is privacy noise where the release states it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plots.figures import pyplot, save


def estimate_rows(release: dict[str, Any]) -> list[tuple[str, float, float | None, float | None]]:
    """(label, estimate, CI low, CI high) of the released ATE, or of each stratum's where a
    mechanism releases several (user-level ``strata``)."""
    rows = []
    for s in release.get("strata") or []:
        if isinstance(s, dict) and s.get("ate") is not None:
            label = "/".join(f"{v}" for k, v in s.items()
                             if k not in ("ate", "se", "se_noise", "ci_lower", "ci_upper")
                             and not isinstance(v, float)) or "stratum"
            rows.append((label, s["ate"], s.get("ci_lower"), s.get("ci_upper")))
    if release.get("ate") is not None:
        lo, hi = release.get("ci") or (None, None)
        rows.append(("ATE", release["ate"], lo, hi))
    return rows


def plot_release(release: dict[str, Any], path: str | Path) -> Path:
    """Write a PNG of the release's estimates and CIs; returns the path."""
    plt = pyplot()
    rows = estimate_rows(release)
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.4 * max(1, len(rows))))
    for i, (_, est, lo, hi) in enumerate(reversed(rows)):
        err = None if lo is None else [[est - lo], [hi - est]]
        ax.errorbar([est], [i], xerr=err, fmt="o", capsize=5)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)])
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    p = release.get("privacy") or {}
    title = (f"{release.get('kind', 'release')}: {100 * release.get('level', 0.95):g}% CI, "
             f"({p.get('epsilon', float('nan')):.3g}, {p.get('delta', 0):.1e})-DP per "
             f"{p.get('unit', '?')}")
    if release.get("noise_share") is not None:
        title += f"; privacy noise {100 * release['noise_share']:.0f}% of the variance"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("estimate")
    return Path(save(fig, Path(path), dpi=100))
