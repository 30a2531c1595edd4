"""The partitioned release from a SQL source (issue 28 §3) through flows/partitioned_release.py
on the flow's Dask runner: the same release as the Parquet path on Parquet partitions holding
the same rows, the identical release whatever the table's row order, only per-block sums reach
the flow, and a release binds the source and charges once."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3

import numpy as np
import pandas as pd
import pytest
from _flowtools import spy_on_block_sums

N, PARTS, K, KB = 3000, 3, 30, 5
ESTIMATOR = {"estimator": "aipw", "block_folds": KB, "outcome_bounds": [-1.0, 1.0], "zeta": 1.0,
             "propensity_clip": 0.1, "ci_share": 0.1}
SEEDED = {**ESTIMATOR, "noise_seed": 7}


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    A = (rng.random(N) < 1 / (1 + np.exp(-0.5 * X[:, 0]))).astype(np.int64)
    return pd.DataFrame({"id": rng.permutation(N).astype(np.int64), "A": A,
                         "Y": np.clip(0.2 * A + 0.3 * X[:, 1] + rng.normal(0, .2, N), -1, 1),
                         "x1": X[:, 0], "x2": X[:, 1]})


def _sqlite(path, frame) -> str:
    with sqlite3.connect(path) as con:
        frame.to_sql("records", con, index=False)
    return f"sqlite:///{path}"


def _sql_release(url, estimator=SEEDED, **kw):
    from flows.partitioned_release import partitioned_sql_release

    args = {"url": url, "sql_partitions": PARTS, "id_column": "id", "treatment": "A",
            "outcome": "Y", "estimator": estimator, "n_folds": K, "fold_key": "curator",
            "evaluation": True, "chunk_rows": 256, "id_type": "int", **kw}
    return partitioned_sql_release("SELECT * FROM records", **args)


def _partition(value: int, key: bytes) -> int:
    """The SQL source's rule written out: HMAC-SHA256(key, 8-byte big-endian id)[:8] mod P."""
    mac = hmac.new(key, value.to_bytes(8, "big", signed=True), hashlib.sha256).digest()
    return int.from_bytes(mac[:8], "big") % PARTS


