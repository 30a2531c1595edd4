"""``dpcausal run --dry-run`` rehearses the release's checks before the charge and exits as ``run``
would (issue 25 §3); ``plan`` and ``run`` report a missing data file alike; ``--json`` reports an
error as a JSON object on stdout (issue 25 §6). None of these starts a Prefect server: they run
here in-process, and one test checks that neither Prefect nor MLflow is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from cli.main import main
from dpcausal.ledger import Ledger
from tests.service._text import without_paths

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
    # the CLI's refusal names the CLI's command, not the Python call (issue 34)
    assert "`dpcausal ledger set-budget small --zeta Z`" in out.stderr
    assert "Ledger.set_budget" not in out.stderr
    assert _charges(env, "small") == 0


def test_dry_run_under_drop_prints_no_complete_case_count(env, tmp_path, monkeypatch):
    """Issue 32 Why 3: ``run --dry-run --set data.missing=drop --set estimator.n_folds=100000``
    on an exhausted budget printed "too large for n=558", the exact complete-case count. Two
    tables that differ only in whether one person's outcome is missing now give the same exit
    code and message, which names all rows (the registered n: records, counted by the curator).
    The two tables are two worlds, each with its own ledger, where the curator registered its
    table under ``missing: drop`` (in one ledger the second, a near copy of the first, could not
    be registered under another id)."""
    frame = pd.read_csv(env["csv"])
    frame.loc[:99, "Y"] = np.nan                 # other people's missing outcomes
    outs = []
    for target_missing in (False, True):
        world = tmp_path / f"world{int(target_missing)}"
        world.mkdir()
        table = frame.copy()
        if target_missing:
            table.loc[500, "Y"] = np.nan
        path = world / "t.csv"
        table.to_csv(path, index=False)
        ledger = f"sqlite:///{world / 'ledger.db'}"
        monkeypatch.setenv("DPCAUSAL_LEDGER_URL", ledger)
        curator = [f"data.path={path}", "ledger.dataset_id=spent", "data.missing=drop"]
        assert env["register"](DEMO, curator).n == 2000
        with Ledger(ledger) as led:
            led.set_budget("spent", zeta=1.0)          # the release asks 1.5: no headroom
        outs.append(_invoke("run", "--dry-run", DEMO,
                            *(x for item in curator for x in ("--set", item)),
                            "--set", "estimator.n_folds=100000"))
    (a, b) = outs
    assert a.exit_code == b.exit_code == 2, a.output
    assert a.output.replace("world0", "world1") == b.output
    assert "n=2000" in a.output and "1900" not in without_paths(a.output)
    assert "1899" not in without_paths(b.output)


def _release_config(tmp_path, name, data, dataset):
    """The demo config as the curator would write it for ``data`` under ``dataset``."""
    config = yaml.safe_load(Path(DEMO).read_text())
    config["data"]["path"] = str(data)
    config["ledger"]["dataset_id"] = dataset
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("copy", ["shuffled, one row short", "a constant column added"])
def test_a_near_copy_in_another_file_is_refused_under_another_id(env, tmp_path, copy):
    """Issue 32 item 7: the CLI bound the exact table and its source only, so a copy of a
    budgeted file one row short, or with a column added, got a fresh budget under a new id. The
    registration now binds the keyed row sketch too, as the library does: the curator cannot
    register the copy under another id (exit 2, the original named), so no run can ask about
    it, and nothing is charged; an unrelated table registers and rehearses."""
    frame = pd.read_csv(env["csv"])
    _cap(env, "original", 5.0)
    assert env["register"](DEMO, [f"data.path={env['csv']}", "ledger.dataset_id=original"])
    other = (frame.sample(frac=1.0, random_state=1).iloc[1:] if copy.startswith("shuffled")
             else frame.assign(site=3))
    path = tmp_path / "copy.csv"
    other.to_csv(path, index=False)
    _cap(env, "fresh", 5.0)
    refused = _invoke("ledger", "register", "fresh",
                      str(_release_config(tmp_path, "copy.yaml", path, "fresh")))
    assert refused.exit_code == 2, refused.output
    assert "already budgeted as dataset 'original'" in refused.stderr
    out = _invoke("run", "--dry-run", DEMO, "--set", f"data.path={path}",
                  "--set", "ledger.dataset_id=fresh", "--set", "estimator.n_folds=20")
    assert out.exit_code == 2 and "'fresh' is not registered" in out.stderr, out.output
    unrelated = tmp_path / "unrelated.csv"
    rng = np.random.default_rng(11)
    pd.DataFrame({"X1": rng.normal(size=2000), "A": rng.integers(0, 2, 2000),
                  "Y": rng.uniform(-1, 1, 2000)}).to_csv(unrelated, index=False)
    registered = _invoke("ledger", "register", "fresh",
                         str(_release_config(tmp_path, "unrelated.yaml", unrelated, "fresh")))
    assert registered.exit_code == 0, registered.output
    ok = _invoke("run", "--dry-run", DEMO, "--set", f"data.path={unrelated}",
                 "--set", "ledger.dataset_id=fresh", "--set", "estimator.n_folds=20")
    assert ok.exit_code == 0, ok.output
    assert _charges(env, "fresh") == _charges(env, "original") == 0


@pytest.mark.parametrize("setting", ["runner.address=tcp://attacker.example:8786",
                                     "runner.kind=dask", "runner.cleartext=true",
                                     "mlflow.tracking_uri=http://attacker.example:5000",
                                     "mlflow.experiment=elsewhere"])
def test_set_may_not_change_where_the_data_go(env, setting):
    """Issue 32 item 6: `run --set` named any runner address or tracking server (exit 0); now
    exit 2 naming the key, with or without --dry-run, before anything is read or charged."""
    _cap(env, "rehearsed", 5.0)
    section = setting.split(".")[0]
    for dry in (["--dry-run"], []):
        out = _invoke("run", *dry, *_args(env, "rehearsed", "--set", setting))
        assert out.exit_code == 2, out.output
        assert f"invalid --set {setting}: {section} (where a release runs and is recorded): " \
               "the curator's deployment settings" in out.stderr
    assert _charges(env, "rehearsed") == 0


@pytest.mark.parametrize("sections", [
    {"runner": {"address": "tcp://attacker.example:8786", "cleartext": True}},
    {"mlflow": {"tracking_uri": "http://attacker.example:5000"}},
    {"runner": {"kind": "dask", "address": "tcp://attacker.example:8786", "cleartext": True},
     "mlflow": {"tracking_uri": "http://attacker.example:5000", "experiment": "elsewhere"}}])
def test_a_config_may_not_say_where_the_data_go(env, tmp_path, sections):
    """Issue 40 item 7: an analyst's own config file with runner.address, runner.cleartext and
    mlflow.tracking_uri passed `run --dry-run` (only the --set forms were refused). Now exit 2
    naming the sections, before anything is read or charged: they are the curator's deployment
    settings (conf/deployment.yaml)."""
    _cap(env, "rehearsed", 5.0)
    args = _args(env, "rehearsed")
    config = yaml.safe_load(Path(DEMO).read_text()) | sections
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(config))
    for dry in (["--dry-run"], []):
        out = _invoke("run", *dry, str(path), *args[1:])
        assert out.exit_code == 2, out.output
        assert f"invalid {path}: {' and '.join(sections)} (where a release runs and is " \
               "recorded): the curator's deployment settings" in out.stderr
    assert _charges(env, "rehearsed") == 0


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


def test_plan_json_error_and_submit_without_a_stack(env, tmp_path, monkeypatch):
    """plan's error as JSON; ``run --submit`` makes run's checks first (exit 3 without a cap,
    before anything is sent: issue 32 §3), then needs the served stack. It submits the config
    its dataset was registered from (`dpcausal ledger register DATASET CONFIG`: issue 42)."""
    plan = _invoke("plan", "--json", DEMO, "--set", f"data.path={tmp_path / 'nope.csv'}")
    assert plan.exit_code == 2 and json.loads(plan.stdout)["exit_code"] == 2
    config = _release_config(tmp_path, "submitted.yaml", env["csv"], "submitted")
    assert env["register"](config, path=config).n == 2000   # the curator registers the file
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    no_cap = _invoke("run", "--submit", str(config), "--set", "estimator.zeta=1.0")
    assert no_cap.exit_code == 3 and "has no privacy budget" in no_cap.stderr, no_cap.output
    _cap(env, "submitted", 5.0)
    submit = _invoke("run", "--submit", str(config), "--set", "estimator.zeta=1.0")
    assert submit.exit_code == 2, submit.output
    assert "--submit needs a running stack: start one with `dpcausal serve`" in submit.stderr
    assert _charges(env, "submitted") == 0


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


def test_bounds_0_1_are_noticed_unless_the_outcome_is_declared_bool(env, tmp_path):
    """Bounds [0, 1] on a continuous outcome (a log wage: every value in [4.6, 7.8]) get the
    notice that they were never checked privately; only an outcome declared ``bool`` (whose
    reader turns any other value into a missing one, so nothing is clipped) skips it (issue 34)."""
    _cap(env, "wage", 5.0)
    rng = np.random.default_rng(4)
    n = 2000
    wage = tmp_path / "wage.csv"
    pd.DataFrame({"X1": rng.normal(size=n), "A": rng.integers(0, 2, n),
                  "Y": rng.uniform(4.6, 7.8, n)}).to_csv(wage, index=False)
    base = [DEMO, "--set", "ledger.dataset_id=wage", "--set", "estimator.n_folds=20",
            "--set", "estimator.outcome_bounds=[0, 1]"]
    assert env["register"](DEMO, ["ledger.dataset_id=wage", f"data.path={wage}"]) is not None
    continuous = _invoke("run", "--dry-run", *base, "--set", f"data.path={wage}")
    assert continuous.exit_code == 0, continuous.output
    assert "Notice: the outcome bounds [0, 1] have never been checked" in continuous.stderr
    # the free alternative for a 0/1 outcome is named beside the charged check (issue 42 §2)
    assert ("If Y is a 0/1 outcome, its curator can declare it instead, at no cost: "
            "`data.dtypes: {Y: bool}` in the registered config") in continuous.stderr
    binary = tmp_path / "binary.csv"
    pd.DataFrame({"X1": rng.normal(size=n), "A": rng.integers(0, 2, n),
                  "Y": rng.integers(0, 2, n)}).to_csv(binary, index=False)
    assert env["register"](DEMO, ["ledger.dataset_id=wage", f"data.path={binary}",   # version 2
                                  "data.dtypes={Y: bool}"]).version == 2
    declared = _invoke("run", "--dry-run", *base, "--set", f"data.path={binary}",
                       "--set", "data.dtypes={Y: bool}")
    assert declared.exit_code == 0, declared.output
    assert "Notice:" not in declared.stderr
    assert _charges(env, "wage") == 0


UNINFORMATIVE = ["--set", "estimator.n_folds=auto", "--set", "estimator.zeta=0.5"]


def _warnings(out):
    return [x for x in out.stderr.splitlines() if x.startswith("Warning: ")]


def _plan_warnings(out):
    """plan's warning paragraphs, each on one line (plan wraps its text at 100 columns)."""
    paragraphs, current = [], None
    for line in out.stdout.splitlines():
        if line.startswith("Warning: "):
            current = [line]
            paragraphs.append(current)
        elif current is not None and not line.startswith(("zeta needed", "Recommended")):
            current.append(line)
        else:
            current = None
    return [" ".join(p) for p in paragraphs]


