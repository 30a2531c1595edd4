"""The Prefect API (and MLflow server) a CLI release talks to (issue 21: a CLI release at most 8 s
cold, at most 3 s above the computation with a served stack), and the start of a deployment run
there (``dpcausal run --submit``):

- ``PREFECT_API_URL`` when the caller set it;
- else the stack ``dpcausal serve`` started, when it answers, with the curator's credentials
  from the private store (:func:`deploy.service_auth.served_stack`); its MLflow server too,
  unless ``MLFLOW_TRACKING_URI`` is set;
- else a temporary server, ``prefect server start --no-services --no-ui`` in its own process
  group, started when ``dpcausal run`` starts (:func:`boot_temporary_server`), so that it boots
  on the other core while the release's public checks import the library and the flow's
  modules import (issue 41 §2: started after the checks, a 10^6-row release waited 3.1 s for it
  at load 5); stopped when the process exits, however it ends (a release the checks refuse
  included: its server is stopped unused).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Callable, Iterator

from conf.settings import PROJECT_ROOT, TEMPORARY_PREFECT_API, default_tracking_uri
from deploy.servers import answers, services_dir, tool
from deploy.service_auth import ServiceCredentials, served_stack


def use_served_stack() -> bool:
    """Point this process at the running ``dpcausal serve`` stack, as the curator (its URLs and
    the credentials of :func:`deploy.service_auth.served_stack`), unless the caller chose a
    Prefect API; True when it did."""
    stack = None if os.environ.get("PREFECT_API_URL") else served_stack()
    if stack is None or not answers(f"{stack.prefect_api}/health", stack.credentials.headers,
                                    timeout=2.0):
        return False
    env = stack.env
    if os.environ.get("MLFLOW_TRACKING_URI") not in (None, default_tracking_uri()):
        del env["MLFLOW_TRACKING_URI"]  # the caller chose another tracking store
    os.environ.update(env)
    return True


class TemporaryServer:
    """A Prefect server for one command: API only, on a free loopback port, in its own process
    group (so that stopping it stops its children), logging to ``<data>/services/logs``."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.api = f"http://127.0.0.1:{self.port}/api"
        logs = services_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.log = logs / "temporary-prefect.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [tool("prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                 str(self.port), "--no-services", "--no-ui"], cwd=PROJECT_ROOT, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def wait(self, timeout: float) -> None:
        """Block until the server answers its health check."""
        deadline = time.monotonic() + timeout
        while not answers(f"{self.api}/health", timeout=2.0):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the temporary Prefect server exited during start-up; see "
                                   f"{self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the temporary Prefect server did not answer within "
                                   f"{timeout:.0f} s; see {self.log}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL to the group: it holds nothing to save (runs, logs and events are flushed to
        it by Prefect's exit hooks, which run before this one; its SQLite database survives a
        kill), and a graceful shutdown costs 1.5 s."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            self.proc.wait(10)


@contextmanager
def _settings(api: str) -> Iterator[None]:
    """Prefect's settings for a CLI release against ``api`` (Prefect read its settings at import).

    Flow-run heartbeats are off unless the caller set ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``: the
    command runs in the foreground and reports its run's final state itself (SIGTERM and Ctrl-C
    included), while Prefect joins its heartbeat thread, which sleeps in 1 s steps, at the end of
    every flow run (0.5 s on average, measured up to 0.9 s)."""
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    updates: dict = {PREFECT_API_URL: api}
    if os.environ.get("PREFECT_API_AUTH_STRING"):  # the served stack's, set after import
        updates[PREFECT_API_AUTH_STRING] = os.environ["PREFECT_API_AUTH_STRING"]
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" not in os.environ:
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    with temporary_settings(updates):
        yield


def boot_temporary_server() -> TemporaryServer | None:
    """A temporary server, booting, unless ``PREFECT_API_URL`` is set or the served stack
    answers (then None, and this process points at it): for :func:`prefect_api`. It is stopped
    at exit, after Prefect's own exit hooks (registered later, run earlier) have flushed the
    run's logs and events to it."""
    if os.environ.get("PREFECT_API_URL") or use_served_stack():
        return None
    server = TemporaryServer()
    atexit.register(server.stop)
    return server


