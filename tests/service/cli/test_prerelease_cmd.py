"""The pre-release of the planning facts through the CLI (issue 39 item 5): ``plan`` and
``run --dry-run`` say which facts a release with ``estimator.prerelease`` would learn, at what
share of zeta^2, and plan under the defaults; every refusal of it (an explicit estimator, both
facts stated or registered, an observational design where auto has no choice, a partitioned
source) exits 2 with nothing charged. No Prefect server: these run in-process."""

from __future__ import annotations

import json

import pytest

from dpcausal.ledger import Ledger
from tests.service.cli.test_declared_assumptions_cmd import TRIAL, _charges, _invoke

AUTO = ["--set", "estimator.estimator=auto", "--set", "estimator.prerelease=0.05"]


def _capped(trial, **facts):
    trial["register"](planning=facts) if facts else trial["register"]()
    with Ledger(trial["ledger"], create=True) as led:
        led.set_budget("trial-dim-demo", zeta=5.0)


def test_plan_and_dry_run_say_what_the_pre_release_would_learn(trial):
    _capped(trial)
    out = _invoke("plan", TRIAL, *trial["args"], *AUTO)
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert ("Pre-release: treated share and outcome sd: learned by a pre-release of 0.05·ζ²"
            in flat)
    assert "The plan below assumes the defaults for the facts it would learn." in flat
    assert "treated share 1/2, learned by a pre-release of 0.05·ζ² (here: the default)" in flat
    doc = json.loads(_invoke("plan", TRIAL, *trial["args"], *AUTO, "--json").output)
    assert doc["prerelease"]["learns"] == ["treated_share", "outcome_sd"]
    assert doc["zeta"] == 1.0 and doc["prerelease"]["zeta_release"] == pytest.approx(
        0.95 ** 0.5)
    stated = json.loads(_invoke("plan", TRIAL, *trial["args"], *AUTO, "--treated-share", "0.3",
                                "--json").output)
    assert stated["prerelease"]["learns"] == ["outcome_sd"]
    dry = _invoke("run", "--dry-run", TRIAL, *trial["args"], *AUTO)
    assert dry.exit_code == 0, dry.output
    flat = " ".join(dry.output.split())
    assert "would charge gaussian, zeta 1 " in flat
    assert "treated share and outcome sd: learned by a pre-release of 0.05·ζ²" in flat
    charge = json.loads(_invoke("run", "--dry-run", TRIAL, *trial["args"], *AUTO,
                                "--json").output.splitlines()[-1])["charge"]
    assert (charge["zeta"], charge["prerelease"]) == (pytest.approx(1.0), 0.05)
    assert _charges(trial["ledger"]) == 0


@pytest.mark.parametrize("asked, facts, match", [
    (["--set", "estimator.prerelease=0.05"], {}, "estimator='dim' is fixed and plans nothing"),
    ([*AUTO, "--set", "estimator.design=observational"], {},
     "auto can only take the model-agnostic ensemble"),
    (AUTO, {"treated_share": 0.5, "outcome_sd": 0.3},
     "treated_share and outcome_sd are both stated"),
    ([*AUTO, "--set", "estimator.treated_share=0.4"], {"outcome_sd": 0.3},
     "treated_share and outcome_sd are both stated"),
    ([*AUTO, "--set", "estimator.prerelease=0.7"], {}, "prerelease"),
])
def test_a_refused_pre_release_exits_2_with_nothing_charged(trial, asked, facts, match):
    _capped(trial, **facts)
    for command in (["run", "--dry-run"], ["run"], ["plan"]):
        out = _invoke(*command, TRIAL, *trial["args"], *asked)
        assert out.exit_code == 2, (command, out.output)
        assert match in " ".join(out.output.split())
    assert _charges(trial["ledger"]) == 0


def test_the_partitioned_path_refuses_a_pre_release(trial, tmp_path):
    _capped(trial)
    parts = tmp_path / "parts"
    parts.mkdir()
    out = _invoke("run", "--dry-run", TRIAL, *AUTO, "--set", "data.path=null", "--set",
                  f"data.partitions={parts}", "--set", "data.id_column=id")
    assert out.exit_code == 2, out.output
    assert "prerelease does not apply to data.partitions" in " ".join(out.output.split())
    assert _charges(trial["ledger"]) == 0
