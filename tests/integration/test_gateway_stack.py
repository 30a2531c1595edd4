"""The analysts' gateway on a served stack (issue 40, "Done when"), in order: the curator sets
up a dataset and admits analysts; ``dpcausal ask`` from an environment holding only the URL and
a token releases and the charge names the analyst; a token for dataset A cannot ask about B, see
it or read its releases; a revoked token, curator-only keys and a config outside the registered
list are refused with nothing charged; two analysts asking at once never exceed the dataset's
cap or their own; the page works in Chromium. Tests share the session stack, in file order."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _browser import browser
from _stack import ARTIFACTS, ROOT, Stack

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Ledger

pytestmark = pytest.mark.integration

A, B = "demo-experiment-a", "it-other"
# the dataset's cap is 1.5: the curator's release (0.5) and alice's first (0.5) leave room for
# exactly two more of zeta 0.8 (0.5^2 + 0.5^2 + 2 * 0.8^2 = 1.78 <= 2.25 < 2.42); alice's own
# cap 1.2 admits one more 0.8 (0.25 + 0.64 = 0.89 <= 1.44 < 1.53), dave's two (1.28 <= 1.44)
CAP_A, OWN = 1.5, 1.2
FAST = ("--set", "estimator.n_folds=20")  # a small K: the release takes seconds
tokens: dict[str, str] = {}


def _ledger(stack: Stack) -> Ledger:
    return Ledger(stack.env["DPCAUSAL_LEDGER_URL"])


def _charges(stack: Stack, dataset: str) -> list[str | None]:
    with _ledger(stack) as led:
        return [None if a != a else a for a in led.history(dataset)["analyst"]]  # NaN: None


def _ask(stack: Stack, tmp: Path, token: str, *args: str, timeout: float = 400
         ) -> subprocess.CompletedProcess[str]:
    """``dpcausal ask`` as an analyst runs it: PATH, a fresh HOME and working folder, the URL
    and the token; no data folder, ledger, key, Prefect or MLflow setting."""
    home, work = tmp / "home", tmp / "work"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "DPCAUSAL_ASK_URL": stack.gateway,
           "DPCAUSAL_ASK_TOKEN": token}
    return subprocess.run([sys.executable, "-P", "-m", "cli", "ask", *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _get(stack: Stack, path: str, token: str) -> tuple[int, dict]:
    req = urllib.request.Request(stack.gateway + path,
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_the_curator_admits_analysts(stack: Stack) -> None:
    assert stack.gateway.startswith("http://127.0.0.1:"), "serve printed no `gateway:` line"
    for args in (("ledger", "set-budget", A, "--zeta", str(CAP_A)),
                 ("ledger", "set-budget", B, "--zeta", "1.0")):
        done = stack.dpcausal(*args)
        assert done.returncode == 0, done.stderr
    # the curator's own release writes and registers the demo data (synthetic), as nightly does
    dep = stack.api("GET", "/deployments/name/release_from_config/demo")
    run = stack.api("POST", f"/deployments/{dep['id']}/create_flow_run", {"parameters": {
        "settings": {"name": "it-curator", "zeta": 0.5, "n_folds": 20}}})
    done = stack.wait_flow_run(run["id"], timeout=240)
    assert done["state_type"] == "COMPLETED", done["state"]["message"]
    for name, datasets, cap in (("alice", A, OWN), ("dave", A, OWN), ("bob", B, None),
                                ("carol", A, None)):
        added = stack.dpcausal("analyst", "add", name, "--datasets", datasets,
                               *(() if cap is None else ("--zeta", str(cap))))
        assert added.returncode == 0, added.stderr
        tokens[name] = added.stdout.strip().splitlines()[-1]
        # the analyst's MLflow user, made on the served stack (deploy/mlflow_users.py)
        assert f"MLflow: user {name} (password: the token) may read" in added.stdout
    # alice reads her dataset's experiment in MLflow with her token, and nothing of bob's
    auth = "Basic " + base64.b64encode(f"alice:{tokens['alice']}".encode()).decode()
    read = urllib.request.Request(
        stack.mlflow + "/api/2.0/mlflow/experiments/get-by-name?experiment_name=dpcausal-demo",
        headers={"Authorization": auth})
    with urllib.request.urlopen(read, timeout=20) as answer:
        assert json.loads(answer.read())["experiment"]["name"] == "dpcausal-demo"
    revoked = stack.dpcausal("analyst", "revoke", "carol")
    assert revoked.returncode == 0 and "MLflow: user carol deleted." in revoked.stdout
    assert _charges(stack, A) == [None]


def test_ask_from_only_a_url_and_a_token_releases_and_names_the_analyst(
        stack: Stack, tmp_path: Path) -> None:
    assert tokens, "needs the analysts (previous test)"
    t0 = time.monotonic()
    done = _ask(stack, tmp_path, tokens["alice"], A, "demo", "--set", "estimator.zeta=0.5",
                *FAST)
    print(f"\n[integration] dpcausal ask: {time.monotonic() - t0:.1f} s "
          f"(load {os.getloadavg()[0]:.2f})")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "ATE" in done.stdout and "release id: " in done.stdout
    release_id = done.stdout.strip().splitlines()[-1].removeprefix("release id: ")
    assert _charges(stack, A) == [None, "alice"]
    with _ledger(stack) as led:
        assert led.history(A)["release_id"].iloc[-1] == release_id
    assert list((tmp_path / "home").iterdir()) == [] and list((tmp_path / "work").iterdir()) == []
    status, one = _get(stack, f"/api/releases/{release_id}", tokens["alice"])
    assert status == 200 and one["state"] == "released" and one["dataset"] == A
    tokens["alice_release"] = release_id


def test_a_token_for_a_cannot_ask_see_or_read_b(stack: Stack, tmp_path: Path) -> None:
    assert "alice_release" in tokens, "needs alice's release (previous test)"
    with _ledger(stack) as led:  # a release on B asked by bob (committed as the flow commits)
        with led.release(B, "it-b-run/b", PrivacyCharge("gaussian", zeta=0.2), unit="row",
                         analyst="bob") as slot:
            slot.commit(json.dumps(one_release(stack)))
    before = (_charges(stack, A), _charges(stack, B))
    done = _ask(stack, tmp_path, tokens["alice"], B, "trial_dim")
    assert done.returncode == 2 and "not admitted to dataset" in done.stderr, done.stderr
    status, listed = _get(stack, "/api/datasets", tokens["alice"])
    assert status == 200 and [d["dataset"] for d in listed["datasets"]] == [A]
    assert _get(stack, "/api/releases/it-b-run/b", tokens["alice"])[0] == 404
    assert _get(stack, "/api/releases/it-b-run/b", tokens["bob"])[0] == 200
    assert _get(stack, f"/api/releases/{tokens['alice_release']}", tokens["bob"])[0] == 404
    assert (_charges(stack, A), _charges(stack, B)) == before


def one_release(stack: Stack) -> dict:
    status, one = _get(stack, f"/api/releases/{tokens['alice_release']}", tokens["alice"])
    assert status == 200
    return {**one["release"], "dataset": B}


@pytest.mark.parametrize(("who", "args", "message"), [
    ("carol", (A, "demo"), "unknown or revoked"),
    ("alice", (A, "trial_dim"), "not one of dataset"),
    ("alice", (A, "../../conf/release/demo"), "not one of dataset"),
    ("alice", (A, "demo", "--set", "runner.address=tcp://127.0.0.1:9"), "not an analysis key"),
    ("alice", (A, "demo", "--set", "mlflow.tracking_uri=http://127.0.0.1:9"),
     "not an analysis key"),
    ("alice", (A, "demo", "--set", "data.path=/etc/passwd"), "not an analysis key"),
    ("alice", (A, "demo", "--set", "mode=evaluation"), "not an analysis key"),
])
def test_refused_asks_exit_2_and_charge_nothing(stack: Stack, tmp_path: Path, who: str,
                                                args: tuple[str, ...], message: str) -> None:
    assert tokens, "needs the analysts"
    before = _charges(stack, A)
    done = _ask(stack, tmp_path, tokens[who], *args, timeout=120)
    assert done.returncode == 2 and message in done.stderr, (done.stdout, done.stderr)
    assert _charges(stack, A) == before


def test_two_analysts_at_once_never_exceed_the_dataset_cap_or_their_own(
        stack: Stack, tmp_path: Path) -> None:
    assert "alice_release" in tokens, "needs alice's first release"
    before = len(_charges(stack, A))
    asks = [("alice", 0), ("dave", 0), ("alice", 1), ("dave", 1)]
    t0 = time.monotonic()
    with ThreadPoolExecutor(len(asks)) as pool:
        results = list(pool.map(lambda a: _ask(stack, tmp_path / f"{a[0]}-{a[1]}", tokens[a[0]],
                                               A, "demo", "--set", "estimator.zeta=0.8", *FAST,
                                               timeout=600), asks))
    codes = [r.returncode for r in results]
    print(f"\n[integration] 4 asks at once: exit codes {codes}, "
          f"{time.monotonic() - t0:.1f} s (load {os.getloadavg()[0]:.2f})")
    assert sorted(codes) == [0, 0, 3, 3], [(r.returncode, r.stderr[-500:]) for r in results]
    assert all("budget exhausted" in r.stderr for r in results if r.returncode == 3)
    with _ledger(stack) as led:
        assert led.spent(A).zeta <= CAP_A
        assert led.analyst_spent("alice", A).zeta <= OWN
        assert led.analyst_spent("dave", A).zeta <= OWN
        assert len(led.history(A)) == before + 2  # the refused asks charged nothing


def test_the_page_in_chromium(stack: Stack) -> None:
    assert "alice_release" in tokens, "needs alice's release"
    token = tokens["alice"]
    with browser({}) as page:
        page.goto(stack.gateway + "/")
        page.wait_text(["Your token", "Sign in"], 60, "the gateway's sign-in page")
        page.send("Runtime.evaluate", expression=(
            f"document.getElementById('token').value = {token!r}; "
            "document.querySelector('form').submit();"))
        text = page.wait_text(["Signed in as", "alice", "Your datasets", A, "Your releases",
                               tokens["alice_release"]], 60, "the analyst's page")
        assert B not in text
        cookie = page.send("Runtime.evaluate", expression="document.cookie",
                           returnByValue=True)["result"]["value"]
        assert cookie == ""  # HttpOnly: no script can read the token
        deadline = time.monotonic() + 90  # the first plot imports matplotlib in the gateway
        while True:
            loaded = page.send("Runtime.evaluate", returnByValue=True, expression=(
                "[...document.querySelectorAll('img.forest')].map(i => i.naturalWidth)"
            ))["result"]["value"]
            if loaded and all(w > 0 for w in loaded):
                break
            assert time.monotonic() < deadline, f"the forest plot did not load: {loaded}"
            time.sleep(1)
        page.scroll_to("Your releases")
        page.screenshot(ARTIFACTS / "gateway_page_releases.png")
        page.send("Runtime.evaluate", expression=(
            "document.getElementById('zeta').value = '0.01'; "
            "document.getElementById('n_folds').value = '20'; "
            "document.querySelector('form.ask').submit();"))
        page.wait_text(["Asked: request"], 60, "the page's ask")
        page.screenshot(ARTIFACTS / "gateway_page_asked.png")
    assert (ROOT / "test-artifacts" / "gateway_page_releases.png").is_file()
