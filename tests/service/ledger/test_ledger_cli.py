"""`dpcausal ledger budgets | set-budget | history` through the real entry point."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Ledger


@pytest.fixture
def run(tmp_path: Path, monkeypatch):
    """Invoke `dpcausal ...` with data in tmp_path (main() sets env defaults: isolate them)."""
    monkeypatch.setattr(os, "environ", dict(os.environ))
    monkeypatch.delenv("DPCAUSAL_LEDGER_URL", raising=False)
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))

    def invoke(*args: str):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)

    return invoke


def test_set_budget_budgets_history(run, tmp_path: Path) -> None:
    out = run("ledger", "set-budget", "trial-A", "--zeta", "1.5")
    assert out.exit_code == 0, out.output
    assert ("Budget of trial-A: zeta=1.5 (GDP) per row (n public); spent so far: nothing."
            in out.output)
    out = run("ledger", "set-budget", "trial-B", "--epsilon", "3", "--delta", "1e-6")
    assert out.exit_code == 0
    assert run("ledger", "set-budget", "trial-C", "--rho", "0.5").exit_code == 0

    with Ledger(f"sqlite:///{tmp_path / 'data' / 'ledger.db'}") as led:
        with led.release("trial-A", "flowrun-1/ate", PrivacyCharge("gaussian", zeta=0.5),
                         run_url="http://127.0.0.1:5000/#/experiments/1/runs/abc",
                         unit="row") as slot:
            slot.commit(json.dumps({"tau_dp": 0.1}))

    out = run("ledger", "budgets")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[1].split()[:8] == ["dataset", "unit", "public", "cap", "charges", "unfinished",
                                    "spent_zeta", "spent_epsilon"]  # zeta beside epsilon
    row_a = next(line for line in lines if line.startswith("trial-A"))
    assert "zeta=1.5 (GDP)" in row_a and "1.41421" in row_a  # sqrt(1.5^2 - 0.5^2)
    assert row_a.split()[5:8] == ["1", "0", "0.5"], row_a  # charges, unfinished, spent_zeta
    row_c = next(line for line in lines if line.startswith("trial-C"))
    assert "rho=0.5 (zCDP)" in row_c

    out = run("ledger", "history", "trial-A")
    assert out.exit_code == 0, out.output
    assert "flowrun-1/ate" in out.output and "committed" in out.output
    assert "http://127.0.0.1:5000/#/experiments/1/runs/abc" in out.output


@pytest.mark.parametrize("args, message", [
    (["set-budget", "d", "--zeta", "-1"], "zeta must be a finite number > 0, got -1.0"),
    (["set-budget", "d", "--zeta", "0"], "zeta must be a finite number > 0, got 0.0"),
    (["set-budget", "d", "--epsilon", "1"], "an epsilon cap needs delta too"),
    (["set-budget", "d"], "give exactly one of zeta, rho or epsilon"),
])
def test_errors_exit_nonzero_with_a_message(run, args: list[str], message: str) -> None:
    out = run("ledger", *args)
    assert out.exit_code == 2 and out.output.startswith("Error: ") and message in out.output


def test_lowering_below_spent_and_unknown_dataset(run, tmp_path: Path) -> None:
    run("ledger", "set-budget", "d", "--zeta", "2")
    with Ledger(f"sqlite:///{tmp_path / 'data' / 'ledger.db'}") as led:
        with led.release("d", "r/1", PrivacyCharge("gaussian", zeta=1.8), unit="row") as slot:
            slot.commit("{}")
    out = run("ledger", "set-budget", "d", "--zeta", "1")
    assert out.exit_code == 2 and "cannot set the cap of dataset d" in out.output
    out = run("ledger", "history", "nope")
    assert out.exit_code == 2 and "unknown dataset 'nope' (known: d)" in out.output


def test_missing_ledger_is_explained(run, tmp_path: Path) -> None:
    for args in (["budgets"], ["history", "d"]):
        out = run("ledger", *args)
        assert out.exit_code == 2 and "the file does not exist" in out.output
    assert not (tmp_path / "data" / "ledger.db").exists()  # reading never creates a ledger


def _charge(tmp_path: Path, dataset: str, release_id: str, charge: PrivacyCharge, unit: str,
            detail: dict | None = None, run_url: str | None = None) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'data' / 'ledger.db'}") as led:
        with led.release(dataset, release_id, charge, run_url=run_url, unit=unit,
                         detail=detail) as slot:
            slot.commit("{}")


def test_budgets_show_what_one_more_release_could_spend(run, tmp_path: Path) -> None:
    """Issue 21: remaining_epsilon was cap eps - spent eps, which no release can spend."""
    assert run("ledger", "set-budget", "trial-A", "--zeta", "2.5").exit_code == 0
    _charge(tmp_path, "trial-A", "r/1", PrivacyCharge("gaussian", zeta=2.0), "row")
    out = run("ledger", "budgets", "--json")
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.output)["datasets"]
    assert row["dataset"] == "trial-A" and row["unit"] == "row" and row["charges"] == 1
    # one more release: zeta = sqrt(2.5^2 - 2^2) = 1.5, which is (7.0514, 1e-5)-DP (spec §1.3)
    assert row["next_zeta"] == pytest.approx(1.5, rel=1e-8)
    assert row["next_epsilon"] == pytest.approx(7.0514, abs=6e-5)
    assert row["next_pure_epsilon"] is None  # a GDP cap admits no pure charge
    assert "remaining_epsilon" not in row
    text = run("ledger", "budgets").output
    assert "7.05141" in text and "not cap minus spent" in text


def test_history_shows_each_charge_and_json(run, tmp_path: Path) -> None:
    run("ledger", "set-budget", "trial-A", "--epsilon", "20", "--delta", "1e-5", "--unit", "label")
    _charge(tmp_path, "trial-A", "flow-1/ate", PrivacyCharge("gaussian", zeta=1.0, delta=1e-5),
            "row", {"estimator": "aipw", "K": 5, "outcome_bounds": [0, 1]},
            "http://mlflow/#/experiments/1/runs/abc")
    _charge(tmp_path, "trial-A", "flow-2/user", PrivacyCharge("laplace", epsilon=0.8), "user",
            {"mechanism": "user_level", "K": 3})
    out = run("ledger", "history", "trial-A")
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("flow-1/ate"))
    assert re.search(r" 4\.377[12]\d* ", line)  # zeta=1 is (4.3772, 1e-5)-DP, spec §1.3, not "-"
    assert "K=5, estimator=aipw" in line and "http://mlflow/#/experiments/1/runs/abc" in line
    line = next(x for x in out.output.splitlines() if x.startswith("flow-2/user"))
    assert " 0.8 " in line and " user " in line and "K=3, mechanism=user_level" in line
    doc = json.loads(run("ledger", "history", "trial-A", "--json").output)
    assert doc["unit"] == "label" and doc["spent"]["n_charges"] == 2
    first, second = doc["charges"]
    assert first["detail"] == {"estimator": "aipw", "K": 5, "outcome_bounds": [0, 1]}
    assert first["epsilon"] == pytest.approx(4.3772, abs=6e-5) and first["delta"] == 1e-5
    assert first["run_url"] == "http://mlflow/#/experiments/1/runs/abc"
    assert first["reserved_at"].endswith("+00:00")
    assert (second["mechanism"], second["unit"], second["epsilon"]) == ("laplace", "user", 0.8)
    assert second["run_url"] is None


def test_mistyped_dataset_suggests_the_closest(run) -> None:
    run("ledger", "set-budget", "trial-2026", "--zeta", "1")
    run("ledger", "set-budget", "demo-experiment-a", "--zeta", "1")
    out = run("ledger", "history", "trail-2026")
    assert out.exit_code == 2
    assert "unknown dataset 'trail-2026'" in out.output
    assert "did you mean 'trial-2026'?" in out.output


def test_set_budget_binds_a_fingerprint_and_unit(run, tmp_path: Path) -> None:
    out = run("ledger", "set-budget", "trial-A", "--rho", "1", "--unit", "user",
              "--fingerprint", "fp-1")
    assert out.exit_code == 0, out.output
    assert ("Budget of trial-A: rho=1 (zCDP) per user (n, occupancy public) (fingerprint bound)"
            in out.output)
    out = run("ledger", "set-budget", "trial-B", "--rho", "1", "--fingerprint", "fp-1")
    assert out.exit_code == 2 and "already budgeted as dataset 'trial-A'" in out.output
    with Ledger(f"sqlite:///{tmp_path / 'data' / 'ledger.db'}") as led:
        assert led.known(fingerprint="fp-1") == "trial-A" and not led.has_dataset("trial-B")
        assert led.unit("trial-A") == "user"


def test_correct_unit_is_logged_and_shown_in_history(run, tmp_path: Path) -> None:
    """Issue 26 §5: the curator corrects a charge recorded under the wrong unit, logged."""
    assert run("ledger", "set-budget", "d", "--epsilon", "9", "--delta", "1e-5", "--unit",
               "label").exit_code == 0
    out = run("ledger", "set-budget", "e", "--epsilon", "9", "--delta", "1e-5", "--unit", "user",
              "--public", "")
    assert out.exit_code == 0 and "per user (n public)" in out.output
    with Ledger(f"sqlite:///{tmp_path / 'data' / 'ledger.db'}") as led:
        with led.release("d", "r/1", PrivacyCharge("pure", epsilon=1.0), unit="row") as slot:
            slot.commit("{}")
    out = run("ledger", "correct-unit", "r/1", "--unit", "user")
    assert out.exit_code == 2 and "Missing option '--reason'" in out.output
    out = run("ledger", "correct-unit", "r/9", "--unit", "user", "--reason", "x")
    assert out.exit_code == 2 and "no charge with release_id 'r/9'" in out.output
    out = run("ledger", "correct-unit", "r/1", "--unit", "user", "--reason", "user-level data")
    assert out.exit_code == 0, out.output
    assert "Charge r/1 is now recorded per user (n, occupancy public)" in out.output
    out = run("ledger", "history", "d")
    assert out.exit_code == 0 and "Corrections of a charge's unit" in out.output
    fix = next(line for line in out.output.splitlines() if line.split()[:2] == ["r/1", "row"])
    assert fix.split()[:5] == ["r/1", "row", "-", "user", "occupancy"] and "user-level data" in fix
    doc = json.loads(run("ledger", "history", "d", "--json").output)
    assert doc["charges"][0]["unit"] == "user" and doc["charges"][0]["public"] == "occupancy"
    assert [(c["old_unit"], c["new_unit"], c["reason"]) for c in doc["corrections"]] == [
        ("row", "user", "user-level data")]
