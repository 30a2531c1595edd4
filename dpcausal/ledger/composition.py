"""Composition of the privacy charges recorded against one dataset (data-free, no database).

Which composition each mechanism gets
-------------------------------------
Every charge is a :class:`dpcausal.accounting.PrivacyCharge`, already expressed relative to its
release's own neighbouring relation and sensitivity (replace-one for the ATE releases), so the
accountant only needs the dominating pair of a sensitivity-1 mechanism with the same noise. A
charge counts against a cap only where its relation bounds the cap's
(:func:`relation_admissible`; README "Units and neighbouring relations").

- All charges ``gaussian``: exact GDP, ``zeta = sqrt(sum zeta_j^2)``. A zeta/rho cap is compared
  exactly (rational arithmetic on the stored floats), an (epsilon, delta) cap through ``gdp_delta``.
- Caps are compared in their own currency, never as epsilon at one delta. A zeta-GDP cap promises
  the whole Gaussian tradeoff curve, so it admits ``gaussian`` charges only. A rho-zCDP cap admits
  every charge with a zCDP bound, summed exactly: ``gaussian`` ``zeta^2 / 2``; ``laplace`` and
  ``pure`` ``eps^2 / 2`` (Bun & Steinke 2016, Prop. 1.4). ``approx`` and ``rdp`` charges have no
  zCDP bound and need an (epsilon, delta) cap.
- Mixed, no ``rdp`` charge: ``dp_accounting`` privacy-loss distributions, composed exactly up to
  pessimistic discretisation. ``gaussian``: N(0, 1/zeta^2) vs N(1, 1/zeta^2); ``laplace``:
  Lap(0, 1/eps) vs Lap(1, 1/eps); ``pure`` and ``approx``: the generic (eps, delta)-DP PLD.
- Any ``rdp`` charge: RDP curves added order-wise on the union of the rdp charges' orders.
  ``gaussian``: ``alpha zeta^2 / 2``; ``laplace``: Mironov (2017) Prop. 6; ``pure``:
  ``min(eps, alpha eps^2 / 2)``; laplace and pure charges alternatively by basic composition,
  whichever bound is smaller; ``approx``: basic composition (its epsilon adds, its delta is taken
  off the dataset's delta). Converted once with ``dp_accounting``'s ``compute_epsilon`` (CKS 2020).

PLD figures use ``dp_accounting``'s pessimistic discretisation, so they are upper bounds. A curve
known only at its own orders is read at another order as its value at the next larger order it has
(RDP is non-decreasing in the order), and as +inf above its largest order. One cumulative
(epsilon, delta) is always reported, at the dataset's delta.

References
----------
Dong, Roth, Su (2022), "Gaussian differential privacy" (GDP composition).
Mironov (2017), "Renyi differential privacy", Prop. 6 (Laplace RDP).
Bun, Steinke (2016), "Concentrated differential privacy", Prop. 3.3 (pure DP => zCDP).
Canonne, Kamath, Steinke (2020), Prop. 12 (RDP -> (epsilon, delta), via ``dp_accounting``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld
from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc

from dpcausal.accounting import (
    DEFAULT_DELTA,
    PrivacyCharge,
    compose_gdp,
    gdp_delta,
    gdp_epsilon,
    gdp_rdp,
)

# Relative margin applied to every figure obtained by root finding or numerical conversion,
# always against the user: spend is rounded up and remaining budget down by this much.
TOLERANCE = 1e-9
PLD_DISCRETISATION = 1e-3  # pessimistic rounding: error is always against the user


@dataclass(frozen=True)
class Cap:
    """A dataset's budget cap: ``kind`` is ``"zeta"``, ``"rho"`` or ``"epsilon"``.

    ``delta`` is the cap's delta for an (epsilon, delta) cap and the reporting delta otherwise.
    """

    kind: str
    value: float
    delta: float = DEFAULT_DELTA

    def __post_init__(self) -> None:
        if self.kind not in {"zeta", "rho", "epsilon"}:
            raise ValueError(f"cap kind must be zeta, rho or epsilon, got {self.kind!r}")
        _check_budget(self.kind, self.value)
        if not (isinstance(self.delta, (int, float)) and 0.0 < self.delta < 1.0):
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}; e.g. delta=1e-5")

    @property
    def zeta(self) -> float | None:
        """The cap as zeta-GDP (a rho cap: zeta = sqrt(2 rho)); None for an (epsilon, delta) cap."""
        if self.kind == "zeta":
            return self.value
        if self.kind == "rho":
            return math.sqrt(2.0 * self.value)
        return None

    @property
    def epsilon(self) -> float:
        """The cap as epsilon at the cap's delta (GDP caps converted by Lemma 2, spec §1.3)."""
        if self.kind == "epsilon":
            return self.value
        return gdp_epsilon(self.zeta, self.delta)

    def describe(self) -> str:
        if self.kind == "zeta":
            return f"zeta={self.value:g} (GDP)"
        if self.kind == "rho":
            return f"rho={self.value:g} (zCDP)"
        return f"epsilon={self.value:g}, delta={self.delta:g}"


