"""The flow tests' reads of a flow run's logs and task states are filtered by the flow run on
the server and paged: one unpaged read returns one page (the API's default limit, 200), so a
leak scan of a long run's logs could miss the rest (issue 34)."""

from __future__ import annotations

import time

from _flowtools import flow_logs, task_states
from prefect import flow, get_run_logger, task
from prefect.context import get_run_context

PAGE = 200  # PREFECT_SERVER_API_DEFAULT_LIMIT


@task(name="fit_fold_stub", task_run_name="fit_fold_stub-{i}")  # unique names
def _stub(i: int) -> int:
    return i


@flow(name="many-logs-and-tasks")
def _long_run(n: int) -> str:
    logger = get_run_logger()
    for i in range(n):
        logger.info("line %d", i)
    for i in range(n):
        _stub(i)
    return str(get_run_context().flow_run.id)


def test_every_log_line_and_task_state_of_a_long_run_is_read() -> None:
    n = PAGE + 15
    run_id = _long_run(n)
    lines = [m for m in flow_logs(run_id) if m.startswith("line ")]
    assert sorted(lines) == sorted(f"line {i}" for i in range(n))
    for _ in range(120):  # the server records task runs from events, a moment after the flow
        states = task_states(run_id, prefix="fit_fold_stub")
        if len(states) == n and set(states.values()) == {"Completed"}:
            break
        time.sleep(0.5)
    assert len(states) == n and set(states.values()) == {"Completed"}