def test_run_says_what_plan_says_when_the_release_would_not_be_informative(env):
    """Issue 33 §5: at n = 2000, zeta = 0.5 the planner's K gives a CI about 12x the non-private
    one (worst-case spread), which plan calls not informative; run --dry-run prints plan's
    warning line, --strict refuses it (exit 2, nothing charged), and zeta = 1.5 (4.5x) passes
    both without it."""
    _cap(env, "rehearsed", 5.0)
    plan = _invoke("plan", *_args(env, "rehearsed", *UNINFORMATIVE))
    assert plan.exit_code == 0, plan.output
    said = [x for x in _plan_warnings(plan) if "would not be informative" in x]
    assert len(said) == 1 and said[0].startswith("Warning: this release would not be "
                                                 "informative: its CI is expected to be 12x"), said
    dry = _invoke("run", "--dry-run", *_args(env, "rehearsed", *UNINFORMATIVE))
    assert dry.exit_code == 0, dry.output
    assert _warnings(dry) == said, dry.stderr
    strict = _invoke("run", "--dry-run", "--strict", *_args(env, "rehearsed", *UNINFORMATIVE))
    assert strict.exit_code == 2, strict.output
    assert _warnings(strict) == said
    assert "Error: refused by --strict: 1 warning(s) above; nothing was charged" in strict.stderr
    informative = ["--set", "estimator.n_folds=auto"]
    assert "would not be informative" not in _invoke(
        "plan", *_args(env, "rehearsed", *informative)).output
    ok = _invoke("run", "--dry-run", "--strict", *_args(env, "rehearsed", *informative))
    assert ok.exit_code == 0 and _warnings(ok) == [], ok.output
    assert _charges(env, "rehearsed") == 0