@dataclass(frozen=True)
class Spend:
    """The composed cost of some charges: one (epsilon, delta), plus zeta if all are Gaussian."""

    n_charges: int
    epsilon: float
    delta: float
    method: str  # "none", "gdp", "pld" or "rdp"
    zeta: float | None = None
    rho: float | None = None  # zCDP, when every charge has a zCDP bound (:func:`zcdp_rho`)

    def describe(self) -> str:
        if self.n_charges == 0:
            return "nothing"
        text = f"epsilon={self.epsilon:.6g} at delta={self.delta:g}"
        if self.zeta is not None:
            return f"zeta={self.zeta:.6g} (GDP), {text}"
        return f"rho={self.rho:.6g} (zCDP), {text}" if self.rho is not None else text


def zcdp_rho(charge: PrivacyCharge) -> Fraction | None:
    """rho-zCDP bound of one charge, exact in the stored floats' rationals; None if it has none.

    Gaussian ``zeta^2 / 2`` (spec §1.3); pure and Laplace ``eps^2 / 2``: an eps-DP mechanism is
    eps^2/2-zCDP (Bun & Steinke 2016, Prop. 1.4). ``approx`` and ``rdp`` charges have no bound.
    """
    if charge.mechanism == "gaussian":
        return Fraction(charge.zeta) ** 2 / 2  # type: ignore[arg-type]
    if charge.mechanism in {"pure", "laplace"}:
        return Fraction(charge.epsilon) ** 2 / 2  # type: ignore[arg-type]
    return None


# Which caps a charge's unit of privacy can bound by its granularity: a change of one user's (or
# client's) records contains a change of any one of its rows, a change of one row a change of
# its label; never the reverse. Clients are not assumed to hold whole users.
UNIT_BOUNDS = {"row": {"row", "label"}, "user": {"user", "row", "label"},
               "client": {"client", "row", "label"}, "label": {"label"}}
# What a neighbouring relation can hold public besides n (every relation here is a replacement,
# so n is public under all of them): the occupancy (records per user and cell, cells split by
# arm; user_level_clip.md §1.3), the arm sizes n_t, n_c (federated_secagg.md Def 2.1), each
# unit's arm and cluster (cluster_dp.md Def 2.2), which rows are complete cases (a core release
# with ``missing="drop_public_count"`` publishes their count; SPECS.md "Missing and non-finite
# values"). Holding a fact public also holds what it determines.
FACTS = ("arm", "arm_sizes", "cluster", "complete_cases", "occupancy")
_IMPLIES = {"occupancy": {"arm_sizes"}, "arm": {"arm_sizes"}}
# The relation each unit's mechanisms are proved under (dpcausal/ledger/README.md "Units").
DEFAULT_PUBLIC = {"row": frozenset(), "user": frozenset({"occupancy"}),
                  "client": frozenset({"arm_sizes"}), "label": frozenset({"arm", "cluster"})}


def check_unit(unit: object, name: str = "unit") -> None:
    """ValueError unless ``unit`` is a unit of privacy (row, user, label, client)."""
    if unit not in UNIT_BOUNDS:
        raise ValueError(f"{name} must be one of {sorted(UNIT_BOUNDS)}, got {unit!r}")


