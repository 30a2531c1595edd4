"""The served stack a test talks to: its data dir, environment, URLs and REST helpers."""

from __future__ import annotations

import base64
import json
import os
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
    gateway: str = ""  # the analysts' gateway, as `serve` printed it (`gateway: http://...`)

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
        for attempt in range(5):
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    return json.loads(r.read() or b"null")
            except urllib.error.HTTPError as exc:
                # 503: the server's database is momentarily busy (SQLite under load); the request
                # was not applied, and Prefect's own client retries it too
                if exc.code != 503 or attempt == 4:
                    raise
                time.sleep(2 ** attempt)

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
                pytest.fail(f"flow run {run['name']} still {run['state_name']} "
                            f"after {timeout:.0f} s "
                            f"(worker log: {self.data / 'services' / 'logs' / 'worker.log'})")
            time.sleep(1)


def stack_env(data: Path) -> dict[str, str]:
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
