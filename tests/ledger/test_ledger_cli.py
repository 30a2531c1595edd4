"""`dpcausal ledger budgets | set-budget | history` through the real entry point."""

from __future__ import annotations

import json
import os
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
    assert "Budget of trial-A: zeta=1.5 (GDP); spent so far: nothing." in out.output
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
    assert lines[1].split()[:5] == ["dataset", "unit", "cap", "delta", "charges"]
    row_a = next(line for line in lines if line.startswith("trial-A"))
    assert "zeta=1.5 (GDP)" in row_a and " 0.5 " in row_a and "1.41421" in row_a
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
    assert out.exit_code == 1 and out.output.startswith("Error: ") and message in out.output


def test_lowering_below_spent_and_unknown_dataset(run, tmp_path: Path) -> None:
    run("ledger", "set-budget", "d", "--zeta", "2")
    with Ledger(f"sqlite:///{tmp_path / 'data' / 'ledger.db'}") as led:
        with led.release("d", "r/1", PrivacyCharge("gaussian", zeta=1.8), unit="row") as slot:
            slot.commit("{}")
    out = run("ledger", "set-budget", "d", "--zeta", "1")
    assert out.exit_code == 1 and "cannot set the cap of dataset d" in out.output
    out = run("ledger", "history", "nope")
    assert out.exit_code == 1 and "unknown dataset 'nope' (known: d)" in out.output


def test_missing_ledger_is_explained(run, tmp_path: Path) -> None:
    for args in (["budgets"], ["history", "d"]):
        out = run("ledger", *args)
        assert out.exit_code == 1 and "the file does not exist" in out.output
    assert not (tmp_path / "data" / "ledger.db").exists()  # reading never creates a ledger
