"""A SQL source whose URL lives in a saved Prefect block (issue 21): a ``Secret`` holding the URL
or prefect-sqlalchemy's ``SqlAlchemyConnector``, read only when the data are loaded; the block's
value never appears in the config, the source description or an error."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from conf.kinds import KINDS
from conf.models import DataSource, ReleaseConfig
from dpcausal.ledger import Ledger
from tasks.data import source_description, source_shape
from tasks.preflight import check_release


def _frame(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({"x1": rng.standard_normal(n), "x2": rng.standard_normal(n),
                         "treated": (rng.random(n) < 0.5).astype(int),
                         "y": rng.uniform(-1, 1, n)})


@pytest.fixture
def trial_db(tmp_path) -> str:
    path = tmp_path / "trial.db"
    with sqlite3.connect(path) as conn:
        _frame().to_sql("trial", conn, index=False)
    return str(path)


def _config(data: dict, dataset: str = "blocks") -> ReleaseConfig:
    return ReleaseConfig.model_validate({
        "data": data, "columns": {"treatment": "treated", "outcome": "y"},
        "estimator": {"n_folds": 4, "outcome_bounds": [-1, 1]},
        "ledger": {"dataset_id": dataset}, "mode": "evaluation"})


def _registered_and_checked(data: dict):
    """The curator registers ``data`` (a new version of dataset ``blocks``; synthetic, so
    evaluation is allowed: issue 32 §1, 4), counting its rows through the block; then the
    evaluation run's checks read the table as the release does."""
    from tasks.registration import register

    cfg = _config(data)
    kind = KINDS[cfg.kind]
    registration = register(cfg, origin="synthetic")
    return registration, check_release(cfg.data, kind.schema(cfg), kind.build(cfg),
                                       kind.roles(cfg), dataset="blocks", evaluation=True,
                                       cap=kind.cap(cfg))


def test_a_secret_block_and_a_connector_block_read_the_same_table_as_the_url(trial_db):
    from prefect.blocks.system import Secret
    from prefect_sqlalchemy import ConnectionComponents, SqlAlchemyConnector, SyncDriver

    Secret(value=f"sqlite:///{trial_db}").save("trial-db-url", overwrite=True)
    SqlAlchemyConnector(connection_info=ConnectionComponents(
        driver=SyncDriver.SQLITE_PYSQLITE, database=trial_db)).save("trial-db", overwrite=True)
    query = "SELECT * FROM trial"
    registration, by_url = _registered_and_checked({"sql": query, "url": f"sqlite:///{trial_db}"})
    assert registration.n == 300
    for block in ("secret/trial-db-url", "sqlalchemy-connector/trial-db"):
        registration, checked = _registered_and_checked({"sql": query, "url_block": block})
        assert registration.n == 300 and registration.source["url_block"] == block
        assert trial_db not in str(registration.source)
        cfg = _config({"sql": query, "url_block": block})
        X, A, _ = checked.prepared.data
        np.testing.assert_array_equal(X, by_url.prepared.data[0])
        np.testing.assert_array_equal(A, by_url.prepared.data[1])
        assert checked.fingerprint == by_url.fingerprint
        assert source_shape(cfg.data, cfg.columns) == (300, 2)
        described = source_description(cfg.data)
        assert described == f"prefect block {block} :: {query}"
        assert trial_db not in described and trial_db not in cfg.model_dump_json()


def test_a_missing_block_and_a_secret_that_is_no_url_are_plain_errors_without_the_value():
    """The first read of a block's source is the curator's registration (a run reads only a
    registered source): there a missing block or a Secret that holds no URL is a plain
    ValueError that names the block, never its value, and nothing is registered."""
    from prefect.blocks.system import Secret

    from tasks.registration import register

    with pytest.raises(ValueError, match=r"url_block 'secret/no-such-block': no saved Prefect "
                                         r"block .*deploy/README.md"):
        register(_config({"sql": "SELECT 1", "url_block": "secret/no-such-block"}, "no-block"),
                 origin="synthetic")
    Secret(value="hunter2-not-a-url").save("not-a-url", overwrite=True)
    with pytest.raises(ValueError, match=r"Secret block 'not-a-url' .* does not hold a usable "
                                         r"SQLAlchemy URL") as caught:
        register(_config({"sql": "SELECT 1", "url_block": "secret/not-a-url"}, "no-url"),
                 origin="synthetic")
    assert "hunter2" not in str(caught.value)
    with Ledger(create=True) as led:
        assert led.registration("no-block") is None and led.registration("no-url") is None


@pytest.mark.parametrize("data, match", [
    ({"sql": "SELECT 1", "url": "sqlite:///a.db", "url_block": "secret/a"}, "exactly one of"),
    ({"sql": "SELECT 1"}, "exactly one of data.url"),
    ({"sql": "SELECT 1", "url_block": "json/a"}, "secret/<name> or sqlalchemy-connector/<name>"),
    ({"sql": "SELECT 1", "url_block": "secret/"}, "secret/<name> or sqlalchemy-connector/<name>"),
    ({"path": "a.csv", "url_block": "secret/a"}, "go with data.sql"),
])
def test_bad_block_settings_are_refused_by_the_config(data, match):
    with pytest.raises(ValidationError, match=match):
        DataSource.model_validate(data)