def test_sql_release_equals_parquet_on_the_same_partitions(tmp_path, monkeypatch):
    from dpcausal.ate.partitioned import BlockSums
    from flows.partitioned_release import partitioned_release
    from store import fold_key

    table = _table(1)
    label = np.array([_partition(int(i), fold_key()) for i in table["id"]])
    (tmp_path / "parquet").mkdir()
    for p in range(PARTS):      # the rows of SQL partition p, in id order, as Parquet file p
        table[label == p].sort_values("id").to_parquet(
            tmp_path / "parquet" / f"part-{p:05d}.parquet", index=False)

    reached = spy_on_block_sums(monkeypatch)
    out = _sql_release(_sqlite(tmp_path / "d.db", table))
    ref = partitioned_release(str(tmp_path / "parquet"), id_column="id", treatment="A",
                              outcome="Y", estimator=SEEDED, n_folds=K, fold_key="curator",
                              evaluation=True)
    assert out["ate"] == ref["ate"] and out["ci"] == ref["ci"]
    assert out["nonprivate"] == ref["nonprivate"]
    assert {k: v for k, v in out["params"].items()} == ref["params"]
    assert (out["params"]["n_blocks"], out["params"]["block_folds"]) == (K // KB, KB)
    assert out["params"]["folds"] == "keyed_rank(id)" and out["params"]["partitions"] == PARTS

    sql_sums, parquet_sums = reached
    assert sql_sums == parquet_sums
    flat = [b for part in sql_sums for b in part]
    assert all(type(b) is BlockSums for b in flat) and sum(b.n for b in flat) == N
    sizes = np.bincount(label, minlength=PARTS)
    assert [sum(b.n for b in part) for part in sql_sums] == sizes.tolist()


def test_row_order_of_the_table_changes_nothing(tmp_path):
    table = _table(2)
    out = _sql_release(_sqlite(tmp_path / "a.db", table))
    again = _sql_release(_sqlite(tmp_path / "b.db", table.sample(frac=1.0, random_state=3)))
    assert again == out


def test_a_release_charges_once_and_binds_the_source(tmp_path, project, monkeypatch):
    from _flowtools import charges, give_cap

    from dpcausal.validation import ReleaseFailedError

    url = _sqlite(tmp_path / "d.db", _table(3))
    give_cap("sql-parts")
    out = _sql_release(url, estimator=ESTIMATOR, evaluation=False, dataset_id="sql-parts",
                       fold_key="release")
    assert out.get("nonprivate") is None and np.isfinite(out["ate"])
    assert charges("sql-parts") == 1
    with pytest.raises(Exception, match="evaluation mode is refused"):
        _sql_release(url, estimator=SEEDED, dataset_id="other-id")
    # the table changes between the count and the read: generic failure after the charge
    import tasks.partitioned as module

    real = module.read_sql_partition

    def shrunk(part, roles, key):
        with sqlite3.connect(tmp_path / "d.db") as con:
            con.execute("DELETE FROM records WHERE rowid IN (SELECT rowid FROM records LIMIT 5)")
        return real(part, roles, key)

    monkeypatch.setattr(module, "read_sql_partition", shrunk)
    with pytest.raises(ReleaseFailedError, match="reading a SQL partition"):
        _sql_release(url, estimator=ESTIMATOR, evaluation=False, dataset_id="sql-parts",
                     fold_key="release")
    assert charges("sql-parts") == 2



@pytest.fixture
def sql_url(tmp_path, monkeypatch):
    """A table's URL in ``$SQLPARTS_URL`` (set before ``invoke`` copies the environment)."""
    monkeypatch.setenv("SQLPARTS_URL", _sqlite(tmp_path / "d.db", _table(4)))


def test_dpcausal_run_releases_a_partitioned_sql_config(tmp_path, sql_url, invoke,
                                                        curator_registers):
    """``data.sql`` with ``data.sql_partitions`` and ``data.id_column`` through ``dpcausal run``
    (dp_release, its Dask subflow, the ledger), the URL from the environment."""
    import json

    import yaml
    from _flowtools import charges, give_cap

    dataset = "sql-parts-cli"
    give_cap(dataset, zeta=1.5)
    raw = {"name": "sqlparts",
           "data": {"sql": "SELECT * FROM records", "url": "${SQLPARTS_URL}",
                    "sql_partitions": PARTS, "id_column": "id", "dtypes": {"id": "int"}},
           "columns": {"treatment": "A", "outcome": "Y", "covariates": ["x1", "x2"]},
           "runner": {"kind": "dask"}, "ledger": {"dataset_id": dataset},
           "estimator": {**ESTIMATOR, "n_folds": K}, "mlflow": {"experiment": f"t-{dataset}"}}
    path = tmp_path / "sqlparts.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert curator_registers(path).n == N  # the curator's registration (issue 32 §1)
    res = invoke("run", str(path), "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    rel = json.loads(res.stdout)["release"]
    assert rel["n"] == N and rel["nonprivate"] is None
    assert rel["params"]["folds"] == "keyed_rank(id)" and rel["params"]["partitions"] == PARTS
    assert (rel["params"]["n_blocks"], rel["params"]["block_folds"]) == (K // KB, KB)
    assert charges(dataset) == 1


def test_a_config_release_counts_the_partitions_once(tmp_path, monkeypatch, curator_registers):
    """``dp_release`` of a partitioned SQL config (its checks, then its Dask subflow) reads the
    id column once, before the charge, and the query's declared columns once per partition
    after it: the subflow reads with the partitions and key its checks counted."""
    from _flowtools import charges, give_cap

    import tasks.sql_partitions as module
    from conf.models import load_config
    from flows.release import run_release

    passes = []
    real = module._chunks

    def spy(parts, columns):
        passes.append(tuple(columns))
        return real(parts, columns)

    monkeypatch.setattr(module, "_chunks", spy)
    dataset = "sql-parts-once"
    give_cap(dataset, zeta=1.5)
    raw = {"name": "sqlonce",
           "data": {"sql": "SELECT * FROM records", "url": _sqlite(tmp_path / "d.db", _table(5)),
                    "sql_partitions": PARTS, "id_column": "id", "dtypes": {"id": "int"}},
           "columns": {"treatment": "A", "outcome": "Y", "covariates": ["x1", "x2"]},
           "runner": {"kind": "dask"}, "ledger": {"dataset_id": dataset},
           "estimator": {**ESTIMATOR, "n_folds": K}, "mlflow": {"experiment": f"t-{dataset}"}}
    config = load_config(None, [f"mlflow.tracking_uri=sqlite:///{tmp_path}/m.db"], base=raw)
    assert curator_registers(config).n == N
    out = run_release(config)
    assert out["release"]["n"] == N and charges(dataset) == 1
    assert passes.count(("id",)) == 1
    assert sorted(passes) == [("id",)] + [("id", "A", "Y", "x1", "x2")] * PARTS