def test_dry_run_prints_epsilon_beside_zeta(env):
    """Issue 33 §5: the rehearsal states the charge as epsilon at the release's delta too, the
    figure from dp_accounting's privacy-loss distribution of the Gaussian mechanism with
    sensitivity 1 and sd 1/zeta (an independent computation of Dong, Roth & Su's conversion)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    _cap(env, "rehearsed", 5.0)
    expected = pld.from_gaussian_mechanism(
        standard_deviation=1 / 1.5, value_discretization_interval=1e-4).get_epsilon_for_delta(1e-5)
    out = _invoke("run", "--dry-run", *_args(env, "rehearsed", "--set", "estimator.n_folds=auto"))
    assert out.exit_code == 0, out.output
    assert f"would charge gaussian, zeta 1.5 (epsilon {expected:.3g} at delta 1e-05)" \
        in out.stdout, out.stdout
    doc = json.loads(_invoke("run", "--dry-run", "--json", *_args(
        env, "rehearsed", "--set", "estimator.n_folds=auto")).stdout)
    assert doc["charge"]["zeta"] == 1.5
    assert doc["charge"]["epsilon"] == pytest.approx(expected, rel=1e-6)


def test_a_stated_outcome_sd_is_the_spread_run_rates_the_release_against(env):
    """Issue 33 §4-5: the ratio uses the stated spread, never the worst case silently: at the
    planner's K and zeta 1.5 the release is 4.5x the non-private CI if the outcome spread were
    the widest the bounds allow (sd 1), but with estimator.outcome_sd 0.25 it is over 10x,
    and run --dry-run and plan both say so, naming the spread."""
    _cap(env, "rehearsed", 5.0)
    stated = ["--set", "estimator.n_folds=auto", "--set", "estimator.outcome_sd=0.25"]
    dry = _invoke("run", "--dry-run", *_args(env, "rehearsed", *stated))
    assert dry.exit_code == 0, dry.output
    [warning] = _warnings(dry)
    assert "(assumed: outcome sd 0.25)" in warning and "would not be informative" in warning
    plan = _invoke("plan", *_args(env, "rehearsed", *stated))
    assert _plan_warnings(plan) == [warning]
    assert _invoke("run", "--dry-run", "--strict",
                   *_args(env, "rehearsed", *stated)).exit_code == 2
    assert _charges(env, "rehearsed") == 0


def test_the_demo_says_why_it_gives_its_data_a_cap(env):
    """Issue 42 friction 6: `./dev demo` gave its dataset a zeta = 15 cap by itself while the
    README stresses that caps are never assumed. Its note says the cap and why: the data are
    synthetic, made by the demo; any other dataset's cap is its curator's."""
    from tasks.registration import prepare_demo

    base, note = prepare_demo("ate", 500)
    assert base["ledger"]["dataset_id"] == "demo-experiment-a"
    assert "registered as dataset 'demo-experiment-a' (n=500, version 1" in note
    assert ("its cap, zeta 15, was set by the demo itself because these data are synthetic "
            "(made just now; no person is in them): any other dataset's cap is set by its "
            "curator (`dpcausal ledger set-budget`), never assumed") in note
    with Ledger(env["ledger"]) as led:
        assert led.cap("demo-experiment-a").zeta == 15.0
