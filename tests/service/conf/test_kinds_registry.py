"""Every list of release kinds is read from ``conf.kinds.KINDS`` (issue 27 §5): a kind added to the
registry shows up in the CLI's ``--kind`` choices, the deployments and the flow's steps, and no
module outside the registry spells two kinds by hand."""

import importlib.util
import re
from dataclasses import replace
from pathlib import Path

import yaml
from click.testing import CliRunner

from conf.kinds import KINDS

ROOT = Path(__file__).resolve().parents[3]


def _fake_kind(monkeypatch):
    """A kind ``fake_kind`` registered like any other (the core's config and mechanism)."""
    monkeypatch.setitem(KINDS, "fake_kind", replace(KINDS["ate"], name="fake_kind"))
    return "fake_kind"


def test_a_registered_kind_is_a_choice_of_the_demo_command(monkeypatch):
    from cli.run_cmd import demo

    name = _fake_kind(monkeypatch)
    out = CliRunner().invoke(demo, ["--help"])
    assert out.exit_code == 0 and name in out.output
    bad = CliRunner().invoke(demo, ["--kind", "no_such_kind"])
    assert bad.exit_code == 2 and name in bad.output  # click lists the valid choices


def test_a_registered_kind_is_deployed(monkeypatch):
    """No deployment per kind takes a whole config (issue 32 item 6): the from-config
    deployment releases any kind of the registry from one of the registered configs, and each
    kind's example config is one its Run form offers."""
    from conf.deployment import REGISTERED_CONFIGS

    name = _fake_kind(monkeypatch)
    spec = importlib.util.spec_from_file_location("gen_prefect_yaml",
                                                  ROOT / "deploy" / "gen_prefect_yaml.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    deployments = yaml.safe_load(generator.render())["deployments"]
    [any_kind] = [d for d in deployments if d["name"] == "from-config"]
    assert any_kind["entrypoint"] == "flows/deployed.py:release_from_config"
    assert name in any_kind["description"]
    assert any_kind["parameters"]["settings"]["config"] in REGISTERED_CONFIGS
    assert {kind.example for kind in KINDS.values()} <= set(REGISTERED_CONFIGS)
    assert not any("config" in d["parameters"] for d in deployments
                   if d["entrypoint"].startswith("flows/release.py"))


def test_the_flow_steps_follow_the_mechanism_not_the_kind_name():
    from dpcausal import PrivateATE
    from dpcausal.cluster_dp import ClusterDP, ResponseSpace
    from flows.release import _core_steps, extra_steps

    class MyATE(PrivateATE):  # a new kind's mechanism that extends the core
        pass

    assert extra_steps(MyATE()) is _core_steps
    assert extra_steps(ClusterDP(ResponseSpace([0.0, 1.0]), epsilon=1.0)) is None


def test_no_module_lists_the_kinds_by_hand():
    names = "|".join(map(re.escape, KINDS))
    quoted = re.compile(rf"""["']({names})["']""")
    offenders = {}
    for folder in ("cli", "conf", "deploy", "demo", "flows", "tasks", "store", "plots"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "conf" / "kinds.py":
                continue
            found = set(quoted.findall(path.read_text()))
            if len(found) > 1:
                offenders[str(path.relative_to(ROOT))] = sorted(found)
    assert offenders == {}, "read the kinds from conf.kinds.KINDS"
