"""The planner's choice across estimators (issue 33 §4): every estimator valid for the declared
design and the declared assumptions, compared from public facts alone by its expected CI
half-width.

Validity is declared, never inferred (issue 39 item 1; spec small_n_estimators.md §6 erratum
E1): randomization makes ``dim``, ``lin`` and the ensemble valid; in an observational design
only the model-agnostic ensemble is, unless the release declares the outcome model
(``assume_linear=True``: each arm's outcome linear in the covariates), which ``lin`` needs.
``covariate_bounds`` are what ``lin`` computes with, and say nothing about linearity.

A :class:`Candidate` is one registry entry: its name, whether the declared design and public
parameters make it valid, whether ``estimator="auto"`` may take it (its assumptions are then
stated in the release), and its ``expected_halfwidth(n, d, *, zeta, outcome_bounds, alpha,
outcome_sd, **public)``. The comparators of the seed paper (``dpcausal.ate.comparators``) join
as one entry each when their module is present; ``auto`` does not take them (PrivateATE does
not run them).

The ratio to the non-private CI uses a stated outcome spread: ``outcome_sd`` when the user
gives it, else the worst case of the bounds (sd = half their width); the table says which.
"""

from __future__ import annotations

import importlib
import math
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd
from scipy.special import ndtri

from dpcausal.ate import sums
from dpcausal.ate.planner import nonprivate_variance, plan, recommended

DESIGNS = ("observational", "randomized")
#: The large covariate imbalance (standardised mean difference per covariate) at which ``auto``
#: also weighs ``lin`` in an observational design (SPECS.md, "Estimators from noisy sums",
#: planner): lin's noise grows with the arms' imbalance, which no public fact bounds, while the
#: ensemble's is set by public facts; ``auto`` takes lin only if it is the narrowest at the
#: planned imbalance and at this one too: arms 2 within-arm sds apart in every covariate, 8x
#: the 0.25 at which regression adjustment is held reliable.
LARGE_IMBALANCE = 2.0
ENSEMBLE_ASSUMPTION = ("no unmeasured confounding and overlap (model-agnostic cross-fitted "
                       "ensemble; randomization gives both)")


@dataclass(frozen=True)
class Candidate:
    """One estimator the planner compares (module docstring)."""

    name: str
    valid: Callable[[str, dict[str, Any]], bool]      # (design, public parameters)
    expected_halfwidth: Callable[..., float]
    selectable: bool
    assumption: Callable[[str], str]


#: The declarations that widen what ``auto`` may take, as a config states them (issue 39 item 6):
#: the key and value, and the constructor argument of :class:`dpcausal.PrivateATE` they set.
DECLARATIONS: dict[str, dict[str, Any]] = {
    "design: randomized": {"design": "randomized"},
    "assume_linear: true": {"assume_linear": True},
}


def lin_valid(design: str, assume_linear: bool) -> bool:
    """Whether ``lin``'s assumption holds by the declarations (erratum E1): randomization, or
    an observational design that declares each arm's outcome linear in the covariates."""
    return design == "randomized" or bool(assume_linear)


def assumption(estimator: str, design: str, assume_linear: bool = False) -> str:
    """The assumption a release by ``estimator`` states for the declared design (issue 39 item
    1): the ensemble's, or ``dim``/``lin``'s (:func:`dpcausal.ate.sums.assumption`), with
    ``lin``'s outcome model in an observational design named as declared by ``assume_linear``.
    A ``ValueError`` when the declarations do not make ``estimator`` valid."""
    if estimator not in sums.SUM_ESTIMATORS:
        return ENSEMBLE_ASSUMPTION
    stated = sums.assumption(estimator, design)
    if estimator == "lin" and design == "observational":
        if not assume_linear:
            raise ValueError(LIN_UNDECLARED)
        return f"{stated}; declared by assume_linear=True"
    return stated


LIN_UNDECLARED = (
    "estimator='lin' in an observational design assumes each arm's outcome is linear in the "
    "covariates (Lin's regression adjustment is biased otherwise, at any n), and "
    "covariate_bounds do not declare that: declare it with assume_linear=True (config: "
    "estimator.assume_linear: true) only if you can defend it; otherwise use estimator='auto' "
    "or 'aipw' (the model-agnostic ensemble), or design='randomized' if the treatment was "
    "randomly assigned")


