"""Model registry: short names -> fresh, unfitted scikit-learn / xgboost estimators.

``quadratic`` is the library's default pair (issue 39): degree-2 features, then a logistic
propensity and per-arm least squares (:mod:`dpcausal.ate.features`), built by its factories.

A name resolves by role: the propensity model must be a classifier (``predict_proba``), the outcome
model is a regressor, or a classifier for binary outcomes (``logistic``). Any importable
``module:Class`` is accepted too. Tree ensembles default to ``n_jobs=1`` (the task runner already
parallelises over folds) and ``random_state=0`` (deterministic fits, so cached fold models are
reproducible); explicit params override both.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

Role = Literal["propensity", "outcome"]

# name -> {role: "module:Class"}; defaults are merged under the user's params.
_REGISTRY: dict[str, dict[str, str]] = {
    "quadratic": {"propensity": "dpcausal.ate.features:default_propensity_model",
                  "outcome": "dpcausal.ate.features:default_outcome_model"},
    "logistic": {"propensity": "sklearn.linear_model:LogisticRegression",
                 "outcome": "sklearn.linear_model:LogisticRegression"},
    "linear": {"outcome": "sklearn.linear_model:LinearRegression"},
    "decision_tree": {"propensity": "sklearn.tree:DecisionTreeClassifier",
                      "outcome": "sklearn.tree:DecisionTreeRegressor"},
    "random_forest": {"propensity": "sklearn.ensemble:RandomForestClassifier",
                      "outcome": "sklearn.ensemble:RandomForestRegressor"},
    "gradient_boosting": {"propensity": "sklearn.ensemble:GradientBoostingClassifier",
                          "outcome": "sklearn.ensemble:GradientBoostingRegressor"},
    "xgboost": {"propensity": "xgboost:XGBClassifier", "outcome": "xgboost:XGBRegressor"},
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "decision_tree": {"random_state": 0},
    "random_forest": {"n_jobs": 1, "random_state": 0},
    "gradient_boosting": {"random_state": 0},
    "xgboost": {"n_jobs": 1, "random_state": 0, "verbosity": 0},
}
_FACTORIES = ("quadratic",)   # names built by a function, not a class
NAMES = tuple(_REGISTRY)

_TREE = ("max_depth", "min_samples_split", "min_samples_leaf", "max_features",
         "max_leaf_nodes", "min_impurity_decrease", "ccp_alpha", "criterion", "random_state")
#: The parameters a registry model may be given (issue 40 item 7): its public hyperparameters.
#: Nothing that writes to the worker's log or console (``verbose``, ``verbosity``: a fold's
#: training loss is a function of its rows), takes callbacks or evaluation sets, or sets the
#: model's threads (``n_jobs``: the runner's). Another parameter needs a ``module:Class`` model,
#: which only the curator's config names.
ALLOWED_PARAMS: dict[str, frozenset[str]] = {
    "quadratic": frozenset(),   # the library's default pair, as it is (issue 39)
    "logistic": frozenset({"C", "penalty", "l1_ratio", "fit_intercept", "class_weight",
                           "max_iter", "tol", "solver"}),
    "linear": frozenset({"fit_intercept", "positive"}),
    "decision_tree": frozenset({*_TREE, "splitter"}),
    "random_forest": frozenset({*_TREE, "n_estimators", "bootstrap", "max_samples"}),
    "gradient_boosting": frozenset({*_TREE, "n_estimators", "learning_rate", "subsample",
                                    "loss"}),
    "xgboost": frozenset({"n_estimators", "max_depth", "learning_rate", "subsample",
                          "colsample_bytree", "colsample_bylevel", "min_child_weight", "gamma",
                          "reg_alpha", "reg_lambda", "max_bin", "max_leaves", "random_state",
                          "scale_pos_weight"}),
}


def check_params(name: str, params: dict[str, Any] | None, role: Role) -> None:
    """ValueError naming the first parameter of ``params`` that registry model ``name`` does not
    allow (:data:`ALLOWED_PARAMS`); a ``module:Class`` model (the curator's) is not checked."""
    allowed = ALLOWED_PARAMS.get(name)
    if allowed is None:
        return
    for param in sorted(params or {}):
        if param not in allowed:
            raise ValueError(
                f"models.{role}.params.{param} is not allowed for registry model {name!r}; it "
                f"may set: {', '.join(sorted(allowed)) or 'nothing'}")



def resolve(name: str, role: Role) -> str:
    """The ``module:Class`` path a model name stands for in a role (ValueError if unknown)."""
    if name in _REGISTRY:
        try:
            return _REGISTRY[name][role]
        except KeyError:
            allowed = [n for n, roles in _REGISTRY.items() if role in roles]
            raise ValueError(
                f"model {name!r} cannot be a {role} model (it has no classifier/regressor variant "
                f"for that role); use one of {allowed} or a 'module:Class' path"
            ) from None
    if ":" in name:
        return name
    raise ValueError(
        f"unknown {role} model {name!r}: use one of {list(NAMES)} or an importable "
        "'module:Class' path such as 'sklearn.svm:SVR'"
    )


def model_class(name: str, role: Role) -> type:
    """Import the class behind a model name (ValueError naming the model if that fails)."""
    path = resolve(name, role)
    module_name, _, attr = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(
            f"{role} model {name!r} cannot be imported ({type(exc).__name__}: {exc}); "
            "check the 'module:Class' spelling and that the package is installed"
        ) from None
    if name in _FACTORIES:      # the registry's own factories (a Pipeline has no single class)
        return cls
    if not isinstance(cls, type) or not hasattr(cls, "fit"):
        raise ValueError(f"{role} model {name!r} is not an estimator class with a fit method")
    if role == "propensity" and not hasattr(cls, "predict_proba"):
        raise ValueError(
            f"propensity model {name!r} ({path}) has no predict_proba: use a classifier"
        )
    return cls


def build_model(name: str, params: dict[str, Any] | None, role: Role) -> Any:
    """A fresh, unfitted estimator for ``name`` with the registry defaults under ``params``."""
    cls = model_class(name, role)
    kwargs = {**_DEFAULTS.get(name, {}), **(params or {})}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(
            f"{role} model {name!r} rejected its params {sorted(kwargs)}: {exc}"
        ) from None
