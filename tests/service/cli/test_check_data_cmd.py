"""``dpcausal check-data``: non-private counts on the curator's terminal, charging and writing
nothing, without Prefect or MLflow (issue 25 §2)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cli.main import main
from tests.service._text import without_paths


@pytest.fixture()
def survey_csv(tmp_path):
    rng = np.random.default_rng(1)
    n = 400
    frame = pd.DataFrame({"X1": rng.normal(size=n), "A": rng.integers(0, 2, n).astype(float),
                          "Y": rng.uniform(-1, 1, n)})
    frame.loc[:9, "X1"] = np.nan           # 10 missing covariates
    frame.loc[10:14, "Y"] = np.nan         # 5 missing outcomes
    frame.loc[15:16, "A"] = np.nan         # 2 missing treatments
    frame.loc[17:19, "Y"] = 3.0            # 3 outcomes outside the bounds
    path = tmp_path / "survey.csv"
    frame.to_csv(path, index=False)
    return path


def _curator_key(data: Path) -> Path:
    """The curator's key file, as the private store holds it (store._secret): 0600."""
    key = data / "private" / "fingerprint.key"
    key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)
    return key


def _run(args, tmp_path, monkeypatch, command="check-data", curator=True):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    if curator:
        _curator_key(tmp_path / "data")
    return CliRunner().invoke(main, [command, *args])