def _ensemble_halfwidth(n: int, d: int, *, zeta: float, outcome_bounds: tuple[float, float],
                        alpha: float = 0.05, outcome_sd: float | None = None,
                        **public: Any) -> float:
    """The cross-fitted AIPW ensemble at its recommended K (:func:`dpcausal.ate.planner.plan`)."""
    table = plan(n, d, outcome_bounds=outcome_bounds, zeta=zeta, alpha=alpha,
                 outcome_sd=outcome_sd, **public)
    return float(recommended(table)["halfwidth"])


def _sums_halfwidth(name: str) -> Callable[..., float]:
    def halfwidth(n: int, d: int, *, zeta: float, outcome_bounds: tuple[float, float],
                  alpha: float = 0.05, outcome_sd: float | None = None, **public: Any) -> float:
        return sums.expected_halfwidth(name, n, d, zeta=zeta, outcome_bounds=outcome_bounds,
                                       alpha=alpha, outcome_sd=outcome_sd,
                                       treated_share=public.get("treated_share", 0.5),
                                       design=public.get("design", "observational"),
                                       imbalance=public.get("imbalance"),
                                       estimand=public.get("estimand", "ate"))
    return halfwidth


def _comparator(name: str) -> Candidate | None:
    """The entry of ``dpcausal.ate.comparators.<name>`` if that module is present."""
    try:
        module = importlib.import_module(f"dpcausal.ate.comparators.{name}")
    except ImportError:
        return None
    return Candidate(name,
                     lambda design, public: module.valid_for(
                         design=design, binary_outcome=public["binary_outcome"]),
                     module.expected_halfwidth, selectable=False,
                     assumption=lambda design: f"{module.ASSUMPTION} (a comparator: not run by "
                                               "auto)")


def candidates(assume_linear: bool = False) -> list[Candidate]:
    """The registry: the ensemble, dim (randomized designs), lin (with covariate bounds, in a
    randomized design or one that declares ``assume_linear``), and the comparators whose
    modules are present."""
    entries = [
        Candidate("aipw", lambda design, public: True, _ensemble_halfwidth, True,
                  lambda design: ENSEMBLE_ASSUMPTION),
        Candidate("dim", lambda design, public: design == "randomized", _sums_halfwidth("dim"),
                  True, lambda design: sums.assumption("dim", design)),
        Candidate("lin", lambda design, public: public.get("covariate_bounds") is not None
                  and lin_valid(design, public.get("assume_linear", False)),
                  _sums_halfwidth("lin"), True,
                  lambda design: assumption("lin", design, assume_linear)),
    ]
    return entries + [c for c in (_comparator("lpgm19"), _comparator("gr25")) if c is not None]


def spread_statement(outcome_sd: float | None, outcome_bounds: tuple[float, float]) -> str:
    """Which outcome spread the ratios assume, in words."""
    if outcome_sd is None:
        return f"worst case of the bounds (sd = {(outcome_bounds[1] - outcome_bounds[0]) / 2:g})"
    return f"stated outcome_sd = {outcome_sd:g}"