@dataclass(frozen=True)
class Relation:
    """A neighbouring relation: data sets differ in one ``unit`` (its records replaced) while
    n and the facts in ``public`` stay the same. Build it with :meth:`of`."""

    unit: str
    public: frozenset[str]

    @classmethod
    def of(cls, unit: str, public: object = None,
           detail: Mapping[str, Any] | None = None) -> Relation:
        """The relation of a charge (or cap) per ``unit`` holding ``public`` public.

        ``public`` None: the relation the unit's mechanisms are proved under
        (:data:`DEFAULT_PUBLIC`), except a charge converted by :func:`group_privacy` (its
        ``detail`` holds ``group_privacy_k``): k whole rows replaced, nothing but n public.
        ``public`` may be a comma-separated string or an iterable of :data:`FACTS`. A charge
        whose ``detail["public_facts"]`` names facts it publishes exactly (the complete-case count
        of ``missing="drop_public_count"``) holds them public too.
        """
        check_unit(unit)
        if public is None:
            if detail is not None and "group_privacy_k" in detail:
                return cls(unit, frozenset())
            public = DEFAULT_PUBLIC[unit]
        if isinstance(public, str):
            public = [f for f in public.split(",") if f.strip()]
        facts = frozenset(str(f).strip() for f in [*public,  # type: ignore[misc]
                                                   *(detail or {}).get("public_facts", ())])
        unknown = sorted(facts - set(FACTS))
        if unknown:
            raise ValueError(f"public must name facts among {list(FACTS)} (n is always public), "
                             f"got {unknown}; e.g. public='occupancy' for a user-level relation")
        return cls(unit, facts)

    @property
    def text(self) -> str:
        """The stored form of ``public``: sorted facts, comma-separated ("" for none)."""
        return ",".join(sorted(self.public))

    def describe(self) -> str:
        return f"per {self.unit} ({', '.join(['n', *sorted(self.public)])} public)"

    def held(self) -> frozenset[str]:
        """Every fact a neighbouring pair of this relation leaves unchanged: a label pair changes
        one outcome only, so it holds every fact but completeness (an outcome may go missing);
        else ``public`` and what it determines."""
        if self.unit == "label":
            return frozenset(FACTS) - {"complete_cases"} | self.public
        return self.public.union(*(_IMPLIES.get(f, set()) for f in self.public))


def relation_admissible(charge: Relation, cap: Relation) -> str | None:
    """Why a charge proved under relation ``charge`` cannot count against a cap protecting
    relation ``cap`` (None if it can, at its own parameters).

    It can iff every neighbouring pair of ``cap`` is a neighbouring pair of ``charge``: one
    cap unit's change lies within one charge unit's change (:data:`UNIT_BOUNDS`) and the cap's
    pairs leave unchanged every fact the charge holds public (:meth:`Relation.held`);
    dpcausal/ledger/README.md "Units and neighbouring relations".
    """
    head = (f"the cap protects {cap.describe()} and the charge is proved {charge.describe()}: ")
    if cap.unit not in UNIT_BOUNDS[charge.unit]:
        return (head + f"changing one {cap.unit} is not changing one {charge.unit}, so a "
                f"{charge.unit}-level guarantee does not bound the loss of one {cap.unit}; "
                f"convert the charge explicitly (e.g. group privacy over a public maximum of rows "
                f"per {cap.unit}) or give the dataset a cap per {charge.unit}")
    exposed = sorted(charge.public - cap.held())
    if exposed:
        return (head + f"a {cap.unit}-level neighbour may change the {', '.join(exposed)} the "
                f"charge publishes exactly (e.g. one row moved to the other arm), so it does "
                f"not bound the loss of one {cap.unit}; give the dataset a cap under a relation "
                f"every charge bounds (e.g. per label), or correct a mislabelled charge with "
                f"`dpcausal ledger correct-unit`")
    return None


#: How the library says to give a dataset an (epsilon, delta) cap (the CLI says it its own way:
#: ``tasks.ledger_ops.in_cli_words``)
EPSILON_CAP_CALL = "Ledger.set_budget(dataset, epsilon=..., delta=...)"


def admissible(charge: PrivacyCharge, cap: Cap) -> str | None:
    """Why ``charge`` can never count against ``cap`` (None if it can): caps compare in their own
    currency (module docstring), so a GDP cap admits Gaussian charges only and a zCDP cap charges
    with a zCDP bound only."""
    if cap.kind == "zeta" and charge.mechanism != "gaussian":
        return (f"a zeta-GDP cap admits Gaussian charges only, got a {charge.mechanism} charge "
                "(GDP is a promise about the whole tradeoff curve, which an epsilon at one delta "
                "does not keep); give the dataset a rho-zCDP cap (zeta-GDP = zeta^2/2-zCDP) or an "
                f"(epsilon, delta) cap with `{EPSILON_CAP_CALL}`")
    if cap.kind == "rho" and zcdp_rho(charge) is None:
        return (f"a rho-zCDP cap admits gaussian, laplace and pure charges only, got a "
                f"{charge.mechanism} charge (it has no zCDP bound); give the dataset an "
                f"(epsilon, delta) cap with `{EPSILON_CAP_CALL}`")
    return None


