"""The warm runner of ``dpcausal serve`` (cli/warm_runner.py, cli/warm_client.py): a command handed
to it behaves as in its own process (output, exit code, charge), signals reach it, a client that
leaves ends it, and a client that gave up before committing never gets a command run for it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

import psutil
import pytest
import yaml
from _flowtools import charges, give_cap, write_exp_a

from cli.warm_client import HEADER, read_message, socket_path


@pytest.fixture(scope="module")
def env(project):
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "COLUMNS": "120"}


@pytest.fixture(scope="module")
def runner(project, env):
    """A runner for the session's data folder, as ``dpcausal serve`` starts it (own process
    group); the socket goes when it stops, so no other test's command reaches it."""
    log = project.root / "runner-test.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-P", "-m", "cli.warm_runner"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    while not socket_path().exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the runner did not listen within 240 s"
        time.sleep(0.2)
    yield proc, log
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(30)
    assert not socket_path().exists()


def _dpcausal(env, *args, **kw):
    """``dpcausal ARGS`` through its real entry point (``python -m cli``), which hands heavy
    commands to a runner."""
    return subprocess.run([sys.executable, "-P", "-m", "cli", *args], capture_output=True,
                          text=True, env=env, timeout=300, **kw)


def _children(log: Path) -> list[str]:
    """The runner's lines "dpcausal COMMAND: child PID", one per command it started."""
    return [line for line in log.read_text().splitlines() if ": child " in line]


def _config(tmp_path, dataset, **estimator):
    """A release config for ``dataset`` with its own data (the ledger binds data to one id)."""
    path = tmp_path / f"{dataset}.yaml"
    data = write_exp_a(tmp_path / f"{dataset}.csv", zlib.crc32(dataset.encode()) % 10_000)
    path.write_text(yaml.safe_dump({
        "name": "warm", "data": {"path": str(data)},
        "columns": {"treatment": "A", "outcome": "Y"},
        "estimator": {"n_folds": 20, "outcome_bounds": [-1, 1], **estimator},
        "ledger": {"dataset_id": dataset}, "mlflow": {"experiment": "test-warm"}}))
    return str(path)


