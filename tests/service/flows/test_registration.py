"""Issue 32: the curator registers a dataset once; a run only asks about it.

The outside audit's probes, replayed as an analyst would send them (``--set``, ``--dry-run``,
``--submit``) on two neighbouring databases behind one URL: they differ only in one person's
outcome (id 17), so a predicate on it (``(SELECT Y FROM t WHERE id=17) > 0``) is true on one and
false on the other. Every answer before the charge (exit code, message, ledger, Prefect flow
runs and artifacts) must be the same on both."""

from __future__ import annotations

import sqlite3
import zlib

import numpy as np
import pandas as pd
import pytest
import yaml
from _flowtools import artifacts_of, give_cap, ledger_rows

from dpcausal.ledger import Ledger
from tests.service._text import without_paths

DATASET = "registered-trial"
PREDICATE = "(SELECT Y FROM t WHERE id = 17) > 0"
# the audit's probes, each an analyst's run of the registered config (exit code expected)
PROBES = {
    "plain run, budget exhausted": ([], 3),
    "dry run": (["--dry-run"], 3),
    "submit": (["--submit"], 3),
    "a WHERE clause on one person": (["--set", f"data.sql=SELECT * FROM t WHERE {PREDICATE}"],
                                     2),
    "a conditional SQL error": (["--set", "data.sql=SELECT * FROM t WHERE CASE WHEN "
                                 f"{PREDICATE} THEN abs(-9223372036854775808) ELSE 1 END"], 2),
    "a NULL id": (["--set", "data.sql=SELECT CASE WHEN id = 17 AND "
                   f"{PREDICATE} THEN NULL ELSE id END AS id, X1, A, Y FROM t"], 2),
    "evaluation under the registered id": (["--set", "mode=evaluation"], 2),
    "evaluation under a new id": (["--set", "mode=evaluation",
                                   "--set", "ledger.dataset_id=fresh-id"], 2),
    "the complete-case count": (["--dry-run", "--set", "data.missing=drop",
                                 "--set", "estimator.n_folds=100000"], 2),
}


