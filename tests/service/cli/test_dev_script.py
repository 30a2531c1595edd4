"""./dev (issue 21): one help for dev jobs and commands; commands run in the caller's folder."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

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
    demo = (DEV.parent / "conf" / "release" / "demo.yaml").read_text()
    assert "  path: ../../data/demo/experiment_a.csv" in demo
    (tmp_path / "my.yaml").write_text(demo.replace("../../data/demo/experiment_a.csv", "d.csv"))
    env = {**os.environ, "DPCAUSAL_DATA": str(tmp_path / "data")}  # the checkout's data/ untouched
    proc = subprocess.run([str(DEV), "run", "my.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(tmp_path / "d.csv") in proc.stdout + proc.stderr
