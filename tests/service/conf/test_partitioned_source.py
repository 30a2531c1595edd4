"""A partitioned source (``data.partitions`` + ``data.id_column``, issue 19 §3) in a release
config: its validation, its shape for the planner and the CLI's preflight, all from the Parquet
footers, never a value. The release through ``dpcausal run`` is tests/service/flows/
test_partitioned_run.py."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from cli.main import main
from conf.kinds import load_any
from conf.models import ConfigError, load_config

N, D, PARTS = 3000, 2, 3


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from dpcausal.ate.partitioned import write_parquet_partitions

    path = tmp_path_factory.mktemp("parts")
    write_parquet_partitions(path, n=N, d=D, n_partitions=PARTS, seed=7)
    return path


def _base(parts, **data):
    return {"data": {"partitions": str(parts), "id_column": "id", **data},
            "columns": {"treatment": "A", "outcome": "Y"},
            "estimator": {"outcome_bounds": [-1.0, 1.0], "n_folds": 12, "zeta": 1.0},
            "ledger": {"dataset_id": "parts"}}


def test_a_partitioned_config_loads_with_absolute_partitions(parts, monkeypatch):
    monkeypatch.chdir(parts.parent)
    config = load_any(None, [f"data.partitions={parts.name}"], base=_base(parts))
    assert config.data.partitions == str(parts) and config.data.id_column == "id"
    assert config.data.fold_key is None


@pytest.mark.parametrize("overrides, match", [
    (["data.id_column=null"], r"data.partitions needs data.id_column"),
    (["data.path=x.csv"], r"give exactly one of data.path .*data.sql .*or data.partitions"),
    (["data.url=sqlite://"], r"data.url and data.url_block go with data.sql only"),
    (["estimator.folds=shuffle"], r"estimator.folds does not apply to data.partitions"),
    (["columns.covariates=[x1, id]"], r"data.id_column 'id' is the record identity"),
    (["data.fold_key=mine"], r"data.fold_key: Input should be 'release' or 'curator'"),
])
def test_invalid_partitioned_configs_are_one_sentence(parts, overrides, match):
    with pytest.raises(ConfigError, match=match) as info:
        load_config(None, overrides, base=_base(parts))
    assert "\n" not in str(info.value)


def test_id_column_only_with_partitions(parts):
    base = {**_base(parts), "data": {"path": "x.csv", "id_column": "id"}}
    with pytest.raises(ConfigError, match="data.id_column and data.fold_key go with "
                                          "data.partitions or data.sql_partitions only"):
        load_config(None, [], base=base)


def test_partitions_only_for_the_core_kind(parts):
    overrides = ["data.path=null", f"data.partitions={parts}", "data.id_column=id"]
    with pytest.raises(ConfigError, match=r"data.partitions works with the core release "
                                          r"\(kind: ate\) only, not with kind: federated"):
        load_any("conf/release/federated_demo.yaml", overrides)


def test_source_shape_sums_the_footers(parts, tmp_path):
    from tasks.data import source_shape

    config = load_config(None, [], base=_base(parts))
    assert source_shape(config.data, config.columns) == (N, D)  # id is not a covariate
    named = load_config(None, ["columns.covariates=[x1]"], base=_base(parts))
    assert source_shape(named.data, named.columns) == (N, 1)
    for where, match in [(tmp_path / "nope", "does not exist"), (tmp_path, "no .parquet files")]:
        missing = load_config(None, [f"data.partitions={where}"], base=_base(parts))
        with pytest.raises(ValueError, match=match):
            source_shape(missing.data, missing.columns)


def _no_value_reads(monkeypatch):
    """Any read of a Parquet file's values fails (footers stay readable)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a data value was read")
    monkeypatch.setattr(pd, "read_parquet", refuse)
    monkeypatch.setattr("pyarrow.parquet.read_table", refuse)
    monkeypatch.setattr("pyarrow.parquet.ParquetFile.read", refuse)


@pytest.fixture(autouse=True)
def _curator(curator_registers):
    global _register
    _register = curator_registers


def _plan(parts, tmp_path, monkeypatch, *args):
    """``plan`` of the partitions, after the curator registered them (footers only)."""
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    source = ["data.path=null", f"data.partitions={parts}", "data.id_column=id",
              "columns.treatment=A", "columns.outcome=Y",
              "columns.covariates=null"]
    assert _register("conf/release/demo.yaml", source).n == N
    return CliRunner().invoke(main, [
        "plan", "conf/release/demo.yaml", *(x for item in source for x in ("--set", item)),
        "--set", "estimator.outcome_bounds=[-1, 1]", *args])


