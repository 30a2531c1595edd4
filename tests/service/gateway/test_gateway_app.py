"""The analysts' gateway as an application (FastAPI's TestClient, no server; issue 40): tokens,
what an analyst may see, ask and read, refusals made before anything is submitted or charged,
and the page (escaped, the token in an HttpOnly SameSite=Strict cookie)."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from _fake import A, B, LedgerRuns, curator_setup, labelled, release_json

with warnings.catch_warnings():  # starlette 1.x asks for httpx2, which is not in the lock
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Ledger
from gateway.app import COOKIE, create_app
from gateway.service import Service


@pytest.fixture
def gw(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", url)
    tokens = curator_setup(url)
    runs = LedgerRuns(url)
    client = TestClient(create_app(Service(runs)))
    client.url, client.runs, client.tokens = url, runs, tokens
    return client


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _charges(url: str) -> list[tuple[str, str | None]]:
    with Ledger(url) as led:
        return [(d, a) for d in (A, B) for a in led.history(d)["analyst"]]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nonsense"},
                                     {"Authorization": "Basic YWxpY2U6eA=="}])
def test_no_or_bad_token_is_401_and_nothing_is_submitted(gw, headers) -> None:
    for method, path, body in (("GET", "/api/datasets", None),
                               ("POST", "/api/releases", {"dataset": A, "config": "demo"}),
                               ("GET", "/api/releases", None)):
        r = gw.request(method, path, json=body, headers=headers)
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"] == "Bearer"
    assert gw.runs.submitted == [] and _charges(gw.url) == []


def test_a_revoked_token_is_refused(gw) -> None:
    r = gw.post("/api/releases", json={"dataset": A, "config": "demo"},
                headers=_auth(gw.tokens["carol"]))
    assert r.status_code == 401 and "unknown or revoked" in r.json()["detail"]
    assert gw.runs.submitted == []


def test_the_list_holds_only_the_analysts_datasets_with_public_facts(gw) -> None:
    r = gw.get("/api/datasets", headers=_auth(gw.tokens["alice"]))
    assert r.status_code == 200
    doc = r.json()
    assert doc["analyst"] == "alice" and [d["dataset"] for d in doc["datasets"]] == [A]
    a = doc["datasets"][0]
    assert (a["n"], a["d"], a["unit"]) == (2000, 1, "row")
    assert a["configs"] == [{"name": "demo", "kind": "ate", "design": "observational"}]
    assert a["cap"].startswith("zeta=3") and a["your_cap_zeta"] == 1.5
    assert a["spent"]["n_charges"] == 0 and a["your_spent"]["n_charges"] == 0
    assert "experiment_a.csv" not in r.text  # the source is the curator's


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"dataset": B, "config": "trial_dim"}, 403, "not admitted to dataset"),
    ({"dataset": A, "config": "trial_dim"}, 400, "not one of dataset"),
    ({"dataset": A, "config": "../../etc/passwd"}, 400, "not one of dataset"),
    ({"dataset": A, "config": "demo", "settings": {"data.path": "/tmp/x.csv"}}, 400,
     "not an analysis key"),
    ({"dataset": A, "config": "demo", "settings": {"runner.address": "tcp://evil:8786"}}, 400,
     "not an analysis key"),
    ({"dataset": A, "config": "demo", "settings": {"mlflow.tracking_uri": "http://evil"}}, 400,
     "not an analysis key"),
    ({"dataset": A, "config": "demo", "settings": {"mode": "evaluation"}}, 400,
     "not an analysis key"),
    ({"dataset": A, "config": "demo", "settings": {"models.outcome.name": "os:system"}}, 400,
     "must be a model of the registry"),
    ({"dataset": A, "config": "demo", "settings": "zeta=9"}, 422, ""),
])
def test_asks_outside_the_grant_or_the_allow_list_are_refused_before_submitting(
        gw, body, status, message) -> None:
    r = gw.post("/api/releases", json=body, headers=_auth(gw.tokens["alice"]))
    assert r.status_code == status, r.text
    assert message in json.dumps(r.json()["detail"])
    assert gw.runs.submitted == [] and _charges(gw.url) == []


def test_an_ask_is_submitted_with_the_analyst_and_released_by_release_id(gw) -> None:
    alice = _auth(gw.tokens["alice"])
    r = gw.post("/api/releases", json={"dataset": A, "config": "demo",
                                       "settings": {"estimator.zeta": 0.5}}, headers=alice)
    assert r.status_code == 202, r.text
    assert gw.runs.submitted == [("conf/release/demo.yaml", {"estimator.zeta": 0.5}, "alice")]
    state = gw.get(f"/api/requests/{r.json()['request_id']}", headers=alice).json()
    assert state["state"] == "released" and state["release_id"].endswith("/demo")
    assert state["release"] == json.loads(labelled(A)) | {"noise_share":
                                                          state["release"]["noise_share"]}
    assert "ATE" in state["text"] and state["spent"]["yours"]["zeta"] == pytest.approx(0.5)
    assert _charges(gw.url) == [(A, "alice")]
    one = gw.get(f"/api/releases/{state['release_id']}", headers=alice).json()
    assert one["state"] == "released" and one["release"]["ate"] == state["release"]["ate"]
    listed = gw.get("/api/releases", headers=alice).json()["releases"]
    assert [x["release_id"] for x in listed] == [state["release_id"]]


def test_a_request_refused_by_the_own_cap_says_budget_without_the_ledger_path(gw) -> None:
    alice = _auth(gw.tokens["alice"])
    r = gw.post("/api/releases", json={"dataset": A, "config": "demo",
                                       "settings": {"estimator.zeta": 1.6}}, headers=alice)
    state = gw.get(f"/api/requests/{r.json()['request_id']}", headers=alice).json()
    assert state["state"] == "refused" and state["reason"] == "budget"
    assert "analyst alice's own cap" in state["message"] and "Ledger:" not in state["message"]
    assert gw.url.split("///")[1] not in json.dumps(state)
    assert _charges(gw.url) == []


def test_a_token_for_a_cannot_read_bs_requests_or_releases(gw) -> None:
    bob = _auth(gw.tokens["bob"])
    asked = gw.post("/api/releases", json={"dataset": B, "config": "trial_dim"}, headers=bob)
    rid = gw.get(f"/api/requests/{asked.json()['request_id']}", headers=bob).json()["release_id"]
    alice = _auth(gw.tokens["alice"])
    assert gw.get(f"/api/requests/{asked.json()['request_id']}", headers=alice).status_code == 404
    assert gw.get(f"/api/releases/{rid}", headers=alice).status_code == 404
    assert gw.get("/api/releases", headers=alice).json()["releases"] == []
    assert gw.post("/api/meta", json={"release_ids": [rid]}, headers=alice).status_code == 404
    assert gw.get(f"/api/releases/{rid}", headers=bob).json()["state"] == "released"


def test_meta_pools_the_analysts_releases_by_id_only(gw) -> None:
    alice = _auth(gw.tokens["alice"])
    ids = []
    for zeta in (0.5, 0.6):
        asked = gw.post("/api/releases", json={"dataset": A, "config": "demo",
                                               "settings": {"estimator.zeta": zeta}},
                        headers=alice).json()
        ids.append(gw.get(f"/api/requests/{asked['request_id']}",
                          headers=alice).json()["release_id"])
    pooled = gw.post("/api/meta", json={"release_ids": ids}, headers=alice)
    assert pooled.status_code == 200, pooled.text
    assert pooled.json()["meta"]["privacy"]["additional_charge"] == 0
    bad = gw.post("/api/meta", json={"release_ids": ids, "csv": "/etc/passwd"}, headers=alice)
    assert bad.status_code == 200  # unknown fields are ignored; only release ids are read
    assert gw.post("/api/meta", json={"release_ids": ["/etc/passwd"]},
                   headers=alice).status_code == 404


def test_plan_reads_the_registration_and_charges_nothing(gw) -> None:
    r = gw.post("/api/plan", json={"dataset": A, "config": "demo",
                                   "settings": {"estimator.zeta": 1.0}},
                headers=_auth(gw.tokens["alice"]))
    assert r.status_code == 200, r.text
    assert (r.json()["n"], r.json()["d"], r.json()["zeta"]) == (2000, 1, 1.0)
    assert gw.runs.submitted == [] and _charges(gw.url) == []


def test_the_openapi_schema_lists_the_endpoints(gw) -> None:
    paths = gw.get("/openapi.json").json()["paths"]
    assert {"/api/datasets", "/api/plan", "/api/releases", "/api/requests/{request_id}",
            "/api/releases/{release_id}", "/api/meta"} <= set(paths)


# ---------------------------------------------------------------- the page
def test_the_page_signs_in_with_a_strict_httponly_cookie_and_refuses_a_bad_token(gw) -> None:
    first = gw.get("/")
    assert first.status_code == 200 and "name='token'" in first.text
    assert "script-src" not in first.headers["content-security-policy"]  # no script allowed
    bad = gw.post("/signin", data={"token": "nonsense"}, follow_redirects=False)
    assert bad.status_code == 401 and COOKIE not in bad.headers.get("set-cookie", "")
    good = gw.post("/signin", data={"token": gw.tokens["alice"]}, follow_redirects=False)
    assert good.status_code == 303
    cookie = good.headers["set-cookie"]
    assert re.search(r"httponly", cookie, re.I) and re.search(r"samesite=strict", cookie, re.I)
    home = gw.get("/")
    assert "Signed in as" in home.text and A in home.text and B not in home.text


def test_the_page_asks_with_the_form_and_escapes_what_it_shows(gw) -> None:
    gw.post("/signin", data={"token": gw.tokens["alice"]})
    asked = gw.post("/ask", data={"target": f"{A}/demo", "zeta": "0.5", "more": ""})
    assert asked.status_code == 200 and "Asked: request" in asked.text, asked.text
    assert gw.runs.submitted[-1] == ("conf/release/demo.yaml", {"estimator.zeta": 0.5}, "alice")
    refused = gw.post("/ask", data={"target": f"{A}/demo", "more": "data.path=/x.csv"})
    assert refused.status_code == 400 and "not an analysis key" in refused.text
    with Ledger(gw.url) as led:  # a release id that would inject markup if not escaped
        with led.release(A, "x/<script>alert(1)</script>", PrivacyCharge("gaussian", zeta=0.1),
                         unit="row", analyst="alice") as slot:
            slot.commit(release_json())
    home = gw.get("/")
    assert "<script>alert(1)" not in home.text and "&lt;script&gt;alert(1)" in home.text
    assert "forest.svg?dataset=demo-experiment-a" in home.text
    svg = gw.get(f"/forest.svg?dataset={A}")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg")
    assert "<script>" not in svg.text
    gw.post("/signout")
    assert gw.get(f"/forest.svg?dataset={A}").status_code == 401
