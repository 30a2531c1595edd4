"""One real stack per session: ``dpcausal serve --auth`` (Prefect server, MLflow server with the
basic-auth app, work pool, deployments, worker) on free loopback ports, data under a session tmp
dir; stopped at the end. Service logs are copied to test-artifacts/ when a test fails."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from _stack import ARTIFACTS, AUTH, Stack, free_port, stack_env

_failed: list[str] = []


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    data = tmp_path_factory.mktemp("stack")
    env = stack_env(data)
    pport, mport, gport = free_port(), free_port(), free_port()
    st = Stack(data=data, env=env, prefect=f"http://127.0.0.1:{pport}",
               mlflow=f"http://127.0.0.1:{mport}")
    t0 = time.monotonic()
    done = st.dpcausal("serve", "--prefect-port", str(pport), "--mlflow-port", str(mport),
                       "--gateway-port", str(gport), "--auth", AUTH, "--timeout", "150")
    if done.returncode != 0:
        _save_logs(data, "serve")
        pytest.fail(f"dpcausal serve failed (exit {done.returncode}) after "
                    f"{time.monotonic() - t0:.0f} s:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    printed = [line for line in done.stdout.splitlines() if line.startswith("gateway: ")]
    st.gateway = printed[0].split(": ", 1)[1].strip() if printed else ""
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
