"""Release mode leaks nothing non-private: the pre-noise ATE and variance of the release appear
nowhere in the MLflow store (params, metrics, tags, artifacts, the database file), the Prefect
result storage and artifacts, the flow run's logs, the ledger or the printed text.

The secrets are the release's own tau_hat and V_hat, caught where the library draws the noise.
Negative controls show the scanner finds them where they are: in an evaluation run's store and
in a planted Prefect-style record.

The partitioned SQL release (flows/partitioned_release.py, tasks/sql_partitions.py) is scanned
for more: sentinel values planted in the private columns, and data-dependent counts (treated and
missing rows, overall and per partition), also when it fails after the charge; the control is
the curator's private log, which receives them.
"""

from __future__ import annotations

import base64
import json
import pickle

from _flowtools import Scanner, artifacts_of, flow_logs

import dpcausal.ate.estimator as estimator_module
from flows.release import run_release


def test_release_mode_leaks_no_nonprivate_value(make_config, project, tmp_path, monkeypatch):
    seen = []
    real = estimator_module.draw_release

    def spy(tau_hat, v_hat, *args, **kwargs):
        seen.append((tau_hat, v_hat))
        return real(tau_hat, v_hat, *args, **kwargs)

    monkeypatch.setattr(estimator_module, "draw_release", spy)
    rel_uri = f"sqlite:///{tmp_path / 'release-mlflow.db'}"
    out = run_release(make_config(f"mlflow.tracking_uri={rel_uri}",
                                  "mlflow.experiment=leak-release"))
    [(tau_hat, v_hat)] = seen
    scanner = Scanner({"tau_hat": tau_hat, "V_hat": v_hat})
    rel = out["release"]
    assert rel["nonprivate"] is None

    # positive control on the release itself: the scanner sees the private values it is shown
    assert Scanner({"ate": rel["ate"]}).mlflow_hits(rel_uri)

    artifacts = artifacts_of([out["release_id"].split("/")[0]])
    assert artifacts
    hits = scanner.mlflow_hits(rel_uri)
    hits += scanner.file_hits(tmp_path / "release-mlflow.db")
    hits += scanner.tree_hits(project.root / "mlartifacts" / "leak-release")
    if project.results.exists():
        hits += scanner.tree_hits(project.results)  # Prefect result storage
    hits += [h for m in flow_logs(out["release_id"].split("/")[0])
             for h in scanner.bytes_hits(m.encode(), "flow-run log")]
    hits += [h for a in artifacts for h in scanner.bytes_hits(str(a.data).encode(), a.key)]
    hits += scanner.bytes_hits(json.dumps(out, default=str).encode(), "flow result")
    hits += scanner.file_hits(project.root / "ledger.db")
    assert hits == []

    # negative controls: the scanner finds an evaluation run's secrets where it puts them ...
    eval_uri = f"sqlite:///{tmp_path / 'eval-mlflow.db'}"
    evaluation = run_release(make_config("mode=evaluation", f"mlflow.tracking_uri={eval_uri}",
                                         "mlflow.experiment=leak-eval", dataset="leak-eval"))
    secrets = evaluation["release"]["nonprivate"]
    found = Scanner({"tau_hat": secrets["ate"], "V_hat": secrets["variance"]}).mlflow_hits(
        eval_uri)
    assert any("tau_hat as number" in h and "nonprivate_ate" in h for h in found)
    assert any("V_hat" in h and "release.json" in h for h in found)
    # ... and inside a Prefect-style record (JSON around a base64 pickle)
    planted = tmp_path / "planted" / "record"
    planted.parent.mkdir()
    payload = base64.b64encode(pickle.dumps({"x": [tau_hat]})).decode()
    planted.write_text(json.dumps({"metadata": {}, "result": payload}))
    assert any("tau_hat as binary double" in h for h in scanner.tree_hits(planted.parent))


# ------------------------------------------------------------ the partitioned SQL release
SQL_N, SQL_PARTS = 3000, 3
#: values planted in the private columns (a leaked row, column or frame shows them)
Y_SENTINEL, X_SENTINEL = 0.8642097531, 4.2424242424
SQL_ESTIMATOR = {"estimator": "aipw", "block_folds": 5, "outcome_bounds": [-1.0, 1.0],
                 "zeta": 1.0, "propensity_clip": 0.1, "ci_share": 0.1}