@contextmanager
def prefect_api(meanwhile: Callable[[], None] = lambda: None,
                server: TemporaryServer | None = None) -> Iterator[None]:
    """Within: ``PREFECT_API_URL`` names a Prefect API that answers (module docstring).
    ``meanwhile`` (e.g. opening the tracking store) runs while a temporary server boots;
    ``server``: one :func:`boot_temporary_server` started (default: started here, if needed)."""
    server = server or boot_temporary_server()
    if server is None:
        with _settings(os.environ["PREFECT_API_URL"]):
            yield
        return
    os.environ["PREFECT_API_URL"] = server.api  # for child processes (Dask workers)
    os.environ[TEMPORARY_PREFECT_API] = server.api  # no link to its pages outlives it
    import flows.release  # noqa: F401 - imports while the server boots (the slow part)

    meanwhile()
    server.wait(float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")))
    with _settings(server.api):
        yield


def release_in_process(config: Any, checked: Any,
                       progress: AbstractContextManager[Any] | None = None,
                       server: TemporaryServer | None = None) -> dict[str, Any]:
    """The release flow of ``config`` in this process, on :func:`prefect_api` (on ``server``
    if given; the MLflow store opened while a temporary server boots), taking the input the
    caller's public checks read (:func:`tasks.preflight.checked_in_process`: the data are read
    once and its warnings are not raised again); ``progress`` is entered around the flow run
    (the CLI's bar)."""
    from tasks.preflight import checked_in_process
    from tasks.tracking import connect

    with prefect_api(lambda: connect(config.mlflow.tracking_uri), server), \
            progress or nullcontext(), checked_in_process(config, checked):
        from flows.release import run_release

        return run_release(config)


DEPLOYMENT = "release_from_config/from-config"


class SubmitError(LookupError):
    """A deployment run that could not be started, in plain words (exit 2): no stack, no
    deployment, or its refusal of the run's parameters."""


def submit_release(settings: dict[str, Any]) -> str:
    """Start a run of :data:`DEPLOYMENT` with ``settings`` (:func:`conf.deployment.submission`)
    on the Prefect API this process would use, without waiting; the flow run's URL in the
    Prefect UI. :class:`SubmitError` when there is no such API or deployment, or when the
    server refuses the parameters (a deployment of older configs: HTTP 409); no Prefect error
    reaches the caller raw."""
    if not (os.environ.get("PREFECT_API_URL") or use_served_stack()):
        raise SubmitError("--submit needs a running stack: start one with `dpcausal serve` (or "
                          "set PREFECT_API_URL to a Prefect API with the dpcausal deployments)")
    api = os.environ["PREFECT_API_URL"]
    auth = os.environ.get("PREFECT_API_AUTH_STRING")
    headers = ServiceCredentials(*auth.split(":", 1)).headers if auth and ":" in auth else None
    if not answers(f"{api}/health", headers, timeout=3.0):
        raise SubmitError(f"--submit: the Prefect API {api} does not answer; start the stack "
                          "with `dpcausal serve` or fix PREFECT_API_URL")
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
    from prefect.utilities.urls import url_for

    with _settings(api):
        try:
            flow_run = run_deployment(DEPLOYMENT, timeout=0, parameters={"settings": settings})
        except ObjectNotFound:
            raise SubmitError(f"--submit: no deployment {DEPLOYMENT!r} on {api}; `dpcausal "
                              "serve` deploys it (not with --no-deploy)") from None
        except PrefectHTTPStatusError as exc:
            raise SubmitError(f"the stack's deployment {DEPLOYMENT!r} refused the run "
                              f"({_detail(exc)}); its deployments may predate this config or "
                              "this version: restart the stack to deploy them again, "
                              "`dpcausal stop && dpcausal serve`") from None
        return str(url_for(flow_run) or f"{api.removesuffix('/api')}/runs/flow-run/{flow_run.id}")


def submit_ask(config: str, overrides: dict[str, Any], analyst: str) -> str:
    """Start the release of the registered ``config`` with analysis ``overrides``, asked by
    ``analyst``, through :data:`DEPLOYMENT` of the Prefect API in ``PREFECT_API_URL`` (with
    ``PREFECT_API_AUTH_STRING``: the gateway holds the curator's credential); the flow run's id,
    without waiting. ``LookupError`` when there is no such API or deployment."""
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    api = os.environ.get("PREFECT_API_URL")
    if not api:
        raise LookupError("the gateway needs PREFECT_API_URL (dpcausal serve sets it)")
    with _settings(api):
        try:
            flow_run = run_deployment(DEPLOYMENT, timeout=0, parameters={
                "settings": {"config": config, "overrides": overrides}, "analyst": analyst})
        except ObjectNotFound:
            raise LookupError(f"no deployment {DEPLOYMENT!r} on {api}") from None
    return str(flow_run.id)


def ask_state(flow_run_id: str) -> dict[str, Any] | None:
    """What the gateway may know of a flow run it started (:func:`submit_ask`): ``state`` (its
    state type: SCHEDULED, PENDING, RUNNING, COMPLETED, FAILED, CRASHED, CANCELLED ...),
    ``message`` (the state's), ``analyst`` (the run's parameter) and ``release_runs`` (the ids
    of its subflow runs: the release id of its charge starts with one of them); None for an
    unknown id."""
    import uuid

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.exceptions import ObjectNotFound

    try:
        run_id = uuid.UUID(flow_run_id)
    except ValueError:
        return None
    with _settings(os.environ["PREFECT_API_URL"]), get_client(sync_client=True) as client:
        try:
            run = client.read_flow_run(run_id)
        except ObjectNotFound:
            return None
        subflows = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run_id])))
    state = run.state
    return {"state": str(state.type.value) if state else "SCHEDULED",
            "message": (state.message or "") if state else "",
            "analyst": run.parameters.get("analyst"),
            "release_runs": [str(sub.id) for sub in subflows]}


def _detail(exc: Any) -> str:
    """The server's reason from a Prefect HTTP error, on one line (its ``detail``)."""
    try:
        detail = exc.response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return " ".join(str(detail or f"HTTP {exc.response.status_code}").split())
