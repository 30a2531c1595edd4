"""A private check of public outcome bounds: is the release about to be biased by clipping?

Outcomes outside the bounds are clipped before the release (spec dp_ate_ensemble.md §1.2), which
changes the estimand. How many are outside is itself a non-private figure, so it is released
with noise: the counts of outcomes below and above the bounds, ``(c_lo, c_hi)``, change by at most
2 in L1 norm when one record is replaced (one row can move from below to above), so each count
gets exact discrete Laplace noise of scale ``2/epsilon`` (:func:`dpcausal.noise.laplace_mechanism`),
which is ``epsilon``-DP for the pair (the Laplace mechanism on an L1-sensitivity-2 query).
With ``zeta`` given instead, each count gets exact discrete Gaussian noise of scale
``sqrt(2)/zeta`` (:func:`dpcausal.noise.gaussian_mechanism`): the pair's L2 sensitivity is
``sqrt(2)``, so the check is ``zeta``-GDP (Dong, Roth and Su 2019, Theorem 2.7) and composes with
the core releases under a zeta-GDP cap.

The verdict compares a one-sided upper/lower ``level`` confidence bound of the released share
outside the bounds with a public ``tolerance`` (default 1%): ``"biased"`` when even the lower bound
exceeds it, ``"ok"`` when even the upper bound is below it, ``"inconclusive"`` otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np
from scipy.stats import norm

from dpcausal.accounting import DEFAULT_DELTA, PrivacyCharge, gdp_epsilon, gdp_to_zcdp
from dpcausal.contract import (
    DEPRECATED,
    Mechanism,
    Prepared,
    Privacy,
    PublicFacts,
    Release,
    columns,
    level_to_alpha,
    renamed,
)
from dpcausal.noise import (
    effective_scale,
    gaussian_mechanism,
    gaussian_sigma_for,
    laplace_mechanism,
    secure_rng,
)
from dpcausal.validation import bounds_pair

VERDICTS = ("ok", "inconclusive", "biased")


@dataclass(frozen=True, kw_only=True)
class BoundsCheckRelease(Release):
    """Released shares of outcomes below/above the bounds and the verdict (no ATE)."""

    kind: ClassVar[str] = "bounds_check"

    bounds: tuple[float, float]
    share_below: float
    share_above: float
    share_outside: float
    noise_sd: float
    tolerance: float
    verdict: str

    @classmethod
    def _decoded(cls, values: dict[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
        values["bounds"] = tuple(values["bounds"])
        return super()._decoded(values, d)

    def extra_rows(self) -> list[tuple[str, str]]:
        return [("bounds", f"[{self.bounds[0]:g}, {self.bounds[1]:g}]"),
                ("share outside (private)", f"{100 * self.share_outside:.2f}% "
                                            f"(below {100 * self.share_below:.2f}%, above "
                                            f"{100 * self.share_above:.2f}%; noise sd "
                                            f"{100 * self.noise_sd:.2f}%)"),
                ("verdict", self.message())]

    def table_rows(self) -> list[dict[str, Any]]:
        """The released shares (the verdict in the last row's name): each count's noise sd is
        ``noise_sd / sqrt(2)``, as the two counts' noises are independent."""
        one = self.noise_sd / math.sqrt(2)
        return [{"name": name, "estimate": share, "se": sd, "ci_lower": None, "ci_upper": None}
                for name, share, sd in (("share below", self.share_below, one),
                                        ("share above", self.share_above, one),
                                        (f"share outside (verdict: {self.verdict})",
                                         self.share_outside, self.noise_sd))]

    def message(self) -> str:
        """The verdict in plain words."""
        pct = f"{100 * self.tolerance:g}%"
        return {
            "ok": f"ok: fewer than {pct} of outcomes lie outside the bounds",
            "biased": f"BIASED: more than {pct} of outcomes lie outside the bounds and would be "
                      "clipped; widen them before releasing",
            "inconclusive": f"inconclusive: the noise cannot tell whether more than {pct} of "
                            "outcomes lie outside the bounds (spend more, or widen them)",
        }[self.verdict]

    def reading(self) -> str:
        return ("The shares are differentially private estimates; the verdict compares their "
                f"one-sided {100 * self.level:g}% bounds with the tolerance.")


@dataclass(frozen=True, eq=False)
class BoundsCheckFacts(PublicFacts):
    """The public facts of a bounds check: the ``n`` outcomes counted."""

    n: int


class BoundsCheck(Mechanism[BoundsCheckFacts]):
    """Private share of outcomes outside ``outcome_bounds`` (module docstring).

    Parameters
    ----------
    outcome_bounds : (low, high), public.
    epsilon : pure-DP budget of the check with Laplace noise (default 0.1: small next to a
        release).
    zeta : Gaussian-DP budget of the check with discrete Gaussian noise instead (for datasets
        whose cap is zeta-GDP or zCDP); when given, ``epsilon`` is not used.
    tolerance : share of clipped outcomes that counts as biasing (default 0.01).
    alpha : miscoverage of the verdict's one-sided bounds: their confidence is ``1 - alpha``
        (default 0.05).
    level : deprecated, the old name of ``1 - alpha`` (for one release).
    """

    unit: ClassVar[str] = "row"

    def __init__(self, outcome_bounds: tuple[float, float] | None = None, epsilon: float = 0.1,
                 tolerance: float = 0.01, alpha: float = 0.05,
                 zeta: float | None = None, level: Any = DEPRECATED) -> None:
        self.outcome_bounds = outcome_bounds
        self.epsilon = epsilon
        self.zeta = zeta
        self.tolerance = tolerance
        self.alpha = alpha
        self.level = level

    def _level(self) -> float:
        """The one-sided confidence ``1 - alpha`` (or the deprecated ``level`` given)."""
        return 1 - renamed(self, "alpha", "level", level_to_alpha)

    def _public(self) -> tuple[float, float]:
        if self.outcome_bounds is None:
            raise ValueError("outcome_bounds is required: the bounds to check, e.g. (0, 100)")
        lo, hi = bounds_pair("outcome_bounds", self.outcome_bounds)
        budget, name = (self.epsilon, "epsilon") if self.zeta is None else (self.zeta, "zeta")
        if not (isinstance(budget, (int, float)) and math.isfinite(budget) and 0 < budget <= 10):
            raise ValueError(f"{name} must be in (0, 10], got {budget!r}")
        if not 0 < self.tolerance < 1 or not 0.5 < self._level() < 1:
            raise ValueError("tolerance must be in (0, 1) and alpha in (0, 0.5)")
        return lo, hi

    def check_input(self, data: Any, *args: Any, outcome: str | None = None,
                    **roles: Any) -> Prepared[BoundsCheckFacts]:
        """Public checks only (bounds, the budget, that the outcome is numeric).

        Parameters
        ----------
        data : pandas.DataFrame or array-like
            A DataFrame with the ``outcome`` column, or the outcomes as a 1-d array.
        outcome : str, optional
            The outcome column of a DataFrame.

        Returns
        -------
        Prepared[BoundsCheckFacts]
            ``public`` holds ``n``; ``data`` the outcomes as floats.
        """
        self._public()
        y = columns(data, outcome=outcome)["outcome"] if outcome is not None else data
        y = np.asarray(y)
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.number):
            raise ValueError("the outcome must be a 1-d numeric column")
        return Prepared(public=BoundsCheckFacts(int(y.size)), data=y.astype(float))

    def privacy_charge(self, public: BoundsCheckFacts | None = None, /, **facts: Any
                       ) -> PrivacyCharge:
        """Pure epsilon-DP (Laplace on an L1-sensitivity-2 pair of counts), or zeta-GDP
        (Gaussian on an L2-sensitivity-sqrt(2) pair), whatever ``n`` (the facts, given or by
        keyword, do not change it)."""
        lo, hi = self._public()
        detail = {"kind": "bounds_check", "bounds": [lo, hi]}
        if self.zeta is not None:
            return PrivacyCharge("gaussian", zeta=float(self.zeta), detail=detail)
        return PrivacyCharge("laplace", epsilon=float(self.epsilon), detail=detail)

    def _private_release(self, prepared: Prepared[BoundsCheckFacts], *, evaluation: bool = False,
                         rng: np.random.Generator | None = None) -> BoundsCheckRelease:
        """Noisy shares below/above and the verdict; non-finite outcomes count as outside."""
        lo, hi = self._public()
        y, n = prepared.data, prepared.public.n
        finite = np.isfinite(y)
        below = int(np.count_nonzero(~finite | (y < lo)))
        above = int(np.count_nonzero(finite & (y > hi)))
        rng = secure_rng() if rng is None else rng
        if self.zeta is None:
            scale = effective_scale(2.0, float(self.epsilon))
            noisy = [laplace_mechanism(c, 2.0, float(self.epsilon), rng) for c in (below, above)]
            sd_outside = math.sqrt(2 * 2 * scale**2) / n  # two independent Laplace(scale) counts
            z = _laplace_sum_quantile(self._level()) * scale / n
            privacy = Privacy(epsilon=float(self.epsilon), delta=0.0, unit="row",
                              mechanism="laplace", detail={"kind": "bounds_check"})
        else:
            zeta = float(self.zeta)
            sigma = gaussian_sigma_for(math.sqrt(2.0) / zeta, math.sqrt(2.0))
            noisy = [gaussian_mechanism(float(c), math.sqrt(2.0) / zeta, math.sqrt(2.0), rng)
                     for c in (below, above)]
            sd_outside = math.sqrt(2.0) * sigma / n          # two independent N(0, sigma^2)
            z = float(norm.ppf(self._level())) * sd_outside
            privacy = Privacy(epsilon=gdp_epsilon(zeta, DEFAULT_DELTA), delta=DEFAULT_DELTA,
                              unit="row", mechanism="gaussian", zeta=zeta,
                              rho=gdp_to_zcdp(zeta), detail={"kind": "bounds_check"})
        share_below, share_above = (max(0.0, c) / n for c in noisy)
        outside = (noisy[0] + noisy[1]) / n
        verdict = ("biased" if outside - z > self.tolerance
                   else "ok" if outside + z < self.tolerance else "inconclusive")
        return BoundsCheckRelease(
            ate=None, ci=None, se=None, level=float(self._level()), n=n,
            privacy=privacy, bounds=(lo, hi), share_below=share_below, share_above=share_above,
            share_outside=min(1.0, max(0.0, outside)), noise_sd=sd_outside,
            tolerance=float(self.tolerance), verdict=verdict)


def _laplace_sum_quantile(level: float) -> float:
    """The ``level`` quantile of L1 + L2 for two independent standard Laplace variables.

    Its density is ``(1 + |t|) e^{-|t|} / 4``, so ``P(S > t) = (2 + t) e^{-t} / 4`` for t >= 0;
    solved by bisection.
    """
    target = 1.0 - level
    lo, hi = 0.0, 60.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if (2 + mid) * math.exp(-mid) / 4 > target:
            lo = mid
        else:
            hi = mid
    return hi
