"""M_clip,post: user-level DP release of per-cell means and variances with Clip-User planning.

Spec ``user_level_clip.md`` §3.7 (release), §7.1-§7.2 (mapping and preconditions), §1.5
(privacy loss ``K * eps`` against ``G_1 * eps`` and naive composition).

:class:`UserLevelATE` follows the release contract of :mod:`dpcausal.contract`:
``fit(records, treatment=, outcome=, unit=, stratum=)`` runs
:meth:`~UserLevelATE.check_input` (every refusal, and the Clip-User plan from the public
occupancy), the data-free :meth:`~UserLevelATE.privacy_charge` (``K * eps`` per user) and
``UserLevelATE._private_release`` (noise drawn once, from OS entropy), and returns a
:class:`UserLevelOutput`. The advanced layer underneath: :meth:`UserLevelATE.plan` reads only
the occupancy and costs nothing; ``UserLevelATE._release`` releases any disjoint cells
following a plan, uncharged (its caller charges ``plan.privacy_charge()`` first).

The pieces it composes: :mod:`~dpcausal.user_level.records` (record table to public occupancy,
the value rule), :mod:`~dpcausal.user_level.plan` (the Clip-User plan and its charge) and
:mod:`~dpcausal.user_level.output` (the released :class:`UserLevelOutput`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence, cast

import numpy as np
import pandas as pd

from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import (
    DEPRECATED,
    Mechanism,
    Prepared,
    Privacy,
    columns,
    deprecated,
    level_to_alpha,
    renamed,
    renamed_names,
)
from dpcausal.noise import laplace_mechanism, secure_rng
from dpcausal.user_level.ate import CAVEATS, derive_ate
from dpcausal.user_level.closed_forms import check_error_params
from dpcausal.user_level.output import SAMPLER, UserLevelOutput
from dpcausal.user_level.plan import UserLevelFacts, UserLevelPlan, make_plan, user_charge
from dpcausal.user_level.records import (
    as_list,
    clamp_values,
    fingerprint,
    keep_mask,
    occupancy_from_records,
)

CLIPS = ("clip_user", "none")
# Largest public magnitude (outcome range U, noise scale) accepted: the squares of the released
# figures (variances, 2 b^2 of the noise, heavy Laplace tails) then stay far below float64's
# 2^1024, so a release that passed its checks always publishes finite numbers.
MAX_MAGNITUDE = 2.0**400


@dataclass(frozen=True)
class _Checked:
    """A checked input: the plan, the retained values shifted to ``[0, U]`` with their cell codes
    (records sorted by unit, cell, order), and the arm as (column, control, treated) levels."""

    plan: UserLevelPlan
    x: np.ndarray = field(repr=False)
    g: np.ndarray = field(repr=False)
    arms: tuple[str, Any, Any] | None


class UserLevelATE(Mechanism[UserLevelFacts]):
    """User-level epsilon-DP per-cell means and variances with Clip-User (spec §3.7, §7).

    Parameters
    ----------
    outcome_bounds : (float, float)
        Public outcome range ``[a, b]``; ``U = b - a`` (at most ``2**400``). Values are clamped
        to it and a missing value (NaN) counts as the midpoint ``(a + b) / 2``
        (:func:`clamp_values`), as the core clips Y: no value is ever refused, since a
        refusal would depend on the data.
    epsilon : float
        Per-cell epsilon (split between mean and variance); the total is ``K * epsilon``.
    clip : {"clip_user", "none"}
        ``"none"`` is the baseline: no suppression, total ``G_1 * epsilon``.
    split, weights : pair of float
        Budget split and error weights of (mean, variance), spec §7.4. A zero share means the
        statistic is not released.
    variant : {"corrected"}
        Variance-bias bound; the printed (invalid) ``"paper_statement"`` is refused here (E1).
    protect_min_grid : bool
        Never suppress in the cell with the smallest baseline error (spec A1).
    error_target : float, optional
        Error budget E for Clip-User (footnote 3); default the baseline worst case.
    noise_seed : None, int or numpy.random.Generator
        Evaluation-only noise seed: used only by an evaluation release
        (``fit(..., evaluation=True)``, ``release(..., evaluation=True)``). A release always
        draws its noise from OS entropy (:func:`dpcausal.noise.secure_rng`), whatever this is.
    occupancy_public : bool
        The caller's declaration that the occupancy array is public (spec §7.2-1). ``False``
        refuses the release.
    rollback_partial_stage : bool
        Undo the suppressions of a halted stage (spec A4: production default).
    treated_level : optional
        The arm column's treated level. Default: arms must be coded 0/1 (or False/True), 1 being
        treated; other labels (``"placebo"``/``"drug"``) are refused without it.
    alpha : float
        Miscoverage of the published CIs: their level is ``1 - alpha`` (default 0.95).
    bounds, random_state, level : deprecated
        The old names of ``outcome_bounds``, ``noise_seed`` and ``1 - alpha`` (for one release).
    """

    unit: ClassVar[str] = "user"

    def __init__(self, outcome_bounds: tuple[float, float] = (0.0, 1.0), epsilon: float = 1.0,
                 clip: str = "clip_user", split: tuple[float, float] = (0.5, 0.5),
                 weights: tuple[float, float] = (1.0, 1.0), variant: str = "corrected",
                 protect_min_grid: bool = True, error_target: float | None = None,
                 noise_seed: Any = None, occupancy_public: bool = True,
                 rollback_partial_stage: bool = True, treated_level: Any = None,
                 alpha: float = 0.05, bounds: Any = DEPRECATED, random_state: Any = DEPRECATED,
                 level: Any = DEPRECATED) -> None:
        self.outcome_bounds = outcome_bounds
        self.epsilon = epsilon
        self.clip = clip
        self.split = split
        self.weights = weights
        self.variant = variant
        self.protect_min_grid = protect_min_grid
        self.error_target = error_target
        self.noise_seed = noise_seed
        self.occupancy_public = occupancy_public
        self.rollback_partial_stage = rollback_partial_stage
        self.treated_level = treated_level
        self.alpha = alpha
        self.bounds = bounds
        self.random_state = random_state
        self.level = level

    def _bounds(self) -> Any:
        return renamed(self, "outcome_bounds", "bounds")

    def _noise_seed(self) -> Any:
        return renamed(self, "noise_seed", "random_state")

    def _alpha(self) -> Any:
        return renamed(self, "alpha", "level", level_to_alpha)

    # ------------------------------------------------------------------ validation
    def _config(self) -> dict:
        """Every public-parameter refusal; returns the settings a plan depends on."""
        b = self._bounds()
        if (not isinstance(b, (tuple, list)) or len(b) != 2
                or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in b)
                or not b[0] < b[1]):
            raise ValueError(
                f"outcome_bounds must be a finite public range (a, b) with a < b, got {b!r}; "
                "unbounded outcomes have unbounded sensitivity (spec §7.2-2): clamp to a public "
                "range first")
        U = float(b[1] - b[0])
        if not U <= MAX_MAGNITUDE:
            raise ValueError(
                f"outcome_bounds {b!r} are too wide: b - a must be at most 2**400 (about 2.6e120) "
                "so the released variances and noise stay finite; rescale the outcome first")
        check_error_params(U, self.epsilon, self.variant, tuple(self.split), tuple(self.weights))
        eps_mu, eps_var = (share * self.epsilon for share in self.split)
        # the largest noise scale any occupancy can give: U/eps_mu (mean), U^2/(4 eps_var)
        if max(math.log2(U) - math.log2(eps_mu) if eps_mu > 0 else -math.inf,
               2 * math.log2(U) - 2 - math.log2(eps_var) if eps_var > 0 else -math.inf) > 400:
            raise ValueError(
                f"epsilon={self.epsilon!r} is too small for outcome_bounds {b!r}: a noise scale "
                "could exceed 2**400 and the released variances overflow; rescale the outcome "
                "or raise epsilon")
        if self.variant != "corrected":
            raise ValueError(
                f"variant={self.variant!r} is the paper's printed Thm IV.2, not a valid bias bound "
                "(spec erratum E1); releases use variant='corrected'")
        if self.clip not in CLIPS:
            raise ValueError(f"clip must be one of {CLIPS}, got {self.clip!r}")
        if self.occupancy_public is not True:
            raise ValueError(
                "occupancy_public is not True: Clip-User's guarantee is DP conditional on the "
                "occupancy (records per unit and cell), which must be public (spec §7.2-1). "
                "Release the counts with their own DP mechanism first, or declare "
                "occupancy_public=True if the design fixes them (e.g. a visit schedule)")
        if self.error_target is not None and not (
                isinstance(self.error_target, (int, float)) and math.isfinite(self.error_target)
                and self.error_target > 0):
            raise ValueError("error_target must be a number > 0 or None, "
                             f"got {self.error_target!r}")
        seed = self._noise_seed()
        if not (seed is None or isinstance(seed, (int, np.integer))
                or isinstance(seed, np.random.Generator)):
            raise TypeError(
                f"noise_seed must be None, an int or a numpy.random.Generator, got "
                f"{type(seed).__name__}")
        alpha = self._alpha()
        if not (isinstance(alpha, float) and 0 < alpha < 1):
            raise ValueError(f"alpha must be a float in (0, 1), e.g. 0.05, got {alpha!r}")
        if not (self.treated_level is None or isinstance(
                self.treated_level, (str, int, float, bool, np.generic))):
            raise TypeError("treated_level must be None or one level of the arm column, got "
                            f"{type(self.treated_level).__name__}")
        return {"bounds": (float(b[0]), float(b[1])), "U": U, "epsilon": float(self.epsilon),
                "clip": self.clip, "split": tuple(map(float, self.split)),
                "weights": tuple(map(float, self.weights)), "variant": self.variant,
                "protect_min_grid": bool(self.protect_min_grid),
                "error_target": self.error_target,
                "rollback_partial_stage": bool(self.rollback_partial_stage)}

    # ------------------------------------------------------------------ contract
    def check_input(
            self, records: pd.DataFrame, *, outcome: str, unit: str,
            treatment: str | None = None, stratum: str | Sequence[str] | None = None,
            order: str | None = None, record: str | None = None,
            expected_occupancy_hash: str | None = None) -> Prepared[UserLevelFacts]:
        """Every refusal (parameters, columns, arms, occupancy: public facts) and the Clip-User
        plan; the values are clamped, never refused (:func:`clamp_values`).

        The cells are the combinations of the ``stratum`` columns and the ``treatment`` (arm)
        column; ``order``, ``record`` and ``expected_occupancy_hash`` are those of :meth:`plan`.
        Nothing is drawn or charged here.

        Parameters
        ----------
        records : pandas.DataFrame
            One row per record.
        outcome, unit : str
            The value column and the privacy-unit column.
        treatment : str, optional
            The arm column (coded 0/1 unless ``treated_level`` is set).
        stratum : str or list of str, optional
            The stratum columns.
        order, record, expected_occupancy_hash
            As in :meth:`plan`.

        Returns
        -------
        Prepared
            ``public`` holds the plan's facts (:meth:`UserLevelPlan.public_facts`); ``data``
            the retained values.
        """
        self._config()
        columns(records, outcome=outcome, unit=unit, treatment=treatment, stratum=stratum,
                order=order, record=record)
        cell = ([] if stratum is None else as_list(stratum)) + (
            [] if treatment is None else [treatment])
        if not cell:
            raise ValueError("give treatment= (the arm column) and/or stratum= (the stratum "
                             "columns): the released cells are their combinations")
        if outcome in cell + [unit]:
            raise ValueError(f"outcome={outcome!r} cannot also be the unit or a cell column")
        plan = self.plan(records, unit=unit, cell=cell, order=order, record=record,
                         expected_occupancy_hash=expected_occupancy_hash)
        return self._prepare(records, outcome, plan, treatment)

    def privacy_charge(self, public: UserLevelFacts | None = None, /, *, K: int | None = None,
                       G1: int | None = None, n_cells: int | None = None,
                       n: int | None = None, occupancy_hash: str | None = None
                       ) -> PrivacyCharge:
        """Data-free charge ``K * eps`` per user from the plan's public facts (Prop V.1, §1.5),
        given as :class:`UserLevelFacts` or by keyword; ``n`` (the users' count) does not change
        it."""
        if public is not None:
            K, G1, n_cells, occupancy_hash = (public.K, public.G1, public.n_cells,
                                              public.occupancy_hash)
        if K is None or G1 is None or n_cells is None:
            raise TypeError("privacy_charge needs K, G1 and n_cells (or UserLevelFacts)")
        return user_charge(self._config(), K, G1, n_cells, occupancy_hash)

    def _private_release(self, prepared: Prepared[UserLevelFacts], *, evaluation: bool = False
                        ) -> UserLevelOutput:
        """Release noisy cell means/variances once and derive the ATEs (spec §3.7, §7.1).

        One exact lattice Laplace draw per released statistic, in a fixed order (cells sorted by
        key); noise from OS entropy, or from ``random_state`` in evaluation mode only.
        """
        cfg = self._config()
        checked = prepared.data
        if not isinstance(checked, _Checked):
            raise TypeError("prepared must come from check_input, "
                            f"got data of type {type(checked).__name__}")
        plan = checked.plan
        if plan.config != cfg:
            raise ValueError("the settings changed since check_input; check the input again")
        rng = secure_rng() if not evaluation else np.random.default_rng(self._noise_seed())
        a = cfg["bounds"][0]
        G = plan.n_cells
        c = plan.cells["c"].to_numpy()
        g = checked.g
        mu = np.bincount(g, weights=checked.x, minlength=G) / c
        var = np.bincount(g, weights=(checked.x - mu[g]) ** 2, minlength=G) / c
        eps_mu, eps_var = cfg["split"][0] * cfg["epsilon"], cfg["split"][1] * cfg["epsilon"]
        cells = plan.cells
        noisy_mu = np.full(G, np.nan)
        noisy_var = np.full(G, np.nan)
        for j in range(G):                 # one draw per released statistic, fixed shape
            if eps_mu > 0:
                noisy_mu[j] = laplace_mechanism(mu[j], cells["delta_mu"].iat[j], eps_mu, rng) + a
            if eps_var > 0:
                noisy_var[j] = laplace_mechanism(var[j], cells["delta_var"].iat[j], eps_var, rng)
        out = cells.assign(mean=noisy_mu, variance=noisy_var)
        strata, pooled = None, None
        if checked.arms is not None and eps_mu > 0:
            arm, control, treated = checked.arms
            strata, pooled = derive_ate(
                out, list(plan.cell), arm, treated, control, level=1 - self._alpha(),
                variance_bound=None if eps_var > 0 else cfg["U"] ** 2 / 4)
        privacy = Privacy(
            epsilon=plan.epsilon_total, delta=0.0, unit="user", mechanism="laplace",
            detail={"epsilon_per_cell": plan.epsilon, "epsilon_parallel": plan.epsilon_parallel,
                    "epsilon_naive": plan.epsilon_naive, "K": plan.K, "G1": plan.G1,
                    "n_cells": plan.n_cells, "clip": plan.clip,
                    "occupancy_hash": plan.occupancy_hash,
                    "noise_seeded": evaluation and self._noise_seed() is not None})
        return UserLevelOutput(
            ate=None if pooled is None else pooled["ate"],
            ci=None if pooled is None else (pooled["ci_lower"], pooled["ci_upper"]),
            se=None if pooled is None else pooled["se"],
            se_noise=None if pooled is None else pooled["se_noise"],
            level=1 - self._alpha(), privacy=privacy, n=plan.n_units, evaluation=evaluation,
            cells=out, strata=strata, caveats=CAVEATS, noise_sampler=SAMPLER, notes=plan.notes)

    # ------------------------------------------------------------------ plan
    def plan(self, records: pd.DataFrame, unit: str = "unit_id",
             cell: str | Sequence[str] = ("stratum", "arm"), order: str | None = None,
             record: str | None = None,
             expected_occupancy_hash: str | None = None) -> UserLevelPlan:
        """Plan the release from the occupancy alone (no values read, no privacy cost).

        Parameters
        ----------
        records : DataFrame
            One row per record.
        unit, cell : str, str or list of str
            Privacy-unit column and the disjoint cell key columns.
        order : str, optional
            Data-independent order (e.g. timestamp) deciding which records of a unit are kept
            (spec A11); ties and ``None`` fall back to row order.
        record : str, optional
            Record-id column; a record id in two cells means overlapping cells and is refused.
        expected_occupancy_hash : str, optional
            Hash of the registered public occupancy (spec §7.3); a mismatch is refused.

        Returns
        -------
        UserLevelPlan
            K, G_1, the per-cell sensitivities and noise scales, the planned error and the
            charge ``K * eps`` per user (:meth:`UserLevelPlan.privacy_charge`).
        """
        return make_plan(self._config(), records, unit, cell, order, record,
                         expected_occupancy_hash)

    def _prepare(self, records: pd.DataFrame, value: str, plan: UserLevelPlan,
                 arm: str | None) -> Prepared[UserLevelFacts]:
        """Check the arms against ``plan`` and keep the retained values, clamped to the bounds
        (:func:`clamp_values`; no value is refused, no draw)."""
        cfg = self._config()
        if not isinstance(plan, UserLevelPlan):
            raise TypeError("plan must be the UserLevelPlan from .plan(), "
                            f"got {type(plan).__name__}")
        if plan.config != cfg:
            raise ValueError("plan was made with different settings than this release "
                             f"({plan.config} vs {cfg}); re-plan with these settings")
        arms = self._arms(plan, arm)
        if not isinstance(records, pd.DataFrame) or value not in records.columns:
            raise ValueError(f"value={value!r} must be a column of the records DataFrame")
        y = records[value]
        if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
            raise TypeError(f"value column {value!r} must be numeric, got dtype {y.dtype}")
        a, b = cfg["bounds"]
        yv = clamp_values(y.to_numpy(np.float64), a, b)
        A, units, keys, perm = occupancy_from_records(records, plan.unit, list(plan.cell),
                                                      plan.order, None)
        if fingerprint(A, units, keys) != plan.occupancy_hash:
            raise ValueError("the records' occupancy differs from the plan's; plan again on "
                             "these records (a plan is valid only for the occupancy it saw)")
        keep_sorted = keep_mask(perm, plan._retained)
        g = perm.cell_codes[keep_sorted]
        if np.any(np.bincount(g, minlength=plan.n_cells) != plan.cells["c"].to_numpy()):
            raise AssertionError("retained counts differ from the plan (bug)")
        x = yv[perm.order][keep_sorted] - a
        return Prepared(public=plan.public_facts(),
                        data=_Checked(plan=plan, x=x, g=g, arms=arms))

    def _arms(self, plan: UserLevelPlan, arm: str | None) -> tuple[str, Any, Any] | None:
        """The arm column with its control and treated levels, from the public cell keys.

        Arms must be coded 0/1 or False/True (1 treated) unless ``treated_level`` names the
        treated level: sorting labels such as ``"drug"``/``"placebo"`` would flip the sign.
        """
        if arm is None:
            return None
        keys = list(plan.cell)
        if arm not in keys:
            raise ValueError(f"arm={arm!r} must be one of the cell columns {keys}")
        column = plan.cells[arm]
        found = list(pd.unique(column))
        if len(found) != 2:
            raise ValueError(f"arm column {arm!r} must have exactly two levels to derive an ATE, "
                             f"got {found}")
        if self.treated_level is None:
            binary = (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)
                      ) and {0, 1} == set(found)
            if not binary:
                raise ValueError(
                    f"arm column {arm!r} has levels {found}: code the arms 0/1 (or False/True, "
                    "1 = treated) or name the treated level with treated_level=...; labels are "
                    "not ordered by meaning (sorting 'drug'/'placebo' would flip the ATE's sign)")
            treated = found[found.index(1)]
        elif self.treated_level in found:
            treated = found[found.index(self.treated_level)]
        else:
            raise ValueError(f"treated_level={self.treated_level!r} is not a level of the arm "
                             f"column {arm!r} (levels: {found})")
        control = found[1 - found.index(treated)]
        strata = [k for k in keys if k != arm]
        both = (plan.cells.groupby(strata)[arm].nunique() == 2).any() if strata else True
        if not both:
            raise ValueError(f"no stratum has records in both arms of {arm!r}: no ATE can be "
                             "derived; release without treatment= or regroup the strata")
        return arm, control, treated

    # ------------------------------------------------------------------ release
    def release(self, records: pd.DataFrame, value: str = "y", plan: UserLevelPlan | None = None,
                arm: str | None = None, *, evaluation: bool = False) -> UserLevelOutput:
        """Deprecated: :meth:`_release` charged like :meth:`fit` (it drew uncharged noise
        before); use :meth:`fit`."""
        deprecated("UserLevelATE.release", "fit(...)")
        prepared = self._planned(records, value, plan, arm)
        return cast(UserLevelOutput, self._charged(prepared, evaluation=evaluation))

    def _release(self, records: pd.DataFrame, value: str = "y",
                 plan: UserLevelPlan | None = None, arm: str | None = None, *,
                 evaluation: bool = False) -> UserLevelOutput:
        """Release noisy per-cell means and variances following ``plan`` (draws noise once).

        Uncharged: the caller charges ``plan.privacy_charge()`` first. Every check
        (configuration, plan match, arms, occupancy unchanged) runs before the first draw; values
        are clamped to the bounds (:func:`clamp_values`). ``arm`` names the binary cell column
        for the ATE derivation (default: a cell column called ``"arm"``; no ATE when there is
        none).
        """
        return self._private_release(self._planned(records, value, plan, arm),
                                     evaluation=evaluation)

    def _planned(self, records: pd.DataFrame, value: str, plan: UserLevelPlan | None,
                 arm: str | None) -> Prepared[UserLevelFacts]:
        if not isinstance(plan, UserLevelPlan):
            raise TypeError("plan must be the UserLevelPlan from .plan(), "
                            f"got {type(plan).__name__}")
        arm_column = arm if arm is not None else ("arm" if "arm" in plan.cell else None)
        return self._prepare(records, value, plan, arm_column)


# the names before issue 27 §5, for one release
__getattr__ = renamed_names(__name__, {"UserLevelRelease": "UserLevelATE"})
