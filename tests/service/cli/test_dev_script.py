"""./dev (issue 21): one help for dev jobs and commands; commands run in the caller's folder."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd

DEV = Path(__file__).resolve().parents[3] / "dev"


def test_help_lists_the_dev_jobs_and_every_command() -> None:
    out = subprocess.run([str(DEV), "--help"], capture_output=True, text=True, check=True).stdout
    for job in ("test", "lint", "wheel", "slow", "integration", "bench"):
        assert f"./dev {job} " in out, job
    for command in ("run", "plan", "ledger", "meta", "serve", "stop", "reproduce", "demo"):
        assert f"\n  {command} " in out, command


def test_version_comes_from_the_package_metadata() -> None:
    out = subprocess.run([sys.executable, "-P", "-m", "cli", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == f"dpcausal, version {version('dpcausal')}"


def test_run_resolves_paths_from_the_config_files_folder(tmp_path: Path) -> None:
    """A path written in a config is relative to the config file's folder, for the curator who
    registers it (issue 32 §1: the first command that opens the file) and for the run that asks
    about it from another folder (its resolved data.path equals the registration's, so the run
    gets past the registration check to the budget's: exit 3, not 2 naming data.path)."""
    demo = (DEV.parent / "conf" / "release" / "demo.yaml").read_text()
    assert "  path: <data>/demo/experiment_a.csv" in demo
    (tmp_path / "my.yaml").write_text(demo.replace("<data>/demo/experiment_a.csv", "d.csv"))
    env = {**os.environ, "DPCAUSAL_DATA": str(tmp_path / "data"),  # the checkout's data/ untouched
           "DPCAUSAL_LEDGER_URL": f"sqlite:///{tmp_path / 'ledger.db'}"}
    register = [str(DEV), "ledger", "register", "demo-experiment-a", "my.yaml"]
    proc = subprocess.run(register, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(tmp_path / "d.csv") in proc.stdout + proc.stderr

    rng = np.random.default_rng(0)
    pd.DataFrame({"X1": rng.normal(size=300), "A": rng.integers(0, 2, 300),
                  "Y": rng.uniform(-1, 1, 300)}).to_csv(tmp_path / "d.csv", index=False)
    proc = subprocess.run(register, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "n=300 records" in proc.stdout, proc.stdout + proc.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run([str(DEV), "run", "--dry-run", "../my.yaml"], cwd=elsewhere, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "has no privacy budget" in proc.stderr and "differs" not in proc.stderr, proc.stderr
