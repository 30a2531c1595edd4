"""The administrators' doors closed by default (issue 40 item 5), on a stack of its own served
WITHOUT ``--auth``: ``serve`` generates the curator's credentials into the private folder (0600)
and reuses them on the next ``serve``; an unauthenticated request to either server's API is
refused; an analyst's MLflow user (deploy/mlflow_users.py) reads the runs of its datasets'
experiments and cannot delete, create, change or read anything else, while the curator still
can. Servers only (``--no-deploy``): nothing here needs the worker."""

from __future__ import annotations

import base64
import json
import stat
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _stack import Stack, free_port, stack_env

pytestmark = pytest.mark.integration


def _serve(st: Stack, pport: int, mport: int) -> str:
    done = st.dpcausal("serve", "--prefect-port", str(pport), "--mlflow-port", str(mport),
                       "--no-deploy", "--timeout", "150")
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("auth-stack")
    pport, mport = free_port(), free_port()
    st = Stack(data=data, env=stack_env(data), prefect=f"http://127.0.0.1:{pport}",
               mlflow=f"http://127.0.0.1:{mport}")
    out = _serve(st, pport, mport)
    yield st, out, (pport, mport)
    if (data / "services" / "prefect.json").exists():
        st.dpcausal("stop", timeout=120)


def _creds(data: Path) -> tuple[str, str]:
    raw = json.loads((data / "private" / "service_auth.json").read_text())
    return raw["user"], raw["password"]


