"""``PrivateATE``: the model-agnostic DP ATE estimator of Lebeda et al. (2025), scikit-learn style.

Spec dp_ate_ensemble.md §2.7 (end-to-end pseudocode). ``fit`` is one privacy release; the phases
(``make_folds`` -> ``fit_fold`` -> ``aggregate`` -> ``release``) are public so an orchestrator can
run them as separate tasks and reserve the privacy charge before ``release`` draws noise.

References
----------
Lebeda, Even, Bellet, Josse (2025), "Model Agnostic Differentially Private Causal Inference",
arXiv:2505.19589.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn import config_context
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from threadpoolctl import threadpool_limits

from dpcausal.accounting import DEFAULT_DELTA, PrivacyCharge
from dpcausal.aggregation import EnsembleNuisances, aggregate
from dpcausal.contract import Mechanism, Prepared, columns
from dpcausal.folds import make_folds
from dpcausal.noise import secure_rng
from dpcausal.nuisance import FoldModels, fit_folds
from dpcausal.release import ATERelease, draw_release
from dpcausal.scores import ate_and_variance, scores
from dpcausal.sensitivity import NoiseCalibration, calibrate
from dpcausal.validation import (
    check_data,
    check_params,
    check_schema,
    check_values,
    outcome_bounds,
    private_failures,
)

# Covariates: a float array, or a DataFrame kept with its column names and dtypes (issue 20)
Covariates = np.ndarray | pd.DataFrame


class PrivateATE(Mechanism):
    """Differentially private ATE by cross-fitted ensembles (G-formula, IPW or AIPW): spec §2.7.

    A :class:`dpcausal.Mechanism`: ``fit(df, treatment=..., outcome=..., covariates=...)`` or
    ``fit(X, A, Y)`` is one privacy release returning an :class:`ATERelease`; the phases
    (:meth:`check_input`, :meth:`privacy_charge`, :meth:`private_release`) and the finer steps
    (:meth:`make_folds`, :meth:`fit_folds`, :meth:`aggregate`, :meth:`release`) are public so an
    orchestrator can reserve the charge before the noise is drawn.

    Parameters
    ----------
    estimator : {"g", "ipw", "aipw"}
    propensity_model : classifier with ``fit``/``predict_proba`` (default ``LogisticRegression()``).
    outcome_model : regressor, or classifier for binary outcomes (default ``LinearRegression()``).
    n_folds : int or "auto"
        K; "auto" is min(500, n // 100), at least 2 (spec §7).
    folds : "secret" (default), "shuffle", "contiguous" or an int array of public fold ids.
        "secret": a fresh uniformly random balanced assignment per release, from OS entropy and
        never published, so fold membership depends neither on the data nor on the source's
        row order (issue 18 item 2). "shuffle" (a permutation seeded by ``random_state``) and
        "contiguous" (the authors' code) assign folds by row position: evaluation mode only.
        An array gives each row's fold; it must be public (e.g. a keyed hash of a record id).
    outcome_bounds : (low, high), required, no default: public bounds on the outcome, fixed
        without looking at the data. The noise is calibrated to them and outcomes outside are
        clipped to them (spec §1.2), so a silent default would bias the estimate or misstate
        the privacy; DP libraries such as OpenDP and Tumult require bounds for this reason.
    propensity_clip : eta_c in (0, 0.5]; B_pi = 1/eta_c.
    zeta : total Gaussian-DP budget of the release.
    ci_share : r = zeta2^2 / zeta^2 spent on the variance; 0 releases the point estimate only.
    alpha, p1 : CI level 1 - alpha and the variance-noise slack p1 (eq. 11-12).
    sensitivity : "theorem1" (default), "lemma", or "released_code" (not a valid bound).
    sigma2 : "paper" or "tight".
    ci : "conservative" (default; spec §3's valid construction) or "paper" (eq. 11, whose coverage
        argument the spec shows is invalid).
    delta : the delta at which epsilon is reported.
    random_state : seeds the fold assignment only, and only in evaluation mode ("shuffle", or
        "secret" folds in evaluation); a release draws its folds and noise from OS entropy.
    noise_seed : evaluation mode only (refused in a release): seeds the noise, which is
        otherwise drawn from OS entropy. A seeded draw is reproducible by anyone who knows the
        seed; the published parameters say ``noise_seeded``, never a seed (issue 18 item 7).
    chunk_size : rows per aggregation block (default: about 2M predictions per block).
    """

    def __init__(
        self,
        estimator: str = "aipw",
        propensity_model: Any = None,
        outcome_model: Any = None,
        n_folds: int | str = "auto",
        folds: str | Sequence[int] = "secret",
        outcome_bounds: tuple[float, float] | None = None,
        propensity_clip: float = 0.2,
        zeta: float = 1.5,
        ci_share: float = 0.1,
        alpha: float = 0.05,
        p1: float = 0.01,
        sensitivity: str = "theorem1",
        sigma2: str = "paper",
        ci: str = "conservative",
        delta: float = DEFAULT_DELTA,
        random_state: int | None = None,
        noise_seed: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.propensity_model = propensity_model
        self.outcome_model = outcome_model
        self.n_folds = n_folds
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

    # ------------------------------------------------------------------ public parameters
    def resolved_n_folds(self, n: int) -> int:
        """K for a dataset of n rows ("auto" -> min(500, n // 100), at least 2; spec §7)."""
        if isinstance(self.n_folds, str):
            if self.n_folds != "auto":
                raise ValueError(f"n_folds must be an int or 'auto', got {self.n_folds!r}")
            return max(2, min(500, n // 100))
        return self.n_folds

    def _params(self, n: int, d: int) -> dict[str, Any]:
        p = self.get_params(deep=False)
        p["n_folds"] = self.resolved_n_folds(n)
        p["propensity_model"] = self._propensity_model()
        p["outcome_model"] = self._outcome_model()
        check_params(p, n, d)
        return p

    def _plain_linear(self) -> bool:
        """Whether every model the estimator uses is a plain ``LinearRegression`` or
        ``LogisticRegression``: then DataFrame covariates become a float array and the fold
        models are predicted by one stacked matrix product; otherwise a DataFrame reaches the
        models with its column names and dtypes (issue 20)."""
        used = []
        if self.estimator in ("ipw", "aipw"):
            used.append(self._propensity_model())
        if self.estimator in ("g", "aipw"):
            used.append(self._outcome_model())
        return all(type(m) in (LinearRegression, LogisticRegression) for m in used)

    def _propensity_model(self) -> Any:
        return LogisticRegression() if self.propensity_model is None else self.propensity_model

    def _outcome_model(self) -> Any:
        return LinearRegression() if self.outcome_model is None else self.outcome_model

    def check_mode(self, evaluation: bool) -> None:
        """Refusals that depend on the mode and the public parameters only, made before anything
        is charged: seeds and row-position folds are for evaluation (issue 18 items 2, 7)."""
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
        """OS entropy; a ``noise_seed`` generator only in evaluation mode (item 7)."""
        if evaluation and self.noise_seed is not None:
            return np.random.default_rng(self.noise_seed)
        return secure_rng()

    def calibration(self, n: int) -> NoiseCalibration:
        """The data-free noise calibration for n rows (spec §2.5)."""
        K = self.resolved_n_folds(n)
        return calibrate(
            self.estimator, n, K, self._bounds(), self.propensity_clip,
            self.zeta, self.ci_share, self.sensitivity, self.sigma2,
        )

    def privacy_charge(self, n: int, d: int | None = None) -> PrivacyCharge:
        """What one release on n rows costs, for the ledger: zeta-GDP (spec §2.6); data-free
        (``d``, the number of covariates, does not change it)."""
        cal = self.calibration(n)
        zeta = cal.zeta if cal.zeta2 > 0 else cal.zeta1
        return PrivacyCharge("gaussian", zeta=zeta, delta=self.delta,
                             detail={"zeta1": cal.zeta1, "zeta2": cal.zeta2})

    def public_params(self, n: int, d: int) -> dict[str, Any]:
        """Everything public about a release (spec §2.6), as plain values for logging."""
        cal = self.calibration(n)
        return {
            "estimator": self.estimator, "n": n, "d": d, "n_folds": cal.n_folds,
            "folds": self.folds if isinstance(self.folds, str) else "public_ids",
            "propensity_model": (_describe(self._propensity_model())
                                 if self.estimator != "g" else None),
            "outcome_model": _describe(self._outcome_model()) if self.estimator != "ipw" else None,
            "aggregators": "harmonic(pi), harmonic(1-pi), mean(mu)",
            "outcome_bounds": list(self._bounds()),
            "propensity_clip": self.propensity_clip, "B_mu": cal.B_mu, "B_pi": cal.B_pi,
            "zeta": self.zeta, "ci_share": self.ci_share, "zeta1": cal.zeta1, "zeta2": cal.zeta2,
            "alpha": self.alpha, "p1": self.p1, "sensitivity": self.sensitivity,
            "sigma2": self.sigma2, "ci": self.ci, "delta": self.delta,
            "noise_seeded": self.noise_seed is not None,  # never a seed: it reveals the noise
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

    def make_folds(self, n: int, evaluation: bool = False) -> np.ndarray:
        """Fold ids (spec §2.2 step 1), never a function of data values: a fresh secret draw
        from OS entropy ("secret"; seeded by ``random_state`` in evaluation), the public array,
        or, in evaluation only, the seeded or contiguous split of row positions (item 2)."""
        self.check_mode(evaluation)
        K = self.resolved_n_folds(n)
        if isinstance(self.folds, str) and self.folds == "secret":
            seeded = evaluation and self.random_state is not None
            return make_folds(n, K, "secret",
                              np.random.default_rng(self.random_state) if seeded else secure_rng())
        return make_folds(n, K, self.folds, self.random_state)

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
            ks = range(self.resolved_n_folds(X.shape[0]))
        propensity, outcome = clone(self._propensity_model()), clone(self._outcome_model())
        with threadpool_limits(limits=1, user_api="blas"), config_context(
            assume_finite=True, skip_parameter_validation=True
        ):
            return fit_folds(X, A, Y, fold_ids, ks, estimator=self.estimator,
                             propensity_model=propensity, outcome_model=outcome,
                             propensity_clip=self.propensity_clip)

    def aggregate(
        self, X: Covariates, fold_ids: np.ndarray, fold_models: Sequence[FoldModels]
    ) -> EnsembleNuisances:
        """Out-of-fold ensemble nuisances (spec §2.2 step 3), streamed in row chunks."""
        return aggregate(
            X, fold_ids, fold_models, estimator=self.estimator,
            outcome_bounds=self._bounds(),
            propensity_clip=self.propensity_clip, chunk_size=self.chunk_size,
        )

    def release(
        self,
        A: np.ndarray,
        Y: np.ndarray,
        nuisances: EnsembleNuisances,
        evaluation: bool = False,
        d: int | None = None,
    ) -> ATERelease:
        """Scores (Y clipped here too: item 8), tau_hat, V_hat, then the noise, drawn once from
        OS entropy (spec §2.2 steps 4-5, §3). Release mode: a failure is generic (item 3)."""
        self.check_mode(evaluation)
        with private_failures(evaluation, "scoring"):
            tau_hat, v_hat = self._estimate(A, Y, nuisances)
        return self._draw(tau_hat, v_hat, A.shape[0], d or 0, evaluation)

    def _estimate(self, A: np.ndarray, Y: np.ndarray, nuisances: EnsembleNuisances
                  ) -> tuple[float, float]:
        gamma = scores(self.estimator, A, self._clip(Y), nuisances,
                       self.calibration(A.shape[0]).centre)
        tau_hat, v_hat = ate_and_variance(gamma)
        if not (math.isfinite(tau_hat) and math.isfinite(v_hat)):
            raise AssertionError("bug: tau_hat and V_hat must be finite before the noise")
        return tau_hat, v_hat

    def _draw(self, tau_hat: float, v_hat: float, n: int, d: int, evaluation: bool,
              diagnostics: dict[str, float] | None = None) -> ATERelease:
        return draw_release(
            tau_hat, v_hat, self.calibration(n), self._noise_rng(evaluation), alpha=self.alpha,
            p1=self.p1, ci_mode=self.ci, delta=self.delta, params=self.public_params(n, d),
            evaluation=evaluation, diagnostics=diagnostics,
        )

    # ------------------------------------------------------------------ contract
    def check_input(self, data: Any, *args: Any, treatment: str | None = None,
                    outcome: str | None = None,
                    covariates: Sequence[str] | None = None) -> Prepared:
        """Checked (X, A, Y) from a DataFrame with column roles or from arrays (issue 17).

        ``check_input(df, treatment="a", outcome="y", covariates=["x1", "x2"])`` (covariates
        default: every other column) or ``check_input(X, A, Y)``. Raises every refusal before
        anything is charged; ``public`` holds ``n`` and ``d``.
        """
        X, A, Y = _split_roles(data, args, treatment, outcome, covariates)
        Xa, Aa, Ya = check_schema(X, A, Y, keep_frame=not self._plain_linear())
        n, d = Xa.shape
        self._params(n, d)
        return Prepared(public={"n": int(n), "d": int(d)}, data=(Xa, Aa, Ya))

    def private_release(self, prepared: Prepared, *, evaluation: bool = False) -> ATERelease:
        """Value checks, folds, fold fits, aggregation, then the noise drawn once (spec §2.7).

        Runs after the charge: in release mode a data-dependent failure raises a generic
        :class:`~dpcausal.validation.ReleaseFailedError` (issue 18 item 3). Evaluation mode also
        returns, in ``nonprivate``, the number of clipped outcomes and of fold fits that fell
        back to constants (non-private counts: never in a release, item 11).
        """
        self.check_mode(evaluation)
        n, d = prepared.public["n"], prepared.public["d"]
        with private_failures(evaluation, "fitting"):
            Xa, Aa, Ya = check_values(*prepared.data)
            lo, hi = self._bounds()
            n_clipped = int(np.count_nonzero((Ya < lo) | (Ya > hi)))
            Ya = self._clip(Ya)
            fold_ids = self.make_folds(n, evaluation)
            models = self.fit_folds(Xa, Aa, Ya, fold_ids)
            tau_hat, v_hat = self._estimate(Aa, Ya, self.aggregate(Xa, fold_ids, models))
        diagnostics = None
        if evaluation:
            diagnostics = {"n_clipped": n_clipped,
                           "failed_fits": sum(fm.failed for fm in models)}
        return self._draw(tau_hat, v_hat, n, d, evaluation, diagnostics)

    def fit(self, data: Any, *args: Any, evaluation: bool = False, **roles: Any) -> ATERelease:
        """One private release on a DataFrame with roles or on (X, A, Y); kept as ``release_``.

        ``evaluation=True`` additionally exposes the pre-noise estimate and variance in
        ``release.nonprivate``: for simulations only, never for publication. Repeated fits on the
        same data compose (each draws new noise and spends again).
        """
        self.check_mode(evaluation)
        release: ATERelease = super().fit(data, *args, evaluation=evaluation, **roles)
        return release


def _split_roles(data: Any, args: tuple[Any, ...], treatment: str | None, outcome: str | None,
                 covariates: Sequence[str] | None) -> tuple[Any, Any, Any]:
    """(X, A, Y) from ``(X, A, Y)`` arrays or a DataFrame with column roles (issue 17)."""
    if args:
        if len(args) != 2 or treatment or outcome or covariates is not None:
            raise TypeError("pass either arrays fit(X, A, Y) or a DataFrame with roles "
                            "fit(df, treatment=..., outcome=..., covariates=...), not both")
        return data, args[0], args[1]
    if treatment is None or outcome is None:
        raise TypeError("fit(df, ...) needs the column roles treatment= and outcome= "
                        "(covariates= defaults to every other column); or pass fit(X, A, Y)")
    if covariates is None:
        columns(data, treatment=treatment, outcome=outcome)    # names the missing role first
        covariates = [c for c in data.columns if c not in (treatment, outcome)]
    cols = columns(data, treatment=treatment, outcome=outcome, covariates=list(covariates))
    if cols["covariates"].shape[1] == 0:
        raise ValueError("no covariate columns: name them with covariates=[...]")
    return cols["covariates"], cols["treatment"], cols["outcome"]


def _describe(model: Any) -> str:
    """A short, public description of a model spec (class and non-default parameters)."""
    return repr(model).replace("\n", " ")