def compose(charges: Sequence[PrivacyCharge], delta: float = DEFAULT_DELTA) -> Spend:
    """Compose charges on one dataset and report (epsilon at ``delta``) per the table above."""
    if not charges:
        return Spend(0, 0.0, delta, "none", zeta=0.0, rho=0.0)
    rhos = [r for r in (zcdp_rho(c) for c in charges) if r is not None]
    rho = _up(float(sum(rhos, Fraction(0)))) if len(rhos) == len(charges) else None
    if all(c.mechanism == "gaussian" for c in charges):
        zeta = compose_gdp([c.zeta for c in charges])  # type: ignore[misc]
        return Spend(len(charges), _up(_gdp_epsilon_or_inf(zeta, delta)), delta, "gdp",
                     zeta=zeta, rho=zeta**2 / 2)
    if any(c.mechanism == "rdp" for c in charges):
        return Spend(len(charges), _up(_rdp_epsilon(charges, delta)), delta, "rdp")
    return Spend(len(charges), _pld_epsilon(charges, delta), delta, "pld", rho=rho)


def within_cap(charges: Sequence[PrivacyCharge], cap: Cap) -> tuple[bool, Spend]:
    """Whether composing ``charges`` stays within ``cap`` (never rounding in the user's favour)."""
    spend = compose(charges, cap.delta)
    if any(admissible(c, cap) is not None for c in charges):
        return False, spend
    if cap.kind == "rho":
        # exact: sum rho_j <= rho_cap in rationals (composition: Bun & Steinke 2016, Lemma 1.7)
        return _total_rho(charges) <= Fraction(cap.value), spend
    if spend.zeta is not None and cap.zeta is not None:
        # exact: sum zeta_j^2 <= zeta_cap^2 (= 2 rho) in rational arithmetic on the stored floats
        total = sum((Fraction(c.zeta) ** 2 for c in charges), Fraction(0))  # type: ignore[arg-type]
        bound = Fraction(cap.value) ** 2 if cap.kind == "zeta" else 2 * Fraction(cap.value)
        return total <= bound, spend
    if spend.zeta is not None:
        # zeta-GDP => (eps_cap, delta(eps_cap)); within iff delta(eps_cap) <= delta_cap (Lemma 2)
        if spend.zeta == 0.0:
            return True, spend
        return gdp_delta(cap.value, spend.zeta) * (1 + TOLERANCE) <= cap.delta, spend
    return spend.epsilon <= _down(cap.epsilon), spend


def _total_rho(charges: Sequence[PrivacyCharge]) -> Fraction:
    """Exact sum of the charges' zCDP rho; every charge admitted under a zeta/rho cap has one."""
    total = Fraction(0)
    for c in charges:
        rho = zcdp_rho(c)
        assert rho is not None, f"bug: a {c.mechanism} charge under a zCDP cap has no rho"
        total += rho
    return total


def headroom(charges: Sequence[PrivacyCharge], cap: Cap) -> dict[str, float | None]:
    """What one more release could spend on top of ``charges`` under ``cap``, rounded down.

    ``next_zeta``: the largest Gaussian charge still admitted; ``next_epsilon``: its epsilon at
    the cap's delta (spec §1.3), so the two figures agree (never cap epsilon minus spent
    epsilon, which no single release can spend); ``next_pure_epsilon``: the largest pure
    eps-DP charge still admitted (None under a GDP cap, which admits none). GDP/zCDP caps:
    closed form from the exact zCDP remainder; (epsilon, delta) caps: the largest value the
    composition of the module docstring admits, by bisection (the value returned was admitted).
    """
    if any(admissible(c, cap) is not None for c in charges):  # recorded under older rules
        return {"next_zeta": 0.0, "next_epsilon": 0.0,
                "next_pure_epsilon": None if cap.kind == "zeta" else 0.0}
    if cap.kind in {"zeta", "rho"}:
        bound = Fraction(cap.value) ** 2 / 2 if cap.kind == "zeta" else Fraction(cap.value)
        left = bound - _total_rho(charges)
        largest = _down(math.sqrt(2 * left)) if left > 0 else 0.0
        next_zeta, next_pure = largest, (None if cap.kind == "zeta" else largest)
    else:
        next_zeta = _largest(lambda z: within_cap(
            [*charges, PrivacyCharge("gaussian", zeta=z)], cap)[0])
        next_pure = _largest(lambda e: within_cap(
            [*charges, PrivacyCharge("pure", epsilon=e)], cap)[0])
    next_epsilon = _up(_gdp_epsilon_or_inf(next_zeta, cap.delta)) if next_zeta > 0 else 0.0
    return {"next_zeta": next_zeta, "next_epsilon": next_epsilon,
            "next_pure_epsilon": next_pure}


