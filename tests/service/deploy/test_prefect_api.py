"""Where ``dpcausal run`` sends its flow (deploy/prefect_api.py): the caller's PREFECT_API_URL, else
a running ``dpcausal serve`` stack that answers, with the curator's stored credentials (issue 40
item 5), else a temporary server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from deploy.prefect_api import use_served_stack

AUTH = "admin:a-long-secret-pass"
CLIENT_KEYS = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "PREFECT_API_AUTH_STRING",
               "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")


class _Health(BaseHTTPRequestHandler):
    """A Prefect API with its auth string on: /api/health answers the right credentials only."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        import base64

        signed = self.headers.get("Authorization") == "Basic " + base64.b64encode(
            AUTH.encode()).decode()
        self.send_response(404 if self.path != "/api/health" else 200 if signed else 401)
        self.end_headers()

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def prefect_like():
    server = HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api"
    server.shutdown()
    server.server_close()


def _stack(tmp_path, monkeypatch, api: str, auth: str | None = AUTH) -> None:
    from deploy.service_auth import ensure_credentials

    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path))
    for key in CLIENT_KEYS:  # restored after the test
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path.resolve()}/mlflow.db")
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "stack.info").write_text(json.dumps(
        {"prefect_api": api, "mlflow_ui": "http://127.0.0.1:5999", "auth": True}))
    if auth is not None:
        ensure_credentials(auth)


def test_a_served_stack_that_answers_is_used_with_the_curators_credentials(
        tmp_path, monkeypatch, prefect_like):
    import os

    _stack(tmp_path, monkeypatch, prefect_like)
    assert use_served_stack()
    assert os.environ["PREFECT_API_URL"] == prefect_like
    assert os.environ["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5999"
    assert os.environ["PREFECT_API_AUTH_STRING"] == AUTH
    assert (os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]) == \
        tuple(AUTH.split(":"))


@pytest.mark.parametrize("case", ["silent", "no_credentials", "wrong_credentials",
                                  "caller_chose", "none"])
def test_otherwise_the_environment_is_left_alone(tmp_path, monkeypatch, prefect_like, case):
    import os

    api = "http://127.0.0.1:9/api" if case == "silent" else prefect_like  # port 9: nothing
    auth = {"no_credentials": None, "wrong_credentials": "admin:another-long-pass"}.get(case, AUTH)
    _stack(tmp_path, monkeypatch, api, auth=auth)
    if case == "caller_chose":
        monkeypatch.setenv("PREFECT_API_URL", "http://prefect.internal:4200/api")
    if case == "none":
        (tmp_path / "services" / "stack.info").unlink()
    before = {k: os.environ.get(k) for k in CLIENT_KEYS}
    assert not use_served_stack()
    assert {k: os.environ.get(k) for k in before} == before


@pytest.mark.parametrize("caller", [None, "60"])
def test_cli_flow_runs_send_no_heartbeats_unless_the_caller_asks(monkeypatch, caller):
    """Prefect joins its heartbeat thread (1 s sleeps) at the end of each flow run: the CLI,
    which reports its run's end itself, turns heartbeats off unless the caller set them."""
    from prefect.settings import get_current_settings

    from deploy.prefect_api import _settings

    if caller is None:
        monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    else:
        monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", caller)
    with _settings("http://127.0.0.1:9/api"):
        settings = get_current_settings()
        assert str(settings.api.url) == "http://127.0.0.1:9/api"
        assert settings.flows.heartbeat_frequency == (None if caller is None else 60)


def test_a_temporary_server_boots_only_where_no_api_answers(tmp_path, monkeypatch,
                                                            prefect_like):
    """``dpcausal run`` boots its temporary server before the public checks (issue 41 §2), but
    not where the caller set PREFECT_API_URL or a served stack answers: there it points at that
    API and starts nothing."""
    import os

    from deploy import prefect_api

    started = []

    class Server:
        def __init__(self) -> None:
            started.append(self)

        def stop(self) -> None:
            pass

    monkeypatch.setattr(prefect_api, "TemporaryServer", Server)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert prefect_api.boot_temporary_server() is None
    _stack(tmp_path, monkeypatch, prefect_like)
    assert prefect_api.boot_temporary_server() is None
    assert os.environ["PREFECT_API_URL"] == prefect_like and started == []
    monkeypatch.delenv("PREFECT_API_URL")
    (tmp_path / "services" / "stack.info").unlink()  # no stack: one boots
    assert prefect_api.boot_temporary_server() is started[0]
