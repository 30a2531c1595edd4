"""The stack ``dpcausal serve`` starts and ``dpcausal stop`` ends: a Prefect server, an MLflow
tracking server (with its artifact store), the ``dpcausal-pool`` process work pool, the
deployments of deploy/prefect.yaml and one worker, all on 127.0.0.1 (recipe §3, §5, §6). Each
service runs in its own process group; its pid, pgid, URL and log file are recorded in
``<data>/services/<name>.json`` and :func:`stop_recorded` ends exactly those groups (worker first:
it needs two signals), then checks that none is left. What the commands print is the CLI's
(cli/serve_cmd.py); a failure here is a :class:`ServiceError` naming the service and its log."""

from __future__ import annotations

import base64
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from conf.settings import PROJECT_ROOT, data_dir, default_tracking_uri
from deploy.service_auth import ServiceCredentials, credentials_file, ensure_credentials

POOL = "dpcausal-pool"
PREFECT_FILE = PROJECT_ROOT / "deploy" / "prefect.yaml"
STOP_ORDER = ("worker", "mlflow", "prefect")
#: MLflow's authorization function: basic auth, and non-admin users read only.
GUARD = "deploy.mlflow_guard:authenticate"


class ServiceError(RuntimeError):
    """A service that would not start or stop; the message names it and its log."""


def services_dir() -> Path:
    return data_dir() / "services"


def tool(name: str) -> str:
    """The path of this environment's ``name`` executable (which need not be on PATH)."""
    return str(Path(sys.executable).parent / name)


def answers(url: str, headers: dict[str, str] | None = None, timeout: float = 3.0) -> bool:
    """Whether ``url`` answers 200 within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _pgid_alive(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in process group ``pgid`` (psutil: Linux and macOS)."""
    pids = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                pids.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return pids


def _start(name: str, cmd: list[str], env: dict[str, str], url: str, extra: dict[str, Any]
           ) -> dict[str, Any]:
    logs = services_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=PROJECT_ROOT, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    record = {"name": name, "pid": proc.pid, "pgid": os.getpgid(proc.pid), "url": url,
              "log": str(log), "cmd": cmd, "started": time.time(), **extra}
    (services_dir() / f"{name}.json").write_text(json.dumps(record, indent=2))
    return record


def _wait_healthy(checks: dict[str, tuple[str, dict[str, str]]], timeout: float) -> None:
    """Poll each health URL until it answers 200; on timeout name the service and its log."""
    pending = dict(checks)
    deadline = time.monotonic() + timeout
    while pending:
        for name, (url, headers) in list(pending.items()):
            if answers(url, headers):
                del pending[name]
            else:
                rec = _record(name)
                if rec and not _pgid_alive(rec["pgid"]):
                    raise ServiceError(f"{name} exited during start-up; see {rec['log']}")
        if pending and time.monotonic() > deadline:
            logs = ", ".join(str(services_dir() / "logs" / f"{n}.log") for n in pending)
            raise ServiceError(f"{', '.join(pending)} did not answer its health check "
                               f"within {timeout:.0f} s; see {logs}")
        time.sleep(0.5)


