"""The typed Run form of the release deployments (issue 25 §5): fields map onto config keys,
bounds are validated, and Prefect's parameter schema carries the descriptions and bounds it
renders as a form. The form asks, the curator decides (issue 32 item 6): a registered config, and
analysis keys only."""

import pytest
from pydantic import ValidationError

from conf.deployment import ReleaseParameters
from conf.kinds import load_any


def test_fields_become_config_overrides():
    p = ReleaseParameters(zeta=0.5, outcome_lower=0, outcome_upper=1, n_folds=40, name="r1",
                          overrides={"estimator.propensity_clip": 0.1, "estimator.zeta": 9.0})
    assert p.override_items() == [
        "estimator.propensity_clip=0.1", "estimator.zeta=0.5", "name=\"r1\"",
        "estimator.n_folds=40", "estimator.outcome_bounds=[0.0, 1.0]"]
    assert ReleaseParameters().override_items() == []


def test_the_overrides_load_into_the_config():
    config = load_any(ReleaseParameters().config, ReleaseParameters(
        zeta=0.5, outcome_lower=-2, outcome_upper=2, n_folds=30,
        overrides={"models.outcome.name": "random_forest",
                   "models.outcome.params.max_depth": 3}).override_items())
    e = config.estimator
    assert (e.zeta, e.outcome_bounds, e.n_folds) == (0.5, (-2.0, 2.0), 30)
    assert (config.models.outcome.name, config.models.outcome.params) == \
        ("random_forest", {"max_depth": 3})


@pytest.mark.parametrize("key, value", [
    ("runner.address", "tcp://attacker.example:8786"),     # where the data go
    ("runner.cleartext", True),
    ("mlflow.tracking_uri", "http://attacker.example:5000"),
    ("data.sql", "SELECT * FROM t WHERE id = 17"),          # what is read
    ("data.url_block", "secret/prod-db"),
    ("data.path", "/etc/passwd"),
    ("mode", "evaluation"),                                 # who reads non-privately
    ("ledger.dataset_id", "fresh-budget"),
    ("runner", {"kind": "dask", "address": "tcp://attacker.example:8786"}),
    ("models.outcome", {"name": "os:system"}),
    ("mechanism.occupancy_public", True),                   # a curator's declaration
])
def test_a_run_may_not_set_what_the_curator_decides(key, value):
    """Issue 32 Why 4: every one of these validated before; whoever may trigger a run could ship
    X, A, Y and the fold ids to a host of their choice, or read the data non-privately."""
    with pytest.raises(ValidationError, match=f"'{key}' is not an analysis key a run may set"):
        ReleaseParameters(overrides={key: value})


def test_models_by_registry_name_only_and_configs_from_the_list():
    with pytest.raises(ValidationError, match="must be a model of the registry"):
        ReleaseParameters(overrides={"models.propensity.name": "evil.module:Class"})
    with pytest.raises(ValidationError, match="one of the deployment's registered configs"):
        ReleaseParameters(config="/tmp/my_release.yaml")
    with pytest.raises(ValidationError, match="one of the deployment's registered configs"):
        ReleaseParameters(config="conf/release/../../data/x.yaml")
    for removed in ("mode", "dataset_id", "missing"):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            ReleaseParameters(**{removed: "evaluation"})


@pytest.mark.parametrize("fields, match", [
    ({"zeta": 0}, "greater than 0"),
    ({"n_folds": 1}, "greater than or equal to 2"),
    ({"outcome_lower": 0}, "give both outcome_lower and outcome_upper"),
    ({"outcome_lower": 1, "outcome_upper": 1}, "outcome_lower must be below outcome_upper"),
    ({"name": "a b"}, "should match pattern"),
    ({"epsilon": 1}, "Extra inputs are not permitted"),
])
def test_bad_settings_are_refused(fields, match):
    with pytest.raises(ValidationError, match=match):
        ReleaseParameters(**fields)


def test_prefect_renders_a_form_with_descriptions_and_bounds():
    from prefect.utilities.callables import parameter_schema

    from flows.deployed import release_from_config

    schema = parameter_schema(release_from_config).model_dump_for_openapi()
    assert "overrides" not in schema["properties"]  # no free-form dict at the top any more
    fields = schema["definitions"]["ReleaseParameters"]["properties"]
    assert {"config", "zeta", "outcome_lower", "outcome_upper", "n_folds"} <= set(fields)
    assert not {"mode", "dataset_id", "missing"} & set(fields)
    assert all(f.get("description") for f in fields.values())
    # a plain input per field (an empty one is left out, i.e. the config's value), not a
    # "type | None" switch, and no null default the form's own check would refuse
    assert not any("anyOf" in f or f.get("default", 0) is None for f in fields.values())
    assert (fields["zeta"]["type"], fields["zeta"]["exclusiveMinimum"]) == ("number", 0)
    assert (fields["n_folds"]["type"], fields["n_folds"]["minimum"]) == ("integer", 2)
    assert "conf/release/demo.yaml" in fields["config"]["enum"]     # a list, not a free path
    assert ReleaseParameters.model_validate({}) == ReleaseParameters()


@pytest.mark.parametrize("overrides", [{"models.outcome.params.verbose": 2},
                                       {"models.propensity.params": {"verbose": 2}}])
def test_a_run_may_set_allow_listed_model_parameters_only(overrides):
    """Issue 40 item 7: the Run form took any model parameter; ``verbose=2`` printed each fold's
    training loss to the worker's log. Refused by the form, naming the parameter."""
    with pytest.raises(ValidationError, match="model parameter 'verbose' .* is not allowed"):
        ReleaseParameters(overrides=overrides)
    fine = ReleaseParameters(overrides={"models.outcome.name": "random_forest",
                                        "models.outcome.params.n_estimators": 20})
    config = load_any("conf/release/demo.yaml", fine.override_items())
    assert config.models.outcome.params == {"n_estimators": 20}
