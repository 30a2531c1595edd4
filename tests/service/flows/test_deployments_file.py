"""deploy/prefect.yaml is generated from conf/: the committed file must be what the generator prints
now, and every deployment's parameters must validate against its flow, or `dpcausal serve`
deploys stale or broken parameters."""

import importlib
import importlib.util
import typing
from pathlib import Path

import pydantic
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PREFECT_FILE = ROOT / "deploy" / "prefect.yaml"
DEPLOYMENTS = yaml.safe_load(PREFECT_FILE.read_text())["deployments"]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_prefect_yaml",
                                                  ROOT / "deploy" / "gen_prefect_yaml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flow(entrypoint: str):
    path, name = entrypoint.split(":")
    return getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)


def test_committed_prefect_yaml_is_what_the_generator_prints():
    assert PREFECT_FILE.read_text() == _generator().render(), (
        "deploy/prefect.yaml is stale: run "
        "`python deploy/gen_prefect_yaml.py > deploy/prefect.yaml`")


@pytest.mark.parametrize("deployment", DEPLOYMENTS,
                         ids=lambda d: f"{d['entrypoint'].split(':')[1]}/{d['name']}")
def test_every_deployment_parameter_validates_against_its_flow(deployment):
    flow = _flow(deployment["entrypoint"])
    hints = typing.get_type_hints(flow.fn)
    params = deployment["parameters"]
    assert set(params) <= set(hints) - {"return"}, f"unknown parameters {set(params) - set(hints)}"
    if "config" in params:  # the pydantic type Prefect validates the JSON dict into
        config = pydantic.TypeAdapter(hints["config"]).validate_python(params["config"])
        assert getattr(config, "kind", None) == params["config"].get("kind")
    if "settings" in params:  # the typed Run form of a release deployment
        settings = pydantic.TypeAdapter(hints["settings"]).validate_python(params["settings"])
        assert (ROOT / settings.config).is_file()


def test_deploy_readme_lists_every_deployment_in_one_table():
    """Issue 25 §6: a paragraph in the middle split the table in two when rendered."""
    lines = (ROOT / "deploy" / "README.md").read_text().splitlines()
    start = lines.index("| deployment | what it runs |")
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    table = "\n".join(lines[start:end])
    for name in ("release_from_config/demo", "release_from_config/nightly",
                 "release_from_config/from-config", "dp_meta_analysis_of_releases/releases",
                 "reproduce_experiments/default"):
        assert f"`{name}`" in table, f"{name} is not in the one deployments table"