def test_a_release_runs_in_the_runner_as_in_its_own_process(runner, env, tmp_path):
    _, log = runner
    give_cap("warm-release", zeta=50.0)
    before = len(_children(log))
    done = _dpcausal(env, "run", _config(tmp_path, "warm-release"), "--json", "--no-progress",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["release"]["n"] == 2000 and result["release_id"].endswith("/warm")
    assert result["release"]["privacy"]["zeta"] == 1.5  # the estimator's default
    assert charges("warm-release") == 1
    (started,) = _children(log)[before:]
    child = started.rsplit(" ", 1)[1]
    assert f"dpcausal run: child {child}" in started
    assert f" child {child}: exit 0" in log.read_text()


@pytest.mark.parametrize("case", ["bad_input", "refused"])
def test_exit_codes_and_messages_are_those_of_its_own_process(runner, env, tmp_path, case):
    dataset = f"warm-{case}"
    give_cap(dataset, zeta=0.5)
    path = _config(tmp_path, dataset)
    args = ["run", path, "--no-progress", "--set",
            "estimator.zetta=1" if case == "bad_input" else "estimator.zeta=1.0"]
    warm = _dpcausal(env, *args)
    own = subprocess.run([sys.executable, "-P", "-m", "cli.main", *args], capture_output=True,
                         text=True, env=env, timeout=300)
    assert warm.returncode == own.returncode == (2 if case == "bad_input" else 3)
    assert warm.stderr == own.stderr and warm.stdout == own.stdout == ""
    assert charges(dataset) == 0


def _slow_release(env, tmp_path, dataset):
    """A release whose fold fits take many seconds (random forests of 600 trees)."""
    give_cap(dataset, zeta=50.0)
    path = Path(_config(tmp_path, dataset))
    config = yaml.safe_load(path.read_text())
    config["models"] = {"outcome": {"name": "random_forest", "params": {"n_estimators": 600}}}
    path.write_text(yaml.safe_dump(config))
    return subprocess.Popen([sys.executable, "-P", "-m", "cli", "run", str(path),
                             "--no-progress"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _child_started(log: Path, before: int) -> int:
    deadline = time.monotonic() + 60
    while len(_children(log)) <= before:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return int(_children(log)[before].rsplit(" ", 1)[1])


def _gone(pid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["sigterm", "sigint", "client_killed"])
def test_a_signal_or_a_vanished_client_ends_the_command(runner, env, tmp_path, how):
    """SIGTERM and Ctrl-C reach the command as in its own process (one Error paragraph, exit 1);
    a client killed outright takes its command with it."""
    _, log = runner
    before = len(_children(log))
    client = _slow_release(env, tmp_path, f"warm-{how}")
    child = _child_started(log, before)
    # the checks passed when the unchecked-bounds notice is printed; the flow and its fits follow
    first = client.stderr.readline()
    assert first.startswith("Notice: the outcome bounds"), first
    time.sleep(1.0)
    assert psutil.pid_exists(child)
    client.send_signal({"sigterm": signal.SIGTERM, "sigint": signal.SIGINT,
                        "client_killed": signal.SIGKILL}[how])
    out, rest = client.communicate(timeout=120)
    err = first + rest
    assert _gone(child, timeout=60), f"child {child} outlived its client"
    if how == "client_killed":
        assert f"child {child}: its client hung up; SIGTERM" in log.read_text()
    else:
        assert client.returncode == 1, out + err
        errors = [x for x in err.splitlines() if x.startswith("Error:")]
        assert len(errors) == 1 and errors[0].startswith(
            "Error: the release run was interrupted"), err
        assert "ATE " not in out


def test_a_client_that_leaves_before_committing_gets_no_command(runner, env, tmp_path):
    """The two-step handshake: the runner forks only after the client's "go", so a client that
    timed out and ran the command itself never has it run a second time by the runner."""
    _, log = runner
    before = len(_children(log))
    request = json.dumps({"argv": ["plan", _config(tmp_path, "warm-left")], "cwd": str(tmp_path),
                          "env": env, "python": sys.executable, "encoding": "utf-8"}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path()))
        socket.send_fds(sock, [HEADER.pack(len(request))], [0, 1, 2])
        sock.sendall(request)
        assert read_message(sock) == {"accepted": True}
    deadline = time.monotonic() + 10
    while "the client left before its command started" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    time.sleep(0.5)
    assert len(_children(log)) == before


def test_other_settings_run_the_command_in_its_own_process(runner, env, tmp_path):
    _, log = runner
    before = len(_children(log))
    other = {**env, "MLFLOW_HTTP_REQUEST_TIMEOUT": "31"}  # read by MLflow: may differ in effect
    done = _dpcausal(other, "plan", _config(tmp_path, "warm-other"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] == 2000
    assert "declined: other settings in the environment" in log.read_text()
    assert len(_children(log)) == before


def test_a_changed_source_restarts_the_runner_and_runs_the_command_itself(runner, env, tmp_path):
    proc, log = runner
    source = Path(__file__).resolve().parents[2] / "cli" / "warm_runner.py"
    stat = source.stat()
    os.utime(source, (stat.st_atime, time.time() + 5))
    try:
        done = _dpcausal(env, "plan", _config(tmp_path, "warm-changed"), "--json")
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 240
        text = log.read_text()
        while "sources changed: restarting" not in text or not text.rstrip().endswith(
                f"(pid {proc.pid})"):  # the same process listens again, warm
            assert proc.poll() is None and time.monotonic() < deadline, text
            time.sleep(0.2)
            text = log.read_text()
        assert "declined: sources changed" in text
    finally:
        os.utime(source, (stat.st_atime, stat.st_mtime))