def _record(name: str) -> dict[str, Any] | None:
    path = services_dir() / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _run(cmd: list[str], env: dict[str, str], what: str, timeout: float = 300) -> None:
    done = subprocess.run(cmd, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise ServiceError(f"{what} failed (exit {done.returncode}):\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")


def _mlflow_auth_config(creds: ServiceCredentials) -> dict[str, str]:
    """The environment of MLflow's basic-auth app: its own user DB under the data folder, the
    curator as its administrator, no access for anyone else (``default_permission =
    NO_PERMISSIONS``: an analyst's user reads only what :mod:`deploy.mlflow_users` grants it),
    the read-only rule for every non-admin user (:func:`deploy.mlflow_guard.authenticate`) and
    MLflow's fail-closed mode (a route without an authorization rule is refused to them)."""
    try:
        import flask_wtf  # noqa: F401  (the basic-auth app needs it: pip install mlflow[auth])
    except ImportError:
        raise ServiceError("serve needs MLflow's basic-auth extra (Flask-WTF), which is not "
                           "installed: pip install 'mlflow[auth]==3.17.2'") from None
    ini = services_dir() / "mlflow_basic_auth.ini"
    fd = os.open(ini, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("[mlflow]\ndefault_permission = NO_PERMISSIONS\n"
                 f"database_uri = sqlite:///{data_dir() / 'mlflow_auth.db'}\n"
                 f"admin_username = {creds.user}\nadmin_password = {creds.password}\n"
                 f"authorization_function = {GUARD}\n")
    secret = services_dir() / "mlflow_secret"
    if not secret.is_file():
        secret.write_text(base64.b64encode(os.urandom(24)).decode())
        secret.chmod(0o600)
    return {"MLFLOW_AUTH_CONFIG_PATH": str(ini),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": secret.read_text(),
            "MLFLOW_BASIC_AUTH_FAIL_CLOSED": "true",
            # the guard is imported from the checkout by the server process
            "PYTHONPATH": os.pathsep.join(p for p in (str(PROJECT_ROOT),
                                                      os.environ.get("PYTHONPATH")) if p)}


def running() -> list[dict[str, Any]]:
    """Recorded services whose process group still has live processes."""
    recs = [json.loads(p.read_text()) for p in sorted(services_dir().glob("*.json"))]
    return [r for r in recs if _pgid_alive(r["pgid"])]


def check_can_start() -> None:
    """:class:`ServiceError` naming them when services ``dpcausal serve`` started still run
    (their records in :func:`services_dir`, which is created here)."""
    services_dir().mkdir(parents=True, exist_ok=True)
    if live := running():
        raise ServiceError("already running: " + ", ".join(
            f"{r['name']} (pid {r['pid']})" for r in live) + "; run `dpcausal stop` first")


def start_stack(prefect_port: int, mlflow_port: int, backend_store_uri: str | None,
                auth: str | None, deploy: bool, timeout: float, t0: float,
                gateway_port: int = 8400) -> dict[str, Any]:
    """Start the servers, both with auth (issue 40 item 5: the curator's credentials,
    :func:`deploy.service_auth.ensure_credentials`: ``auth`` when given, else the stored ones,
    else new ones), wait for their health checks, then (``deploy``) create the work pool, deploy
    deploy/prefect.yaml, start a worker and the analysts' gateway on ``gateway_port``
    (``gateway.app``), which both get the credentials; ``timeout`` seconds per stage. Returns
    the stack's record (``<data>/services/stack.info``: URLs, where the credentials are, whether
    they were generated now, seconds since ``t0`` until the servers answered and until the stack
    was ready). On a failure the services started so far keep running: :func:`stop_recorded`
    ends them."""
    data = data_dir()
    creds, generated = ensure_credentials(auth)
    prefect_api = f"http://127.0.0.1:{prefect_port}/api"
    mlflow_url = f"http://127.0.0.1:{mlflow_port}"
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "MLFLOW_TRACKING_URI": mlflow_url,
           "DPCAUSAL_ROOT": str(PROJECT_ROOT), "DPCAUSAL_DATA": str(data),
           "PREFECT_WORKER_QUERY_SECONDS": os.environ.get("PREFECT_WORKER_QUERY_SECONDS", "3"),
           "PREFECT_WORKER_PREFETCH_SECONDS": os.environ.get("PREFECT_WORKER_PREFETCH_SECONDS",
                                                             "5")}
    server_env = {**env, "PREFECT_SERVER_API_AUTH_STRING": creds.auth_string}
    env.update(creds.client_env)
    mlflow_cmd = [tool("mlflow"), "server", "--host", "127.0.0.1", "--port", str(mlflow_port),
                  "--workers", "1", "--backend-store-uri",
                  backend_store_uri or default_tracking_uri(),
                  "--artifacts-destination", str(data / "mlartifacts"),
                  "--app-name", "basic-auth"]
    mlflow_env = {**env, **_mlflow_auth_config(creds)}
    _start("prefect", [tool("prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                       str(prefect_port)], server_env, prefect_api.removesuffix("/api"), {})
    _start("mlflow", mlflow_cmd, mlflow_env, mlflow_url, {"auth": True})
    _wait_healthy({"prefect": (f"{prefect_api}/health", creds.headers),
                   "mlflow": (f"{mlflow_url}/health", creds.headers)}, timeout)
    t_servers = time.monotonic() - t0
    if deploy:
        _run([tool("prefect"), "work-pool", "create", POOL, "--type", "process", "--overwrite"],
             env, f"creating work pool {POOL}", timeout)
        _run([tool("prefect"), "--no-prompt", "deploy", "--all", "--prefect-file",
              str(PREFECT_FILE)], env, "prefect deploy --all", timeout)
        _start("worker", [tool("prefect"), "worker", "start", "--pool", POOL, "--limit", "2",
                          "--type", "process"], env, prefect_api, {})
        gateway = f"http://127.0.0.1:{gateway_port}"
        _start("gateway", [sys.executable, "-m", "uvicorn", "gateway.app:create_app",
                           "--factory", "--host", "127.0.0.1", "--port", str(gateway_port),
                           "--workers", "1", "--no-server-header"], env, gateway, {})
        _wait_healthy({"gateway": (f"{gateway}/openapi.json", {})}, timeout)
    stack = {"prefect_ui": prefect_api.removesuffix("/api"), "prefect_api": prefect_api,
             "mlflow_ui": mlflow_url, "auth": True, "user": creds.user,
             "credentials": str(credentials_file()), "generated": generated,
             "servers_s": round(t_servers, 1), "startup_s": round(time.monotonic() - t0, 1),
             **({"gateway": gateway} if deploy else {})}
    (services_dir() / "stack.info").write_text(json.dumps(stack, indent=2))
    return stack


def trigger_command(prefect_api: str) -> str:
    """A shell command that runs the demo deployment on the stack at ``prefect_api`` as printed
    (the ``prefect`` of this environment, which need not be on PATH), its auth string read from
    the curator's credentials file (never printed)."""
    read = shlex.join([sys.executable, "-c", "import json,sys; c=json.load(open(sys.argv[1])); "
                       "print(c['user'] + ':' + c['password'])", str(credentials_file())])
    return (f"PREFECT_API_URL={shlex.quote(prefect_api)} PREFECT_API_AUTH_STRING=\"$({read})\" "
            + shlex.join([tool("prefect"), "deployment", "run", "release_from_config/demo", "-p",
                          "settings=" + json.dumps({"zeta": 1.0})]))


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _end(rec: dict[str, Any], grace: float) -> None:
    """TERM the group (a worker also gets INT: it needs two signals, recipe §5), KILL after
    ``grace`` seconds."""
    pgid = rec["pgid"]
    _signal_group(pgid, signal.SIGTERM)
    if rec["name"] == "worker":
        time.sleep(0.5)
        _signal_group(pgid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while _pgid_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _pgid_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _pgid_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)


def stop_recorded(grace: float) -> dict[str, dict[str, Any]]:
    """End every recorded service's process group (:data:`STOP_ORDER`), check that none is
    left and forget them; the records of the services stopped (empty: none was recorded)."""
    recs = {p.stem: json.loads(p.read_text()) for p in services_dir().glob("*.json")}
    for name in sorted(recs, key=lambda n: STOP_ORDER.index(n) if n in STOP_ORDER else -1):
        _end(recs[name], grace)
    left = {name: _pgid_alive(rec["pgid"]) for name, rec in recs.items()}
    left = {k: v for k, v in left.items() if v}
    if left:
        raise ServiceError(f"processes still alive after stop: {left}")
    for name in recs:
        (services_dir() / f"{name}.json").unlink(missing_ok=True)
    return recs