def _sentinel_table(seed: int):
    """A table whose private columns hold the sentinels in scattered rows, a treated share of
    about 1/4 and an unreadable x2 ("n/a", a missing covariate the policy imputes) in about 2/5
    of the rows: the counts of treated and of missing rows are data-dependent secrets."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((SQL_N, 2))
    A = (rng.random(SQL_N) < 0.25).astype(np.int64)
    Y = np.clip(0.2 * A + 0.3 * X[:, 1] + rng.normal(0, .2, SQL_N), -1, 1)
    Y[::97], X[5::89, 0] = Y_SENTINEL, X_SENTINEL
    x2 = X[:, 1].astype(object)
    x2[rng.random(SQL_N) < 0.4] = "n/a"
    return pd.DataFrame({"id": rng.permutation(SQL_N).astype(np.int64), "A": A, "Y": Y,
                         "x1": X[:, 0], "x2": x2})


def _secret_counts(table) -> dict[str, int]:
    """The table's data-dependent counts, overall and per SQL partition (:func:`_partition_of`)."""
    label = _partition_of(table["id"])
    treated, missing = table["A"] == 1, table["x2"].eq("n/a")
    counts = {"treated": int(treated.sum()), "missing_x2": int(missing.sum())}
    for p in range(SQL_PARTS):
        mine = [lab == p for lab in label]
        counts[f"treated_{p}"] = int(treated[mine].sum())
        counts[f"missing_x2_{p}"] = int(missing[mine].sum())
    return counts