def test_counts_missing_values_and_writes_nothing(survey_csv, tmp_path, monkeypatch):
    out = _run(["conf/release/demo.yaml", "--set", f"data.path={survey_csv}",
                "--set", "estimator.n_folds=10"], tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("NON-PRIVATE")
    row = {line.split()[1]: line.split()[2:] for line in lines
           if line.split()[:1] in (["treatment"], ["outcome"], ["covariate"])}
    assert row["X1"][:2] == ["400", "10"] and row["A"][:2] == ["400", "2"]
    assert row["Y"][:4] == ["400", "5", "0", "3"]
    assert "rows without a usable treatment or outcome  7" in out.output
    assert "n of the release" in out.output and "rows per fold" in out.output
    assert not (tmp_path / "ledger.db").exists()
    assert [p.name for p in (tmp_path / "data").rglob("*") if p.is_file()] == [
        "fingerprint.key"]  # the curator's key, written before: nothing else


def test_drop_reports_the_complete_case_count(survey_csv, tmp_path, monkeypatch):
    out = _run(["conf/release/demo.yaml", "--set", f"data.path={survey_csv}",
                "--set", "data.missing=drop_public_count", "--set", "estimator.n_folds=10"],
               tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    assert "rows dropped                                17" in out.output
    assert "n of the release                            383" in out.output
    noisy = _run(["conf/release/demo.yaml", "--set", f"data.path={survey_csv}",
                  "--set", "data.missing=drop", "--set", "estimator.n_folds=10"],
                 tmp_path, monkeypatch)
    assert "complete cases (released noisy)             383" in noisy.output
    assert "n of the release                            400" in noisy.output


def test_other_kinds_get_the_per_role_counts(tmp_path, monkeypatch):
    path = tmp_path / "fed.csv"
    pd.DataFrame({"treatment": [0, 1, 1, 0], "outcome": [0.5, np.nan, 2.0, -0.1]}).to_csv(
        path, index=False)
    out = _run(["conf/release/federated_demo.yaml", "--set", f"data.path={path}"],
               tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    assert "outcome   outcome     4        1           0             1" in out.output
    assert "treated" in out.output


def test_a_missing_file_is_one_error_line(tmp_path, monkeypatch):
    out = _run(["conf/release/demo.yaml", "--set", f"data.path={tmp_path / 'none.csv'}"],
               tmp_path, monkeypatch)
    assert out.exit_code == 2 and "does not exist" in out.output


def test_imports_neither_prefect_nor_mlflow(survey_csv, tmp_path):
    code = ("import sys; from click.testing import CliRunner; from cli.main import main; "
            f"r = CliRunner().invoke(main, ['check-data', 'conf/release/demo.yaml', '--set', "
            f"'data.path={survey_csv}', '--set', 'estimator.n_folds=10']); "
            "assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('prefect', 'mlflow')))")
    env = {**os.environ, "DPCAUSAL_DATA": str(tmp_path / "data")}
    _curator_key(tmp_path / "data")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_a_partitioned_source_is_read_whole_as_a_file_is(tmp_path, monkeypatch):
    """check-data reads partitions through the release's reader (tasks.data.read_frame): every
    row of every partition, the id column dropped, each column as its declared type."""
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, (a, y) in enumerate([(["1", "0", "x"], [0.5, 0.2, 3.0]), (["0", "1"], [None, -0.1])]):
        pd.DataFrame({"id": [f"{i}-{j}" for j in range(len(a))], "A": a, "Y": y,
                      "X1": [1.0] * len(a)}).to_parquet(parts / f"part-{i}.parquet")
    out = _run(["conf/release/demo.yaml", "--set", f"data.partitions={parts}",
                "--set", "data.path=null", "--set", "data.id_column=id",
                "--set", "runner.kind=dask", "--set", "estimator.n_folds=2"],
               tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    row = {line.split()[1]: line.split()[2:] for line in out.output.splitlines()
           if line.split()[:1] in (["treatment"], ["outcome"], ["covariate"])}
    assert set(row) == {"A", "Y", "X1"}             # the id column is no covariate
    assert row["A"][:2] == ["5", "1"]               # 'x' is no 0/1 integer: missing
    assert row["Y"][:4] == ["5", "1", "0", "1"]     # 3.0 is outside the bounds [-1, 1]


@pytest.fixture()
def wages_csv(tmp_path):
    """A public-data-like survey: missing values, text id columns, a log-wage outcome."""
    rng = np.random.default_rng(2)
    n = 400
    frame = pd.DataFrame({"educ": rng.integers(8, 18, n).astype(float),
                          "exper": rng.normal(10, 3, n),
                          "address": [f"{i} Main St" for i in range(n)],
                          "village": [f"v{i % 7}" for i in range(n)],
                          "A": rng.integers(0, 2, n), "Y": rng.uniform(4.6, 7.8, n)})
    frame.loc[:19, "exper"] = np.nan
    path = tmp_path / "wages.csv"
    frame.to_csv(path, index=False)
    return path


def _curator_half(args):
    """The ``--set data.*`` / ``columns.*`` items of ``args``: what the curator registers."""
    return [item for key, item in zip(args, args[1:], strict=False)
            if key == "--set" and item.split(".")[0] in ("data", "columns")]


def test_one_meaning_of_covariates_in_check_data_plan_and_run(wages_csv, tmp_path, monkeypatch,
                                                              curator_registers):
    """``covariates: []`` is no covariates for every command (refused alike); omitted, the
    covariates are the other columns declared numbers, never one declared str (issue 34 §1);
    check-data says what it left out and flags a column missing in every row. check-data and
    the registration are the curator's and read the config as given; plan and run only ask
    about the registration (issue 32 §2), whose d counts the covariates as the release takes
    them."""
    from conf.kinds import load_any
    from dpcausal.ledger import Ledger
    from tasks.registration import register

    base = ["conf/release/demo.yaml", "--set", f"data.path={wages_csv}",
            "--set", "estimator.n_folds=10", "--set", "estimator.outcome_bounds=[4, 8]"]
    empty = [*base, "--set", "columns.covariates=[]"]
    out = _run(empty, tmp_path, monkeypatch)
    assert out.exit_code == 2 and "no covariate columns" in out.output, out.output
    with pytest.raises(ValueError, match="no covariate columns"):  # the curator: refused alike
        register(load_any(base[0], _curator_half(empty)))
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", create=True) as led:
        led.set_budget("demo-experiment-a", zeta=15.0)
    for command in (["plan"], ["run", "--dry-run"]):   # so nothing asks about it
        asked = CliRunner().invoke(main, [*command, *empty])
        assert asked.exit_code == 2 and "is not registered" in asked.output, asked.output

    declared = [*base, "--set", "columns.covariates=null",
                "--set", "data.dtypes={address: str, village: str}"]
    assert curator_registers(base[0], _curator_half(declared)).facts["d"] == 2
    planned = _run(declared, tmp_path, monkeypatch, "plan")
    assert planned.exit_code == 0, planned.output
    assert "n=400, d=2" in planned.output  # educ, exper: never the text columns
    for command in (["plan"], ["run", "--dry-run"]):   # a run cannot ask for none instead
        asked = CliRunner().invoke(main, [*command, *empty])
        assert asked.exit_code == 2, asked.output
        assert "columns.covariates differs from the registration" in asked.output, asked.output
    looked = _run(declared, tmp_path, monkeypatch)
    assert looked.exit_code == 0, looked.output
    covariates = [line.split()[1] for line in looked.output.splitlines()
                  if line.split()[:1] == ["covariate"]]
    assert covariates == ["educ", "exper"]
    assert "not covariates (not a number): address, village" in looked.output
    # an undeclared text column is read as a number, missing in every row: flagged
    undeclared = _run([*base, "--set", "columns.covariates=null",
                       "--set", "data.dtypes={address: str}"], tmp_path, monkeypatch)
    assert undeclared.exit_code == 0, undeclared.output
    assert "covariates missing in every row: village" in undeclared.output
    # ... and the curator cannot register it as a covariate: a run never meets it (issue 34 §1)
    with pytest.raises(ValueError, match=r"columns \['village'\] hold no number in any row"):
        register(load_any(base[0], _curator_half([*base, "--set", "columns.covariates=null",
                                                  "--set", "data.dtypes={address: str}"])))


@pytest.mark.parametrize("key", [None, "unreadable"])
def test_without_the_curators_key_check_data_refuses_and_reads_nothing(
        survey_csv, tmp_path, monkeypatch, key):
    """Issue 32 §6/§8: check-data prints exact, non-private counts, so it is the curator's only:
    without the curator's key file readable it refuses (exit 2) saying why, printing no count."""
    if key == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads every file")
        _curator_key(tmp_path / "data").chmod(0)
    out = _run(["conf/release/demo.yaml", "--set", f"data.path={survey_csv}",
                "--set", "estimator.n_folds=10"], tmp_path, monkeypatch, curator=False)
    assert out.exit_code == 2, out.output
    assert "for the dataset's curator only" in out.output and "fingerprint.key" in out.output
    assert "NON-PRIVATE" not in out.output and "400" not in without_paths(out.output)


def test_a_database_reached_through_the_runners_block_is_refused(tmp_path, monkeypatch):
    out = _run(["conf/release/demo.yaml", "--set", "data.path=null",
                "--set", "data.sql=SELECT * FROM t", "--set", "data.url_block=secret/db"],
               tmp_path, monkeypatch)
    assert out.exit_code == 2, out.output
    assert "does not read data.url_block 'secret/db'" in out.output
