"""The curator's credentials of the served stack (issue 40 item 5): generated once into the
private store (0600), reused, replaced by ``--auth``, and the one place a client of the stack
reads them from (:func:`deploy.service_auth.served_stack`)."""

from __future__ import annotations

import json
import stat

import pytest


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path))
    return tmp_path


def test_credentials_are_generated_once_private_and_reused(data):
    from deploy.service_auth import CURATOR_USER, credentials_file, ensure_credentials

    first, generated = ensure_credentials()
    assert generated and first.user == CURATOR_USER and len(first.password) >= 40
    path = credentials_file()
    assert path == data / "private" / "service_auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again, generated = ensure_credentials()
    assert again == first and not generated
    assert first.password not in repr(first)


def test_given_credentials_replace_the_stored_ones(data):
    from deploy.service_auth import ensure_credentials, stored_credentials

    ensure_credentials()
    given, generated = ensure_credentials("admin:a-long-secret-pass")
    assert not generated and (given.user, given.password) == ("admin", "a-long-secret-pass")
    assert stored_credentials() == given
    with pytest.raises(ValueError, match="at least 12 characters"):
        ensure_credentials("admin:short")


def test_served_stack_gives_a_child_process_its_environment(data):
    from deploy.servers import services_dir
    from deploy.service_auth import ensure_credentials, served_stack

    assert served_stack() is None  # nothing served
    creds, _ = ensure_credentials()
    services_dir().mkdir(parents=True)
    (services_dir() / "stack.info").write_text(json.dumps({
        "prefect_api": "http://127.0.0.1:4200/api", "mlflow_ui": "http://127.0.0.1:5000"}))
    env = served_stack().env
    assert env == {"PREFECT_API_URL": "http://127.0.0.1:4200/api",
                   "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000",
                   "PREFECT_API_AUTH_STRING": f"{creds.user}:{creds.password}",
                   "MLFLOW_TRACKING_USERNAME": creds.user,
                   "MLFLOW_TRACKING_PASSWORD": creds.password}


@pytest.mark.parametrize("method, path, read", [
    ("GET", "/api/2.0/mlflow/runs/get", True),
    ("POST", "/api/2.0/mlflow/runs/search", True),
    ("POST", "/ajax-api/2.0/mlflow/experiments/search", True),
    ("POST", "/api/2.0/mlflow/experiments/create", False),
    ("POST", "/api/2.0/mlflow/runs/create", False),
    ("POST", "/api/2.0/mlflow/runs/delete", False),
    ("DELETE", "/api/2.0/mlflow/users/delete", False),
    ("PATCH", "/api/2.0/mlflow/experiments/update", False),
])
def test_only_reads_pass_the_guard_for_an_analyst(method, path, read):
    from deploy.mlflow_guard import is_read

    assert is_read(method, path) is read
