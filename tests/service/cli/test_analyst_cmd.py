"""``dpcausal analyst add|list|revoke`` (issue 40 item 3): the token is the last line of
``add``'s output, once; ``ledger history`` and ``ledger show`` say which analyst asked."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.main import main
from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Ledger


@pytest.fixture
def ledger_env(tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", url)
    with Ledger(url, create=True) as led:
        led.register("trial", source={"path": "/d/trial.csv"}, columns={"treatment": "A"},
                     n=100, zeta=2.0)
        led.set_budget("other", zeta=1.0)
    return url


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_add_prints_the_token_last_once_and_list_and_revoke_show_it(ledger_env) -> None:
    added = _invoke("analyst", "add", "alice", "--datasets", "trial,other", "--zeta", "0.8")
    assert added.exit_code == 0, added.output
    lines = added.output.strip().splitlines()
    token = lines[-1]
    assert token.startswith("dpca_") and added.output.count(token) == 1
    with Ledger(ledger_env) as led:
        assert led.authenticate(token).datasets == {"other": 0.8, "trial": 0.8}
    listed = _invoke("analyst", "list")
    assert "alice (active" in listed.output and "trial: own cap zeta=0.8" in listed.output
    assert token not in listed.output and token[5:21] not in listed.output
    as_json = json.loads(_invoke("analyst", "list", "--json").output)
    assert as_json[0]["name"] == "alice" and as_json[0]["active"] is True
    revoked = _invoke("analyst", "revoke", "alice")
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    assert "alice (revoked" in _invoke("analyst", "list").output


@pytest.mark.parametrize(("args", "message"), [
    (("--datasets", "nope"), "unknown dataset 'nope'"),
    (("--datasets", "trial", "--zeta", "3"), "not within the cap of dataset trial"),
])
def test_bad_grants_exit_2(ledger_env, args, message) -> None:
    out = _invoke("analyst", "add", "bob", *args)
    assert out.exit_code == 2 and message in out.output
    assert "dpca_" not in out.output


def test_history_and_show_name_who_asked(ledger_env) -> None:
    with Ledger(ledger_env) as led:
        led.add_analyst("alice", ["trial"])
        for rid, who in (("r/1", None), ("r/2", "alice")):
            with led.release("trial", rid, PrivacyCharge("gaussian", zeta=0.5), unit="row",
                             analyst=who) as slot:
                slot.commit("{}")
    history = _invoke("ledger", "history", "trial")
    rows = {line.split()[0]: line.split()[2] for line in history.output.splitlines()
            if line.startswith("r/")}
    assert rows == {"r/1": "(curator)", "r/2": "alice"}, history.output
    doc = json.loads(_invoke("ledger", "history", "trial", "--json").output)
    assert [c["analyst"] for c in doc["charges"]] == [None, "alice"]
    shown = _invoke("ledger", "show", "trial")
    assert "1 by the curator's own runs, 1 asked by analysts" in shown.output
    assert "analyst alice (active): the dataset's cap; spent zeta=0.5" in shown.output
