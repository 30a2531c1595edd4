"""``dpcausal ledger register`` and ``show`` (issue 32 §1): the curator binds a config's data
half to its dataset id, with n counted as records, and the ledger shows every version."""

import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from cli.main import main


def _invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_register_counts_records_sets_the_cap_and_shows_each_version(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"X1": rng.normal(size=50), "A": rng.integers(0, 2, 50),
                          "Y": rng.uniform(-1, 1, 50), "note": "plain"})
    frame.loc[7, "note"] = "a note\nover two lines"  # one record, two lines
    path = tmp_path / "trial.csv"
    frame.to_csv(path, index=False)
    config = tmp_path / "c.yaml"
    config.write_text(f"data: {{path: {path}}}\ncolumns: {{treatment: A, outcome: Y, "
                      "covariates: [X1]}\nestimator: {outcome_bounds: [-1, 1]}\n"
                      "ledger: {dataset_id: trial}\n")
    out = _invoke("ledger", "register", "trial", str(config), "--zeta", "3")
    assert out.exit_code == 0, out.output
    assert "n=50 records" in out.output and "evaluation mode refused" in out.output
    again = _invoke("ledger", "register", "trial", str(config), "--evaluation-allowed",
                    "synthetic")
    assert again.exit_code == 0 and "version 2" in again.output, again.output
    shown = _invoke("ledger", "show", "trial", "--json")
    versions = json.loads(shown.output)
    assert [(v["version"], v["n"], v["evaluation_allowed"]) for v in versions] == [
        (1, 50, False), (2, 50, True)]
    assert versions[0]["source"]["path"] == str(path)
    budgets = _invoke("ledger", "budgets", "--json")
    assert json.loads(budgets.output)["datasets"][0]["cap"].startswith("zeta=3")
    other = _invoke("ledger", "register", "another", str(config))
    assert other.exit_code == 2 and "names dataset 'trial'" in other.output
    unknown = _invoke("ledger", "show", "nothing")
    assert unknown.exit_code == 2 and "is not registered" in unknown.output
