"""The default nuisance models: degree-2 features, then a logistic propensity and per-arm least
squares (issue 39 §4; dpcausal/SPECS.md "Default nuisance models").

A logistic model on the raw covariates cannot fit a selection that is U-shaped in a covariate,
nor a linear outcome model a quadratic or an interaction; with the squares and pairwise
products of the covariates both can, and AIPW stays consistent whenever one of the two is
right. The feature map is a fixed function of each row alone (``PolynomialFeatures`` learns
nothing from the values: its ``fit`` records the column count), so applying it to all rows
before the folds are fitted is the same as fitting it inside each fold's pipeline, and keeps
model k a function of fold k's rows only (spec dp_ate_ensemble.md §1.3). That is what lets the
default pipelines use the batched fits and the stacked predictions of plain linear models:
:func:`split_features` recognises a pipeline of such a map followed by a plain
``LinearRegression`` / ``LogisticRegression``; the fold models are then fitted on the mapped
rows and returned as fitted pipelines (:func:`as_pipeline`), which predict from the raw
covariates anywhere, and the aggregation maps the rows once again to predict all of them by one
matrix product (:func:`unwrap_fold_models`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import PolynomialFeatures

#: The degree of the default models' features (squares and pairwise products).
DEFAULT_DEGREE = 2
#: The default propensity's inverse penalty: ``||w||^2 / (2C)`` against the log-loss summed over
#: a fold's rows, so the slope is shrunk by a share about ``1 / (C m)`` on m rows. scikit-learn's
#: C = 1 shrinks 100-row folds enough to bias the ensemble by +0.0135 on the threshold design, a
#: bias that does not fall with n (SPECS.md "Default nuisance models"); at 10^4 the fit is the
#: maximum-likelihood one wherever that exists, and stays finite on a separated fold.
DEFAULT_PROPENSITY_C = 1e4


def default_propensity_model() -> Pipeline:
    """``PolynomialFeatures(2, include_bias=False)`` then ``LogisticRegression(C=1e4)``
    (:data:`DEFAULT_PROPENSITY_C`, close to unpenalised): the default propensity model."""
    return Pipeline([("features", PolynomialFeatures(DEFAULT_DEGREE, include_bias=False)),
                     ("model", LogisticRegression(C=DEFAULT_PROPENSITY_C))])


def default_outcome_model() -> Pipeline:
    """``PolynomialFeatures(2, include_bias=False)`` then ``LinearRegression()``, fitted per
    arm: the default outcome model."""
    return Pipeline([("features", PolynomialFeatures(DEFAULT_DEGREE, include_bias=False)),
                     ("model", LinearRegression())])


def split_features(model: Any) -> tuple[PolynomialFeatures | None, Any]:
    """``(feature map, inner model)`` when ``model`` is a two-step ``Pipeline`` of a
    ``PolynomialFeatures`` (a row-wise map, nothing learnt from values) and a plain
    ``LinearRegression`` or ``LogisticRegression``; ``(None, model)`` otherwise."""
    if type(model) is not Pipeline or len(model.steps) != 2:
        return None, model
    first, last = model.steps[0][1], model.steps[1][1]
    if type(first) is PolynomialFeatures and type(last) in (LinearRegression, LogisticRegression):
        return first, last
    return None, model


def shared_features(models: list[Any]) -> tuple[PolynomialFeatures | None, list[Any]]:
    """The feature map every model in ``models`` starts with, and their inner models; ``None``
    and the models unchanged unless all share one map with equal parameters."""
    split = [split_features(m) for m in models]
    maps = [f for f, _ in split]
    if not models or any(f is None for f in maps):
        return None, models
    params = [f.get_params() for f in maps if f is not None]
    if any(p != params[0] for p in params):
        return None, models
    return maps[0], [inner for _, inner in split]


def as_pipeline(template: Pipeline, features: PolynomialFeatures, inner: Any) -> Any:
    """A fitted inner model as the fitted pipeline ``template`` describes (its step names,
    ``features`` fitted); a fold's constant fallback (float or None) stays as it is."""
    if inner is None or isinstance(inner, float):
        return inner
    (first, _), (last, _) = template.steps
    return Pipeline([(first, features), (last, inner)])


def unwrap_fold_models(X: Any, fold_models: Sequence[Any]) -> tuple[Any, list[Any]]:
    """``(X mapped, fold models with their inner models)`` when every fitted nuisance of
    ``fold_models`` (:class:`dpcausal.ate.nuisance.FoldModels`) is such a pipeline sharing one
    feature map and X is a float array; else ``(X, fold_models)`` unchanged. Constants stay."""
    fitted = [m for fm in fold_models for m in (fm.propensity, fm.mu1, fm.mu0)
              if m is not None and not isinstance(m, float)]
    features, _ = shared_features(fitted)
    if features is None or not isinstance(X, np.ndarray):
        return X, list(fold_models)

    def inner(m: Any) -> Any:
        return m if m is None or isinstance(m, float) else split_features(m)[1]

    return features.transform(X), [type(fm)(fm.k, inner(fm.propensity), inner(fm.mu1),
                                            inner(fm.mu0), fm.failed) for fm in fold_models]