def _largest(fits: Callable[[float], bool], rel: float = 1e-6) -> float:
    """Largest x > 0 with ``fits(x)`` for a monotone ``fits``, to ``rel``; always a value that
    fits (0.0 if even 1e-9 does not; 1e4 is taken as unbounded)."""
    if not fits(1e-9):
        return 0.0
    lo, hi = 1e-9, 1.0
    while fits(hi):
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            return lo
    while hi - lo > rel * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def group_privacy(charge: PrivacyCharge, k: int) -> PrivacyCharge:
    """The charge of the same release for groups of ``k`` records (e.g. a row-level charge as a
    user-level one, with a public maximum of ``k`` rows per user): the explicit unit conversion.

    Gaussian ``zeta -> k zeta`` and Laplace ``eps -> k eps`` (exact: the statistic moves by at
    most ``k`` sensitivities); pure ``eps -> k eps``; approx ``(eps, delta) -> (k eps,
    k e^{(k-1) eps} delta)`` (group privacy, Vadhan 2017, Lemma 2.2). RDP curves are refused
    (no simple group bound).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1 (the public maximum group size), got {k!r}")
    detail = {**charge.detail, "group_privacy_k": k}
    if charge.mechanism == "gaussian":
        return PrivacyCharge("gaussian", zeta=k * charge.zeta, delta=charge.delta,  # type: ignore
                             detail=detail)
    if charge.mechanism in {"laplace", "pure"}:
        return PrivacyCharge(charge.mechanism, epsilon=k * charge.epsilon,  # type: ignore
                             detail=detail)
    if charge.mechanism == "approx":
        eps = charge.epsilon
        return PrivacyCharge("approx", epsilon=k * eps,  # type: ignore[operator]
                             delta=k * math.exp((k - 1) * eps) * charge.delta,  # type: ignore
                             detail=detail)
    raise ValueError("an rdp charge has no group-privacy conversion here; state the release's "
                     "RDP curve for the larger unit directly")


def laplace_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP curve of the Laplace mechanism with scale 1/epsilon: Mironov (2017), Prop. 6.

    .. math:: \\varepsilon(\\alpha) = \\varepsilon + \\frac{1}{\\alpha-1}
              \\log\\Bigl(1 + (\\alpha-1)\\frac{e^{(1-2\\alpha)\\varepsilon} - 1}{2\\alpha-1}\\Bigr)
    """
    a = np.asarray(orders, dtype=float)
    return epsilon + np.log1p((a - 1) * np.expm1((1 - 2 * a) * epsilon) / (2 * a - 1)) / (a - 1)