def _prefect_records(flow_run_id: str) -> list[tuple[str, str]]:
    """(where, text) of what the Prefect API holds for a flow run and its task runs: names,
    parameters, state names and messages, and its logs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
        artifacts = artifacts_of([run.id])
    records = [("flow run", json.dumps({"name": run.name, "parameters": run.parameters,
                                        "state": run.state.name, "message": run.state.message},
                                       default=str))]
    records += [(f"task run {t.name}", f"{t.name} {t.state.name} {t.state.message}")
                for t in tasks]
    records += [(f"artifact {a.key}", str(a.data)) for a in artifacts]
    records += [("flow-run log", m) for m in flow_logs(flow_run_id)]
    return records


def _private_log_size() -> int:
    from store import error_log_path

    return error_log_path().stat().st_size if error_log_path().exists() else 0


def _private_log_since(offset: int) -> bytes:
    """What the curator's private log (``<data>/private/errors.log``, attached by the charged
    release) received after ``offset``."""
    from store import error_log_path

    return error_log_path().read_bytes()[offset:]


def _sql_release(url: str, monkeypatch):
    """partitioned_sql_release in release mode under the curator's key; returns its final
    state and the (tau_hat, V_hat) and per-block sums the flow held in memory."""
    from _flowtools import spy_on_block_sums

    from flows.partitioned_release import partitioned_sql_release

    drawn = []
    real = estimator_module.draw_release

    def spy(tau_hat, v_hat, *args, **kwargs):
        drawn.append((tau_hat, v_hat))
        return real(tau_hat, v_hat, *args, **kwargs)

    monkeypatch.setattr(estimator_module, "draw_release", spy)
    sums = spy_on_block_sums(monkeypatch)
    state = partitioned_sql_release(
        "SELECT * FROM records", url=url, sql_partitions=SQL_PARTS, id_column="id",
        id_type="int", treatment="A", outcome="Y", estimator=SQL_ESTIMATOR, n_folds=30,
        dataset_id="sql-leak", fold_key="curator", chunk_rows=512, return_state=True)
    return state, drawn, [b for call in sums for part in call for b in part]


def test_partitioned_sql_release_leaks_no_nonprivate_value(project, tmp_path, monkeypatch):
    """Release mode from a SQL query (flows/partitioned_release.py, tasks/sql_partitions.py):
    tau_hat, V_hat, every block's sums, the sentinel values of the private columns and the
    data-dependent counts (treated, missing x2; overall and per partition) appear in no Prefect
    record (flow and task runs, states, parameters, artifacts, logs), result store, ledger or
    output. Controls: the curator's private log, where the missing-value policy writes its
    per-partition counts, is where the scanner finds them; the released se is found in the
    output."""
    import sqlite3

    from _flowtools import give_cap

    table = _sentinel_table(8)
    with sqlite3.connect(tmp_path / "d.db") as con:
        table.to_sql("records", con, index=False)
    give_cap("sql-leak", zeta=1.5)

    before = _private_log_size()
    state, drawn, blocks = _sql_release(f"sqlite:///{tmp_path / 'd.db'}", monkeypatch)
    out = state.result()
    [(tau_hat, v_hat)] = drawn
    assert out["nonprivate"] is None and len(blocks) == 6
    counts = _secret_counts(table)
    public = {v for v in out["params"].values() if isinstance(v, int)} | {out["n"]}
    assert min(counts.values()) >= 100 and not public & set(counts.values())
    secrets = {"tau_hat": tau_hat, "V_hat": v_hat, "Y_sentinel": Y_SENTINEL,
               "X_sentinel": X_SENTINEL,
               **{f"block_{b.block}_sum": b.s1 for b in blocks},
               **{f"block_{b.block}_sum_sq": b.s2 for b in blocks}}
    scanner = Scanner(secrets, counts)

    # controls: the scanner sees a released value, and the private log's data-dependent counts
    assert Scanner({"se": out["se"]}).bytes_hits(json.dumps(out).encode(), "output")
    logged = scanner.bytes_hits(_private_log_since(before), "private log")
    assert {f"missing_x2_{p} as text in private log" for p in range(SQL_PARTS)} <= set(logged)

    run_id = str(state.state_details.flow_run_id)
    hits = [h for where, text in _prefect_records(run_id)
            for h in scanner.bytes_hits(text.encode(), where)]
    hits += scanner.bytes_hits(json.dumps(out, default=str).encode(), "flow result")
    floats = Scanner(secrets)  # binary stores: floats as doubles or text (ints are not text)
    if project.results.exists():
        hits += floats.tree_hits(project.results)
    hits += floats.file_hits(project.root / "ledger.db")
    assert hits == []


def test_partitioned_sql_release_failure_leaks_no_value(project, tmp_path, monkeypatch):
    """A data step that fails after the charge with the partition's rows in its message (a
    bug's worst case) fails the release generically: the exception, its traceback, the flow
    and task runs' states and the logs hold no sentinel, which the curator's private log does
    (the control); the charge stays spent."""
    import sqlite3
    import traceback

    from _flowtools import charges, give_cap

    import tasks.partitioned as partitioned_tasks
    from dpcausal.validation import ReleaseFailedError

    table = _sentinel_table(9)
    with sqlite3.connect(tmp_path / "d.db") as con:
        table.to_sql("records", con, index=False)
    give_cap("sql-leak", zeta=1.5)
    spent, logged = charges("sql-leak"), _private_log_size()
    real = partitioned_tasks.read_sql_partition

    def failing(part, roles):
        raise ValueError(f"cannot use these rows:\n{real(part, roles).to_csv()}")

    monkeypatch.setattr(partitioned_tasks, "read_sql_partition", failing)
    state, drawn, _ = _sql_release(f"sqlite:///{tmp_path / 'd.db'}", monkeypatch)
    assert state.is_failed() and drawn == [] and charges("sql-leak") == spent + 1
    exc = state.result(raise_on_failure=False)
    assert isinstance(exc, ReleaseFailedError)
    scanner = Scanner({"Y_sentinel": Y_SENTINEL, "X_sentinel": X_SENTINEL})
    assert scanner.bytes_hits(_private_log_since(logged), "private log")  # the control
    text = "".join(traceback.format_exception(exc))
    hits = scanner.bytes_hits(text.encode(), "exception")
    hits += [h for where, record in _prefect_records(str(state.state_details.flow_run_id))
             for h in scanner.bytes_hits(record.encode(), where)]
    if project.results.exists():
        hits += scanner.tree_hits(project.results)
    assert hits == []


def test_partitioned_sql_config_release_leaks_no_nonprivate_value(project, tmp_path,
                                                                  monkeypatch, curator_registers):
    """The same scan through ``dp_release`` of a registered ``data.sql_partitions`` config
    (checked from its registration; its Dask subflow counts the partitions under a fresh fold
    key inside the charged task and reads with them: issue 32 §3), also over the MLflow store;
    the fold key itself (held in memory from the count to the reads) is a secret too."""
    import sqlite3

    import numpy as np
    from _flowtools import give_cap
    from mlflow import MlflowClient
    from prefect.client.orchestration import get_client

    import flows.partitioned_release as partitioned_flow
    from conf.models import load_config

    table = _sentinel_table(10)
    with sqlite3.connect(tmp_path / "d.db") as con:
        table.to_sql("records", con, index=False)
    counted, drawn = [], []
    real_count, real_draw = partitioned_flow.count_sql, estimator_module.draw_release

    def spy_count(parts, key, roles):
        counted.append(real_count(parts, key, roles))
        return counted[-1]

    def spy_draw(tau_hat, v_hat, *args, **kwargs):
        drawn.append((tau_hat, v_hat))
        return real_draw(tau_hat, v_hat, *args, **kwargs)

    monkeypatch.setattr(partitioned_flow, "count_sql", spy_count)
    monkeypatch.setattr(estimator_module, "draw_release", spy_draw)
    dataset, uri = "sql-leak-config", f"sqlite:///{tmp_path / 'mlflow.db'}"
    give_cap(dataset, zeta=1.5)
    raw = {"name": "sqlleak",
           "data": {"sql": "SELECT * FROM records", "url": f"sqlite:///{tmp_path / 'd.db'}",
                    "sql_partitions": SQL_PARTS, "id_column": "id", "dtypes": {"id": "int"}},
           "columns": {"treatment": "A", "outcome": "Y", "covariates": ["x1", "x2"]},
           "runner": {"kind": "dask"}, "ledger": {"dataset_id": dataset},
           "estimator": {**SQL_ESTIMATOR, "n_folds": 30},
           "mlflow": {"experiment": f"t-{dataset}", "tracking_uri": uri}}
    config = load_config(None, [], base=raw)
    assert curator_registers(config).n == len(table)
    out = run_release(config)
    [(tau_hat, v_hat)], [sql] = drawn, counted
    rel = out["release"]
    assert rel["nonprivate"] is None
    counts = _secret_counts(table)
    assert [p.rows for p in sql.parts] == np.bincount(_partition_of(table["id"]),
                                                      minlength=SQL_PARTS).tolist()
    public = {v for v in rel["params"].values() if isinstance(v, int)} | {rel["n"]}
    assert min(counts.values()) >= 100 and not public & set(counts.values())
    secrets = {"tau_hat": tau_hat, "V_hat": v_hat, "Y_sentinel": Y_SENTINEL,
               "X_sentinel": X_SENTINEL}
    scanner = Scanner(secrets, counts, keys={"fold key": sql.key})
    binary = Scanner(secrets, keys={"fold key": sql.key})  # ints are not text in binary stores
    assert Scanner({"se": rel["se"]}).mlflow_hits(uri)  # the control: the scanner sees values

    parent = out["release_id"].split("/")[0]
    with get_client(sync_client=True) as client:
        runs = [str(r.id) for r in client.read_flow_runs()
                if str(r.id) == parent or r.parent_task_run_id is not None]
    assert len(runs) >= 2  # dp_release and its partitioned subflow
    hits = [h for r in runs for where, text in _prefect_records(r)
            for h in scanner.bytes_hits(text.encode(), where)]
    client = MlflowClient(tracking_uri=uri)
    records = [[r.data.params, r.data.tags, r.data.metrics] for e in client.search_experiments()
               for r in client.search_runs([e.experiment_id])]
    hits += scanner.bytes_hits(json.dumps(records).encode(), "MLflow params, tags, metrics")
    hits += binary.mlflow_hits(uri) + binary.file_hits(tmp_path / "mlflow.db")
    hits += scanner.bytes_hits(json.dumps(out, default=str).encode(), "flow result")
    if project.results.exists():
        hits += binary.tree_hits(project.results)
    hits += binary.file_hits(project.root / "ledger.db")
    assert hits == []


def _partition_of(ids):
    """The SQL source's partition rule written out: the sorted ids cut into P consecutive runs,
    the first n mod P one id longer."""
    import numpy as np

    label = np.empty(len(ids), dtype=np.int64)
    for p, run in enumerate(np.array_split(np.argsort(np.asarray(ids)), SQL_PARTS)):
        label[run] = p
    return label
