"""``dpcausal run`` / ``demo``: a printed release on good input; on bad input one paragraph on
stderr, exit code 2, and no ledger charge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest
import yaml

from dpcausal.ledger import Ledger

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
    with ThreadPoolExecutor(max_workers=2) as pool:  # independent subprocesses: two at a time
        results = list(pool.map(lambda case: invoke("run", *case[0], "--no-progress"), cases))
    for result, (_, match) in zip(results, cases, strict=True):
        _assert_bad(result, match)
    assert _charges(BAD_DATASET) == before


def test_exhausted_budget_is_a_clean_error_without_charge(cli_config, invoke):
    dataset = "cli-small-budget"
    path = cli_config(ledger={"dataset_id": dataset, "budget": 1.0})
    _assert_bad(invoke("run", path, "--no-progress"),
                r"budget exhausted for dataset cli-small-budget")
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


def test_help_lists_run_and_demo_without_importing_heavy_libraries():
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--help"], capture_output=True,
                          text=True, env=dict(os.environ), check=True)
    assert "run" in proc.stdout and "demo" in proc.stdout
    out = subprocess.run([sys.executable, "-c", "import cli.main, cli.run_cmd, sys; "
                          "print(sorted(m for m in ('mlflow', 'prefect', 'sklearn') "
                          "if m in sys.modules))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _mechanism_config(tmp_path, kind: str, dataset: str, **changes) -> str:
    """The shipped demo config of a mechanism, on freshly written demo data, own ledger dataset."""
    import importlib
    from pathlib import Path

    import conf

    data = importlib.import_module(f"tasks.{kind}_demo_data").write_demo_csv(tmp_path / "d.csv")
    cfg = yaml.safe_load((Path(conf.__file__).parent / "release" / f"{kind}_demo.yaml").read_text())
    cfg["data"] = {"path": str(data)}
    cfg["ledger"] = {**cfg["ledger"], "dataset_id": dataset, **changes}
    cfg["mlflow"] = {"experiment": f"test-cli-{kind}"}
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _mechanism_charges(dataset: str) -> int:
    with Ledger(create=True) as led:
        return led.spent(dataset).n_charges if dataset in set(led.budgets()["dataset"]) else 0


def test_run_dispatches_on_kind_to_the_mechanism_flow(tmp_path, invoke):
    path = _mechanism_config(tmp_path, "cluster_dp", "cli-cluster-dp")
    out = invoke("run", path, "--no-progress")
    assert out.exit_code == 0, out.output
    for label in ("Cluster-DP label-DP release", "label-DP, strict accounting", "dataset spend"):
        assert label in out.stdout
    assert _mechanism_charges("cli-cluster-dp") == 1
    js = invoke("run", path, "--json", "--set", "mechanism.epsilon=2.0")
    assert js.exit_code == 0, js.output
    assert json.loads(js.stdout)["release"]["privacy"]["epsilon"] == pytest.approx(2.0)
    assert _mechanism_charges("cli-cluster-dp") == 2


def test_mechanism_bad_input_and_refusal_exit_2_without_charge(tmp_path, invoke):
    path = _mechanism_config(tmp_path, "federated", "cli-federated", epsilon=0.5)
    _assert_bad(invoke("run", path, "--set", "mechanism.epsilon=0"),
                r"mechanism\.epsilon: Input should be greater than 0")
    _assert_bad(invoke("run", path, "--set", "kind=laplace"), r"kind 'laplace' is not one of")
    _assert_bad(invoke("run", path), r"budget exhausted for dataset cli-federated")
    assert _mechanism_charges("cli-federated") == 0


def test_demo_kind_writes_its_data_and_releases(project, invoke):
    out = invoke("demo", "--kind", "federated", "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["release"]["privacy"]["epsilon"] == pytest.approx(1.0)
    assert (project.root / "demo" / "federated.csv").is_file()