def pure_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP bound of any epsilon-DP mechanism: min(eps, alpha eps^2 / 2), Bun & Steinke Prop. 3.3."""
    return np.minimum(epsilon, np.asarray(orders, dtype=float) * epsilon**2 / 2.0)


def _rdp_epsilon(charges: Sequence[PrivacyCharge], delta: float) -> float:
    """RDP composition; pure/Laplace charges go through RDP or add by basic composition,
    whichever is smaller (both are valid bounds)."""
    grid = np.array(sorted({a for c in charges if c.mechanism == "rdp"
                            for a in (c.rdp_orders or ()) if a > 1}))
    if grid.size == 0:
        raise ValueError("an rdp charge needs at least one order > 1; got none")
    base = np.zeros_like(grid)  # curves that only RDP can compose
    pure = np.zeros_like(grid)  # pure/Laplace charges as RDP curves
    pure_eps, approx_eps, approx_delta = 0.0, 0.0, 0.0
    for c in charges:
        if c.mechanism == "gaussian":
            base += gdp_rdp(c.zeta, grid)  # type: ignore[arg-type]
        elif c.mechanism == "rdp":
            base += _curve_on(c, grid)
        elif c.mechanism == "approx":
            approx_eps += c.epsilon  # type: ignore[operator]
            approx_delta += c.delta
        else:
            rdp = laplace_rdp if c.mechanism == "laplace" else pure_rdp
            pure += rdp(c.epsilon, grid)  # type: ignore[arg-type]
            pure_eps += c.epsilon  # type: ignore[operator]
    rdp_delta = delta - approx_delta
    if rdp_delta <= 0:
        return math.inf
    both = _rdp_to_epsilon(grid, base + pure, rdp_delta)
    apart = _rdp_to_epsilon(grid, base, rdp_delta) + pure_eps
    return min(both, apart) + approx_eps


def _rdp_to_epsilon(grid: np.ndarray, curve: np.ndarray, delta: float) -> float:
    """RDP -> (epsilon, delta) by CKS 2020 Prop. 12, as implemented in dp_accounting."""
    if not np.isfinite(curve).any():
        return math.inf
    return float(rdp_acc.compute_epsilon(grid, curve, delta)[0])


def _curve_on(charge: PrivacyCharge, grid: np.ndarray) -> np.ndarray:
    """The charge's curve at each grid order: its value at the next order >= it, +inf beyond."""
    orders = np.asarray(charge.rdp_orders, dtype=float)
    values = np.asarray(charge.rdp_epsilons, dtype=float)
    idx = np.argsort(orders)
    orders, values = orders[idx], values[idx]
    pos = np.searchsorted(orders, grid, side="left")
    out = np.full(grid.shape, np.inf)
    ok = pos < orders.size
    out[ok] = values[pos[ok]]
    return out


def _pld_epsilon(charges: Sequence[PrivacyCharge], delta: float) -> float:
    """PLD composition: the last charge composed onto the (cached) composition of the others,
    so that trying many last charges (:func:`headroom`) composes the recorded ones once."""
    keys = [_pld_key(c) for c in charges]
    base = _pld_composed(tuple(sorted(Counter(keys[:-1]).items())))
    last = _pld_of(*keys[-1])
    total = last if base is None else base.compose(last)
    return float(total.get_epsilon_for_delta(delta))


@lru_cache(maxsize=32)
def _pld_composed(counts: tuple[tuple[tuple[str, float, float], int], ...]
                  ) -> pld.PrivacyLossDistribution | None:
    total = None
    for key, count in counts:
        one = _pld_of(*key).self_compose(count) if count > 1 else _pld_of(*key)
        total = one if total is None else total.compose(one)
    return total


def _pld_key(c: PrivacyCharge) -> tuple[str, float, float]:
    value = c.zeta if c.mechanism == "gaussian" else c.epsilon
    return (c.mechanism, float(value), float(c.delta))  # type: ignore[arg-type]


def _pld_of(mechanism: str, value: float, delta: float) -> pld.PrivacyLossDistribution:
    if mechanism == "gaussian":
        return pld.from_gaussian_mechanism(
            standard_deviation=1.0 / value, sensitivity=1.0,
            value_discretization_interval=PLD_DISCRETISATION)
    if mechanism == "laplace":
        return pld.from_laplace_mechanism(
            parameter=1.0 / value, sensitivity=1.0,
            value_discretization_interval=PLD_DISCRETISATION)
    params = pld_common.DifferentialPrivacyParameters(epsilon=value, delta=delta)
    return pld.from_privacy_parameters(params, value_discretization_interval=PLD_DISCRETISATION)


def _gdp_epsilon_or_inf(zeta: float, delta: float) -> float:
    try:
        return gdp_epsilon(zeta, delta)
    except ValueError:  # no finite epsilon reaches delta: report it as unbounded
        return math.inf


def _check_budget(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}; "
                         f"a budget cap is a positive privacy parameter, e.g. {name}=1.0")


def _up(x: float) -> float:
    return x if not math.isfinite(x) else x * (1 + TOLERANCE)


def _down(x: float) -> float:
    return x if not math.isfinite(x) else x * (1 - TOLERANCE)
