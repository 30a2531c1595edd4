"""Model registry: names resolve by role to fresh, unfitted estimators."""

import pytest
from sklearn.base import is_classifier, is_regressor

from conf.registry import NAMES, build_model, resolve


@pytest.mark.parametrize("name", ["logistic", "decision_tree", "random_forest",
                                  "gradient_boosting", "xgboost"])
def test_propensity_names_build_unfitted_classifiers(name):
    model = build_model(name, {}, "propensity")
    assert is_classifier(model) and hasattr(model, "predict_proba")
    assert not hasattr(model, "classes_")  # unfitted


@pytest.mark.parametrize("name", ["linear", "decision_tree", "random_forest",
                                  "gradient_boosting", "xgboost"])
def test_outcome_names_build_regressors(name):
    assert is_regressor(build_model(name, {}, "outcome"))


def test_logistic_outcome_is_a_classifier_for_binary_outcomes():
    assert is_classifier(build_model("logistic", None, "outcome"))


def test_defaults_single_threaded_and_seeded_but_overridable():
    rf = build_model("random_forest", {"n_estimators": 7}, "outcome")
    assert (rf.n_jobs, rf.random_state, rf.n_estimators) == (1, 0, 7)
    xgb = build_model("xgboost", {"n_jobs": 2}, "propensity")
    assert xgb.get_params()["n_jobs"] == 2


def test_every_build_is_a_new_object():
    assert build_model("linear", {}, "outcome") is not build_model("linear", {}, "outcome")


def test_module_class_paths():
    model = build_model("sklearn.svm:SVR", {"C": 2.0}, "outcome")
    assert type(model).__name__ == "SVR" and model.C == 2.0
    assert resolve("sklearn.svm:SVR", "outcome") == "sklearn.svm:SVR"


@pytest.mark.parametrize("name, role, params, match", [
    ("nosuch", "outcome", {}, r"unknown outcome model 'nosuch': use one of"),
    ("linear", "propensity", {}, r"'linear' cannot be a propensity model"),
    ("nosuch_pkg.mod:Thing", "outcome", {}, r"cannot be imported \(ModuleNotFoundError"),
    ("sklearn.svm:Nope", "outcome", {}, r"cannot be imported \(AttributeError"),
    ("sklearn.svm:SVR", "propensity", {}, r"has no predict_proba: use a classifier"),
    ("os:path", "outcome", {}, r"is not an estimator class"),
    ("random_forest", "outcome", {"n_trees": 3}, r"rejected its params \['n_jobs', 'n_trees'"),
])
def test_bad_models(name, role, params, match):
    with pytest.raises(ValueError, match=match):
        build_model(name, params, role)


def test_names_listed():
    assert set(NAMES) == {"quadratic", "logistic", "linear", "decision_tree", "random_forest",
                          "gradient_boosting", "xgboost"}


def test_quadratic_is_the_default_pair_and_builds_the_librarys_models():
    """Issue 39: a config without ``models`` gets the library's default degree-2 models."""
    from conf.models import Models
    from dpcausal.ate.features import default_outcome_model, default_propensity_model

    assert (Models().propensity.name, Models().outcome.name) == ("quadratic", "quadratic")
    for role, ref in (("propensity", default_propensity_model()),
                      ("outcome", default_outcome_model())):
        built = build_model("quadratic", None, role)
        assert repr(built) == repr(ref) and built is not build_model("quadratic", None, role)
    with pytest.raises(ValueError, match=r"rejected its params \['C'\]"):
        build_model("quadratic", {"C": 2.0}, "propensity")


@pytest.mark.parametrize("name", NAMES)
def test_allowed_params_are_the_models_own(name):
    """Each allow-listed parameter is one the model's classes take (no typo allows nothing)."""
    from conf.registry import _REGISTRY, ALLOWED_PARAMS, model_class

    for role in _REGISTRY[name]:
        assert ALLOWED_PARAMS[name] <= set(model_class(name, role)().get_params()), role


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("param", ["verbose", "verbosity", "n_jobs", "callbacks", "warm_start"])
def test_params_that_log_or_take_resources_are_refused(name, param):
    """Issue 40 item 7: ``verbose=2`` printed each fold's training loss to the worker's log."""
    from conf.models import ConfigError, load_config

    role = "outcome"
    with pytest.raises(ConfigError, match=rf"models\.{role}\.params\.{param} is not allowed "
                                          rf"for registry model '{name}'; it may set: "):
        load_config("conf/release/demo.yaml", [f"models.{role}.name={name}",
                                                f"models.{role}.params.{param}=1"])
