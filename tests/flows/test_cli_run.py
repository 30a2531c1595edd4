"""``dpcausal run`` / ``demo``: a printed release on good input; on bad input one paragraph on
stderr, exit code 2, and no ledger charge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from ledger import Ledger

BAD_DATASET = "cli-bad-input"


@pytest.fixture
def cli_config(exp_a_csv, tmp_path):
    counter = iter(range(1000))

    def write(data_path=None, **top):
        cfg = {"name": "cli", "data": {"path": str(data_path or exp_a_csv)},
               "columns": {"treatment": "A", "outcome": "Y"},
               "estimator": {"n_folds": 20, "fold_seed": 3}, "folds_per_task": 5,
               "ledger": {"dataset_id": BAD_DATASET, "budget": 50.0},
               "mlflow": {"experiment": "test-cli"}, **top}
        path = tmp_path / f"release{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return str(path)
    return write


def _charges(dataset: str) -> int:
    with Ledger(create=True) as led:
        if dataset not in set(led.budgets()["dataset"]):
            led.set_budget(dataset, zeta=50.0)
        return led.spent(dataset).n_charges


@pytest.fixture
def invoke(project):
    """Run ``dpcausal`` as a subprocess (a real exit code), against the test Prefect server."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "COLUMNS": "120"}

    def run(*args):
        proc = subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                              text=True, env=env, timeout=300)
        return SimpleNamespace(exit_code=proc.returncode, stdout=proc.stdout, stderr=proc.stderr,
                               output=proc.stdout + proc.stderr)
    return run


def _assert_bad(result, match):
    assert result.exit_code == 2, (match, result.output)
    err = result.stderr.strip()
    assert err.startswith("Error: ") and "\n" not in err and "Traceback" not in err
    assert pd.Series([err]).str.contains(match, regex=True).iloc[0], err
    assert result.stdout == ""


def test_bad_input_fails_with_one_paragraph_and_no_charge(cli_config, exp_a_csv, tmp_path, invoke):
    before = _charges(BAD_DATASET)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: x\ndata: {path: [\n")
    frame = pd.read_csv(exp_a_csv)
    nonbinary = tmp_path / "nonbinary.csv"
    frame.assign(A=frame["A"] * 2).to_csv(nonbinary, index=False)
    cases = [
        ((str(tmp_path / "nope.yaml"),), r"config file .*nope\.yaml' does not exist"),
        ((cli_config(tmp_path / "missing.csv"),), r"data file .*missing\.csv' does not exist"),
        ((cli_config(), "--set", "columns.treatment=arm"),
         r"columns\.treatment names column 'arm', which is not in the data"),
        ((cli_config(nonbinary),), r"treatment A must be coded 0/1"),
        ((str(bad_yaml),), r"is not valid YAML"),
        ((cli_config(), "--set", "models.outcome.name=nosuch"), r"unknown outcome model 'nosuch'"),
        ((cli_config(), "--set", "estimator.zeta=-1"), r"zeta must be a finite number > 0"),
        ((cli_config(), "--set", "estimator.n_folds=5000"), r"n_folds=5000 is too large"),
    ]
    for args, match in cases:
        _assert_bad(invoke("run", *args, "--no-progress"), match)
    assert _charges(BAD_DATASET) == before


def test_exhausted_budget_is_a_clean_error_without_charge(cli_config, invoke):
    dataset = "cli-small-budget"
    path = cli_config(ledger={"dataset_id": dataset, "budget": 1.0})
    _assert_bad(invoke("run", path, "--no-progress"), r"budget exhausted for dataset cli-small-budget")
    with Ledger() as led:
        assert led.spent(dataset).n_charges == 0


def test_run_prints_the_release_as_table_and_json(cli_config, invoke):
    dataset = "cli-good"
    path = cli_config(ledger={"dataset_id": dataset, "budget": 50.0})
    table = invoke("run", path, "--no-progress")
    assert table.exit_code == 0, table.output
    for label in ("ATE (private)", "95% CI", "1.5-GDP", "dataset spend", "MLflow"):
        assert label in table.stdout
    js = invoke("run", path, "--no-progress", "--json", "--set", "estimator.ci_share=0")
    assert js.exit_code == 0, js.output
    out = json.loads(js.stdout)
    assert out["release"]["ci"] is None and out["release"]["privacy"]["zeta"] == 1.5
    assert out["spent"]["n_charges"] == 2 and out["release_id"].endswith("/cli")
    assert isinstance(out["release"]["ate"], float)


def test_help_is_fast_and_lists_run_and_demo():
    env = dict(os.environ)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--help"], capture_output=True,
                          text=True, env=env, check=True)
    elapsed = time.perf_counter() - start
    assert "run" in proc.stdout and "demo" in proc.stdout
    assert elapsed < 2.0, f"dpcausal --help took {elapsed:.2f} s"
    out = subprocess.run([sys.executable, "-c", "import cli.main, cli.run_cmd, sys; "
                          "print(sorted(m for m in ('mlflow', 'prefect', 'sklearn') if m in sys.modules))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
