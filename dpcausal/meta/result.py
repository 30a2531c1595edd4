"""The pooled result of a meta-analysis: numbers, study table, privacy position; prints and plots
(spec dp_ate_ensemble.md §4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from dpcausal._results import ResultMixin
from dpcausal.meta.studies import is_missing

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MODELS = ("fixed", "random")


@dataclass(frozen=True, eq=False)
class MetaResult(ResultMixin):
    """Pooled estimate of several private ATE releases (returned by :func:`combine`).

    Attributes
    ----------
    ate, variance, se : float
        Pooled ATE, its variance ``sum_j w_j^2 (V_j + tau2)`` and standard error.
    ci : tuple of float
        ``ate -/+ critical_value * se``.
    level : float
        Confidence level of ``ci``.
    critical, critical_value : str, float
        ``"normal"`` (Phi^{-1}(1 - (1-level)/2), 1.96 at 95%) or ``"paper"`` (2.0537 at 95%).
    weights : tuple of float
        The pooling weights, non-negative and summing to one, in study order.
    weighting : str
        ``"inverse_variance"``, ``"paper_sqrt"``, ``"equal"`` or ``"custom"``.
    model : str
        ``"fixed"`` or ``"random"`` (DerSimonian-Laird).
    n_studies : int
        Number of pooled studies.
    tau2, q, i2 : float or None
        Between-study variance, Cochran's Q and I^2 (``model="random"`` only; None for fixed).
    studies : pandas.DataFrame
        One row per study: label, ate, variance, se, ci_low, ci_high (with the same critical
        value as the pooled CI), zeta, n, weight.
    privacy : dict
        The privacy position: ``additional_charge`` (always 0: post-processing), per-study
        ``study_zeta`` / ``study_epsilon``, the declared ``shared_groups`` with their composed
        zeta, ``composed_zeta`` / ``composed_epsilon`` (largest over the declared groups, None if
        none declared), ``same_data`` (each dataset whose several releases were pooled as one
        study, with their composed zeta) and ``max_individual_zeta``, the worst exposure of any
        one person under the declaration (None if some study's zeta is unknown).
    """

    ate: float
    variance: float
    se: float
    ci: tuple[float, float]
    level: float
    critical: str
    critical_value: float
    weights: tuple[float, ...]
    weighting: str
    model: str
    n_studies: int
    tau2: float | None
    q: float | None
    i2: float | None
    studies: pd.DataFrame
    privacy: dict

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if not (math.isfinite(self.variance) and self.variance > 0):
            raise ValueError(f"variance must be finite and > 0, got {self.variance!r}")
        if not math.isclose(self.se, math.sqrt(self.variance), rel_tol=1e-12):
            raise ValueError(f"se must equal sqrt(variance), got se={self.se!r}")
        if not self.ci[0] <= self.ate <= self.ci[1]:
            raise ValueError(f"ci must contain ate, got ci={self.ci!r}, ate={self.ate!r}")
        if len(self.weights) != self.n_studies or len(self.studies) != self.n_studies:
            raise ValueError("weights and studies must have one entry per study")
        if min(self.weights) < 0 or not math.isclose(math.fsum(self.weights), 1.0, abs_tol=1e-9):
            raise ValueError(f"weights must be >= 0 and sum to 1, got {self.weights!r}")
        set_fields = [v is not None for v in (self.tau2, self.q, self.i2)]
        if set_fields != [self.model == "random"] * 3:
            raise ValueError("tau2, q and i2 are set for model='random' and None for 'fixed'")
        object.__setattr__(self, "studies", self.studies.copy())
        object.__setattr__(self, "privacy", dict(self.privacy))

    def __str__(self) -> str:
        model = "fixed-effect" if self.model == "fixed" else "random-effects (DerSimonian-Laird)"
        pct = f"{100 * self.level:g}%"
        lines = [f"MetaResult: {model} pooling of {self.n_studies} private releases, "
                 f"{self.weighting} weights, {pct} CI with critical value "
                 f"{self.critical_value:.4f}"]
        rows = [(str(r.label), r.ate, r.se, (r.ci_low, r.ci_high), _opt(r.zeta, ".3g"),
                 _opt(r.n, ".0f"), r.weight) for r in self.studies.itertuples()]
        rows.append(("pooled", self.ate, self.se, self.ci, "", "", 1.0))
        width = max(len("label"), *(len(r[0]) for r in rows))
        header = f"{'label':<{width}}  {'ate':>9}  {'se':>8}  {pct + ' CI':^21}  " \
                 f"{'zeta':>6}  {'n':>8}  {'weight':>6}"
        lines += [header, "-" * len(header)]
        for i, (label, ate, se, ci, zeta, n, w) in enumerate(rows):
            if i == len(rows) - 1:
                lines.append("-" * len(header))
            interval = f"[{ci[0]:.4f}, {ci[1]:.4f}]"
            lines.append(f"{label:<{width}}  {ate:>9.4f}  {se:>8.4f}  {interval:^21}  "
                         f"{zeta:>6}  {n:>8}  {w:>6.3f}")
        if self.model == "random":
            assert self.tau2 is not None and self.q is not None and self.i2 is not None, \
                "bug: a random-effects result without its heterogeneity"
            lines.append(f"heterogeneity: tau2 = {self.tau2:.4g}, Q = {self.q:.4g} "
                         f"(df {self.n_studies - 1}), I2 = {100 * self.i2:.1f}%")
        lines.append(f"privacy: {self.privacy['statement']}")
        for group in self.privacy["shared_groups"]:
            zeta = ("" if group["composed_zeta"] is None
                    else f"zeta {group['composed_zeta']:.4g}, ")
            lines.append(f"  studies {', '.join(group['studies'])} share people: composed "
                         f"{zeta}epsilon {group['composed_epsilon']:.4g} at delta "
                         f"{group['composed_delta']:.3g}")
        if self.privacy["max_individual_zeta"] is not None:
            lines.append(f"  worst exposure of any one person: zeta "
                         f"{self.privacy['max_individual_zeta']:.4g}")
        return "\n".join(lines)

    def plot(self, ax: Axes | None = None) -> Axes:
        """The forest plot (studies, pooled diamond, zeta and weights, privacy notes) on ``ax``,
        or on a new figure sized to the studies; returns the Axes. The CLI's ``forest.png`` is
        this figure."""
        from dpcausal._forest import forest

        return forest(self, ax)


def _opt(value: Any, fmt: str) -> str:
    return "-" if is_missing(value) else format(value, fmt)
