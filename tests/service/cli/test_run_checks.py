"""``dpcausal run --dry-run`` rehearses the release's checks before the charge and exits as ``run``
would (issue 25 §3); ``plan`` and ``run`` report a missing data file alike; ``--json`` reports an
error as a JSON object on stdout (issue 25 §6). None of these starts a Prefect server: they run
here in-process, and one test checks that neither Prefect nor MLflow is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cli.main import main
from dpcausal.ledger import Ledger

DEMO = "conf/release/demo.yaml"


@pytest.fixture
def env(tmp_path, monkeypatch, curator_registers):
    """A data folder and ledger of the test's own; a 2000-row trial CSV, which the curator
    registers under each dataset id a test asks about (:func:`_args`)."""
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    rng = np.random.default_rng(3)
    n = 2000
    path = tmp_path / "trial.csv"
    pd.DataFrame({"X1": rng.normal(size=n), "A": rng.integers(0, 2, n),
                  "Y": rng.uniform(-1, 1, n)}).to_csv(path, index=False)
    return {"csv": path, "ledger": f"sqlite:///{tmp_path / 'ledger.db'}",
            "register": curator_registers}


def _args(env, dataset="rehearsed", *more):
    data = [f"data.path={env['csv']}", f"ledger.dataset_id={dataset}"]
    env["register"](DEMO, data)
    return [DEMO, *(x for item in data for x in ("--set", item)),
            "--set", "estimator.n_folds=20", *more]


def _invoke(*args):
    return CliRunner().invoke(main, list(args))


def _cap(env, dataset, zeta):
    with Ledger(env["ledger"], create=True) as led:
        led.set_budget(dataset, zeta=zeta)


def _charges(env, dataset):
    with Ledger(env["ledger"], create=True) as led:
        return led.spent(dataset).n_charges


def test_dry_run_exits_3_without_a_cap_and_0_with_one(env):
    no_cap = _invoke("run", "--dry-run", *_args(env))
    assert no_cap.exit_code == 3, no_cap.output
    assert "no privacy budget in the ledger" in no_cap.stderr and no_cap.stdout == ""
    _cap(env, "rehearsed", 5.0)
    ok = _invoke("run", "--dry-run", *_args(env))
    assert ok.exit_code == 0, ok.output
    assert "would charge gaussian, zeta 1.5" in ok.stdout and "Nothing was charged" in ok.stdout
    assert _charges(env, "rehearsed") == 0


def test_dry_run_exits_3_when_the_budget_has_no_headroom(env):
    _cap(env, "small", 1.0)  # the release asks zeta 1.5
    out = _invoke("run", "--dry-run", *_args(env, "small"))
    assert out.exit_code == 3, out.output
    assert "budget exhausted for dataset small" in out.stderr
    assert _charges(env, "small") == 0


@pytest.mark.parametrize("setting, message", [
    ("columns.treatment=arm", "columns.treatment differs from the registration"),  # issue 32
    ("estimator.zeta=-1", "zeta must be a finite number > 0"),
    ("estimator.n_folds=5000", "n_folds=5000 is too large"),  # against the source's n
])
def test_dry_run_exits_2_on_bad_input(env, setting, message):
    _cap(env, "rehearsed", 5.0)
    out = _invoke("run", "--dry-run", *_args(env, "rehearsed", "--set", setting))
    assert out.exit_code == 2, out.output
    assert message in out.stderr and out.stdout == ""


def test_dry_run_strict_refuses_a_release_whose_checks_warn(env):
    _cap(env, "rehearsed", 5.0)
    args = _args(env, "rehearsed", "--set", "estimator.n_folds=125")  # 16 rows per fold
    warned = _invoke("run", "--dry-run", *args)
    assert warned.exit_code == 0 and "Warning: only 16 rows per fold" in warned.stderr
    strict = _invoke("run", "--dry-run", "--strict", *args)
    assert strict.exit_code == 2, strict.output
    assert "refused by --strict: 1 warning(s) above" in strict.stderr


def test_plan_and_run_refuse_a_source_other_than_the_registered_one_alike(env, tmp_path):
    """Issue 32 §2: the data half is the registration's; plan, run and its dry run refuse
    another file alike, naming the key, before anything is read (a missing file included)."""
    _cap(env, "rehearsed", 5.0)
    _args(env)  # registered with the trial CSV
    missing = ["--set", f"data.path={tmp_path / 'nope.csv'}",
               "--set", "ledger.dataset_id=rehearsed"]
    outs = [_invoke(*cmd, DEMO, *missing) for cmd in (["plan"], ["run"], ["run", "--dry-run"])]
    assert [o.exit_code for o in outs] == [2, 2, 2], [o.output for o in outs]
    assert outs[0].stderr.startswith("Error: data.path differs from the registration of dataset "
                                      "'rehearsed'")
    assert outs[0].stderr == outs[1].stderr == outs[2].stderr


@pytest.mark.parametrize("case, code, kind, text", [
    ("bad_input", 2, "bad_input", "columns.treatment differs from the registration"),
    ("refused", 3, "refused", "budget exhausted for dataset json-errors"),
])
def test_json_errors_are_a_json_object_on_stdout_with_the_exit_code(env, case, code, kind,
                                                                    text):
    _cap(env, "json-errors", 1.0)
    more = ["--set", "columns.treatment=arm"] if case == "bad_input" else []
    for command in (["run", "--json"], ["run", "--dry-run", "--json"]):
        out = _invoke(*command, *_args(env, "json-errors", *more))
        assert out.exit_code == code, out.output
        doc = json.loads(out.stdout)
        assert doc["error"] == kind and doc["exit_code"] == code and text in doc["message"]
        assert out.stderr == f"Error: {doc['message']}\n"
    assert _charges(env, "json-errors") == 0


def test_plan_json_error_and_submit_without_a_stack(env, tmp_path):
    plan = _invoke("plan", "--json", DEMO, "--set", f"data.path={tmp_path / 'nope.csv'}")
    assert plan.exit_code == 2 and json.loads(plan.stdout)["exit_code"] == 2
    os.environ.pop("PREFECT_API_URL", None)
    _cap(env, "rehearsed", 5.0)  # --submit makes run's checks first (issue 32 §3)
    submit = _invoke("run", "--submit", *_args(env))
    assert submit.exit_code == 2, submit.output
    assert "--submit needs a running stack: start one with `dpcausal serve`" in submit.stderr


def test_plan_and_dry_run_import_neither_prefect_nor_mlflow(env):
    _cap(env, "rehearsed", 5.0)
    for command in (["plan"], ["run", "--dry-run"]):
        code = ("import sys\nfrom cli.main import main\n"
                f"try:\n    main({[*command, *_args(env)]!r}, standalone_mode=False)\n"
                "finally:\n    print(sorted(m for m in ('prefect', 'mlflow') if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=dict(os.environ), timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip().splitlines()[-1] == "[]", (command, out.stdout)
