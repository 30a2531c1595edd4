"""``dpcausal plan``: the planner's table for a config, from the data's shape only, charging
nothing (issue 19 §1)."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cli.main import main


@pytest.fixture()
def data_csv(tmp_path):
    rng = np.random.default_rng(0)
    n = 4000
    frame = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                          "A": rng.integers(0, 2, n), "Y": rng.uniform(0, 1, n)})
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(autouse=True)
def _curator(curator_registers):
    global _register
    _register = curator_registers


def _run(args, tmp_path, monkeypatch):
    """``plan`` of the demo config with ``args``, after the curator registered the data its
    ``--set data.*`` / ``columns.*`` name (plan takes n and d from the registration)."""
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    curator = [item for key, item in zip(args, args[1:], strict=False)
               if key == "--set" and item.split(".")[0] in ("data", "columns")]
    _register("conf/release/demo.yaml", curator)
    return CliRunner().invoke(main, ["plan", "conf/release/demo.yaml", *args])


def test_prints_the_recommendation_from_the_shape_only(data_csv, tmp_path, monkeypatch):
    out = _run(["--set", f"data.path={data_csv}", "--set", "columns.covariates=null",
                "--target-halfwidth", "0.5"], tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    assert "n=4000, d=2" in out.output
    assert "<- recommended" in out.output and "Recommended: estimator=aipw, K=" in out.output
    assert "zeta needed for an expected half-width of 0.5" in out.output
    assert _register("conf/release/demo.yaml", [f"data.path={data_csv}",
                                                "columns.covariates=null"]).n == 4000


def test_warns_when_the_release_would_not_be_informative(data_csv, tmp_path, monkeypatch):
    out = _run(["--set", f"data.path={data_csv}", "--set", "columns.covariates=null",
                "--set", "estimator.outcome_bounds=[0, 1000]", "--set", "estimator.zeta=0.2"],
               tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    assert "would not be informative" in out.output


def test_json_output(data_csv, tmp_path, monkeypatch):
    out = _run(["--set", f"data.path={data_csv}", "--set", "columns.covariates=null", "--json"],
               tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert (doc["n"], doc["d"]) == (4000, 2)
    assert sum(r["recommended"] for r in doc["table"]) == 1
    assert doc["recommended"]["rows_per_fold"] >= 25


def test_an_unregistered_dataset_is_a_clean_error(tmp_path, monkeypatch):
    """A file the curator could not register (it does not exist): plan refuses, exit 2."""
    out = _run(["--set", f"data.path={tmp_path / 'nope.csv'}"], tmp_path, monkeypatch)
    assert out.exit_code == 2 and "is not registered" in out.output


def test_plan_charges_nothing_and_has_no_charged_option(data_csv, tmp_path, monkeypatch):
    """The private bounds check spends budget, so it is a charged library call, not a plan
    option (issue 27 §3: plan spent budget outside any flow, with no MLflow run)."""
    out = _run(["--set", f"data.path={data_csv}", "--set", "columns.covariates=null",
                "--check-bounds"], tmp_path, monkeypatch)
    assert out.exit_code == 2 and "No such option '--check-bounds'" in out.output
    from dpcausal.ledger import Ledger

    with Ledger() as led:
        assert not led.has_dataset("demo-experiment-a")  # no cap, no charge


def test_plan_reads_a_data_path_relative_to_the_config_from_another_folder(tmp_path,
                                                                         monkeypatch):
    """Issue 25 §6: `plan` resolves data.path against the config file's folder, as `run` does
    (and as the curator's registration did)."""
    import subprocess
    import sys

    import numpy as np
    import pandas as pd
    import yaml

    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    proj.mkdir()
    elsewhere.mkdir()
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.normal(size=500), "a": rng.integers(0, 2, 500),
                  "y": rng.normal(size=500)}).to_csv(proj / "d.csv", index=False)
    (proj / "c.yaml").write_text(yaml.safe_dump({
        "name": "rel", "data": {"path": "d.csv"}, "columns": {"treatment": "a", "outcome": "y"},
        "estimator": {"outcome_bounds": [-3, 3]}, "ledger": {"dataset_id": "rel"}}))
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    assert _register(proj / "c.yaml").n == 500
    out = subprocess.run([sys.executable, "-m", "cli.main", "plan", "../proj/c.yaml", "--json"],
                         cwd=elsewhere, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert '"n": 500' in out.stdout


def test_under_a_public_count_plan_says_n_becomes_the_complete_case_count(data_csv, tmp_path,
                                                                           monkeypatch):
    """plan reads the registration only, so under ``data.missing: drop_public_count`` its n is every
    row; it says that the release's n (and its K) will be the complete-case count, and where to
    see it. Under ``drop`` (the count noisy) and ``impute`` n and K are all rows'."""
    common = ["--set", f"data.path={data_csv}", "--set", "columns.covariates=null"]
    dropped = _run([*common, "--set", "data.missing=drop_public_count"], tmp_path, monkeypatch)
    assert dropped.exit_code == 0, dropped.output
    assert "the release's n is the exact complete-case count" in dropped.output
    assert "check-data conf/release/demo.yaml" in dropped.output
    for policy in ("drop", "impute"):
        other = _run([*common, "--set", f"data.missing={policy}"], tmp_path, monkeypatch)
        assert other.exit_code == 0 and "complete-case" not in other.output


def test_plan_compares_the_estimators_of_a_randomized_design(tmp_path, monkeypatch):
    """Issue 33 §4, §6: for the shipped randomized trial config, plan compares every estimator
    valid for the design (the ensemble at its best K, dim, and lin once covariate bounds are
    given), marks the one the release runs (auto's choice) and recommends it; the ensemble's K
    table follows, its best K marked as such."""
    from demo.trial import write_trial_csv

    data = write_trial_csv(tmp_path / "trial.csv")
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    assert _register("conf/release/trial_dim.yaml", [f"data.path={data}"]).n == 2000
    args = ["plan", "conf/release/trial_dim.yaml", "--set", f"data.path={data}",
            "--set", "estimator.estimator=auto"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert " ".join(lines[:2]).startswith(
        "Plan for conf/release/trial_dim.yaml: n=2000, d=3 (from the registration), "
        "design=randomized, estimator=auto -> dim, zeta=1 (from the config)")
    # the seed paper's comparators are rows too (gr25: the outcome bounds are (0, 1)), never
    # auto's pick; each one's assumption follows the table, wrapped (issue 42)
    rows = {line.split()[0]: line for line in lines[4:8]}
    assert set(rows) == {"aipw", "dim", "lpgm19", "gr25"}, lines[:9]
    assert rows["dim"].endswith("<- this release (auto's choice)")
    assert all("<-" not in rows[c] for c in ("lpgm19", "gr25"))
    assumptions: dict[str, str] = {}
    for line in lines[8:]:
        if line.startswith("    ") and assumptions:
            last = list(assumptions)[-1]
            assumptions[last] += " " + line.strip()
        elif line.startswith("  ") and ": " in line:
            name, text = line.strip().split(": ", 1)
            assumptions[name] = text
        else:
            break
    assert set(assumptions) == set(rows), lines[:14]
    assert assumptions["dim"].startswith("randomized assignment (declared design): no model "
                                         "assumption")
    assert all("(a comparator: not run by auto)" in assumptions[c] for c in ("lpgm19", "gr25"))
    assert all("(a comparator" not in assumptions[c] for c in ("aipw", "dim"))
    assert any(line.endswith("<- its best K") for line in lines)
    assert any(line.startswith("Recommended: estimator=dim (randomized design; no folds")
               for line in lines)
    bounded = CliRunner().invoke(main, [*args, "--set", "estimator.covariate_bounds="
                                        "{age: [18, 80], score: [0, 10], site: [0, 1]}", "--json"])
    assert bounded.exit_code == 0, bounded.output
    doc = json.loads(bounded.output)
    assert [r["estimator"] for r in doc["estimators"]] == ["aipw", "dim", "lin", "lpgm19", "gr25"]
    assert [r["estimator"] for r in doc["estimators"] if not r["selectable"]] == ["lpgm19", "gr25"]
    assert doc["estimator"] == doc["recommended"]["estimator"] == "dim"
    ratio = {r["estimator"]: r["ratio"] for r in doc["estimators"]}
    assert ratio["dim"] < 1.2 < ratio["aipw"]


def test_plan_gives_the_zeta_for_a_target_half_width_of_dim(tmp_path, monkeypatch):
    """``--target-halfwidth`` for a release from noisy sums (the shipped trial config runs dim)
    prints the zeta that reaches it, which planned again shows dim's expected half-width at the
    target (to the 4 digits printed); a target under the non-private half-width is unreachable
    (was: "computed for the ensembles' K only ... raise zeta and plan again")."""
    import re

    from demo.trial import write_trial_csv

    data = write_trial_csv(tmp_path / "trial.csv")
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    assert _register("conf/release/trial_dim.yaml", [f"data.path={data}"]).n == 2000
    args = ["plan", "conf/release/trial_dim.yaml", "--set", f"data.path={data}"]
    out = CliRunner().invoke(main, [*args, "--target-halfwidth", "0.06"])
    assert out.exit_code == 0, out.output
    found = re.search(r"^zeta needed for an expected half-width of 0.06 with dim: (\S+)$",
                      out.output, re.MULTILINE)
    assert found is not None, out.output
    zeta = float(found.group(1))
    again = CliRunner().invoke(main, [*args, "--set", f"estimator.zeta={zeta}", "--json"])
    assert again.exit_code == 0, again.output
    doc = json.loads(again.output)
    assert doc["recommended"]["estimator"] == "dim"
    assert doc["recommended"]["halfwidth"] == pytest.approx(0.06, rel=1e-3)
    floor = doc["recommended"]["nonprivate_halfwidth"]
    out = CliRunner().invoke(main, [*args, "--target-halfwidth", f"{floor * 0.99:.6g}"])
    assert out.exit_code == 0, out.output
    assert "with dim: unreachable (the non-private CI is already wider)" in " ".join(
        out.output.split())   # the line is wrapped at 100 columns


def test_every_line_fits_100_columns_and_says_where_each_input_comes_from(data_csv, tmp_path,
                                                                          monkeypatch):
    """Issue 42 friction 6: the estimator table's lines were about 250 characters wide (the
    assumption column) and the header said zeta came "from the registration" (n and d do; zeta
    is the config's). Each assumption now follows the table, wrapped."""
    out = _run(["--set", f"data.path={data_csv}", "--set", "columns.covariates=null",
                "--set", "estimator.zeta=1.25", "--target-halfwidth", "0.5"],
               tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    text = " ".join(" ".join(lines).split())
    assert "n=4000, d=2 (from the registration)" in text
    assert "zeta=1.25 (from the config)" in text and "zeta=1.25 (from the registration" not in text
    assert "aipw: no unmeasured confounding and overlap" in text
    assert "<- recommended" in out.output


def test_plan_of_the_att_names_it_and_the_treated_share_it_assumed(data_csv, tmp_path,
                                                                   monkeypatch):
    """``estimator.estimand: att`` (issue 39 item 7): the plan says so, divides the noise by
    the treated share it states with its source, and its half-width is wider than the ATE's
    at 20% treated; the target zeta is the ATT's."""
    base = ["--set", f"data.path={data_csv}", "--set", "columns.covariates=null",
            "--set", "estimator.estimator=aipw"]
    att = _run([*base, "--set", "estimator.estimand=att", "--treated-share", "0.2",
                "--target-halfwidth", "0.5"], tmp_path, monkeypatch)
    assert att.exit_code == 0, att.output
    flat = " ".join(att.output.split())
    assert "estimator=aipw, estimand=att, zeta=" in flat
    assert ("expected 95% CI half-width of the ATT (the noise over the treated share 0.2, "
            "stated (--treated-share))") in flat
    doc = json.loads(_run([*base, "--set", "estimator.estimand=att", "--treated-share", "0.2",
                           "--target-halfwidth", "0.5", "--json"], tmp_path,
                          monkeypatch).output)
    ate = json.loads(_run([*base, "--treated-share", "0.2", "--target-halfwidth", "0.5",
                           "--json"], tmp_path, monkeypatch).output)
    assert doc["estimand"] == "att" and doc["recommended"]["estimand"] == "att"
    assert doc["recommended"]["halfwidth"] > 2 * ate["recommended"]["halfwidth"]
    assert doc["zeta_for_target"] > 2 * ate["zeta_for_target"]


def test_plan_says_what_run_warns_of_small_folds(data_csv, tmp_path, monkeypatch):
    """Issue 33 §5 (run says what plan says), for the fold-size bias warning: the default
    degree-2 models in 200 folds of 20 rows against the small noise of zeta = 100 at a stated
    clip: plan prints the warning and the n_folds it names, and its JSON carries it."""
    args = ["--set", f"data.path={data_csv}", "--set", "columns.covariates=null",
            "--set", "models.propensity={name: quadratic}",
            "--set", "models.outcome={name: quadratic}", "--set", "estimator.zeta=100"]
    out = _run(args, tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    assert "Warning: 200 folds of 20 rows are small against this release's noise" in out.output
    doc = json.loads(_run([*args, "--json"], tmp_path, monkeypatch).output)
    assert doc["warnings"] and "Choose n_folds <=" in doc["warnings"][0]
    calm = _run(["--set", f"data.path={data_csv}", "--set", "columns.covariates=null"],
                tmp_path, monkeypatch)
    assert "are small against" not in calm.output
