"""Input checks for the private ATE: every user mistake becomes a ValueError/TypeError naming the
argument and the fix, split by what the check reads (a refusal after the charge would depend on
data):

- :func:`check_schema` reads public facts only (shapes, dtypes, n, d) and runs before anything
  is charged (the core's parameters: :func:`dpcausal.ate.params.check_params`);
- :func:`check_values` reads data values (finiteness, the 0/1 coding, both arms non-empty); in a
  release it runs after the charge, inside :func:`private_failures`, so that a failure publishes
  a generic message and its details go only to the curator's private log.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pandas as pd
from scipy.stats import norm

#: The curator's private log: details of data-dependent failures (counts, values, a user
#: model's error text). It never propagates to the root logger (Prefect's, the CLI's) and has
#: no output of its own: attach a handler writing to the private store (``data/private/``).
private_log = logging.getLogger("dpcausal.private")
private_log.propagate = False
private_log.setLevel(logging.INFO)
private_log.addHandler(logging.NullHandler())


class PrivateFileHandler(logging.FileHandler):
    """The curator's private log file, created 0600 (:mod:`dpcausal.curator_log`)."""

    def _open(self):  # noqa: ANN202 - the supertype returns a TextIOWrapper
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8")


def private_log_file() -> str:
    """The file the private log writes to (:mod:`dpcausal.curator_log`), for messages."""
    for handler in private_log.handlers:
        if isinstance(handler, PrivateFileHandler):
            return handler.baseFilename
    return "(none attached: see dpcausal.curator_log.log_private_to)"


class ReleaseFailedError(RuntimeError):
    """A release failed after its charge, for a reason that depends on the data; the message is
    generic on purpose (details: :data:`private_log`)."""


# Exceptions that stand for an interrupt of the process (a signal), never for a value: they pass
# through every fallback. An orchestrator adds the one its signal handlers raise
# (:func:`treat_as_interrupt`; the Prefect tasks add Prefect's ``TerminationSignal``).
_INTERRUPTS: list[type[BaseException]] = [KeyboardInterrupt]


def treat_as_interrupt(cls: type[BaseException]) -> None:
    """Let ``cls`` (an orchestrator's signal exception, e.g. raised on SIGTERM) stop a release
    like ``KeyboardInterrupt`` does, instead of becoming a fallback (the charge stays)."""
    if cls not in _INTERRUPTS:
        _INTERRUPTS.append(cls)


def guarded(exc: BaseException) -> bool:
    """Whether a release turns ``exc``, raised by a user's model or by data-dependent work, into a
    public fallback (a release never fails after its charge): any exception, ``SystemExit`` and
    other ``BaseException``s included; only an interrupt of the process (``KeyboardInterrupt``, or a
    class given to :func:`treat_as_interrupt`) passes through."""
    return not isinstance(exc, tuple(_INTERRUPTS))


@contextmanager
def private_failures(evaluation: bool, step: str) -> Iterator[None]:
    """Release mode: any exception inside becomes a generic :class:`ReleaseFailedError` (no
    counts, values or model text; not chained), its details logged to :data:`private_log`.
    Evaluation mode, and an interrupt (:func:`guarded`), pass exceptions through unchanged."""
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: never fail after the charge
        if evaluation or not guarded(exc):
            raise
        private_log.error("release failed during %s", step, exc_info=exc)
        raise ReleaseFailedError(
            f"the release failed during {step} for a reason that depends on the data; its "
            f"budget is spent; the curator's private log {private_log_file()} holds the "
            "details") from None


def _numeric(name: str, values: Any) -> np.ndarray:
    """A float array, refused by dtype (a schema fact) rather than by a value's text; a
    pandas nullable column's missing values become NaN (the missing-value policy's)."""
    if isinstance(values, pd.Series) and pd.api.types.is_numeric_dtype(values):
        return values.to_numpy(dtype=float, na_value=np.nan)
    arr = np.asarray(values)
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric (or bool), got dtype {arr.dtype}")
    return arr.astype(float)


def as_covariates(X: Any, keep_frame: bool = False) -> np.ndarray | pd.DataFrame:
    """Covariates as a 2-d float array or, with ``keep_frame``, a DataFrame kept with its column
    names and dtypes (a user's Pipeline selects and encodes columns by name inside each
    fold) and a fresh positional index (no source row labels travel with it)."""
    if isinstance(X, pd.DataFrame):
        if keep_frame:
            return X.reset_index(drop=True)
        non_numeric = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
        if non_numeric:
            raise ValueError(
                f"X has non-numeric columns {non_numeric}, which plain LinearRegression/"
                "LogisticRegression models cannot use: give a Pipeline that encodes them (e.g. a "
                "ColumnTransformer with a OneHotEncoder) as propensity_model/outcome_model; it "
                "is fitted within each fold and sees the columns by name"
            )
        X = X.to_numpy(dtype=float, na_value=np.nan)
    arr = _numeric("X", X)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"X must be 2-dimensional (n_samples, n_features), got shape {arr.shape}")
    return arr


