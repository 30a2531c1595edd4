"""The declared missing-value policy of a release: a public parameter, so what a release does
with a missing value never depends on the data (SPECS.md "Missing and non-finite values").

A release must never fail on values after its charge, and nothing value-dependent may be refused
before it, so what a missing or non-finite value becomes is decided by public rules only:

- ``"impute"`` (default): a non-finite numeric covariate takes the declared public ``fill``
  (default 0) and every numeric covariate gets a missingness-indicator column (1 where its value
  was missing). Both are row-wise maps with public constants, so applying them to all rows is the
  same as applying them inside each fold (no statistic of other rows is used). A row whose
  treatment is missing, non-finite or not 0/1, or whose outcome is missing or non-finite, stays
  in n, is left out of its fold's training and contributes the public constant score 0.
- ``"drop"``: the complete-case estimate, released privately. A row with a missing covariate, or
  without a usable treatment or outcome, stays in n (all rows: public), trains no model and
  scores 0, as under "impute"; the complete-case count is released with its own noise and the
  estimate is the ratio (:mod:`dpcausal.ate.complete_cases`). Whether a row is complete stays
  protected.
- ``"drop_public_count"``: complete cases only; the release's n is their exact count. The
  curator declares completeness public: the charge's relation holds the fact "complete_cases",
  and a ledger refuses it under a cap whose relation does not.

:func:`apply_missing` is the one function every release path calls on its (X, A, Y); unparseable
cells that a reader turned into NaN are handled the same way. What it did (counts) goes to the
curator's private log only.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.metaestimators import available_if

from dpcausal.validation import private_log

POLICIES = ("impute", "drop", "drop_public_count")

#: The public constant score of a row whose treatment or outcome is unusable (SPECS.md).
MISSING_SCORE = 0.0

#: Suffix of the missingness-indicator column of a DataFrame covariate.
INDICATOR_SUFFIX = "__missing"


@dataclass(frozen=True)
class Completed:
    """(X, A, Y) after the policy: covariates imputed with their indicator columns ("impute")
    or complete cases ("drop"); ``A`` int8 0/1 and ``Y`` finite (0 on an unusable row, which
    never reaches a model or a score); ``usable`` marks the rows that train their fold and
    score (all True under "drop_public_count", the complete cases under "drop"). Non-private:
    never published."""

    X: Any
    A: np.ndarray
    Y: np.ndarray
    usable: np.ndarray


def check_policy(missing: Any, fill: Any) -> None:
    """The public policy parameters: ``missing`` in :data:`POLICIES`, ``fill`` a finite
    number."""
    if missing not in POLICIES:
        raise ValueError(f"missing must be one of {POLICIES}, got {missing!r}: 'impute' fills "
                         "covariates and scores rows without treatment or outcome as 0, 'drop' "
                         "releases the complete-case estimate privately, 'drop_public_count' "
                         "keeps complete cases and publishes their exact count as n")
    if isinstance(fill, bool) or not (isinstance(fill, (int, float)) and math.isfinite(fill)):
        raise ValueError(f"missing_fill must be a finite number (the public value of a missing "
                         f"covariate), got {fill!r}")


def missing_covariates(X: Any) -> np.ndarray:
    """(n, d) bool: a numeric covariate that is NaN or infinite, any other one that is NA."""
    if isinstance(X, pd.DataFrame):
        cols = [_bad(X[c]) for c in X.columns]
        return np.column_stack(cols) if cols else np.zeros((len(X), 0), dtype=bool)
    return ~np.isfinite(np.asarray(X, dtype=float))


def _bad(column: pd.Series) -> np.ndarray:
    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        return np.asarray(column.isna())
    return ~np.isfinite(column.to_numpy(dtype=float, na_value=np.nan))


def unusable_rows(A: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """(n,) bool: the treatment is missing, non-finite or not 0/1, or the outcome is missing or
    non-finite."""
    A, Y = np.asarray(A, dtype=float), np.asarray(Y, dtype=float)
    return ~np.isin(A, (0.0, 1.0)) | ~np.isfinite(Y)


def complete_cases(X: Any, A: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """(n,) bool: the complete cases (no missing covariate, usable treatment and outcome)."""
    return ~(missing_covariates(X).any(axis=1) | unusable_rows(A, Y))


def apply_missing(X: Any, A: np.ndarray, Y: np.ndarray, policy: str = "impute",
                  fill: float = 0.0, *, indicators: str = "present") -> Completed:
    """The declared policy on (X, A, Y) (module docstring; SPECS.md "Missing and non-finite
    values"). X is a float array or a DataFrame (numeric columns are imputed, others are left to
    the user's Pipeline); A and Y are float arrays of length n that may hold NaN.

    ``indicators`` says where "impute" fills and which indicator columns it adds (SPECS.md):
    "present" fills here and adds one for each numeric covariate missing somewhere in X, "all"
    one for every numeric covariate (both for plain linear/logistic models only, for which an
    all-zero column changes no prediction); "in_folds" only turns non-finite covariates into
    NaN and leaves the fill and the indicators to each fold's model (:class:`FoldImputed`)."""
    check_policy(policy, fill)
    bad_x = missing_covariates(X)
    bad_ay = unusable_rows(A, Y)
    private_log.info("missing-value policy %r: %d rows with a missing covariate (%s), %d rows "
                     "without a usable treatment or outcome (%s)", policy,
                     int(bad_x.any(axis=1).sum()),
                     f"filled with {fill:g} + indicator" if policy == "impute" else "dropped",
                     int(bad_ay.sum()),
                     f"scored {MISSING_SCORE:g}" if policy == "impute" else "dropped")
    if policy == "drop":    # every row stays in n; an incomplete one trains nothing, scores 0
        X = _impute(X, bad_x, float(fill), np.zeros(bad_x.shape[1], dtype=bool))
        bad_ay = bad_ay | bad_x.any(axis=1)
    elif policy == "drop_public_count":
        keep = ~(bad_x.any(axis=1) | bad_ay)
        X = X.iloc[keep].reset_index(drop=True) if isinstance(X, pd.DataFrame) else X[keep]
        A, Y = np.asarray(A)[keep], np.asarray(Y)[keep]
        bad_ay = bad_ay[keep]
    elif indicators == "in_folds":
        X = _impute(X, bad_x, np.nan, np.zeros(bad_x.shape[1], dtype=bool))
    else:
        indicate = (np.asarray(bad_x.any(axis=0)) if indicators == "present"
                    else np.ones(bad_x.shape[1], dtype=bool))
        X = _impute(X, bad_x, float(fill), indicate)
    usable = ~bad_ay
    A_out = np.where(usable, np.asarray(A, dtype=float), 0.0)
    Y_out = np.where(usable, np.asarray(Y, dtype=float), 0.0)
    return Completed(X=X, A=np.nan_to_num(A_out).astype(np.int8), Y=np.nan_to_num(Y_out),
                     usable=usable)


def _impute(X: Any, bad: np.ndarray, fill: float, indicate: np.ndarray) -> Any:
    """``fill`` in every missing numeric covariate, plus an indicator column for each numeric
    covariate flagged in ``indicate``."""
    if isinstance(X, pd.DataFrame):
        numeric = [j for j, c in enumerate(X.columns)
                   if pd.api.types.is_numeric_dtype(X[c]) and not pd.api.types.is_bool_dtype(X[c])]
        if not bad[:, numeric].any() and not indicate.any():
            return X
        out = X.copy()
        for j in numeric:
            c = X.columns[j]
            out[c] = np.where(bad[:, j], fill, X[c].to_numpy(dtype=float, na_value=np.nan))
        for j in numeric:
            if indicate[j]:
                out[f"{X.columns[j]}{INDICATOR_SUFFIX}"] = bad[:, j].astype(float)
        return out
    if not bad.any() and not indicate.any():
        return X
    arr = np.where(bad, fill, np.asarray(X, dtype=float))
    return np.hstack([arr, bad[:, indicate].astype(float)])


class FoldImputed(BaseEstimator):
    """A fold's model behind the fold's own missing-value transform (the "impute" policy for
    models other than plain linear/logistic ones; SPECS.md): fitted on fold k's rows, it fills
    missing numeric covariates with the public ``fill`` and adds an indicator column for each
    covariate missing in those rows, as ``SimpleImputer(strategy="constant",
    add_indicator=True)`` would inside a Pipeline. A function of fold k's rows only, and the
    identity on complete data."""

    def __init__(self, model: Any, fill: float = 0.0) -> None:
        self.model = model
        self.fill = fill

    def __sklearn_tags__(self) -> Any:
        return self.model.__sklearn_tags__()

    def fit(self, X: Any, y: np.ndarray) -> FoldImputed:
        self.indicate_ = np.asarray(missing_covariates(X).any(axis=0))
        self.model_ = copy.deepcopy(self.model).fit(self._transform(X), y)
        if hasattr(self.model_, "classes_"):
            self.classes_ = self.model_.classes_
        return self

    def _transform(self, X: Any) -> Any:
        return _impute(X, missing_covariates(X), float(self.fill), self.indicate_)

    @available_if(lambda self: hasattr(self.model, "predict"))
    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(self.model_.predict(self._transform(X)))

    @available_if(lambda self: hasattr(self.model, "predict_proba"))
    def predict_proba(self, X: Any) -> np.ndarray:
        return np.asarray(self.model_.predict_proba(self._transform(X)))
