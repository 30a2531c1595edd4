"""What the ``dpcausal`` entry point hands to the warm runner (cli/warm_client.py), and how the
runner reports a child's end (cli/warm_runner.exit_code); the runner itself is tested end to end in
tests/flows/test_warm_runner.py."""

from __future__ import annotations

import os
import signal
import socket
import threading

import pytest

from cli import warm_client
from cli.warm_runner import exit_code


@pytest.fixture
def listening(tmp_path, monkeypatch):
    """A socket where the runner's would be that hangs up on every client (as a runner that went
    away); returns how many connected."""
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path))
    monkeypatch.delenv("DPCAUSAL_WARM_RUNNER", raising=False)
    path = warm_client.socket_path()
    path.parent.mkdir(parents=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    seen = []

    def hang_up() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed
                return
            seen.append(1)
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    yield lambda: len(seen)
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(5)


@pytest.mark.parametrize("argv", [[], ["ledger", "budgets"], ["serve"], ["run", "c.yaml", "-v"],
                                  ["plan", "c.yaml", "--verbose"]])
def test_light_commands_and_verbose_runs_stay_in_their_own_process(listening, argv):
    assert warm_client.forward(argv) is None
    assert listening() == 0


def test_the_runner_can_be_turned_off(listening, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_WARM_RUNNER", "off")
    assert warm_client.forward(["run", "c.yaml"]) is None
    assert listening() == 0


def test_a_heavy_command_asks_the_runner_and_runs_itself_when_it_does_not_answer(listening):
    assert warm_client.forward(["run", "c.yaml"]) is None
    assert listening() == 1


def test_no_runner_no_connection(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path))
    assert warm_client.forward(["run", "c.yaml"]) is None


def test_settings_env_keeps_what_the_imported_libraries_read():
    env = {"PREFECT_API_URL": "a", "MLFLOW_TRACKING_URI": "b", "DPCAUSAL_LEDGER_URL": "c",
           "OMP_NUM_THREADS": "1", "DPCAUSAL_DATA": "/d", "HOME": "/root", "TERM": "xterm"}
    assert warm_client.settings_env(env) == {
        "PREFECT_API_URL": "a", "MLFLOW_TRACKING_URI": "b", "DPCAUSAL_LEDGER_URL": "c",
        "OMP_NUM_THREADS": "1"}


def test_exit_codes_are_reported_as_a_shell_does():
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    assert exit_code(os.waitpid(pid, 0)[1]) == 3
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGTERM)
        os._exit(0)
    assert exit_code(os.waitpid(pid, 0)[1]) == 128 + signal.SIGTERM


def test_a_data_folder_that_is_a_file_is_one_error_line_exit_2(tmp_path):
    """Through the real entry point (the warm client first, then the command), no traceback."""
    import subprocess
    import sys

    not_a_folder = tmp_path / "data"
    not_a_folder.write_text("")
    env = {**os.environ, "DPCAUSAL_DATA": str(not_a_folder)}
    done = subprocess.run([sys.executable, "-P", "-m", "cli", "run", "c.yaml"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"Error: the data folder {str(not_a_folder)!r} cannot be used")
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