def compare(n: int, d: int, *, design: str, zeta: float, outcome_bounds: tuple[float, float],
            alpha: float = 0.05, outcome_sd: float | None = None,
            covariate_bounds: Any = None, treated_share: float = 0.5,
            ensemble: dict[str, Any] | None = None, assume_linear: bool = False,
            estimand: str = "ate") -> pd.DataFrame:
    """One row per candidate valid for ``design`` and the declared ``assume_linear``: estimator,
    expected half-width, the non-private difference-in-means half-width under the stated
    spread, their ratio, whether ``auto`` may take it, the assumption it states,
    ``robust_halfwidth`` (what ``auto`` ranks by: the expected half-width, or for ``lin`` in an
    observational design the wider of it and its half-width at :data:`LARGE_IMBALANCE`) and
    ``chosen`` (auto's pick: the selectable one narrowest by that rank). Data-free.

    ``ensemble``: the ensemble's public knobs for :func:`dpcausal.ate.planner.plan`
    (propensity_clip, sensitivity, ...); ``estimand``: the effect compared ("ate" or "att"),
    given to every candidate."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    # a comparator for binary outcomes (GR25) is listed where the bounds are (0, 1): a planning
    # row only, never auto's pick
    public = {"covariate_bounds": covariate_bounds, "treated_share": treated_share,
              "binary_outcome": tuple(outcome_bounds) == (0, 1), "assume_linear": assume_linear,
              "design": design, "estimand": estimand}
    base = float(ndtri(1.0 - alpha / 2.0)) * math.sqrt(
        nonprivate_variance(n, outcome_bounds, outcome_sd, treated_share))
    rows = []
    for cand in candidates(assume_linear):
        if not cand.valid(design, public):
            continue
        extra = dict(ensemble or {}, treated_share=treated_share, estimand=estimand) \
            if cand.name == "aipw" else dict(public)
        try:
            half = cand.expected_halfwidth(n, d, zeta=zeta, outcome_bounds=outcome_bounds,
                                           alpha=alpha, outcome_sd=outcome_sd, **extra)
        except ValueError:      # a comparator refusing these public facts does not apply
            if cand.selectable:
                raise
            continue
        robust = half
        if cand.name == "lin" and design == "observational":
            robust = max(half, cand.expected_halfwidth(
                n, d, zeta=zeta, outcome_bounds=outcome_bounds, alpha=alpha,
                outcome_sd=outcome_sd, **extra, imbalance=LARGE_IMBALANCE))
        rows.append({"estimator": cand.name, "design": design, "halfwidth": half,
                     "nonprivate_halfwidth": base, "ratio": half / base,
                     "selectable": cand.selectable, "assumption": cand.assumption(design),
                     "outcome_spread": spread_statement(outcome_sd, outcome_bounds),
                     "robust_halfwidth": robust})
    table = pd.DataFrame(rows)
    pool = table[table["selectable"]]
    best = pool.sort_values("robust_halfwidth", kind="stable").index[0]
    table["chosen"] = table.index == best
    return EstimatorComparison(table)


def declaration_changes(n: int, d: int, *, design: str, assume_linear: bool = False,
                        covariate_bounds: Any = None, **compared: Any) -> list[dict[str, Any]]:
    """The declarations (:data:`DECLARATIONS`) the release does not make that would change
    ``auto``'s choice (issue 39 item 6), each ``{"declare", "estimator", "halfwidth",
    "assumption", "needs_covariate_bounds"}``: the estimator ``auto`` would then take and its
    expected half-width (:func:`compare` under the wider declarations; ``compared`` holds its
    other arguments). ``lin``'s expected half-width does not depend on the covariate bounds'
    values, so ``assume_linear`` is weighed without them, flagged ``needs_covariate_bounds``.
    Data-free; a declaration is a statement about the study, never a setting to tune."""
    now = compare(n, d, design=design, assume_linear=assume_linear,
                  covariate_bounds=covariate_bounds, **compared)
    chosen = str(now.loc[now["chosen"], "estimator"].iloc[0])
    out = []
    for text, change in DECLARATIONS.items():
        declared: dict[str, Any] = {"design": design, "assume_linear": assume_linear, **change}
        if declared == {"design": design, "assume_linear": assume_linear}:
            continue
        placeholder = covariate_bounds is None and "assume_linear" in change
        table = compare(n, d, **declared, covariate_bounds=[(0.0, 1.0)] * d if placeholder
                        else covariate_bounds, **compared)
        row = table[table["chosen"]].iloc[0]
        if row["estimator"] != chosen:
            out.append({"declare": text, "estimator": str(row["estimator"]),
                        "halfwidth": float(row["halfwidth"]), "ratio": float(row["ratio"]),
                        "assumption": str(row["assumption"]),
                        "needs_covariate_bounds": placeholder and row["estimator"] == "lin"})
    return out




class EstimatorComparison(pd.DataFrame):
    """The table of :func:`compare` (``PrivateATE.compare_estimators``): a ``DataFrame`` with
    every column, whose printed form (``repr``, ``str``, a notebook's HTML) is the narrow view
    of :data:`VIEW`, in full, followed by the names of the other columns (its ten columns
    were cut to ``...`` by pandas). Any slice or operation gives a plain ``DataFrame``."""

    #: the columns the printed form shows
    VIEW = ["estimator", "halfwidth", "ratio", "selectable", "chosen"]

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _view(self) -> pd.DataFrame:
        return pd.DataFrame(self)[self.VIEW]

    def _others(self) -> str:
        hidden = ", ".join(str(c) for c in self.columns if c not in self.VIEW)
        return textwrap.fill(f"(more columns: {hidden}; to_string() shows all)", 100)

    def __repr__(self) -> str:
        return f"{self._view().to_string(index=False)}\n{self._others()}"

    def __str__(self) -> str:
        return repr(self)

    def _repr_html_(self) -> str:
        return f"{self._view().to_html(index=False)}<p>{self._others()}</p>"