def test_plan_on_partitions_reads_the_footers_only(parts, tmp_path, monkeypatch):
    _no_value_reads(monkeypatch)
    out = _plan(parts, tmp_path, monkeypatch, "--json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert (doc["n"], doc["d"]) == (N, D)


def test_preflight_checks_partitions_without_reading_a_value(parts, tmp_path, monkeypatch):
    from conf.kinds import KINDS
    from conf.registration import check_asked, registered
    from dpcausal.ledger import Ledger
    from tasks.preflight import check_release

    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    with Ledger(create=True) as led:
        led.set_budget("parts", zeta=1.5)
    _no_value_reads(monkeypatch)
    assert _register(load_config(None, [], base=_base(parts))).n == N  # footers only
    kind = KINDS["ate"]

    def check(*overrides):
        config = load_config(None, list(overrides), base=_base(parts))
        check_asked(config, registered("parts"))  # a run only asks (issue 32 §2)
        return check_release(config.data, kind.schema(config), kind.build(config),
                             kind.roles(config), dataset="parts", evaluation=False,
                             cap=kind.cap(config))

    checked = check()
    assert checked.prepared.public == {"n": N, "d": D} and checked.fingerprint is None
    assert checked.charge.zeta == pytest.approx(1.0)
    assert set(checked.schema) == {"id", "A", "Y", "x1", "x2"}
    with pytest.raises(ValueError, match=r"columns.treatment differs from the registration"):
        check("columns.treatment=T")
    from dpcausal.ledger import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        check("estimator.zeta=2.0")
    with Ledger() as led:
        assert led.history("parts").empty


def test_plan_on_partitions_shows_the_block_layout(parts, tmp_path, monkeypatch):
    """Issue 28 §3: the plan of a partitioned source shows K, B, K' and the rows of the largest
    block and smallest fold of the release's own public plan (footers only): 3 files of 1000
    rows, K = 30 in 6 blocks of 5 folds, 2 blocks per file of 500 rows, folds of 100."""
    _no_value_reads(monkeypatch)
    blocks = ("--set", "estimator.n_folds=30", "--set", "estimator.block_folds=5")
    out = _plan(parts, tmp_path, monkeypatch, "--json", *blocks)
    assert out.exit_code == 0, out.output
    part = json.loads(out.output)["partitioned"]
    assert {k: v for k, v in part.items() if k not in ("halfwidth", "ratio")} == {
        "partitions": 3, "n_folds": 30, "n_blocks": 6, "block_folds": 5, "rows_per_block": 500,
        "rows_per_fold": 100}
    # equal files cut into equal blocks: the balanced layout the planner's table assumes (the
    # demo config: AIPW, clip 0.2, zeta 1.5)
    from dpcausal.ate.planner import plan

    table = plan(3000, 2, outcome_bounds=(-1.0, 1.0), zeta=1.5, n_folds=[30], block_folds=5)
    assert part["halfwidth"] == pytest.approx(table["halfwidth"].min(), rel=1e-9)
    text = _plan(parts, tmp_path, monkeypatch, *blocks)
    assert text.exit_code == 0, text.output
    assert ("Partitioned path (3 partitions): K=30 in B=6 blocks of K'=5 folds, each block "
            "inside one partition; largest block 500 rows, smallest fold 100 rows (only per-block "
            f"sums leave the workers); expected 95% CI half-width {part['halfwidth']:.4g}") \
        in " ".join(text.output.split())    # plan wraps its lines at 100 columns (issue 42)
    full = json.loads(_plan(parts, tmp_path, monkeypatch, "--json", "--set",
                            "estimator.n_folds=12").output)["partitioned"]
    assert (full["n_folds"], full["n_blocks"], full["rows_per_fold"]) == (12, 1, None)


def test_sql_partitions_need_a_query_an_id_and_dask(parts):
    sql = {"sql": "SELECT * FROM t", "url": "sqlite:///x.db"}
    with pytest.raises(ConfigError, match="data.sql_partitions splits a data.sql query"):
        load_config(None, [], base={**_base(parts), "data": {"path": "x.csv",
                                                              "sql_partitions": 2}})
    with pytest.raises(ConfigError, match="data.sql_partitions needs data.id_column"):
        load_config(None, [], base={**_base(parts), "data": {**sql, "sql_partitions": 2}})
    with pytest.raises(ConfigError, match="data.sql_partitions works with the core release"):
        load_any("conf/release/federated_demo.yaml",
                 ["data.path=null", "data.sql='SELECT * FROM t'", "data.url=sqlite:///x.db",
                  "data.sql_partitions=2", "data.id_column=id"])
    config = load_config(None, [], base={**_base(parts), "data": {
        **sql, "sql_partitions": 2, "id_column": "id", "dtypes": {"id": "int"}}})
    assert config.data.partitioned and config.data.partitions is None
    # Dask whatever runner.kind says (issue 40 item 7: the runner is the curator's deployment
    # settings, which need no section for a partitioned dataset)
    assert load_config(None, ["runner.kind=threads"], base=config.model_dump(mode="json")
                       ).data.partitioned


@pytest.mark.parametrize("value, ok", [("auto", True), (8, True), (0, False), ("many", False),
                                       (2.5, False)])
def test_sql_partitions_take_a_number_or_auto(parts, value, ok):
    """Issue 35 §5: ``data.sql_partitions`` is an int >= 1 or ``auto``; anything else is one
    sentence naming the key."""
    data = {"sql": "SELECT * FROM t", "url": "sqlite:///x.db", "sql_partitions": value,
            "id_column": "id"}
    if ok:
        assert load_config(None, [], base={**_base(parts), "data": data}
                           ).data.sql_partitions == value
    else:
        with pytest.raises(ConfigError, match="sql_partitions"):
            load_config(None, [], base={**_base(parts), "data": data})
