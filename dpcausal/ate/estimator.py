"""``PrivateATE``: the model-agnostic DP ATE estimator of Lebeda et al. (2025), scikit-learn style.

Spec dp_ate_ensemble.md §2.7 (end-to-end pseudocode). ``fit`` is one privacy release; the phases
before the noise (``make_folds`` -> ``fit_folds`` -> ``aggregate``) are public so an orchestrator
can run them as separate tasks; the noise is drawn only through the accountant (``fit``, or
:func:`dpcausal.session.charged_release` after the reservation).

References
----------
Lebeda, Even, Bellet, Josse (2025), "Model Agnostic Differentially Private Causal Inference",
arXiv:2505.19589.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeAlias, cast

import numpy as np
import pandas as pd
from sklearn import config_context
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, LogisticRegression

from dpcausal.accounting import DEFAULT_DELTA, PrivacyCharge
from dpcausal.ate import prerelease as pre
from dpcausal.ate import sums
from dpcausal.ate.aggregation import EnsembleNuisances, aggregate, one_blas_thread
from dpcausal.ate.blocks import BlockLayout, aggregate_blocks, check_block_folds, layout_of
from dpcausal.ate.choice import (
    DESIGNS,
    ENSEMBLE_ASSUMPTION,
    LIN_UNDECLARED,
    compare,
    declaration_changes,
    lin_valid,
)
from dpcausal.ate.choice import assumption as stated_assumption
from dpcausal.ate.complete_cases import count_ratio_release, split_zeta
from dpcausal.ate.features import (
    as_pipeline,
    default_outcome_model,
    default_propensity_model,
    shared_features,
)
from dpcausal.ate.folds import check_n_folds, make_folds
from dpcausal.ate.nuisance import FoldModels, fit_folds, take_rows
from dpcausal.ate.params import check_clip, check_params
from dpcausal.ate.planner import (
    AUTO_CLIP_RANGE,
    UNINFORMATIVE_RATIO,
    NoiseAt,
    auto_folds,
    auto_propensity_clip,
    block_split,
    check_fold_bias,
    check_full_ensemble_cost,
    layout_for,
    narrowest_noise_modes,
    plan,
)
from dpcausal.ate.release import ATERelease, draw_release, draw_sums_release
from dpcausal.ate.scores import ate_and_variance, scores
from dpcausal.ate.sensitivity import (
    NoiseCalibration,
    calibrate,
    outcome_scale,
    score_key,
)
from dpcausal.contract import Mechanism, Prepared, PublicFacts, columns, deprecated
from dpcausal.data_check import DataCheck, check_ate_data
from dpcausal.missing import MISSING_SCORE, FoldImputed, apply_missing, check_policy
from dpcausal.noise import secure_rng
from dpcausal.validation import (
    check_data,
    check_noise_scale,
    check_schema,
    outcome_bounds,
    private_failures,
)

ESTIMATOR_NAMES = ("auto", "aipw", "ipw", "g", "dim", "lin")

# Covariates: a float array, or a DataFrame kept with its column names and dtypes (a user's
# Pipeline may select and encode columns by name)
Covariates: TypeAlias = np.ndarray | pd.DataFrame


@dataclass(frozen=True, eq=False)
class ATEFacts(PublicFacts):
    """The public facts of a core release: ``n`` rows and ``d`` covariates (``None`` where the
    caller does not know it; then ``n_folds`` must be an int)."""

    n: int
    d: int | None = None
    covariates: tuple[str, ...] | None = None   # named covariates, for mapping covariate_bounds

    def _names(self) -> tuple[str, ...]:
        names = super()._names()
        return names if self.covariates is not None else names[:2]


def _facts(n: ATEFacts | int, d: int | None) -> tuple[int, int | None]:
    """``(n, d)`` from :class:`ATEFacts` or the two numbers."""
    return (n.n, n.d) if isinstance(n, ATEFacts) else (n, d)


class PrivateATE(Mechanism[ATEFacts]):
    """Differentially private ATE by cross-fitted ensembles (G-formula, IPW or AIPW): spec §2.7.

    A :class:`dpcausal.Mechanism`: ``fit(df, treatment=..., outcome=..., covariates=...)`` or
    ``fit(X, A, Y)`` is one privacy release returning an :class:`ATERelease`; the public checks
    (:meth:`check_input`, :meth:`privacy_charge`) and the steps before the noise
    (:meth:`make_folds`, :meth:`fit_folds`, :meth:`aggregate`) are public so an orchestrator can
    reserve the charge first; the steps that draw noise (``_private_release``, ``_release``,
    ``_release_sums``) are private and run charged only.

    Parameters
    ----------
    estimator : {"auto", "aipw", "ipw", "g", "dim", "lin"}
        "aipw", "ipw", "g": the cross-fitted ensembles (spec §2.7). "dim": the difference in arm
        means from noisy sums (randomized designs only); "lin": Lin's regression adjustment from
        noisy sufficient statistics (needs ``covariate_bounds``, and in an observational design
        ``assume_linear=True``); both :mod:`dpcausal.ate.sums` (spec small_n_estimators.md
        §2-3). "auto" (default): the narrowest expected CI among the estimators whose
        assumptions the release declares (:mod:`dpcausal.ate.choice`): in a randomized design
        all; in an observational one the model-agnostic AIPW ensemble, and "lin" only when
        ``assume_linear=True`` declares its outcome model and ``covariate_bounds`` are given
        (the bounds alone declare nothing: erratum E1). Chosen from public facts (n, d, design,
        the declarations, bounds, zeta, ``outcome_sd``, ``treated_share``) and published.
    propensity_model : classifier with ``fit``/``predict_proba``. Default: degree-2 features
        then ``LogisticRegression()`` (:func:`dpcausal.ate.features.default_propensity_model`),
        which fits a selection U-shaped in a covariate.
    outcome_model : regressor, or classifier for binary outcomes. Default: degree-2 features then
        ``LinearRegression()`` per arm (:func:`dpcausal.ate.features.default_outcome_model`).
    n_folds : int or "auto"
        K; "auto" (default) follows the data-free planner
        (:func:`dpcausal.ate.planner.auto_n_folds`): the largest K whose folds keep the
        rows-per-fold floor of the estimator and model kind and whose predicted compute fits
        ``compute_budget``, never less than about sqrt(n) when the floor allows. It needs n and
        d only; the K chosen is published.
    block_folds : int, None or "auto"
        K', the folds per block (spec §2.5b): the rows are split into B = K / K'
        public blocks of K' folds, and a row's nuisances average the K' - 1 models of its own
        block not trained on its fold, so each row meets K' - 1 models instead of K - 1.
        ``None`` (or K' = K) is the paper's full ensemble. "auto" (default): with
        ``n_folds="auto"`` the planner's blocks (:func:`dpcausal.ate.planner.auto_folds`: K from
        the rows-per-fold floor; the full ensemble up to K = 256, above it K' <= 128); with an
        int ``n_folds``, the full ensemble. An int must
        divide K. B, K', K and the rows per fold are published.
    folds : "secret" (default), "shuffle", "contiguous" or an int array of public fold ids.
        "secret": a fresh uniformly random balanced assignment per release, from OS entropy and
        never published, so fold membership depends neither on the data nor on the source's row
        order (the order could carry values). "shuffle" (a permutation seeded by ``random_state``)
        and "contiguous" (the authors' code) assign folds by row position: evaluation mode only. An
        array gives each row's fold; it must be public (e.g. a keyed hash of a record id).
    outcome_bounds : (low, high), required, no default: public bounds on the outcome, fixed
        without looking at the data. The noise is calibrated to them and outcomes outside are
        clipped to them (spec §1.2), so a silent default would bias the estimate or misstate
        the privacy; DP libraries such as OpenDP and Tumult require bounds for this reason.
    propensity_clip : eta_c in (0, 0.5] (B_pi = 1/eta_c), or "auto" (default): the planner's
        eta for this release, ``2 sqrt((1/n + 1/(K-1)) / zeta)`` within [0.01, 0.2]
        (:func:`dpcausal.ate.planner.auto_propensity_clip`; SPECS.md "The propensity clip for
        the release at hand"), so that the clip's bias, under the overlap assumption stated
        there, stays below the noise as n and zeta grow. Public; the eta chosen is published.
    zeta : total Gaussian-DP budget of the release.
    ci_share : r = zeta2^2 / zeta^2 spent on the variance; 0 releases the point estimate only;
        "auto" (default): the planner's share with the narrowest expected CI for this n and K
        (:func:`dpcausal.ate.planner.narrowest_noise_modes`, worst-case outcome spread; data-free).
    alpha, p1 : CI level 1 - alpha and the variance-noise slack p1 (eq. 11-12).
    sensitivity : "tight" (default: :func:`dpcausal.ate.sensitivity.tight_constants`, the
        tightest proven bound), "theorem1" (the paper's), "lemma", or "released_code" (not a valid
        bound).
    sigma2 : "paper", "tight" (spec §2.5; both valid) or "auto" (default: the planner's
        narrower one, in practice "tight").
    ci : "conservative" (default; spec §3's valid construction) or "paper" (eq. 11, whose coverage
        argument the spec shows is invalid).
    delta : the delta at which epsilon is reported.
    random_state : seeds the fold assignment only, and only in evaluation mode ("shuffle", or
        "secret" folds in evaluation); a release draws its folds and noise from OS entropy.
    noise_seed : evaluation mode only (refused in a release): seeds the noise, which is
        otherwise drawn from OS entropy. A seeded draw is reproducible by anyone who knows the
        seed; the published parameters say ``noise_seeded``, never a seed.
    chunk_size : rows per aggregation block (default: about 2M predictions per block).
    compute_budget : seconds of fit + aggregation the "auto" K may take on this machine class
        (the planner's compute model); public.
    missing : {"impute", "drop", "drop_public_count"}
        The declared missing-value policy (:mod:`dpcausal.missing`; SPECS.md "Missing and
        non-finite values"), public. "impute" (default): a missing or non-finite covariate takes
        ``missing_fill`` plus an indicator column; a row without a usable treatment or outcome
        stays in n, trains no model and scores 0. "drop": the complete-case estimate, with the
        complete-case count noisy and charged (:mod:`dpcausal.ate.complete_cases`); n, K and the
        folds come from all rows. "drop_public_count": complete cases, whose exact count is
        published as n; its charge holds completeness public ("complete_cases"), which a ledger
        admits only under a cap whose relation holds it.
    missing_fill : the public value of a missing covariate under "impute" (default 0).
    design : {"observational", "randomized"}
        The declared design, public (default "observational"). "randomized" declares the
        treatment randomly assigned: "dim" is allowed only then, and "lin" needs no model
        assumption then.
    covariate_bounds : mapping column -> (lo, hi), or d pairs in column order, optional
        Public covariate bounds, fixed without looking at the data; covariates are clipped to
        them. Required for "lin"; published. They say nothing about the outcome model.
    outcome_sd : float, optional
        A stated outcome standard deviation for the planner's expected CI (and the "auto"
        choices); default the worst case the outcome bounds allow. Public, never checked
        against the data.
    assume_linear : bool
        Declares each arm's outcome linear in the covariates (default False), the model "lin"
        needs in an observational design (issue 39 item 1): only then may "auto" take "lin"
        there, and an explicit "lin" is refused without it. Public: the release states it.
    prerelease : float in (0, 0.5], optional
        Opts in to a charged pre-release of the planning facts (issue 39 item 5;
        :mod:`dpcausal.ate.prerelease`): the share r of zeta^2 releases each arm's noisy count,
        outcome sum and sum of squares, from which ``auto`` learns the treated share and the
        outcome sd it chooses with (a stated or registered fact takes precedence); the release
        runs on ``zeta sqrt(1 - r)``, and the charge is zeta. Only where ``auto`` has a choice
        (a randomized design, or ``assume_linear`` with ``covariate_bounds``) and a fact is
        unstated; the learned facts and the choice are published. Default None: no
        pre-release.
    treated_share : float in (0, 1), optional
        A stated share of treated rows for the planner's expected CI and the "auto" choice (a
        trial protocol's assignment probability, or a curator's registered fact); default 1/2.
        Public, never checked against the data; published.
    estimand : {"ate", "att"}
        The average treatment effect (default) or the effect on the treated. For "dim" and
        "lin" the same noisy statistics post-processed (:mod:`dpcausal.ate.sums`; SPECS.md,
        "Estimators from noisy sums", the ATT); published. For the ensemble, ``"att"`` is
        AIPW's (DoubleML IRM's ``"ATTE"`` score; SPECS.md "The ATT of the ensemble"): the mean
        of the ATT scores over the noisy count of usable treated rows, each with its own
        noise, the count on a public 1% share of zeta^2 (:mod:`dpcausal.ate.complete_cases`);
        ``"g"`` and ``"ipw"`` refuse it, and so does the ensemble's partitioned path.
    """

    def __init__(
        self,
        estimator: str = "auto",
        propensity_model: Any = None,
        outcome_model: Any = None,
        n_folds: int | str = "auto",
        block_folds: int | str | None = "auto",
        folds: str | Sequence[int] = "secret",
        outcome_bounds: tuple[float, float] | None = None,
        propensity_clip: float | str = "auto",
        zeta: float = 1.5,
        ci_share: float | str = "auto",
        alpha: float = 0.05,
        p1: float = 0.01,
        sensitivity: str = "tight",
        sigma2: str = "auto",
        ci: str = "conservative",
        delta: float = DEFAULT_DELTA,
        random_state: int | None = None,
        noise_seed: int | None = None,
        chunk_size: int | None = None,
        compute_budget: float = 60.0,
        missing: str = "impute",
        missing_fill: float = 0.0,
        design: str = "observational",
        covariate_bounds: Any = None,
        outcome_sd: float | None = None,
        assume_linear: bool = False,
        prerelease: float | None = None,
        treated_share: float | None = None,
        estimand: str = "ate",
    ) -> None:
        self.estimator = estimator
        self.propensity_model = propensity_model
        self.outcome_model = outcome_model
        self.n_folds = n_folds
        self.block_folds = block_folds
        self.folds = folds
        self.outcome_bounds = outcome_bounds
        self.propensity_clip = propensity_clip
        self.zeta = zeta
        self.ci_share = ci_share
        self.alpha = alpha
        self.p1 = p1
        self.sensitivity = sensitivity
        self.sigma2 = sigma2
        self.ci = ci
        self.delta = delta
        self.random_state = random_state
        self.noise_seed = noise_seed
        self.chunk_size = chunk_size
        self.compute_budget = compute_budget
        self.missing = missing
        self.missing_fill = missing_fill
        self.design = design
        self.covariate_bounds = covariate_bounds
        self.outcome_sd = outcome_sd
        self.assume_linear = assume_linear
        self.prerelease = prerelease
        self.treated_share = treated_share
        self.estimand = estimand

    # ------------------------------------------------------------------ estimator choice
    def _ensemble(self) -> str:
        """The ensemble the ensemble phases run: the given one, or "aipw" (the model-agnostic
        ensemble ``auto`` compares)."""
        return self.estimator if self.estimator in ("g", "ipw", "aipw") else "aipw"

    def _check_choice(self, d: int | None = None, columns: Sequence[Any] | None = None
                      ) -> None:
        """Refusals of ``estimator``, ``design``, the declarations (``assume_linear``),
        ``covariate_bounds``, ``outcome_sd`` and ``treated_share``, from public parameters only
        (before any charge)."""
        if self.estimator not in ESTIMATOR_NAMES:
            raise ValueError(f"estimator must be one of {ESTIMATOR_NAMES}, got "
                             f"{self.estimator!r}")
        if self.design not in DESIGNS:
            raise ValueError(f"design must be one of {DESIGNS}, got {self.design!r}")
        sums.check_estimand(self.estimand)
        if self.estimand == "att" and self.estimator in ("g", "ipw"):
            raise ValueError(f"estimand='att' is not available for estimator="
                             f"{self.estimator!r}: the ensemble's ATT is AIPW's (its score "
                             "needs the control outcome model and the propensity); use "
                             "estimator='aipw' or 'auto', or estimand='ate'")
        if self.estimand == "att" and self.sensitivity == "released_code":
            raise ValueError("estimand='att' with sensitivity='released_code': that mode "
                             "reproduces the paper's ATE figures and is not a valid bound; use "
                             "sensitivity='tight' (the default)")
        if self.estimator == "dim" and self.design != "randomized":
            raise ValueError("estimator='dim' (difference in means) is valid only in a "
                             f"randomized design, got design={self.design!r}: declare "
                             "design='randomized' if the treatment was randomly assigned, or "
                             "use estimator='aipw' or 'lin'")
        if not isinstance(self.assume_linear, (bool, np.bool_)):
            raise ValueError(f"assume_linear must be True or False, got {self.assume_linear!r}")
        if self.estimator == "lin" and not lin_valid(self.design, self.assume_linear):
            raise ValueError(LIN_UNDECLARED)
        if self.estimator == "lin" and self.covariate_bounds is None:
            raise ValueError("estimator='lin' needs covariate_bounds: a mapping column -> "
                             "(lo, hi) or one pair per covariate, fixed without looking at the "
                             "data")
        sd = self.outcome_sd
        if sd is not None and not (isinstance(sd, (int, float)) and not isinstance(sd, bool)
                                   and math.isfinite(sd) and sd > 0):
            raise ValueError(f"outcome_sd must be a finite number > 0 or None, got {sd!r}")
        if sd is not None and sd > (self._bounds()[1] - self._bounds()[0]) / 2:
            raise ValueError(f"outcome_sd={sd!r} exceeds half the width of the outcome bounds, "
                             "the largest spread any outcome within them can have")
        share = self.treated_share
        if share is not None and not (isinstance(share, (int, float)) and not isinstance(
                share, bool) and 0 < share < 1):
            raise ValueError(f"treated_share must be a number in (0, 1) or None, got {share!r}")
        if self.covariate_bounds is not None and d is not None:
            sums.check_covariate_bounds(self.covariate_bounds, columns, d)
        pre.check(self)

    def compare_estimators(self, n: int, d: int, *, treated_share: float | None = None
                           ) -> pd.DataFrame:
        """Every estimator valid for the declared design and assumptions, compared from public
        facts (:func:`dpcausal.ate.choice.compare`): expected half-width, ratio to the
        non-private CI under the stated outcome spread (``outcome_sd``, else the worst case) and
        treated share (``treated_share``, else this estimator's, else 1/2), the assumption
        each states, and ``chosen``, what ``estimator="auto"`` takes. Data-free. With a
        ``prerelease``: at the release's share of zeta, under the defaults of the facts it
        would learn (auto chooses after the charge)."""
        self._check_choice()
        if self.prerelease is not None:
            return pre.informed(self).compare_estimators(n, d, treated_share=treated_share)
        return compare(n, d, **self._compared(n, d, treated_share),
                       covariate_bounds=self.covariate_bounds, design=self.design,
                       assume_linear=bool(self.assume_linear))

    def declaration_changes(self, n: int, d: int) -> list[dict[str, Any]]:
        """For ``estimator="auto"``: each declaration this release does not make (``design:
        randomized``, ``assume_linear: true``) that would change auto's choice, with the
        estimator it would then take and that one's expected half-width
        (:func:`dpcausal.ate.choice.declaration_changes`); empty for a fixed estimator.
        Data-free."""
        self._check_choice()
        if self.prerelease is not None:     # before the charge: under the defaults
            return pre.informed(self).declaration_changes(n, d)
        if self.estimator != "auto":
            return []
        return declaration_changes(n, d, **self._compared(n, d, None), design=self.design,
                                   assume_linear=bool(self.assume_linear),
                                   covariate_bounds=self.covariate_bounds)

    def _compared(self, n: int, d: int, treated_share: float | None) -> dict[str, Any]:
        """The public arguments of :func:`dpcausal.ate.choice.compare` besides the
        declarations."""
        return dict(zeta=self.zeta, outcome_bounds=self._bounds(), alpha=self.alpha,
                    outcome_sd=self.outcome_sd,
                    treated_share=self.assumed_treated_share(treated_share),
                    ensemble=self._ensemble_knobs(n, d), estimand=self.estimand)

    def assumed_treated_share(self, given: float | None = None) -> float:
        """The treated share the planner assumes: ``given``, else the stated
        ``treated_share``, else 1/2 (the planner's default)."""
        if given is not None:
            return float(given)
        return 0.5 if self.treated_share is None else float(self.treated_share)

    def _ensemble_knobs(self, n: int, d: int) -> dict[str, Any]:
        """The ensemble's public knobs for :func:`dpcausal.ate.planner.plan` at (n, d)."""
        return {
            "estimator": "aipw", "propensity_clip": self.propensity_clip,
            "ci_share": None if self.ci_share == "auto" else self.ci_share,
            "sigma2": None if self.sigma2 == "auto" else self.sigma2, "ci": self.ci,
            "p1": self.p1, "sensitivity": self.sensitivity, "model_kind": self._model_kind(),
            "compute_budget": float(self.compute_budget),
            "block_folds": self.block_folds if self.n_folds == "auto" else None,
            "noise_at": self._fold_bias_noise_at(n, d),
        }

    def resolved_estimator(self, n: int, d: int | None = None) -> str:
        """The estimator a release on n rows and d covariates runs: the given one, or for
        "auto" the narrowest expected CI among those whose assumptions it states
        (:meth:`compare_estimators`); "aipw" when it is the only one (an observational design
        that does not declare ``assume_linear`` with ``covariate_bounds``). Public facts
        only. With a ``prerelease``, before the charge: the choice under the defaults of the
        facts it would learn, at the release's share of zeta (the release chooses again from
        the learned facts)."""
        self._check_choice()
        if self.prerelease is not None:
            return pre.informed(self).resolved_estimator(n, d)
        if self.estimator != "auto":
            return self.estimator
        if self.design == "observational" and (self.covariate_bounds is None
                                               or not self.assume_linear):
            return "aipw"
        if d is None:
            raise ValueError("estimator='auto' compares estimators whose noise depends on the "
                             "number of covariates d: pass d (e.g. privacy_charge(n, d))")
        def choose() -> str:
            table = self.compare_estimators(n, d)
            return str(table.loc[table["chosen"], "estimator"].iloc[0])

        return cast(str, self._memoised("_choices", n, d, choose))

    def _memoised(self, name: str, n: int, d: int, make: Callable[[], Any]) -> Any:
        """``make()``, a function of the public parameters, n and d only, memoised per instance
        in ``self.<name>`` (keyed by them; a copy that changes a parameter misses)."""
        key = (n, d, repr(sorted((k, v) for k, v in self.get_params(deep=False).items()
                                 if k not in ("noise_seed", "random_state"))))
        memo = self.__dict__.setdefault(name, {})
        if key not in memo:
            memo[key] = make()
        return memo[key]

    def assumption(self, estimator: str) -> str:
        """The assumption a release by ``estimator`` states, for the declared design and
        assumptions (:func:`dpcausal.ate.choice.assumption`)."""
        return stated_assumption(estimator, self.design, bool(self.assume_linear))

    def _sums_calibration(self, estimator: str, n: int, d: int) -> sums.SumsCalibration:
        _positive_zeta(self.zeta)
        return sums.calibrate_sums(estimator, n, d, float(self.zeta), self.design)

    def _sums_params(self, estimator: str, n: int, d: int,
                     columns: Sequence[Any] | None = None) -> dict[str, Any]:
        """Everything public about a ``dim``/``lin`` release."""
        cal = self._sums_calibration(estimator, n, d)
        bounds = (None if self.covariate_bounds is None or estimator == "dim"
                  else [list(b) for b in sums.check_covariate_bounds(
                      self.covariate_bounds, columns, d)])
        return {
            "estimator": estimator, "design": self.design, "n": n, "d": d,
            "assumption": self.assumption(estimator),
            "outcome_bounds": list(self._bounds()), "covariate_bounds": bounds,
            "outcome_sd": self.outcome_sd, "assume_linear": bool(self.assume_linear),
            "treated_share": self.treated_share, "estimand": self.estimand,
            "zeta": self.zeta, "alpha": self.alpha,
            "delta": self.delta, "sensitivity": cal.sensitivity,
            "sensitivity_mode": "replace_one_l2_sums", "q_weight": cal.q_weight,
            "ridge": cal.ridge, "eigen_floor": cal.eigen_floor, "count_floor": cal.floor,
            "planned": "estimator" if self.estimator == "auto" else "",
            "noise_seeded": self.noise_seed is not None,
            "missing": self.missing,
            "missing_fill": self.missing_fill if self.missing == "impute" else None,
        }

    def sum_statistics(self, X: Any, A: np.ndarray, Y: np.ndarray, *, estimator: str,
                       usable: np.ndarray | None = None, columns: Sequence[Any] | None = None
                       ) -> np.ndarray:
        """The pre-noise statistic vector of ``dim``/``lin`` on a chunk of rows
        (:func:`dpcausal.ate.sums.chunk_statistics`): additive across chunks, so a partitioned
        run sums the chunks' vectors and releases once with :meth:`_release_statistics`.
        ``usable`` False rows contribute nothing. Non-private: for in-memory sums only."""
        d = 0 if X is None else int(np.shape(X)[1])
        pairs = (None if estimator == "dim" else
                 sums.check_covariate_bounds(self.covariate_bounds, columns, d))
        return sums.chunk_statistics(X, A, Y, estimator=estimator,
                                     outcome_bounds=self._bounds(), covariate_bounds=pairs,
                                     usable=usable)

    def _release_statistics(self, n: int, statistics: np.ndarray, *, estimator: str, d: int,
                            evaluation: bool = False, params: dict[str, Any] | None = None,
                            columns: Sequence[Any] | None = None) -> ATERelease:
        """The ``dim``/``lin`` release from the summed pre-noise vector of all n rows: the
        noise drawn once, then the estimate and its CI (:func:`draw_sums_release`). ``params``
        adds public facts of how the sums were made. Uncharged: callers charge it first
        (:func:`dpcausal.session.charged_release`)."""
        self.check_mode(evaluation)
        cal = self._sums_calibration(estimator, n, d)
        stats = np.asarray(statistics, dtype=float)
        if stats.shape != (2 * sums.block_size(cal.d),):
            raise ValueError(f"statistics must have {2 * sums.block_size(cal.d)} entries for "
                             f"estimator={estimator!r} and d={cal.d}, got {stats.shape}")
        return draw_sums_release(
            stats, cal, self._noise_rng(evaluation), alpha=self.alpha, delta=self.delta,
            outcome_bounds=self._bounds(),
            params={**self._sums_params(estimator, n, d, columns), **(params or {})},
            evaluation=evaluation, estimand=self.estimand)

    # ------------------------------------------------------------------ public parameters
    def resolved_n_folds(self, n: int, d: int | None = None) -> int:
        """K for n rows and d covariates: the given int, or the planner's for "auto" (which
        needs d: the rows-per-fold floor grows with it)."""
        return self.resolved_folds(n, d)[0]

    def resolved_folds(self, n: int, d: int | None = None) -> tuple[int, int]:
        """``(K, K')``: the folds and the folds per block (spec §2.5b), public."""
        kb = self.block_folds
        if not (kb is None or kb == "auto" or (isinstance(kb, int) and not isinstance(kb, bool))):
            raise ValueError(f"block_folds must be an int, None or 'auto', got {kb!r}")
        if isinstance(self.n_folds, str):
            if self.n_folds != "auto":
                raise ValueError(f"n_folds must be an int or 'auto', got {self.n_folds!r}")
            if d is None:
                raise ValueError(
                    "n_folds='auto' follows the planner, whose rows-per-fold floor depends on "
                    "the number of covariates d: pass d (e.g. privacy_charge(n, d)) or an int "
                    "n_folds")
            budget = self.compute_budget
            if not (isinstance(budget, (int, float)) and budget > 0):
                raise ValueError(f"compute_budget must be a number > 0, got {budget!r}")
            return self._auto_folds(n, d)
        K = self.n_folds
        if not isinstance(kb, int) or kb == K:
            return K, K
        check_block_folds(K, kb)
        return K, kb

    def block_layout(self, n: int, d: int | None = None) -> BlockLayout | None:
        """The public block layout (spec §2.5b), None for the full ensemble: the balanced
        split's, or counted from a public fold-id array."""
        K, kb = self.resolved_folds(n, d)
        if kb == K:
            return None
        if isinstance(self.folds, str):
            return layout_for(n, K, kb)
        return layout_of(np.asarray(self.folds), K, kb)

    def planned_params(self, n: ATEFacts | int, d: int | None = None) -> dict[str, Any]:
        """The knobs the planner picks for n rows and d covariates (or their
        :class:`ATEFacts`): ``{"estimator": ...}`` for ``estimator="auto"``, and
        ``{"n_folds": K}`` when an ensemble's K is the planner's (``n_folds="auto"``), with
        ``"block_folds": K'`` when the planner chose blocks; the noise modes follow from n and
        K, so they need no record."""
        n, d = _facts(n, d)
        out: dict[str, Any] = {}
        if self.prerelease is not None:     # chosen after the charge, recorded by the release
            return out
        chosen = self.resolved_estimator(n, d)
        if self.estimator == "auto":
            out["estimator"] = chosen
        if chosen not in sums.SUM_ESTIMATORS and self.n_folds == "auto":
            K, kb = self.resolved_folds(n, d)
            out["n_folds"] = K
            if kb != K:   # blocks (spec §2.5b): an int K alone would be the full ensemble
                out["block_folds"] = kb
        if chosen not in sums.SUM_ESTIMATORS and chosen != "g" and self.propensity_clip == "auto":
            out["propensity_clip"] = self.resolved_propensity_clip(n, d)
        return out

    def _auto_folds(self, n: int, d: int) -> tuple[int, int]:
        """``n_folds="auto"``'s ``(K, K')`` (:func:`~dpcausal.ate.planner.auto_folds`): for the
        AIPW ensemble with the default models and set bounds, also kept where the fold-size
        bias envelope is within :data:`~dpcausal.ate.planner.FOLD_BIAS_KEPT` of the noise sd,
        found on this release's own calibration (:meth:`_noise_at`); the floor and the envelope
        count the smaller arm's rows at the stated (registered, pre-released) treated share.
        Memoised per (n, d) and public parameters: the bisection calibrates about 20 times."""
        def resolve() -> tuple[int, int]:
            noise_at = self._fold_bias_noise_at(n, d)
            return auto_folds(n, d, estimator=self._ensemble(), model_kind=self._model_kind(),
                              compute_budget=float(self.compute_budget),
                              block_folds=self.block_folds,
                              outcome_bounds=None if noise_at is None else self.outcome_bounds,
                              noise_at=noise_at, treated_share=self.assumed_treated_share())

        return cast(tuple[int, int], self._memoised("_folds_memo", n, d, resolve))

    def _fold_bias_noise_at(self, n: int, d: int) -> NoiseAt | None:
        """:meth:`_noise_at` at (n, d) where ``n_folds="auto"`` keeps the fold-size bias rule
        (the AIPW ensemble with the default models and set bounds), else None."""
        if not (self.n_folds == "auto" and self._ensemble() == "aipw"
                and self._model_kind() == "quadratic" and self.outcome_bounds is not None):
            return None
        return lambda k: self._noise_at(k, n, d)

    def resolved_propensity_clip(self, n: int, d: int | None = None,
                                 layout: BlockLayout | None = None) -> float:
        """eta: the given number, or for "auto" the planner's
        (:func:`dpcausal.ate.planner.auto_propensity_clip`) at this n, K (or block ``layout``)
        and the estimate's zeta; public."""
        if self.propensity_clip != "auto":
            return check_clip(self.propensity_clip)
        K, _ = self.resolved_folds(n, d)
        check_n_folds(n, K)
        _positive_zeta(self.zeta)
        return auto_propensity_clip(n, K, self._estimate_zeta(), self._layout(n, d, layout),
                                    self.assumed_treated_share())

    def check_facts(self, n: ATEFacts | int, d: int | None = None) -> None:
        """Every refusal that n rows and d covariates (or their :class:`ATEFacts`) decide, as
        :meth:`check_input` makes them after its schema checks: the parameters of the estimator
        that will run, and for an ensemble K against n and its noise scale against the bounds
        (``dim``/``lin`` are not judged by the ensemble's noise: issue 39 item 6). Data-free: an
        orchestrator that holds the registered n (issue 32 §3) refuses here, before the charge
        and before any read."""
        facts = n
        n, d = _facts(n, d)
        if d is None:
            raise TypeError("check_facts needs d, the number of covariates (or ATEFacts)")
        names = facts.covariates if isinstance(facts, ATEFacts) else None
        if names is None and isinstance(self.covariate_bounds, Mapping):
            names = tuple(self.covariate_bounds)
        check_policy(self.missing, self.missing_fill)
        self._check_params(n, d, names)

    def _check_params(self, n: int, d: int, names: Sequence[Any] | None) -> None:
        """The refusals of the parameters of the estimator that will run (dim/lin are not
        judged by the ensemble's noise: issue 39 item 6); with a pre-release, of each one
        ``auto`` may take after it, at the release's zeta (:func:`dpcausal.ate.prerelease.
        candidates`), so the release completes whichever the learned facts choose."""
        if self.prerelease is not None:
            for informed in pre.candidates(self, n, d):
                informed._check_params(n, d, names)
            return
        chosen = self.resolved_estimator(n, d)
        if chosen in sums.SUM_ESTIMATORS:
            self._sums_params(chosen, n, d, names)
        else:
            self._params(n, d)

    def resolved_noise_modes(self, n: int, d: int | None = None) -> tuple[str, float]:
        """``(sigma2, ci_share)``: the given values, or for "auto" the planner's narrowest
        expected CI at this n and K (data-free; worst-case outcome spread)."""
        sigma2, share = self.sigma2, self.ci_share
        if sigma2 != "auto" and share != "auto":
            return sigma2, share  # type: ignore[return-value]
        K, kb = self.resolved_folds(n, d)
        return narrowest_noise_modes(
            n, K, block_folds=kb, outcome_bounds=self._bounds(),
            estimator=self._ensemble(), propensity_clip=self.resolved_propensity_clip(n, d),
            zeta=self.zeta, ci_share=None if share == "auto" else share,  # type: ignore[arg-type]
            sigma2=None if sigma2 == "auto" else sigma2, ci=self.ci, alpha=self.alpha,
            p1=self.p1, sensitivity=self.sensitivity, estimand=self.estimand)

    def plan(self, n: int, d: int, *, outcome_sd: float | None = None,
             treated_share: float | None = None, n_folds: Sequence[int] | None = None,
             estimators: Sequence[str] | None = None,
             propensity_clips: Sequence[float] | None = None) -> pd.DataFrame:
        """The planner's table for this estimator's public parameters on n rows and d
        covariates (:func:`dpcausal.ate.planner.plan`): candidate K, rows per fold, sigma1, sigma2,
        the expected CI half-width under the stated outcome-spread assumption (``outcome_sd``,
        default the worst case of the bounds), its ratio to the non-private CI, predicted
        predictions and seconds, and the recommended row, which is what ``n_folds="auto"`` and
        the "auto" noise modes choose. Data-free: nothing is read or charged.

        Parameters
        ----------
        n, d : int
            Rows and covariates (public).
        outcome_sd : float, optional
            The assumed outcome standard deviation; default the worst case of the bounds.
        treated_share : float, optional
            The assumed share of treated rows; default the stated ``treated_share``, else 1/2.
        n_folds, estimators, propensity_clips : sequences, optional
            Candidates to compare instead of the planner's K grid and this estimator's own
            ``estimator`` and ``propensity_clip``.

        Returns
        -------
        pandas.DataFrame
            :func:`dpcausal.ate.planner.plan`'s table for the ensemble, plus one row per
            other estimator valid for the declared design (:meth:`compare_estimators`: dim in
            a randomized design, lin with ``covariate_bounds`` where its model is valid, the
            comparators present), with
            the columns ``design``, ``assumption`` (what a release by that estimator states),
            ``outcome_spread`` (the stated ``outcome_sd`` or the worst case) and
            ``selectable``; ``planner.recommended(table)`` is its recommended row: for
            ``estimator="auto"`` the estimator auto takes, else the given ensemble's best K.
            With a ``prerelease``: at the release's share of zeta, under the defaults of the
            facts it would learn.
        """
        self._check_choice()
        if self.prerelease is not None:
            return pre.informed(self).plan(n, d, outcome_sd=outcome_sd,
                                           treated_share=treated_share, n_folds=n_folds,
                                           estimators=estimators,
                                           propensity_clips=propensity_clips)
        outcome_sd = self.outcome_sd if outcome_sd is None else outcome_sd
        treated_share = self.assumed_treated_share(treated_share)
        ensembles = None if estimators is None else [e for e in estimators
                                                     if e in ("g", "ipw", "aipw")]
        others = [e for e in (estimators or []) if e not in ("g", "ipw", "aipw")]
        table = plan(
            n, d, outcome_bounds=self._bounds(), estimator=self._ensemble(),
            propensity_clip=self.propensity_clip, zeta=self.zeta,
            ci_share=None if self.ci_share == "auto" else self.ci_share,  # type: ignore[arg-type]
            sigma2=None if self.sigma2 == "auto" else self.sigma2, ci=self.ci,
            alpha=self.alpha, p1=self.p1, sensitivity=self.sensitivity, n_folds=n_folds,
            estimators=ensembles or None, propensity_clips=propensity_clips,
            model_kind=self._model_kind(), outcome_sd=outcome_sd, treated_share=treated_share,
            compute_budget=float(self.compute_budget),
            block_folds=self.block_folds if self.n_folds == "auto" else self.resolved_folds(
                n, d)[1], estimand=self.estimand, noise_at=self._fold_bias_noise_at(n, d))
        return self._with_comparison(table, n, d, outcome_sd, treated_share,
                                     None if estimators is None else others)

    def _with_comparison(self, table: pd.DataFrame, n: int, d: int, outcome_sd: float | None,
                         treated_share: float, names: list[str] | None) -> pd.DataFrame:
        """The ensemble's K table plus one row per other estimator valid for the design
        (:func:`dpcausal.ate.choice.compare`; ``names`` restricts them), with the design, the
        assumption each states and the stated outcome spread; for ``estimator="auto"`` the
        recommended row is auto's choice."""
        comparison = compare(n, d, design=self.design, zeta=self.zeta,
                             outcome_bounds=self._bounds(), alpha=self.alpha,
                             outcome_sd=outcome_sd, covariate_bounds=self.covariate_bounds,
                             treated_share=treated_share, ensemble=self._ensemble_knobs(n, d),
                             assume_linear=bool(self.assume_linear), estimand=self.estimand)
        extra = comparison[(comparison["estimator"] != "aipw") & (
            comparison["estimator"].isin(names) if names is not None else True)]
        table = table.assign(design=self.design, assumption=ENSEMBLE_ASSUMPTION,
                             outcome_spread=comparison["outcome_spread"].iloc[0],
                             selectable=True)
        rows = extra.assign(feasible=True, informative=extra["ratio"] <= UNINFORMATIVE_RATIO,
                            recommended=False).drop(columns="chosen")
        out = pd.concat([table, rows], ignore_index=True) if len(rows) else table
        if self.estimator == "auto":
            chosen = str(comparison.loc[comparison["chosen"], "estimator"].iloc[0])
            if chosen != "aipw" and chosen in set(out["estimator"]):
                out["recommended"] = out["estimator"] == chosen
        return out

    def _model_kind(self) -> str:
        """The planner's model kind: "parametric" for plain linear/logistic models,
        "quadratic" for them after a shared degree-2 feature map (the defaults)."""
        features, _ = shared_features(self._used_models())
        if not self._plain_linear():
            return "other"
        if features is None:
            return "parametric"
        return "quadratic" if features.get_params()["degree"] == 2 else "other"

    def _params(self, n: int, d: int) -> dict[str, Any]:
        p = self.get_params(deep=False)
        p["estimator"] = self._ensemble()
        p["n_folds"] = self.resolved_n_folds(n, d)
        p["propensity_model"] = self._propensity_model()
        p["outcome_model"] = self._outcome_model()
        if self.propensity_clip == "auto":
            p["propensity_clip"] = self.resolved_propensity_clip(n, d)
        # "auto" noise modes are the planner's choice among valid values: checked as such here,
        # resolved once K has passed its checks
        p["sigma2"] = "tight" if self.sigma2 == "auto" else self.sigma2
        p["ci_share"] = (0.0 if self._ensemble() == "g" else 0.1) if self.ci_share == "auto" \
            else self.ci_share
        check_params(p, n, d)
        check_policy(self.missing, self.missing_fill)
        p["sigma2"], p["ci_share"] = self.resolved_noise_modes(n, d)
        sigma_ate = self.calibration(n, d).sigma_ate
        check_noise_scale(sigma_ate, self._bounds())
        if self._ensemble() == "aipw" and self._model_kind() == "quadratic":
            check_fold_bias(n, d, self._bounds(), p["n_folds"], sigma_ate,
                            lambda k: self._noise_at(k, n, d), self.assumed_treated_share())
        if isinstance(self.compute_budget, (int, float)):
            check_full_ensemble_cost(n, *self.resolved_folds(n, d), self._ensemble(),
                                     float(self.compute_budget))
        return p

    def _noise_at(self, n_folds: int, n: int, d: int) -> tuple[int, int, float]:
        """``(K, K', sigma1)`` of this release with about ``n_folds`` folds, laid out as its own
        K is: with an int ``block_folds`` K' a multiple of it (below it the full ensemble); with
        ``n_folds="auto"`` and ``block_folds="auto"`` the planner's blocks
        (:func:`~dpcausal.ate.planner.block_split`); else the full ensemble of that K."""
        other = clone(self)
        kb = self.block_folds
        if isinstance(kb, int) and not isinstance(kb, bool):
            K, kb = ((n_folds // kb) * kb, kb) if n_folds >= kb else (n_folds, n_folds)
        elif self.n_folds == "auto" and kb == "auto":
            K, kb = block_split(n_folds, "auto")
        else:
            K, kb = n_folds, n_folds
        other.set_params(n_folds=K, block_folds=kb if kb < K else None)
        cal = other.calibration(n, d)
        return cal.n_folds, kb, cal.sigma_ate

    def _plain_linear(self) -> bool:
        """Whether every model the estimator uses is a plain ``LinearRegression`` or
        ``LogisticRegression``: then DataFrame covariates become a float array and the fold
        models are predicted by one stacked matrix product; otherwise a DataFrame reaches the
        models with its column names and dtypes, for a Pipeline that selects columns by
        name."""
        _, inner = shared_features(self._used_models())
        return all(type(m) in (LinearRegression, LogisticRegression) for m in inner)

    def _used_models(self) -> list[Any]:
        """The models the ensemble fits: propensity (IPW, AIPW) and outcome (G, AIPW)."""
        used = []
        if self._ensemble() in ("ipw", "aipw"):
            used.append(self._propensity_model())
        if self._ensemble() in ("g", "aipw"):
            used.append(self._outcome_model())
        return used

    def _indicators(self, linear: str) -> str:
        """Where the "impute" policy fills covariates (:func:`dpcausal.missing.apply_missing`):
        ``linear`` ("present" in memory, "all" across partitions) for plain linear/logistic
        models, else inside each fold's model (:class:`dpcausal.missing.FoldImputed`)."""
        return linear if self._plain_linear() else "in_folds"

    def _propensity_model(self) -> Any:
        return (default_propensity_model() if self.propensity_model is None
                else self.propensity_model)

    def _outcome_model(self) -> Any:
        return default_outcome_model() if self.outcome_model is None else self.outcome_model

    def check_mode(self, evaluation: bool) -> None:
        """Refusals that depend on the mode and the public parameters only, made before anything
        is charged: seeds and row-position folds are for evaluation, since
        a seeded draw or a fold that follows row order can be replayed or read from the data."""
        if evaluation:
            return
        if self.noise_seed is not None:
            raise ValueError(
                "noise_seed is for evaluation mode only (fit(..., evaluation=True)): a seeded "
                "draw is reproducible by anyone who knows the seed; a release draws its noise "
                "from OS entropy")
        if isinstance(self.folds, str) and self.folds in ("shuffle", "contiguous"):
            raise ValueError(
                f"folds={self.folds!r} is for evaluation mode only: it assigns folds by row "
                "position, so a source ordered by data values moves records between folds when "
                "one record changes; a release uses folds='secret' (the default) or an array "
                "of public fold ids (e.g. a keyed hash of a record id)")

    def _noise_rng(self, evaluation: bool) -> np.random.Generator:
        """OS entropy; a ``noise_seed`` generator only in evaluation mode (a seeded draw
        can be replayed)."""
        if evaluation and self.noise_seed is not None:
            return np.random.default_rng(self.noise_seed)
        return secure_rng()

    def calibration(self, n: int, d: int | None = None, layout: BlockLayout | None = None
                    ) -> NoiseCalibration:
        """The data-free noise calibration for n rows and d covariates (spec §2.5; d is needed
        only by the "auto" K). ``layout``: a public block layout other than this estimator's
        own (spec §2.5b; the partitioned path's blocks, :mod:`dpcausal.ate.partitioned`), checked
        against n, K and K'."""
        K = self.resolved_n_folds(n, d)
        sigma2, share = self.resolved_noise_modes(n, d)
        return calibrate(
            self._ensemble(), n, K, self._bounds(), self.resolved_propensity_clip(n, d, layout),
            self._estimate_zeta(), share, self.sensitivity, sigma2, self._layout(n, d, layout),
            self.estimand,
        )

    def _counted(self) -> str | None:
        """What the ensemble's release divides by, drawn noisy beside T
        (:func:`dpcausal.ate.complete_cases.count_ratio_release`): the usable treated rows for
        the ATT (complete ones under ``missing="drop"``), the complete cases for the ATE under
        "drop", else nothing."""
        if self.estimand == "att":
            return "treated"
        return "complete_cases" if self.missing == "drop" else None

    def _estimate_zeta(self) -> float:
        """The zeta of the estimate and its CI: all of it, or, when a count is released beside
        it (:meth:`_counted`), what the count leaves
        (:func:`dpcausal.ate.complete_cases.split_zeta`)."""
        return split_zeta(self.zeta)[0] if self._counted() else self.zeta

    def _layout(self, n: int, d: int | None, layout: BlockLayout | None) -> BlockLayout | None:
        """``layout`` checked against (n, K, K'), else :meth:`block_layout`."""
        if layout is None:
            return self.block_layout(n, d)
        K, kb = self.resolved_folds(n, d)
        if (layout.n, layout.n_folds, layout.block_folds) != (n, K, kb):
            raise ValueError(
                f"the block layout (n={layout.n}, K={layout.n_folds}, K'={layout.block_folds}) "
                f"is not this release's (n={n}, K={K}, K'={kb})")
        return layout

    def privacy_charge(self, n: ATEFacts | int, d: int | None = None) -> PrivacyCharge:
        """What one release on n rows and d covariates (or their :class:`ATEFacts`) costs, for
        the ledger: zeta-GDP (spec §2.6); data-free. ``d`` is needed only with
        ``n_folds="auto"`` (the split of zeta between the ATE and the CI follows K)."""
        n, d = _facts(n, d)
        if self.prerelease is not None:
            return pre.charge(self, n, d)
        chosen = self.resolved_estimator(n, d)
        if chosen in sums.SUM_ESTIMATORS:
            cal_s = self._sums_calibration(chosen, n, d or 0)
            sums_detail: dict[str, Any] = {"estimator": chosen, "sensitivity": cal_s.sensitivity}
            # under "drop" the arms' counts are noisy statistics already (no extra draw); an
            # exact complete-case n publishes completeness
            if self.missing == "drop_public_count":
                sums_detail["public_facts"] = ["complete_cases"]
            return PrivacyCharge("gaussian", zeta=cal_s.zeta, delta=self.delta,
                                 detail=sums_detail)
        cal = self.calibration(n, d)
        zeta = cal.zeta if cal.zeta2 > 0 else cal.zeta1
        detail: dict[str, Any] = {"zeta1": cal.zeta1, "zeta2": cal.zeta2}
        if self._counted():     # the complete-case or treated count's own draw
            detail["zeta_count"] = split_zeta(self.zeta)[1]
            zeta = math.hypot(zeta, detail["zeta_count"])
        if self.missing == "drop_public_count":     # its n publishes completeness exactly
            detail["public_facts"] = ["complete_cases"]
        return PrivacyCharge("gaussian", zeta=zeta, delta=self.delta, detail=detail)

    def public_params(self, n: int, d: int | None, layout: BlockLayout | None = None
                      ) -> dict[str, Any]:
        """Everything public about a release (spec §2.6), as plain values for logging; the
        knobs the planner chose are listed in ``planned``; ``layout`` as :meth:`calibration`.
        A ``dim``/``lin`` release has its own set (:meth:`_sums_params`)."""
        chosen = self.resolved_estimator(n, d)
        if chosen in sums.SUM_ESTIMATORS:
            return self._sums_params(chosen, n, d or 0)
        cal = self.calibration(n, d, layout)
        _, share = self.resolved_noise_modes(n, d)
        planned = [name for name, value in (("n_folds", self.n_folds), ("sigma2", self.sigma2),
                                            ("ci_share", self.ci_share),
                                            ("block_folds", self.block_folds if self.n_folds
                                             == "auto" else None),
                                            ("propensity_clip", self.propensity_clip
                                             if self._ensemble() != "g" else None),
                                            ("estimator", self.estimator)) if value == "auto"]
        layout = self._layout(n, d, layout)
        return {
            "estimator": self._ensemble(), "n": n, "d": d, "n_folds": cal.n_folds,
            "n_blocks": cal.n_blocks, "block_folds": cal.block_folds,
            "rows_per_block": cal.block_rows, "rows_per_fold": (
                layout.fold_rows if layout is not None
                else n // cal.n_folds if isinstance(self.folds, str)
                else int(np.bincount(np.asarray(self.folds)).min())),
            "folds": self.folds if isinstance(self.folds, str) else "public_ids",
            "propensity_model": (_describe(self._propensity_model())
                                 if self._ensemble() != "g" else None),
            "outcome_model": (_describe(self._outcome_model())
                              if self._ensemble() != "ipw" else None),
            "aggregators": "harmonic(pi), harmonic(1-pi), mean(mu)",
            "outcome_bounds": list(self._bounds()),
            "propensity_clip": self.resolved_propensity_clip(n, d, layout), "B_mu": cal.B_mu,
            "B_pi": cal.B_pi,
            "zeta": self.zeta, "ci_share": share, "zeta1": cal.zeta1,
            "zeta2": cal.zeta2, "alpha": self.alpha, "p1": self.p1,
            "sensitivity": self.sensitivity, "sigma2": cal.sigma2_mode, "ci": self.ci,
            "delta": self.delta, "planned": ",".join(planned),
            "compute_budget": self.compute_budget if self.n_folds == "auto" else None,
            "noise_seeded": self.noise_seed is not None,  # never a seed: it reveals the noise
            "missing": self.missing,
            "missing_fill": self.missing_fill if self.missing == "impute" else None,
            "design": self.design, "assumption": ENSEMBLE_ASSUMPTION,
            "covariate_bounds": None if self.covariate_bounds is None or d is None else [
                list(b) for b in sums.check_covariate_bounds(
                    self.covariate_bounds, list(self.covariate_bounds)
                    if isinstance(self.covariate_bounds, Mapping) else None, d)],
            "outcome_sd": self.outcome_sd, "assume_linear": bool(self.assume_linear),
            "treated_share": self.treated_share, "estimand": self.estimand,
        }

    # ------------------------------------------------------------------ phases
    def validate(self, X: Any, A: Any, Y: Any) -> tuple[Covariates, np.ndarray, np.ndarray]:
        """Check data and parameters with detailed messages (evaluation and curator-side use);
        clip Y to the bounds (spec §1.2). Data-dependent messages: a release uses
        :meth:`check_input` before the charge and checks values after it."""
        Xa, Aa, Ya = check_data(X, A, Y, keep_frame=not self._plain_linear())
        self._params(Xa.shape[0], Xa.shape[1])
        return Xa, Aa, self._clip(Ya)

    def _clip(self, Y: np.ndarray) -> np.ndarray:
        lo, hi = self._bounds()
        return np.clip(Y, lo, hi)

    def _bounds(self) -> tuple[float, float]:
        """The checked public outcome bounds (a ``ValueError`` naming the argument if unset)."""
        return outcome_bounds(self.outcome_bounds)

    def make_folds(self, n: int, evaluation: bool = False, d: int | None = None) -> np.ndarray:
        """Fold ids (spec §2.2 step 1), never a function of data values: a fresh secret draw from OS
        entropy ("secret"; seeded by ``random_state`` in evaluation), the public array, or, in
        evaluation only, the seeded or contiguous split of row positions (row order may carry
        values). ``d`` is needed only with ``n_folds="auto"``."""
        self.check_mode(evaluation)
        K, kb = self.resolved_folds(n, d)
        if isinstance(self.folds, str) and self.folds == "secret":
            seeded = evaluation and self.random_state is not None
            return make_folds(n, K, "secret",
                              np.random.default_rng(self.random_state) if seeded else secure_rng(),
                              block_folds=kb)
        return make_folds(n, K, self.folds, self.random_state, block_folds=kb)

    def fit_fold(
        self, X: Covariates, A: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray, k: int
    ) -> FoldModels:
        """Fold k's nuisances, fitted on fold k's rows only (spec §2.2 step 2)."""
        return self.fit_folds(X, A, Y, fold_ids, ks=[k])[0]

    def fit_folds(
        self, X: Covariates, A: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray,
        ks: Sequence[int] | None = None,
    ) -> list[FoldModels]:
        """Fit the folds ``ks`` (default: all), each on its own rows, one BLAS thread each.

        Fold models are tiny problems: a multi-threaded BLAS only adds contention (5x slower for
        25-row logistic fits on 2 cores), so parallelism belongs across folds, not inside them.
        The data were validated once (finite, shapes), so scikit-learn's per-fit re-checks are
        skipped; they do not change any fitted value. The user's models are cloned once here.
        """
        if ks is None:
            ks = range(self.resolved_n_folds(X.shape[0], X.shape[1]))
        features, used = shared_features(self._used_models())
        if features is not None and isinstance(X, np.ndarray):
            # row-wise: learns only the column count, so from a row of zeros (X may have none)
            features = clone(features).fit(np.zeros((1, X.shape[1])))
            X = (features.transform(X) if X.shape[0]
                 else np.empty((0, features.n_output_features_)))
        else:
            features, used = None, self._used_models()
        models = dict(zip([r for r, e in (("propensity", ("ipw", "aipw")),
                                          ("outcome", ("g", "aipw")))
                           if self._ensemble() in e], used, strict=True))
        propensity = clone(models.get("propensity", self._propensity_model()))
        outcome = clone(models.get("outcome", self._outcome_model()))
        if self.missing == "impute" and not self._plain_linear():
            propensity = FoldImputed(propensity, self.missing_fill)
            outcome = FoldImputed(outcome, self.missing_fill)
        # a fold's constant propensity is clipped again at aggregation, at the release's eta:
        # with "auto", clip here at the least eta the rule gives (clipping twice = the larger)
        clip = (AUTO_CLIP_RANGE[0] if self.propensity_clip == "auto"
                else check_clip(self.propensity_clip))
        with one_blas_thread(), config_context(
            assume_finite=True, skip_parameter_validation=True
        ):
            fitted = fit_folds(X, A, Y, fold_ids, ks, estimator=self._ensemble(),
                               propensity_model=propensity, outcome_model=outcome,
                               propensity_clip=clip)
        if features is None:
            return fitted
        p, o = self._propensity_model(), self._outcome_model()
        return [FoldModels(fm.k, as_pipeline(p, features, fm.propensity),
                           as_pipeline(o, features, fm.mu1), as_pipeline(o, features, fm.mu0),
                           fm.failed) for fm in fitted]

    def aggregate(
        self, X: Covariates, fold_ids: np.ndarray, fold_models: Sequence[FoldModels],
        d: int | None = None,
    ) -> EnsembleNuisances:
        """Out-of-fold ensemble nuisances (spec §2.2 step 3), streamed in row chunks; inside
        each block of ``block_folds`` folds when there are several (spec §2.5b). ``d``: the
        declared covariates when X also holds missing-value indicator columns."""

        n, d = X.shape[0], X.shape[1] if d is None else d
        eta = self.resolved_propensity_clip(n, d)

        def full(x: Covariates, ids: np.ndarray, models: Sequence[FoldModels]
                 ) -> EnsembleNuisances:
            return aggregate(x, ids, models, estimator=self._ensemble(),
                             outcome_bounds=self._bounds(), propensity_clip=eta,
                             chunk_size=self.chunk_size)

        K, kb = self.resolved_folds(n, d)
        if kb == K:
            return full(X, fold_ids, fold_models)
        return aggregate_blocks(X, fold_ids, fold_models, kb, full)

    def release(self, A: np.ndarray, Y: np.ndarray, nuisances: EnsembleNuisances,
                evaluation: bool = False, d: int | None = None) -> ATERelease:
        """Deprecated: :meth:`_release` charged like :meth:`fit` (it drew uncharged noise
        before); use :meth:`fit`."""
        deprecated("PrivateATE.release", "fit(...)")
        prepared = Prepared(public=ATEFacts(int(A.shape[0]), d), data=(A, Y, nuisances))
        return cast(ATERelease, self._charged(
            prepared, evaluation=evaluation,
            draw=lambda: self._release(A, Y, nuisances, evaluation, d)))

    def _release(
        self,
        A: np.ndarray,
        Y: np.ndarray,
        nuisances: EnsembleNuisances,
        evaluation: bool = False,
        d: int | None = None,
    ) -> ATERelease:
        """Scores (Y clipped here too, whoever calls it), tau_hat, V_hat, then the noise, drawn once
        from OS entropy (spec §2.2 steps 4-5, §3). Release mode: a failure is generic (its message
        could carry values). Uncharged: callers charge it first."""
        self.check_mode(evaluation)
        with private_failures(evaluation, "scoring"):
            tau_hat, v_hat = self._estimate(A, Y, nuisances)
        treated = _count_of("treated", A, np.ones(A.shape[0], dtype=bool))
        return self._draw(tau_hat, v_hat, A.shape[0], d, evaluation,
                          n_folds=nuisances.n_folds,
                          count=treated if self.estimand == "att" else None)

    def block_scores(self, X: Covariates, A: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray,
                     fold_models: Sequence[FoldModels], usable: np.ndarray | None = None
                     ) -> np.ndarray:
        """Scores Gamma_i of a block of rows (any subset of the data, e.g. one partition),
        given all K fold models in fold order: aggregation and scores (spec §2.2 steps 3-4), Y
        clipped to the bounds, the public score 0 where ``usable`` is False (the missing-value
        policy). Non-private: for in-memory sums only (the partitioned path)."""
        return self._scores(A, Y, self.aggregate(X, fold_ids, fold_models), usable)

    def release_sums(self, n: int, total: float, total_sq: float, *, n_folds: int,
                     d: int | None = None, evaluation: bool = False,
                     params: dict[str, Any] | None = None) -> ATERelease:
        """Deprecated: :meth:`_release_sums` charged like :meth:`fit` (it drew uncharged noise
        before); an orchestrator runs it inside :func:`dpcausal.session.charged_release`."""
        deprecated("PrivateATE.release_sums", "dpcausal.session.charged_release")
        prepared = Prepared(public=ATEFacts(int(n), d), data=(n, total, total_sq))
        return cast(ATERelease, self._charged(
            prepared, evaluation=evaluation,
            draw=lambda: self._release_sums(n, total, total_sq, n_folds=n_folds, d=d,
                                            evaluation=evaluation, params=params)))

    def _release_sums(self, n: int, total: float, total_sq: float, *, n_folds: int,
                      d: int | None = None, evaluation: bool = False,
                      params: dict[str, Any] | None = None,
                      layout: BlockLayout | None = None) -> ATERelease:
        """The release from ``sum_i Gamma_i`` and ``sum_i Gamma_i^2`` over all n rows (e.g.
        summed over partitions of :meth:`block_scores`): tau_hat = total / n, V_hat = (total_sq
        - n tau_hat^2) / (n (n - 1)) (spec §2.1), then the noise as :meth:`_release`, calibrated
        for ``n_folds`` (checked against this estimator's K). ``params`` adds public facts of
        how the sums were made (e.g. the partitioned fold rule) to the release's; ``layout``
        is the public block layout the sums were made on (spec §2.5b, :meth:`calibration`).
        Uncharged: callers charge it first."""
        self.check_mode(evaluation)
        if self._counted():
            raise ValueError(PARTITIONED_ATE_ONLY)
        with private_failures(evaluation, "scoring"):
            tau_hat = total / n
            v_hat = max(0.0, (total_sq - n * tau_hat * tau_hat) / (n * (n - 1)))
            _check_finite(tau_hat, v_hat)
        return self._draw(tau_hat, v_hat, n, d, evaluation, n_folds=n_folds, params=params,
                          layout=layout)

    def _scores(self, A: np.ndarray, Y: np.ndarray, nuisances: EnsembleNuisances,
                usable: np.ndarray | None = None) -> np.ndarray:
        gamma = scores(score_key(self._ensemble(), self.estimand), A, self._clip(Y), nuisances,
                       outcome_scale(self._ensemble(), self._bounds())[1])
        return gamma if usable is None else np.where(usable, gamma, MISSING_SCORE)

    def _estimate(self, A: np.ndarray, Y: np.ndarray, nuisances: EnsembleNuisances,
                  usable: np.ndarray | None = None) -> tuple[float, float]:
        tau_hat, v_hat = ate_and_variance(self._scores(A, Y, nuisances, usable))
        _check_finite(tau_hat, v_hat)
        return tau_hat, v_hat

    def _draw(self, tau_hat: float, v_hat: float, n: int, d: int | None, evaluation: bool,
              diagnostics: dict[str, float] | None = None, n_folds: int | None = None,
              params: dict[str, Any] | None = None, layout: BlockLayout | None = None,
              count: int | None = None) -> ATERelease:
        """The noise, calibrated to the K the nuisances were aggregated over (checked) and to
        the block ``layout`` (:meth:`calibration`); with the ``count`` of :meth:`_counted`
        (complete cases under ``missing="drop"``, usable treated rows for the ATT) the private
        ratio (:func:`dpcausal.ate.complete_cases.count_ratio_release`)."""
        cal = self.calibration(n, d, layout)
        if n_folds is not None and n_folds != cal.n_folds:
            raise ValueError(
                f"the nuisances were aggregated over {n_folds} folds but the release is "
                f"calibrated for {cal.n_folds}: pass the same n_folds (and d for 'auto')")
        rng = self._noise_rng(evaluation)
        release = draw_release(
            tau_hat, v_hat, cal, rng, alpha=self.alpha,
            p1=self.p1, ci_mode=self.ci, delta=self.delta,
            params={**self.public_params(n, d, layout), **(params or {})},
            evaluation=evaluation, diagnostics=diagnostics,
            outcome_bounds=self._bounds() if count is None else None,
        )
        counted = self._counted()
        if count is None or counted is None:
            return release
        return count_ratio_release(release, count, split_zeta(self.zeta)[1], rng,
                                   outcome_bounds=self._bounds(), counted=counted)

    def check_data(self, data: pd.DataFrame, *, treatment: str | None = None,
                   outcome: str | None = None, covariates: Sequence[str] | None = None,
                   outcome_bounds: tuple[float, float] | None = None, **roles: Any
                   ) -> DataCheck:
        """A NON-PRIVATE look at the values that costs nothing: rows, missing and
        non-finite values per role, the share of outcomes outside the bounds (``outcome_bounds``,
        default this estimator's), arm sizes, what the ``missing`` policy will do and rows per
        fold at the planned K. ``treatment`` and ``outcome`` are required; no other role is.

        Charges nothing and publishes nothing (no accountant, ledger or log sees it): the
        curator already holds the data. The result is for the curator's eyes only; never share
        it. Returns a :class:`~dpcausal.data_check.DataCheck` (prints as text, shows as a table).
        """
        if treatment is None or outcome is None or roles:
            raise TypeError("check_data takes the roles treatment= and outcome= (required) and "
                            f"covariates=; got {sorted(roles) or 'no treatment or outcome'}")
        left_out = [] if covariates is not None else [
            c for c in _other_columns(data, treatment, outcome) if not _is_number(data[c])]
        covariates = _covariates(data, treatment, outcome, covariates,
                                 none_needed=self.estimator == "dim")
        check_policy(self.missing, self.missing_fill)
        bounds = self._bounds() if outcome_bounds is None else outcome_bounds
        return check_ate_data(data, treatment=treatment, outcome=outcome,
                              covariates=covariates, outcome_bounds=bounds,
                              missing=self.missing, n_folds=self.resolved_n_folds,
                              left_out=left_out, folds=self.estimator not in sums.SUM_ESTIMATORS)

    # ------------------------------------------------------------------ contract
    def check_input(self, data: Any, *args: Any, treatment: str | None = None,
                    outcome: str | None = None,
                    covariates: Sequence[str] | None = None) -> Prepared[ATEFacts]:
        """Checked (X, A, Y) from a DataFrame with column roles or from arrays.

        ``check_input(df, treatment="a", outcome="y", covariates=["x1", "x2"])`` (covariates
        default: every other column) or ``check_input(X, A, Y)``. Raises every refusal before
        anything is charged.

        Parameters
        ----------
        data : pandas.DataFrame or array-like
            The DataFrame, or X with ``A`` and ``Y`` in ``*args``.
        treatment, outcome : str, optional
            The column roles of a DataFrame.
        covariates : sequence of str, optional
            The covariate columns (default: every other column).

        Returns
        -------
        Prepared
            ``public`` holds ``n`` and ``d``; ``data`` the checked (X, A, Y).
        """
        X, A, Y = _split_roles(data, args, treatment, outcome, covariates,
                               none_needed=self.estimator == "dim")
        names = tuple(str(c) for c in X.columns) if isinstance(X, pd.DataFrame) else None
        self._check_choice(np.shape(X)[1], names)
        Xa, Aa, Ya = check_schema(X, A, Y, keep_frame=not self._plain_linear())
        check_policy(self.missing, self.missing_fill)
        if self.missing == "drop_public_count":  # n is the complete-case count, declared public
            kept = apply_missing(Xa, Aa, Ya, "drop_public_count")
            Xa, Aa, Ya = kept.X, kept.A, kept.Y
        n, d = Xa.shape
        self._check_params(n, d, names)
        keep = names if isinstance(self.covariate_bounds, Mapping) else None
        return Prepared(public=ATEFacts(int(n), int(d), keep), data=(Xa, Aa, Ya))

    def _private_release(self, prepared: Prepared[ATEFacts], *, evaluation: bool = False
                         ) -> ATERelease:
        """The missing-value policy, folds, fold fits, aggregation, then the noise drawn once
        (spec §2.7).

        Runs after the charge and is total, since a failure after the charge could depend on the
        data: missing and non-finite values follow the declared policy
        (:func:`dpcausal.missing.apply_missing`), empty arms and failing models the §2.7 fallbacks,
        so every data set gets a finite release; only a bug raises (generic in release mode, so its
        message carries no value). Rows without a usable treatment or outcome train no model and
        score 0. Evaluation mode also returns, in ``nonprivate``, the number of clipped outcomes and
        of fold fits that fell back to constants (non-private counts: never in a release).
        """
        self.check_mode(evaluation)
        if self.prerelease is not None:     # the facts, then auto's choice, then the release
            return pre.release(self, prepared, evaluation)
        n, d = prepared.public.n, prepared.public.d
        chosen = self.resolved_estimator(n, d)
        if chosen in sums.SUM_ESTIMATORS:
            return self._private_sums_release(prepared, chosen, evaluation)
        with private_failures(evaluation, "fitting"):
            X, A, Y = prepared.data
            done = apply_missing(X, A, Y, self.missing, self.missing_fill,
                                 indicators=self._indicators("present"))
            lo, hi = self._bounds()
            n_clipped = int(np.count_nonzero(done.usable & ((done.Y < lo) | (done.Y > hi))))
            Ya = self._clip(done.Y)
            fold_ids = self.make_folds(n, evaluation, d)
            train = slice(None) if done.usable.all() else done.usable
            models = self.fit_folds(take_rows(done.X, train), done.A[train], Ya[train],
                                    fold_ids[train], ks=range(self.resolved_n_folds(n, d)))
            tau_hat, v_hat = self._estimate(
                done.A, Ya, self.aggregate(done.X, fold_ids, models, d), done.usable)
        diagnostics: dict[str, float] | None = None
        if evaluation:
            diagnostics = {"n_clipped": n_clipped,
                           "failed_fits": sum(fm.failed for fm in models)}
        count = _count_of(self._counted(), done.A, done.usable)
        return self._draw(tau_hat, v_hat, n, d, evaluation, diagnostics, count=count)

    def _private_sums_release(self, prepared: Prepared[ATEFacts], estimator: str,
                              evaluation: bool) -> ATERelease:
        """``dim``/``lin``: the missing-value policy (rows without a usable treatment or outcome
        add nothing; a missing covariate takes ``missing_fill``, no indicator), the statistic
        vector, then the noise drawn once. Total after the charge, like the ensemble's."""
        n, d = prepared.public.n, int(prepared.public.d or 0)
        columns = prepared.public.covariates
        with private_failures(evaluation, "summing"):
            stats = self.completed_statistics(*prepared.data, estimator=estimator,
                                              columns=columns)
        return self._release_statistics(n, stats, estimator=estimator, d=d,
                                        evaluation=evaluation, columns=columns)

    def completed_statistics(self, X: Any, A: np.ndarray, Y: np.ndarray, *, estimator: str,
                             columns: Sequence[Any] | None = None) -> np.ndarray:
        """:meth:`sum_statistics` after the declared missing-value policy, row by row (so a
        chunk's vector is the same as within the whole data): a row without a usable treatment
        or outcome adds nothing; a missing covariate takes ``missing_fill`` (no indicator;
        SPECS.md "Estimators from noisy sums"). Non-private: keep it in memory."""
        Xa = X.to_numpy(dtype=float) if isinstance(X, pd.DataFrame) else np.asarray(X, float)
        done = apply_missing(Xa, A, Y, self.missing, self.missing_fill, indicators="in_folds")
        Xf = np.where(np.isnan(done.X), float(self.missing_fill), done.X)
        return self.sum_statistics(Xf, done.A, done.Y, estimator=estimator, usable=done.usable,
                                   columns=columns)

    def fit(self, data: Any, *args: Any, evaluation: bool = False, **roles: Any) -> ATERelease:
        """One private release on a DataFrame with roles or on (X, A, Y); kept as ``release_``.

        Repeated fits on the same data compose (each draws new noise and spends again).

        Parameters
        ----------
        data : pandas.DataFrame or array-like
            A DataFrame with the roles ``treatment=``, ``outcome=`` and optionally
            ``covariates=`` (default: every other column), or the covariates X followed by
            ``A`` and ``Y`` as positional arguments.
        evaluation : bool
            ``True`` additionally exposes the pre-noise estimate and variance in
            ``release.nonprivate`` and allows seeds: for simulations only, never for
            publication.
        **roles : str or list of str
            The column roles.

        Returns
        -------
        ATERelease
            tau_DP with its private CI (spec §2.2 step 5, §3), the total se and the privacy
            position; also kept as ``release_``.

        Raises
        ------
        ValueError, TypeError
            A refusal of the public checks, before anything is charged or drawn.
        """
        self.check_mode(evaluation)
        release = cast(ATERelease, super().fit(data, *args, evaluation=evaluation, **roles))
        return release


def _split_roles(data: Any, args: tuple[Any, ...], treatment: str | None, outcome: str | None,
                 covariates: Sequence[str] | None, none_needed: bool = False
                 ) -> tuple[Any, Any, Any]:
    """(X, A, Y) from ``(X, A, Y)`` arrays or a DataFrame with column roles; ``none_needed``:
    no covariate is required (the difference in means uses none)."""
    if args:
        if len(args) != 2 or treatment or outcome or covariates is not None:
            raise TypeError("pass either arrays fit(X, A, Y) or a DataFrame with roles "
                            "fit(df, treatment=..., outcome=..., covariates=...), not both")
        return data, args[0], args[1]
    if treatment is None or outcome is None:
        raise TypeError("fit(df, ...) needs the column roles treatment= and outcome= "
                        "(covariates= defaults to every other column); or pass fit(X, A, Y)")
    covariates = _covariates(data, treatment, outcome, covariates, none_needed)
    cols = columns(data, treatment=treatment, outcome=outcome, covariates=covariates)
    return cols["covariates"], cols["treatment"], cols["outcome"]


def _other_columns(data: pd.DataFrame, treatment: str, outcome: str) -> list[Any]:
    columns(data, treatment=treatment, outcome=outcome)    # names a missing role first
    return [c for c in data.columns if c not in (treatment, outcome)]


def _is_number(col: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col))


def _covariates(data: pd.DataFrame, treatment: str, outcome: str,
                covariates: Sequence[str] | None, none_needed: bool = False) -> list[Any]:
    """The covariates of a DataFrame release, one meaning for ``fit``, ``check_input`` and
    ``check_data`` (issue 34 §1): the columns named, or, when ``covariates`` is omitted, every
    other column whose dtype is a number or bool (never a text or id column, which would be
    missing in every row); none at all is refused (``covariates=[]`` names none) unless
    ``none_needed`` (the difference in means uses none)."""
    if covariates is None:
        covariates = [c for c in _other_columns(data, treatment, outcome)
                      if _is_number(data[c])]
        if not covariates and not none_needed:
            raise ValueError("no covariate columns: no column besides the treatment and the "
                             "outcome is numeric; name them with covariates=[...]")
    elif len(covariates) == 0 and not none_needed:
        raise ValueError("no covariate columns: covariates=[] names none; name at least one "
                         "(covariates=[...]), or omit covariates= to take every other numeric "
                         "column")
    columns(data, treatment=treatment, outcome=outcome, covariates=list(covariates))
    return list(covariates)


#: The ensemble's partitioned path refuses a ratio release (its workers return score sums only).
PARTITIONED_ATE_ONLY = (
    "estimand='att' with the ensemble does not apply to the partitioned path: its workers "
    "return score sums only, not the treated count the ATT divides by; release the ATT from "
    "a single file or SQL query (data.path / data.query), or use estimand='ate'")


def _count_of(counted: str | None, A: np.ndarray, usable: np.ndarray) -> int | None:
    """The exact count a ratio release divides by (:meth:`PrivateATE._counted`): usable rows
    (complete cases), usable treated rows (the ATT), or None. Non-private."""
    if counted is None:
        return None
    keep = usable if counted == "complete_cases" else usable & (np.asarray(A) == 1)
    return int(np.count_nonzero(keep))


def _positive_zeta(zeta: Any) -> None:
    if not (isinstance(zeta, (int, float)) and not isinstance(zeta, bool) and math.isfinite(zeta)
            and zeta > 0):
        raise ValueError(f"zeta must be a finite number > 0, got {zeta!r}")


def _check_finite(tau_hat: float, v_hat: float) -> None:
    if not (math.isfinite(tau_hat) and math.isfinite(v_hat)):
        raise AssertionError("bug: tau_hat and V_hat must be finite before the noise")


def _describe(model: Any) -> str:
    """A short, public description of a model spec (class and non-default parameters)."""
    return repr(model).replace("\n", " ")
