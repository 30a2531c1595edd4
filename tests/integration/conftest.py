"""One real stack per session: ``dpcausal serve --auth`` (Prefect server, MLflow server with the
basic-auth app, work pool, deployments, worker) on free loopback ports, data under a session tmp
dir; stopped at the end. Service logs are copied to test-artifacts/ when a test fails."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
AUTH = "dpcausal:integration-pass-2026"
_failed: list[str] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Stack:
    data: Path
    env: dict[str, str]
    prefect: str  # http://127.0.0.1:<port>
    mlflow: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(AUTH.encode()).decode(),
                "Content-Type": "application/json"}

    def call(self, base: str, method: str, path: str, body: Any = None, *, auth: bool = True,
             timeout: float = 20) -> Any:
        req = urllib.request.Request(base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers=self.headers if auth else
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def api(self, method: str, path: str, body: Any = None) -> Any:
        return self.call(self.prefect + "/api", method, path, body)

    def ml(self, method: str, path: str, body: Any = None) -> Any:
        return self.call(self.mlflow + "/api/2.0/mlflow", method, path, body)

    def dpcausal(self, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def wait_flow_run(self, run_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            run = self.api("GET", f"/flow_runs/{run_id}")
            if run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                return run
            if time.monotonic() > deadline:
                pytest.fail(f"flow run {run['name']} still {run['state_name']} after {timeout:.0f} s "
                            f"(worker log: {self.data / 'services' / 'logs' / 'worker.log'})")
            time.sleep(1)


def _stack_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "MLFLOW_", "DPCAUSAL_"))}
    env.update({
        "DPCAUSAL_DATA": str(data), "PREFECT_HOME": str(data / "prefect"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(data / "prefect" / "results"),
        "DPCAUSAL_LEDGER_URL": f"sqlite:///{data / 'ledger.db'}",
        "DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
        # the scheduler looks for due schedules every 5 s (default 60) so a one-minute cron fires
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
        "PREFECT_WORKER_QUERY_SECONDS": "2",
    })
    (data / "prefect").mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    data = tmp_path_factory.mktemp("stack")
    env = _stack_env(data)
    pport, mport = free_port(), free_port()
    st = Stack(data=data, env=env, prefect=f"http://127.0.0.1:{pport}",
               mlflow=f"http://127.0.0.1:{mport}")
    t0 = time.monotonic()
    done = st.dpcausal("serve", "--prefect-port", str(pport), "--mlflow-port", str(mport),
                       "--auth", AUTH, "--timeout", "150")
    if done.returncode != 0:
        _save_logs(data, "serve")
        pytest.fail(f"dpcausal serve failed (exit {done.returncode}) after "
                    f"{time.monotonic() - t0:.0f} s:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    print(f"\n[integration] stack ready in {time.monotonic() - t0:.1f} s: {done.stdout}")
    yield st
    if (data / "services" / "prefect.json").exists():  # the stop test did not run or failed
        st.dpcausal("stop", timeout=120)
    if _failed:
        _save_logs(data, "failure")


def _save_logs(data: Path, why: str) -> None:
    dest = ARTIFACTS / f"integration-logs-{why}"
    shutil.rmtree(dest, ignore_errors=True)
    if (data / "services" / "logs").is_dir():
        shutil.copytree(data / "services" / "logs", dest)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    report = yield
    if report.failed:
        _failed.append(item.nodeid)
    return report