def check_schema(X: Any, A: Any, Y: Any, keep_frame: bool = False
                 ) -> tuple[np.ndarray | pd.DataFrame, np.ndarray, np.ndarray]:
    """Shapes and dtypes only (public facts): X (n, d) (see :func:`as_covariates`), float A (n,)
    and Y (n,)."""
    Xa = as_covariates(X, keep_frame)
    Aa = _numeric("A", A).ravel()
    Ya = _numeric("Y", Y).ravel()
    n = Xa.shape[0]
    if not (Aa.shape[0] == Ya.shape[0] == n):
        raise ValueError(
            f"X, A and Y must have the same number of rows, got {n}, {Aa.shape[0]}, {Ya.shape[0]}"
        )
    return Xa, Aa, Ya


def check_data(X: Any, A: Any, Y: Any, keep_frame: bool = False
               ) -> tuple[np.ndarray | pd.DataFrame, np.ndarray, np.ndarray]:
    """:func:`check_schema` then :func:`check_values` (the detailed messages: evaluation and
    curator-side use)."""
    return check_values(*check_schema(X, A, Y, keep_frame))


def check_values(Xa: np.ndarray | pd.DataFrame, Aa: np.ndarray, Ya: np.ndarray
                 ) -> tuple[np.ndarray | pd.DataFrame, np.ndarray, np.ndarray]:
    """Finiteness (of numeric covariates), the 0/1 treatment coding and two non-empty arms:
    data-dependent checks."""
    n = Xa.shape[0]
    numeric_X = (Xa.select_dtypes(include=["number", "bool"]).to_numpy(dtype=float)
                 if isinstance(Xa, pd.DataFrame) else Xa)
    for name, arr in (("X", numeric_X), ("A", Aa), ("Y", Ya)):
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValueError(
                f"{name} contains {int(bad.sum())} NaN or infinite values: impute or drop them "
                "before the release (imputation must not use other rows' values across folds)"
            )
    if not np.isin(Aa, (0.0, 1.0)).all():
        values = np.unique(Aa)[:5]
        raise ValueError(f"treatment A must be coded 0/1, got values such as {values.tolist()}")
    n_treated = int(Aa.sum())
    if n_treated == 0 or n_treated == n:
        arm = "treated" if n_treated == 0 else "control"
        raise ValueError(f"the {arm} arm is empty: an ATE needs units in both arms")
    return Xa, Aa.astype(np.int8), Ya


class NoiseWiderThanBoundsWarning(UserWarning):
    """The privacy noise alone would make the release uninformative (:func:`check_noise_scale`);
    public parameters only. ``dpcausal run --strict`` refuses such a release."""


def check_noise_scale(sigma_ate: float, bounds: tuple[float, float], level: float = 0.95
                      ) -> None:
    """Warn when the noise of the released ATE is wider than the bounds, so the release would say
    nothing: its central
    ``level`` interval, +/- z sigma_1 (spec §2.5's sigma_1), is wider than the range of every ATE
    the outcome bounds allow, [-(hi - lo), hi - lo]. Public facts only (n, K, bounds, zeta)."""
    lo, hi = bounds
    half = float(norm.ppf(0.5 + level / 2)) * sigma_ate
    if half > hi - lo:
        warnings.warn(
            f"the privacy noise alone is wider than the outcome bounds: the released ATE's "
            f"noise has a {level:.0%} half-width of {half:.3g}, more than the whole range of "
            f"ATEs the bounds [{lo:g}, {hi:g}] allow (+/-{hi - lo:g}), so the release will say "
            "almost nothing. Raise zeta, use more rows, or choose n_folds with "
            "`PrivateATE(...).plan(n, d)`",
            NoiseWiderThanBoundsWarning, stacklevel=4)


class ComputeWarning(UserWarning):
    """The release's public parameters predict far more compute than its budget
    (:meth:`dpcausal.PrivateATE.check_facts`); ``dpcausal run --strict`` refuses such a
    release."""


class FoldBiasWarning(UserWarning):
    """The ensemble's folds are so small against its noise that their own bias may shift the CI
    (:func:`dpcausal.ate.planner.check_fold_bias`); public parameters only. ``dpcausal run
    --strict`` refuses such a release."""


def outcome_bounds(bounds: Any) -> tuple[float, float]:
    """The public outcome bounds as floats; ``None`` (unset) and malformed pairs raise a
    ``ValueError`` naming the argument and why it is required."""
    if bounds is None:
        raise ValueError(
            "outcome_bounds is required: pass PrivateATE(outcome_bounds=(low, high)), public "
            "bounds on the outcome chosen without looking at the data (e.g. the scale's range). "
            "The noise is calibrated to them and outcomes outside are clipped (spec §1.2), so "
            "there is no safe default")
    return bounds_pair("outcome_bounds", bounds)


def bounds_pair(name: str, bounds: Any) -> tuple[float, float]:
    """Public bounds ``(low, high)`` as floats, finite with ``low < high``: the one check of a
    bounds pair (outcome bounds, each covariate's bounds); a malformed pair raises a
    ``ValueError`` naming the argument ``name``."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high), got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"{name} must be finite with low < high, got {bounds!r}")
    return lo, hi
