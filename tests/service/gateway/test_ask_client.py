"""The analyst's client (issue 40 item 4): ``dpcausal ask`` and ``dpcausal.ask`` against a real
HTTP gateway (uvicorn on a loopback port, in a thread; the stack behind it is ``_fake``'s), from
an environment that holds only the URL and a token; exit codes 0, 2, 3; and the client path
imports neither Prefect, MLflow nor scikit-learn."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _fake import A, B, LedgerRuns, curator_setup

import dpcausal
from dpcausal.client import AskBudgetError, AskRefusedError
from dpcausal.ledger import Ledger

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("prefect", "mlflow", "sklearn")


@pytest.fixture
def gateway(tmp_path, monkeypatch):
    import uvicorn

    from gateway.app import create_app
    from gateway.service import Service

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", url)
    tokens = curator_setup(url)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(Service(LedgerRuns(url))),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.05)
    yield {"url": f"http://127.0.0.1:{port}", "ledger": url, "tokens": tokens}
    server.should_exit = True
    thread.join(10)


def _analyst_env(tmp_path: Path, url: str, token: str) -> dict[str, str]:
    """What an analyst's shell holds: PATH, a fresh HOME, the URL and the token; the data
    folder named does not exist (and must not be created)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "DPCAUSAL_ASK_URL": url,
            "DPCAUSAL_ASK_TOKEN": token, "DPCAUSAL_DATA": str(tmp_path / "no-data-here")}


def _ask(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-P", "-m", "cli", "ask", *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)


def _charges(url: str, dataset: str) -> list[str | None]:
    with Ledger(url) as led:
        return list(led.history(dataset)["analyst"])


def test_ask_releases_from_only_a_url_and_a_token_and_the_charge_names_the_analyst(
        gateway, tmp_path) -> None:
    env = _analyst_env(tmp_path, gateway["url"], gateway["tokens"]["alice"])
    done = _ask(tmp_path, env, A, "demo", "--set", "estimator.zeta=0.5")
    assert done.returncode == 0, done.stderr
    assert "ATE" in done.stdout and "release id: " in done.stdout
    assert done.stdout.strip().splitlines()[-1].endswith("/demo")
    assert "released" in done.stderr  # progress on stderr
    assert _charges(gateway["ledger"], A) == ["alice"]
    assert not (tmp_path / "no-data-here").exists()
    assert list((tmp_path / "home").iterdir()) == [] and list((tmp_path / "work").iterdir()) == []
    as_json = _ask(tmp_path, env, A, "demo", "--set", "estimator.zeta=0.5", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["state"] == "released"


@pytest.mark.parametrize(("who", "args", "code", "message"), [
    ("alice", (A, "demo", "--set", "estimator.zeta=1.6"), 3, "analyst alice's own cap"),
    ("bob", (A, "demo"), 2, "not admitted to dataset"),
    ("alice", (B, "trial_dim"), 2, "not admitted to dataset"),
    ("carol", (A, "demo"), 2, "unknown or revoked"),
    ("nobody", (A, "demo"), 2, "token is not valid"),
    ("alice", (A, "trial_dim"), 2, "not one of dataset"),
    ("alice", (A, "demo", "--set", "runner.address=tcp://evil:8786"), 2, "not an analysis key"),
    ("alice", (A, "demo", "--set", "data.path=/etc/passwd"), 2, "not an analysis key"),
])
def test_refusals_exit_2_or_3_and_charge_nothing(gateway, tmp_path, who, args, code,
                                                  message) -> None:
    token = gateway["tokens"].get(who, "dpca_0123456789abcdef_not-a-token")
    done = _ask(tmp_path, _analyst_env(tmp_path, gateway["url"], token), *args, "--json")
    assert done.returncode == code, (done.stdout, done.stderr)
    assert message in done.stderr
    error = json.loads(done.stdout)
    assert error["exit_code"] == code
    assert error["error"] == ("refused" if code == 3 else "bad_input")
    assert _charges(gateway["ledger"], A) == [] and _charges(gateway["ledger"], B) == []


def test_ask_without_a_url_or_token_exits_2(tmp_path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = _ask(tmp_path, env, A, "demo")
    assert done.returncode == 2 and "DPCAUSAL_ASK_URL" in done.stderr


def test_the_library_ask_returns_the_release(gateway) -> None:
    from dpcausal import Release

    release = dpcausal.ask(A, "demo", {"estimator.zeta": 0.4}, url=gateway["url"],
                           token=gateway["tokens"]["alice"])
    assert isinstance(release, Release) and release.dataset == A
    with pytest.raises(AskBudgetError, match="own cap"):
        dpcausal.ask(A, "demo", {"estimator.zeta": 1.5}, url=gateway["url"],
                     token=gateway["tokens"]["alice"])
    with pytest.raises(AskRefusedError, match="not admitted"):
        dpcausal.ask(B, "trial_dim", url=gateway["url"], token=gateway["tokens"]["alice"])


def _imported(code: list[str]) -> set[str]:
    """Top-level packages imported by a fresh interpreter running ``code``
    (``-X importtime`` lists every module imported)."""
    done = subprocess.run([sys.executable, "-P", "-X", "importtime", *code], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")})
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_the_client_path_imports_neither_prefect_mlflow_nor_sklearn() -> None:
    """Seen failing when ``dpcausal.ask`` was imported from a module that imports the contract
    (``Release``) at its top: sklearn was among the modules."""
    for code in (["-m", "cli", "ask", "--help"],
                 ["-c", "import dpcausal; dpcausal.ask; import dpcausal.client"]):
        loaded = _imported(code)
        assert "click" in loaded or code[0] == "-c"  # the list is read
        assert not loaded & set(HEAVY), (code, sorted(loaded & set(HEAVY)))