def _request(base: str, method: str, path: str, body=None, user: tuple[str, str] | None = None):
    """(status, JSON or text) of one request, with basic auth when ``user`` is given."""
    headers = {"Content-Type": "application/json"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(user).encode()).decode()
    req = urllib.request.Request(base + path, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, json.loads(text or "null")
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        exc.close()
        return exc.code, text


def _ml(st: Stack, method: str, path: str, body=None, user=None):
    return _request(st.mlflow + "/api/2.0/mlflow", method, path, body, user)


def test_serve_without_auth_generates_private_credentials(served):
    st, out, _ = served
    path = st.data / "private" / "service_auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    user, password = _creds(st.data)
    assert len(password) >= 32
    assert f"user {user}, password in {path}" in out and "(generated now;" in out
    assert password not in out  # the password is never printed


@pytest.mark.parametrize("service", ["prefect", "mlflow"])
def test_unauthenticated_requests_are_refused(served, service):
    st, _, _ = served
    base, path, body = ((st.prefect + "/api", "/flow_runs/filter", {"limit": 1})
                        if service == "prefect" else
                        (st.mlflow + "/api/2.0/mlflow", "/experiments/search",
                         {"max_results": 1}))
    user, password = _creds(st.data)
    assert _request(base, "POST", path, body)[0] == 401
    assert _request(base, "POST", path, body, (user, "wrong-" + password))[0] == 401
    assert _request(base, "POST", path, body, (user, password))[0] == 200


def test_an_analysts_mlflow_user_reads_its_datasets_experiment_only(served):
    from deploy.mlflow_users import delete_analyst_user, set_analyst_user
    from deploy.service_auth import ServedStack, ServiceCredentials

    st, _, _ = served
    admin = _creds(st.data)
    stack = ServedStack(st.prefect + "/api", st.mlflow, ServiceCredentials(*admin))
    # the curator: analyst "ana" may read dataset it-a; it-b is someone else's
    grants = set_analyst_user("ana", "ana-token-0123456789abcdef", ["it-a"], stack)
    assert list(grants) == ["dpcausal/it-a"]
    exp_b = set_analyst_user("bo", "bo-token-0123456789abcdef", ["it-b"], stack)["dpcausal/it-b"]
    exp_a = grants["dpcausal/it-a"]
    runs = {}
    for name, exp in (("a", exp_a), ("b", exp_b)):
        status, made = _ml(st, "POST", "/runs/create", {
            "experiment_id": exp, "run_name": f"release-{name}",
            "start_time": int(time.time() * 1000)}, admin)
        assert status == 200, made
        runs[name] = made["run"]["info"]["run_id"]
        assert _ml(st, "POST", "/runs/log-metric", {
            "run_id": runs[name], "key": "ate", "value": 0.5, "timestamp": 0}, admin)[0] == 200
    ana = ("ana", "ana-token-0123456789abcdef")
    # reads its own experiment's runs
    status, found = _ml(st, "POST", "/runs/search", {"experiment_ids": [exp_a]}, ana)
    assert status == 200 and [r["info"]["run_id"] for r in found["runs"]] == [runs["a"]]
    assert _ml(st, "GET", f"/runs/get?run_id={runs['a']}", user=ana)[0] == 200
    status, listed = _ml(st, "POST", "/experiments/search", {"max_results": 100}, ana)
    assert status == 200 and {e["name"] for e in listed["experiments"]} == {"dpcausal/it-a"}
    # cannot read another's
    assert _ml(st, "GET", f"/runs/get?run_id={runs['b']}", user=ana)[0] == 403
    assert _ml(st, "GET", f"/experiments/get?experiment_id={exp_b}", user=ana)[0] == 403
    status, found = _ml(st, "POST", "/runs/search", {"experiment_ids": [exp_b]}, ana)
    assert status == 403 or not found.get("runs"), found
    # cannot delete, create or change anything, its own experiment included
    for method, path, body in (
            ("POST", "/runs/delete", {"run_id": runs["a"]}),
            ("POST", "/runs/delete", {"run_id": runs["b"]}),
            ("POST", "/experiments/delete", {"experiment_id": exp_a}),
            ("POST", "/runs/create", {"experiment_id": exp_a}),
            ("POST", "/experiments/create", {"name": "ana-own"}),
            ("POST", "/runs/set-tag", {"run_id": runs["a"], "key": "k", "value": "v"}),
            ("POST", "/runs/log-metric", {"run_id": runs["a"], "key": "ate", "value": 9.0,
                                          "timestamp": 0}),
            ("POST", "/users/create", {"username": "eve", "password": "eve-pass-123456789"})):
        status, answer = _ml(st, method, path, body, ana)
        assert status in (401, 403), f"{path} answered {status}: {answer}"
    # the curator still can do everything
    assert _ml(st, "POST", "/runs/set-tag", {"run_id": runs["a"], "key": "k", "value": "v"},
               admin)[0] == 200
    assert _ml(st, "POST", "/runs/delete", {"run_id": runs["b"]}, admin)[0] == 200
    assert _ml(st, "POST", "/experiments/create", {"name": "it-curator"}, admin)[0] == 200
    # a new token and other datasets: the old token and the old grant are gone
    set_analyst_user("ana", "ana-token-second-0123456789", ["it-b"], stack)
    assert _ml(st, "GET", f"/runs/get?run_id={runs['a']}", user=ana)[0] == 401
    ana2 = ("ana", "ana-token-second-0123456789")
    assert _ml(st, "GET", f"/runs/get?run_id={runs['a']}", user=ana2)[0] == 403
    assert _ml(st, "GET", f"/experiments/get?experiment_id={exp_b}", user=ana2)[0] == 200
    # revoked: the user is gone
    assert delete_analyst_user("ana", stack) is True
    assert _ml(st, "GET", f"/experiments/get?experiment_id={exp_b}", user=ana2)[0] == 401
    assert delete_analyst_user("ana", stack) is False


def test_a_second_serve_reuses_the_credentials(served):
    st, _, (pport, mport) = served
    before = _creds(st.data)
    stopped = st.dpcausal("stop", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    out = _serve(st, pport, mport)
    assert "(reused;" in out
    assert _creds(st.data) == before
    assert _request(st.mlflow + "/api/2.0/mlflow", "POST", "/experiments/search",
                    {"max_results": 1})[0] == 401
    assert _request(st.mlflow + "/api/2.0/mlflow", "POST", "/experiments/search",
                    {"max_results": 1}, before)[0] == 200
    assert _request(st.prefect + "/api", "POST", "/flow_runs/filter", {"limit": 1},
                    before)[0] == 200
