"""The released output of a user-level release: noisy per-cell statistics, the per-stratum and
pooled ATE with their CIs, the privacy loss beside its two comparators (spec ``user_level_clip.md``
§3.7, §7.1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import pandas as pd

from dpcausal.contract import Release

SAMPLER = ("exact discrete Laplace (Canonne-Kamath-Steinke 2020) on a 2^-k lattice, "
           "sensitivity rounded up to lattice steps; see dpcausal.noise")


@dataclass(frozen=True, kw_only=True)
class UserLevelOutput(Release):
    """One user-level release (spec §3.7, §7.1): the pooled ATE with its total standard error
    and CI (``ate``, ``se``, ``ci``; ``None`` without an arm), the noisy per-cell statistics
    (``cells``) and the per-stratum ATE table (``strata``, each row with its total ``se`` and
    CI). ``n`` is the number of users; ``privacy`` is ``K * eps`` per user, with the loss
    without Clip-User (``epsilon_parallel``) and under naive composition in its ``detail``."""

    kind: ClassVar[str] = "user_level"

    cells: pd.DataFrame
    strata: pd.DataFrame | None
    se_noise: float | None
    caveats: tuple[str, ...]
    noise_sampler: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        p, d = self.privacy, self.privacy.detail
        if not (math.isclose(p.epsilon, d["K"] * d["epsilon_per_cell"])
                and p.epsilon <= d["epsilon_parallel"] * (1 + 1e-12)
                <= d["epsilon_naive"] * (1 + 1e-12)):
            raise AssertionError(f"bug: privacy figures out of order: {p}")

    @classmethod
    def _decoded(cls, values: dict[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
        values["cells"] = pd.DataFrame(values["cells"])
        if values.get("strata") is not None:
            values["strata"] = pd.DataFrame(values["strata"])
        values["caveats"] = tuple(values["caveats"])
        values["notes"] = tuple(values.get("notes", ()))
        return super()._decoded(values, d)

    def _stratum_keys(self) -> list[str]:
        cols = [] if self.strata is None else list(self.strata.columns)
        return cols[:cols.index("ate")] if cols else []

    def estimate_rows(self) -> list[dict[str, Any]]:
        """The pooled ATE, then one row per stratum with an ATE (``ATE <key>=<level>``)."""
        rows = super().estimate_rows()
        keys = self._stratum_keys()
        if self.strata is None or not keys:
            return rows
        for r in self.strata.to_dict("records"):
            if math.isfinite(r["ate"]):
                rows.append({"name": "ATE " + ", ".join(f"{k}={r[k]}" for k in keys),
                             "estimate": r["ate"], "se": r["se"], "ci_lower": r["ci_lower"],
                             "ci_upper": r["ci_upper"]})
        return rows

    def extra_rows(self) -> list[tuple[str, str]]:
        d = self.privacy.detail
        rows = [("privacy loss", f"{self.privacy.epsilon:.4g} (K*eps) vs "
                                 f"{d['epsilon_parallel']:.4g} without Clip-User (G1*eps), "
                                 f"{d['epsilon_naive']:.4g} naive"),
                ("cells", str(len(self.cells))), ("noise", self.noise_sampler)]
        return rows + [("note", n) for n in self.notes]

    def reading(self) -> str:
        return (super().reading() + " It does not cover the suppression bias (ate_bias_bound "
                "in strata) nor within-user correlation (see caveats).")

    def noise_share(self) -> float | None:
        if self.se is None or self.se_noise is None or self.se == 0:
            return None
        return (self.se_noise / self.se) ** 2
