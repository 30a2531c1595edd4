"""The typed Run form of the release deployments (issue 25 §5): fields map onto config keys,
bounds are validated, and Prefect's parameter schema carries the descriptions and bounds it
renders as a form."""

import pytest
from pydantic import ValidationError

from conf.deployment import ReleaseParameters
from conf.kinds import load_any


def test_fields_become_config_overrides():
    p = ReleaseParameters(zeta=0.5, outcome_lower=0, outcome_upper=1, n_folds=40,
                          missing="drop", mode="evaluation", dataset_id="trial-7", name="r1",
                          overrides={"runner.max_workers": 1, "estimator.zeta": 9.0})
    assert p.override_items() == [
        "runner.max_workers=1", "estimator.zeta=0.5", "mode=\"evaluation\"",
        "ledger.dataset_id=\"trial-7\"", "name=\"r1\"", "estimator.n_folds=40",
        "data.missing=\"drop\"", "estimator.outcome_bounds=[0.0, 1.0]"]
    assert ReleaseParameters().override_items() == []


def test_the_overrides_load_into_the_config():
    config = load_any(ReleaseParameters().config, ReleaseParameters(
        zeta=0.5, outcome_lower=-2, outcome_upper=2, n_folds=30, dataset_id="x").override_items())
    e = config.estimator
    assert (e.zeta, e.outcome_bounds, e.n_folds, config.ledger.dataset_id) == \
        (0.5, (-2.0, 2.0), 30, "x")


@pytest.mark.parametrize("fields, match", [
    ({"zeta": 0}, "greater than 0"),
    ({"n_folds": 1}, "greater than or equal to 2"),
    ({"missing": "mean"}, "'impute' or 'drop'"),
    ({"mode": "test"}, "'release' or 'evaluation'"),
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
    assert {"config", "zeta", "outcome_lower", "outcome_upper", "n_folds", "missing",
            "mode"} <= set(fields)
    assert all(f.get("description") for f in fields.values())
    # a plain input per field (an empty one is left out, i.e. the config's value), not a
    # "type | None" switch, and no null default the form's own check would refuse
    assert not any("anyOf" in f or f.get("default", 0) is None for f in fields.values())
    assert (fields["zeta"]["type"], fields["zeta"]["exclusiveMinimum"]) == ("number", 0)
    assert (fields["n_folds"]["type"], fields["n_folds"]["minimum"]) == ("integer", 2)
    assert fields["missing"]["enum"] == ["impute", "drop"]
    assert ReleaseParameters.model_validate({}) == ReleaseParameters()
