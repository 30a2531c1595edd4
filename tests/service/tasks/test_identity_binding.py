"""The evaluation guard and the ledger's identity binding (issue 26 §3): a budgeted table, or its
source, cannot be read without privacy (evaluation mode) or released with a fresh budget under
another dataset id, whatever the row order, the column order or the covariates chosen; a
partitioned source is bound by its partition list and footers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conf.kinds import KINDS
from conf.models import ReleaseConfig
from dpcausal.ledger import DatasetIdentityError, Ledger
from tasks.preflight import EvaluationRefusedError, check_release

BUDGETED = "trial-A"
# an evaluation of budgeted data is refused when the curator registers it (the data are bound
# to another id: issue 32 §1), else by the run's evaluation guard
REFUSED = (EvaluationRefusedError, DatasetIdentityError)


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    with Ledger(create=True) as led:
        for dataset in (BUDGETED, "trial-B"):
            led.set_budget(dataset, zeta=10.0)


def _frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    a = (rng.random(n) < 0.5).astype(int)
    y = np.clip(0.2 * x[:, 0] + 0.1 * a + 0.1 * rng.standard_normal(n), -1, 1)
    return pd.DataFrame({"X1": x[:, 0], "X2": x[:, 1], "A": a, "Y": y})


def _config(data, *, dataset, mode="release", covariates=("X1", "X2")):
    return ReleaseConfig.model_validate({
        "data": data, "mode": mode, "ledger": {"dataset_id": dataset},
        "columns": {"treatment": "A", "outcome": "Y", "covariates": list(covariates)},
        "estimator": {"n_folds": 4, "outcome_bounds": [-1, 1]},
        **({"runner": {"kind": "dask"}} if "partitions" in data else {})})


def _check(cfg):
    """The curator's registration of ``cfg`` (issue 32 §1: it binds the data's and the
    source's keyed identities, refusing them under another id), then a run's checks.
    Evaluation is allowed where the config asks for it: the guard under test is the binding."""
    from tasks.registration import register

    register(cfg, origin="synthetic" if cfg.evaluation else None)
    kind = KINDS[cfg.kind]
    return check_release(cfg.data, kind.schema(cfg), kind.build(cfg), kind.roles(cfg),
                         dataset=cfg.ledger.dataset_id, evaluation=cfg.evaluation,
                         cap=kind.cap(cfg))


def _charge(cfg, release_id="r/1"):
    """A committed release of ``cfg`` as the charged task makes it: its identity bound."""
    checked = _check(cfg)
    with Ledger() as led, led.release(cfg.ledger.dataset_id, release_id, checked.charge,
                                      unit="row", fingerprint=checked.identity) as slot:
        slot.commit("{}")
    return checked


@pytest.fixture
def budgeted(tmp_path):
    """A table released once under trial-A, from tmp/d.csv."""
    df = _frame()
    df.to_csv(tmp_path / "d.csv", index=False)
    _charge(_config({"path": str(tmp_path / "d.csv")}, dataset=BUDGETED))
    return df


def _copy(df, tmp_path, name):
    path = tmp_path / name
    if name.endswith(".csv"):
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)
    return {"path": str(path)}


def test_the_issue_command_is_refused(budgeted, tmp_path):
    """`run <budgeted config> --set mode=evaluation --set ledger.dataset_id=scratch --set
    'columns.covariates=[X2, X1]'` printed the non-private ATE (old: the fingerprint was of the
    reordered selection)."""
    cfg = _config({"path": str(tmp_path / "d.csv")}, dataset="scratch", mode="evaluation",
                  covariates=("X2", "X1"))
    with pytest.raises(REFUSED, match=f"as (dataset )?'{BUDGETED}'"):
        _check(cfg)


@pytest.mark.parametrize("change", [
    lambda df: df.sample(frac=1.0, random_state=1),                  # rows shuffled
    lambda df: df[["Y", "X2", "A", "X1"]],                           # columns reordered
    lambda df: df.sample(frac=1.0, random_state=2)[["A", "Y", "X2", "X1"]],
    lambda df: df.assign(A=df["A"].astype(float)),                   # re-saved as floats
], ids=["shuffled", "reordered", "both", "float-treatment"])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_disguised_copy_is_refused_evaluation_and_a_second_id(budgeted, tmp_path, change,
                                                                 suffix):
    data = _copy(change(budgeted), tmp_path, f"copy{suffix}")
    with pytest.raises(REFUSED, match=f"as (dataset )?'{BUDGETED}'"):
        _check(_config(data, dataset="scratch", mode="evaluation"))
    with pytest.raises(DatasetIdentityError, match=f"already budgeted as dataset '{BUDGETED}'"):
        _check(_config(data, dataset="trial-B"))


@pytest.mark.parametrize("covariates", [("X2", "X1"), ("X1",), ("X2",)])
def test_fewer_or_reordered_covariates_keep_the_identity(budgeted, tmp_path, covariates):
    data = {"path": str(tmp_path / "d.csv")}
    with pytest.raises(REFUSED):
        _check(_config(data, dataset="scratch", mode="evaluation", covariates=covariates))
    with pytest.raises(DatasetIdentityError):
        _check(_config(data, dataset="trial-B", covariates=covariates))
    _check(_config(data, dataset=BUDGETED, covariates=covariates))  # its own id: fine


def test_the_source_is_bound_too(budgeted, tmp_path):
    """New values in the budgeted file (a new data version) still belong to trial-A."""
    _frame(seed=7).to_csv(tmp_path / "d.csv", index=False)
    data = {"path": str(tmp_path / "d.csv")}
    with pytest.raises(REFUSED, match=f"as (dataset )?'{BUDGETED}'"):
        _check(_config(data, dataset="scratch", mode="evaluation"))
    with pytest.raises(DatasetIdentityError, match="the same file, query or partitions"):
        _check(_config(data, dataset="trial-B"))


def test_other_data_elsewhere_stay_free(budgeted, tmp_path):
    other = _copy(_frame(seed=3), tmp_path, "other.csv")
    assert _check(_config(other, dataset="scratch", mode="evaluation")).prepared.public["n"] == 300
    _check(_config(other, dataset="trial-B"))


def test_a_sql_source_is_bound_by_its_query(budgeted, tmp_path):
    import sqlite3

    with sqlite3.connect(tmp_path / "d.db") as conn:
        _frame(seed=5).to_sql("trial", conn, index=False)
    data = {"sql": "SELECT * FROM trial", "url": f"sqlite:///{tmp_path / 'd.db'}"}
    _charge(_config(data, dataset="trial-B"), "r/2")
    with sqlite3.connect(tmp_path / "d.db") as conn:  # the table changes: same query, same source
        conn.execute("UPDATE trial SET Y = 0")
    with pytest.raises(REFUSED, match="as (dataset )?'trial-B'"):
        _check(_config(data, dataset="scratch", mode="evaluation"))


N_PARTS = 3


def _partitions(folder, seed=0):
    df = _frame(n=240, seed=seed).assign(id=np.arange(240))
    folder.mkdir()
    for p in range(N_PARTS):
        df.iloc[p::N_PARTS].to_parquet(folder / f"part-{p}.parquet", index=False)
    return {"partitions": str(folder), "id_column": "id"}


def test_a_partitioned_source_binds_its_partitions(tmp_path):
    """Old: a partitioned source bound no fingerprint at all, so evaluation under another id
    and a second budget passed."""
    data = _partitions(tmp_path / "parts")
    checked = _charge(_config(data, dataset=BUDGETED))
    assert checked.fingerprint is None and len(checked.identity) == 1
    with pytest.raises(REFUSED, match=f"as (dataset )?'{BUDGETED}'"):
        _check(_config(data, dataset="scratch", mode="evaluation"))
    with pytest.raises(DatasetIdentityError):
        _check(_config(data, dataset="trial-B"))
    other = _partitions(tmp_path / "other", seed=1)  # same shape, another folder: free
    _check(_config(other, dataset="scratch", mode="evaluation"))