def _database(path, y17: float, seed: int = 5) -> None:
    """One of the two neighbours: 300 records, person 17's outcome ``y17``, one missing
    outcome (so ``missing: drop`` would count 299); other data for another ``seed`` (the same
    data cannot be registered under two ids)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"id": np.arange(300), "X1": rng.normal(size=300),
                          "A": rng.integers(0, 2, 300), "Y": rng.uniform(-1, 1, 300)})
    frame.loc[17, "Y"] = y17
    frame.loc[40, "Y"] = np.nan
    with sqlite3.connect(path) as conn:
        frame.to_sql("t", conn, index=False, if_exists="replace")


def _state() -> tuple:
    """What a refusal must leave as it was: every row of the ledger, Prefect's flow runs and
    artifacts."""
    from prefect.client.orchestration import get_client

    with Ledger() as led:
        ledger = (ledger_rows(), led.history(DATASET)["release_id"].tolist(),
                  [r.version for r in led.registrations(DATASET)],
                  led.registration("fresh-id"))
    artifacts = [(a.key, a.id) for key in ("%registered-trial%", "%fresh-id%")
                 for a in artifacts_of(key_like=key)]
    with get_client(sync_client=True) as client:
        return ledger, client.count_flow_runs(), artifacts


@pytest.fixture
def registered(project, tmp_path, request, curator_registers):
    """The curator's config of a SQL source, registered (n = 300) and capped at zeta 1 (a
    release at zeta 1.5 is refused: the budget is as good as exhausted); the probes' dataset
    id, or for another test one of its own."""
    dataset = DATASET if "neighbouring" in request.node.name else (
        "registered-" + request.node.name.removeprefix("test_")[:40].replace("_", "-"))
    db = tmp_path / "trial.db"
    _database(db, 0.9, 5 if dataset == DATASET else zlib.crc32(dataset.encode()))
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump({
        "name": "reg", "data": {"sql": "SELECT id, X1, A, Y FROM t", "url": f"sqlite:///{db}"},
        "columns": {"treatment": "A", "outcome": "Y", "covariates": ["X1"]},
        "estimator": {"n_folds": 10, "outcome_bounds": [-1, 1], "zeta": 1.5},
        "ledger": {"dataset_id": dataset}}))
    give_cap(dataset, zeta=1.0)
    reg = curator_registers(path)
    assert reg is not None and reg.n == 300
    return path, db, dataset


def test_every_probe_answers_the_same_on_neighbouring_databases(registered, invoke):
    """Issue 32 "Why" 1-3 and 6: the probes gave exit 3 vs exit 2 ("n_folds=10 is too large
    for n=0"), a conditional SQL error or a NULL id split likewise, evaluation mode printed
    the non-private estimate under a new id, and ``missing: drop`` printed the exact
    complete-case count. Now the registration answers them all, identically on both
    neighbours; the refusals name the key that differs from the registration."""
    path, db, _ = registered
    answers = {}
    for y17 in (0.9, -0.9):
        _database(db, y17)
        before = _state()
        answers[y17] = {name: invoke("run", str(path), "--no-progress", *args)
                        for name, (args, _) in PROBES.items()}
        assert _state() == before, y17  # nothing charged, run, published or registered
    for name, (_, code) in PROBES.items():
        one, other = answers[0.9][name], answers[-0.9][name]
        assert (one.exit_code, one.stdout, one.stderr) == (
            other.exit_code, other.stdout, other.stderr), name
        assert one.exit_code == code, (name, one.output)
        assert "n_clipped" not in one.output and "failed_fits" not in one.output
    text = {name: answers[0.9][name].stderr for name in PROBES}
    assert "data.sql differs from the registration" in text["a WHERE clause on one person"]
    assert "data.missing differs from the registration" in text["the complete-case count"]
    assert "299" not in without_paths(text["the complete-case count"])
    assert "registration does not allow it" in text["evaluation under the registered id"]
    assert "'fresh-id' is not registered" in text["evaluation under a new id"]
    assert "budget exhausted" in text["submit"] and "http" not in answers[0.9]["submit"].stdout


def test_a_source_that_no_longer_holds_n_records_fails_after_the_charge(registered, invoke,
                                                                       tmp_path):
    """The registered n is public: a run is reserved on it before the query runs; a database
    that no longer holds n records fails after the reservation, charged and generic, the
    curator's private log saying why."""
    path, db, dataset = registered
    with Ledger() as led:
        led.set_budget(dataset, zeta=10.0)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM t WHERE id = 17")
    out = invoke("run", str(path), "--no-progress")
    assert out.exit_code == 1, out.output
    assert "ReleaseFailedError" in out.stderr and "299" not in without_paths(out.output)
    with Ledger() as led:
        assert led.history(dataset)["status"].tolist() == ["incomplete"]


def test_a_registered_run_leaves_the_data_half_out(registered, invoke, tmp_path):
    """A run's config names the dataset and the analysis only: the data half comes from the
    registration (`dpcausal ledger show`)."""
    path, _, dataset = registered
    asked = yaml.safe_load(path.read_text())
    del asked["data"], asked["columns"]
    short = tmp_path / "asked.yaml"
    short.write_text(yaml.safe_dump(asked))
    out = invoke("run", str(short), "--dry-run")
    assert out.exit_code == 3 and "budget exhausted" in out.stderr, out.output
    shown = invoke("ledger", "show", dataset)
    assert shown.exit_code == 0 and "n=300 records (public)" in shown.stdout, shown.output
    assert "SELECT id, X1, A, Y FROM t" in shown.stdout


def test_the_partition_count_runs_after_the_reservation(registered, monkeypatch,
                                                       curator_registers):
    """Issue 32 §3: a partitioned SQL source was counted (a query, under the analyst's WHERE)
    before the headroom was checked; now the checks before the charge read nothing."""
    import tasks.data as data
    import tasks.preflight as preflight
    import tasks.sql_partitions as sql_partitions
    from conf.kinds import KINDS, load_any
    from dpcausal.ledger import BudgetExceededError

    def no_query(*args, **kw):
        raise AssertionError("a query ran before the reservation")

    path, _, dataset = registered
    config = load_any(path, ["data.sql_partitions=4", "data.id_column=id",
                             "data.dtypes={id: int}", "runner.kind=dask"])
    assert curator_registers(config).n == 300   # the curator's count, before the patches
    # the partition count (count_sql), and every query of a data source: each opens its
    # database through tasks.data.database_engine
    for module in (preflight, sql_partitions):
        monkeypatch.setattr(module, "count_sql", no_query, raising=False)
    for module in (data, sql_partitions):
        monkeypatch.setattr(module, "database_engine", no_query)
    kind = KINDS["ate"]
    with pytest.raises(BudgetExceededError):
        preflight.check_release(config.data, kind.schema(config), kind.build(config),
                                kind.roles(config), dataset=dataset, evaluation=False,
                                cap=kind.cap(config))


# ------------------------------------------------------------------ the further kinds
FURTHER = ["cluster_dp", "federated", "user_level"]
#: a cap below each kind's charge in its unit (the budget is as good as exhausted)
SHORT_CAP = {"cluster_dp": dict(epsilon=1.5, delta=1e-5, unit="label"),
             "federated": dict(epsilon=0.5, delta=1e-5, unit="client"),
             "user_level": dict(epsilon=0.5, delta=1e-5, unit="user")}
OUTCOME = {"cluster_dp": "outcome", "federated": "outcome", "user_level": "y"}


def _neighbour(text: str, kind: str) -> str:
    """The CSV ``text`` with the first person's outcome field opened by a quote (``"0.3``):
    one person's value, which leaves every public fact as registered but makes the reader
    take the rest of the file as that one field (the records after it are one broken record)."""
    header, first, *rest = text.splitlines()
    fields = first.split(",")
    at = header.split(",").index(OUTCOME[kind])
    fields[at] = '"' + fields[at]
    return "\n".join([header, ",".join(fields), *rest]) + "\n"


@pytest.fixture
def further(project, tmp_path, curator_registers, request):
    """``further(kind)``: a registered config of ``kind`` on its own CSV file (the curator
    counted it), capped below its charge; returns (config path, data file, text, dataset).
    The dataset is the test's own (a test that raises its cap must not change what another
    test sees, whatever their order)."""
    from test_kinds_release import _base, _frame

    def make(kind: str):
        dataset = f"registered-{kind.replace('_', '-')}-{request.node.originalname[5:40]}"
        data = tmp_path / f"{kind}.csv"
        _frame(kind, zlib.crc32(dataset.encode()) % 1000).to_csv(data, index=False)
        path = tmp_path / f"{kind}.yaml"
        path.write_text(yaml.safe_dump({
            "kind": kind, "name": "k", "data": {"path": str(data)}, **_base(kind),
            "ledger": {"dataset_id": dataset, "epsilon": 40.0, "delta": 1e-5}}))
        give_cap(dataset, **SHORT_CAP[kind])
        reg = curator_registers(path)
        assert reg is not None and reg.n > 0
        return path, data, data.read_text(), dataset

    return make


def _kind_state(dataset: str) -> tuple:
    from prefect.client.orchestration import get_client

    with Ledger() as led:
        ledger = (ledger_rows(),
                  led.history(dataset).to_json() if led.has_dataset(dataset) else "",
                  [r.version for r in led.registrations(dataset)])
    artifacts = [(a.key, a.id) for a in artifacts_of(key_like=f"%{dataset}%")]
    with get_client(sync_client=True) as client:
        return ledger, client.count_flow_runs(), artifacts


@pytest.mark.parametrize("kind", FURTHER)
def test_a_further_kind_answers_the_same_on_neighbouring_files(further, invoke, kind):
    """Issue 32 §3 for Cluster-DP, federated and user-level releases: they read their file and
    ran ``check_input`` before the reservation, so one person's outcome field opened by a quote
    (the reader then takes the rest of the file as one broken record) turned the budget's
    refusal (exit 3) into a refusal of the data (exit 2: empty cluster groups, labels that are
    not 0/1, a record without its user). Now each is checked from its registration's public
    facts: the same answer, ledger, flow runs and artifacts on both neighbours."""
    path, data, text, dataset = further(kind)
    answers = {}
    for name, content in (("registered", text), ("neighbour", _neighbour(text, kind))):
        data.write_text(content)
        before = _kind_state(dataset)
        answers[name] = [invoke("run", str(path), "--no-progress", *args)
                         for args in ([], ["--dry-run"])]
        assert _kind_state(dataset) == before, name  # nothing charged, run or published
    for one, other in zip(answers["registered"], answers["neighbour"], strict=True):
        assert (one.exit_code, one.stdout, one.stderr) == (
            other.exit_code, other.stdout, other.stderr)
        assert one.exit_code == 3 and "budget exhausted" in one.stderr, one.output


@pytest.mark.parametrize("kind", FURTHER)
def test_a_further_kind_opens_no_file_before_the_reservation(further, monkeypatch, kind):
    """The checks before the charge of a further kind read its registration only: a spy on
    every reader of a data file sees no call before the budget's refusal."""
    import tasks.data as data_module
    import tasks.preflight as preflight
    from conf.kinds import KINDS, load_any
    from dpcausal.ledger import BudgetExceededError

    path, _, _, dataset = further(kind)
    config = load_any(path)

    def spy(*args, **kw):
        raise AssertionError("a data file was read before the reservation")

    for module, name in ((preflight, "read_frame"), (data_module, "read_frame"),
                         (data_module, "read_csv_table"), (pd, "read_parquet"),
                         (pd, "read_csv")):
        monkeypatch.setattr(module, name, spy)
    kind_ = KINDS[kind]
    with pytest.raises(BudgetExceededError):
        preflight.check_release(config.data, kind_.schema(config), kind_.build(config),
                                kind_.roles(config), dataset=dataset, evaluation=False,
                                cap=kind_.cap(config))


@pytest.mark.parametrize("kind", FURTHER)
def test_a_further_kind_whose_file_changed_fails_after_the_charge(further, invoke, kind):
    """The neighbour above under a cap that holds the charge: the run is reserved on the
    registered facts, then its file no longer gives them (SourceChangedError in the curator's
    private log): a charged, generic failure, as the core's."""
    path, data, text, dataset = further(kind)
    with Ledger() as led:
        led.set_budget(dataset, epsilon=40.0, delta=1e-5, unit=SHORT_CAP[kind]["unit"])
    data.write_text(_neighbour(text, kind))
    out = invoke("run", str(path), "--no-progress")
    assert out.exit_code == 1, out.output
    assert "ReleaseFailedError" in out.stderr and "records" not in out.output
    with Ledger() as led:
        assert led.history(dataset)["status"].tolist() == ["incomplete"]
