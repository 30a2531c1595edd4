"""``data.missing`` / ``data.missing_fill``: the declared missing-value policy in a release config
(issue 25 §2), carried to the estimator, the ledger detail and the fold-fit store key."""

from __future__ import annotations

import pytest

from conf.kinds import KINDS, load_any, model_specs
from conf.models import ConfigError


def _core(**data):
    return {"data": {"path": "d.csv", **data}, "columns": {"treatment": "A", "outcome": "Y"},
            "estimator": {"outcome_bounds": [0.0, 1.0]}, "ledger": {"dataset_id": "s"}}


def test_impute_is_the_default_and_reaches_the_estimator_and_the_ledger():
    config = load_any(None, base=_core())
    assert (config.data.missing, config.data.missing_fill) == ("impute", 0.0)
    est = KINDS["ate"].build(config)
    assert (est.missing, est.missing_fill) == ("impute", 0.0)
    detail = KINDS["ate"].detail(config)
    assert (detail["missing"], detail["missing_fill"]) == ("impute", 0.0)


def test_drop_and_a_fill_are_public_parameters_of_the_release():
    config = load_any(None, ["data.missing=drop"], base=_core())
    assert KINDS["ate"].build(config).missing == "drop"
    assert KINDS["ate"].detail(config)["missing_fill"] is None
    filled = load_any(None, ["data.missing_fill=-9"], base=_core())
    assert KINDS["ate"].build(filled).missing_fill == -9.0
    # another fill or policy gives other stored fold fits
    assert model_specs(filled) != model_specs(load_any(None, base=_core()))


def test_an_unknown_policy_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="data.missing"):
        load_any(None, ["data.missing=mean"], base=_core())


def test_drop_is_refused_for_partitions():
    base = {**_core(), "data": {"partitions": "parts", "id_column": "id", "missing": "drop"},
            "runner": {"kind": "dask"}}
    with pytest.raises(ConfigError, match="does not apply to data.partitions"):
        load_any(None, base=base)


def test_other_kinds_refuse_the_core_policy():
    base = {"kind": "federated", "data": {"path": "f.csv", "missing": "drop"},
            "columns": {"treatment": "t", "outcome": "y"},
            "mechanism": {"R": 1.0, "epsilon": 1.0, "delta": 1e-5},
            "ledger": {"dataset_id": "f"}}
    with pytest.raises(ConfigError, match="kind: ate"):
        load_any(None, base=base)
