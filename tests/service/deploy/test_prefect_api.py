"""Where ``dpcausal run`` sends its flow (deploy/prefect_api.py): the caller's PREFECT_API_URL, else
a running ``dpcausal serve`` stack that answers (without auth), else a temporary server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from deploy.prefect_api import use_served_stack


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/api/health" else 404)
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


def _stack(tmp_path, monkeypatch, api: str, auth: bool = False) -> None:
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path.resolve()}/mlflow.db")
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "stack.info").write_text(json.dumps(
        {"prefect_api": api, "mlflow_ui": "http://127.0.0.1:5999", "auth": auth}))


def test_a_served_stack_that_answers_is_used(tmp_path, monkeypatch, prefect_like):
    import os

    _stack(tmp_path, monkeypatch, prefect_like)
    assert use_served_stack()
    assert os.environ["PREFECT_API_URL"] == prefect_like
    assert os.environ["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5999"


@pytest.mark.parametrize("case", ["silent", "auth", "caller_chose", "none"])
def test_otherwise_the_environment_is_left_alone(tmp_path, monkeypatch, prefect_like, case):
    import os

    api = "http://127.0.0.1:9/api" if case == "silent" else prefect_like  # port 9: nothing
    _stack(tmp_path, monkeypatch, api, auth=case == "auth")
    if case == "caller_chose":
        monkeypatch.setenv("PREFECT_API_URL", "http://prefect.internal:4200/api")
    if case == "none":
        (tmp_path / "services" / "stack.info").unlink()
    before = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
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
