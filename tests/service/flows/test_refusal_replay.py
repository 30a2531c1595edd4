"""The rule of issue 26: before the reservation nothing that depends on data values changes what
anyone sees; after it a release completes.

Every refusal path of every kind (core, Cluster-DP, user-level, federated, the private bounds
check, partitioned) is replayed on a data set D and on a neighbour D' that differs in one record,
chosen as an attacker would (a value outside the public bounds or response space, a missing
value, an unparseable cell, a malformed row). Both go through ``dpcausal`` in-process (CLI: exit
code and printed message) and through the ``dp_release`` flow (Prefect state and message, the
``refused-<dataset>`` artifact), under the same dataset id and path; the ledger must hold the same
state after each. On today's main the user-level, Cluster-DP and federated neighbours were
refused for their values before the budget was consulted (exit 2 against 3), and the core's
neighbours for their text ("Y must be numeric", a parser error naming the line).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from _flowtools import give_cap
from click.testing import CliRunner

from conf.deployment import ReleaseParameters
from conf.kinds import load_any

CAPS = {"ate": {"zeta": 1.0}, "cluster_dp": {"epsilon": 1.0, "delta": 1e-5},
        "federated": {"epsilon": 0.5, "delta": 1e-5}, "user_level": {"epsilon": 0.5,
                                                                      "delta": 1e-5}}
ENOUGH = {"ate": {"zeta": 50.0}, "cluster_dp": {"epsilon": 40.0, "delta": 1e-5},
          "federated": {"epsilon": 40.0, "delta": 1e-5}, "user_level": {"epsilon": 40.0,
                                                                         "delta": 1e-5}}
UNIT = {"ate": "row", "cluster_dp": "label", "federated": "client", "user_level": "user"}


# ------------------------------------------------------------------ data: D and its neighbour
def _core_frame(seed: int = 3) -> pd.DataFrame:
    from dpcausal.datasets import make_experiment_a

    X, A, Y, _ = make_experiment_a(800, random_state=seed)
    return pd.DataFrame({"X1": X[:, 0], "A": A, "Y": Y})


def _frame(kind: str, seed: int = 3) -> pd.DataFrame:
    if kind == "cluster_dp":
        from demo.cluster_dp import demo_frame

        return demo_frame(seed=seed, sizes=(105, 155, 205))
    if kind == "federated":
        from demo.federated import demo_frame

        return demo_frame(seed=seed, n=600)
    if kind == "user_level":
        from dpcausal.user_level import make_user_level_panel

        return make_user_level_panel(n_units=400, n_strata=3, cells_per_unit=2.5, seed=seed)
    return _core_frame(seed)


def _set_cell(text: str, column: str, value: str, row: int = 5) -> str:
    """The CSV ``text`` with one cell of data row ``row`` replaced by ``value`` (raw text)."""
    lines = text.splitlines()
    names = lines[0].split(",")
    fields = lines[row + 1].split(",")
    fields[names.index(column)] = value
    lines[row + 1] = ",".join(fields)
    return "\n".join(lines) + "\n"


def _extra_field(text: str, row: int = 5) -> str:
    lines = text.splitlines()
    lines[row + 1] += ",0.5"
    return "\n".join(lines) + "\n"


OUTCOME = {"ate": "Y", "cluster_dp": "outcome", "federated": "outcome", "user_level": "y"}

# kind -> {neighbour name: how D' differs from D in one record}
NEIGHBOURS = {
    "ate": {"abc": lambda t: _set_cell(t, "Y", "abc"), "malformed": _extra_field,
            "huge": lambda t: _set_cell(t, "Y", "1e300"), "missing": lambda t: _set_cell(
                t, "X1", "")},
    "cluster_dp": {"out_of_space": lambda t: _set_cell(t, "outcome", "99"),
                   "between": lambda t: _set_cell(t, "outcome", "0.5"),
                   "missing": lambda t: _set_cell(t, "outcome", "")},
    "user_level": {"above_bounds": lambda t: _set_cell(t, "y", "45.623e3"),
                   "missing": lambda t: _set_cell(t, "y", "nan"),
                   "abc": lambda t: _set_cell(t, "y", "abc")},
    "federated": {"nan": lambda t: _set_cell(t, "outcome", "nan"),
                  "abc": lambda t: _set_cell(t, "outcome", "abc"),
                  "inf": lambda t: _set_cell(t, "outcome", "inf")},
}
CASES = [(kind, name) for kind, names in NEIGHBOURS.items() for name in names]


def _base(kind: str, path: str, dataset: str) -> dict:
    common = {"name": "replay", "data": {"path": path}}
    if kind == "ate":
        return {**common, "columns": {"treatment": "A", "outcome": "Y", "covariates": ["X1"]},
                "estimator": {"n_folds": 10, "outcome_bounds": [-1.0, 1.0]},
                "ledger": {"dataset_id": dataset}}
    eps = {"ledger": {"dataset_id": dataset, "epsilon": 40.0, "delta": 1e-5}}
    if kind == "cluster_dp":
        return {"kind": kind, **common, **eps,
                "columns": {"cluster": "cluster", "treatment": "treatment",
                            "outcome": "outcome"},
                "mechanism": {"values": list(range(-5, 7)), "epsilon": 3.0}}
    if kind == "federated":
        return {"kind": kind, **common, **eps,
                "columns": {"treatment": "treatment", "outcome": "outcome"},
                "mechanism": {"R": 1.0, "epsilon": 1.0, "delta": 1e-5, "m1": 64, "m2": 64},
                "chunk_size": 256}
    return {"kind": kind, **common, **eps,
            "columns": {"unit": "unit_id", "cell": ["stratum", "arm"], "value": "y",
                        "order": "ts"},
            "mechanism": {"bounds": [0.0, 65.0], "epsilon": 1.0, "occupancy_public": True}}


# ------------------------------------------------------------------ what anyone sees
def _ledger(dataset: str):
    from dpcausal.ledger import Ledger

    with Ledger(create=True) as led:
        if not led.has_dataset(dataset):
            return None
        h = led.history(dataset)
        return (h["status"].tolist(), led.spent(dataset).n_charges)


def _cli(*args: str) -> tuple[int, str]:
    from cli.main import main

    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _flow(config) -> tuple[str, str, list[str]]:
    """(state name, state message, the run's markdown artifacts) of one dp_release run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from flows.release import dp_release

    state = dp_release(config=config, return_state=True)
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])))
    return state.name, state.message or "", sorted(f"{a.key}: {a.data}" for a in arts
                                                   if a.type == "markdown")


@pytest.fixture
def seen(project, monkeypatch, tmp_path, curator_registers):
    """``seen(kind, base, text_or_dir)``: write the data, the curator registers them (``base``,
    or ``curator``: the config the curator registered, where a run asks something else), then
    everything a refusal shows: the CLI's exit code and message, the flow's state, message and
    artifacts, the ledger before and after (which must not change). The CLI must refuse before
    it reaches the flow."""
    import flows.release

    monkeypatch.setenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    monkeypatch.setenv("MLFLOW_LOGGING_LEVEL", "WARNING")

    def reached(config):
        raise AssertionError("the CLI reached the release flow: no refusal before the charge")

    def see(base: dict, write, *cli_args: str, flow: bool = True,
            curator: dict | None = None) -> dict:
        write()
        curator_registers(load_any(None, base=curator or base))
        cfg_path = tmp_path / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(base))
        dataset = base["ledger"]["dataset_id"]
        before = _ledger(dataset)
        with monkeypatch.context() as m:
            m.setattr(flows.release, "run_release", reached)
            code, message = _cli(*(cli_args or ("run", str(cfg_path), "--no-progress")))
        out = {"exit": code, "message": message, "ledger": _ledger(dataset)}
        if flow:
            out["flow"] = _flow(load_any(None, base=base))
            out["ledger after flow"] = _ledger(dataset)
        assert out["ledger"] == before and out.get("ledger after flow", before) == before
        return out

    return see


def _replay(seen, base: dict, path: Path, d: str, neighbours: list[str], *cli_args: str,
            flow: bool = True, curator: dict | None = None) -> dict:
    """The refusal of D and of each neighbour D' (same path, same dataset id): the same."""
    first = seen(base, lambda: path.write_text(d), *cli_args, flow=flow, curator=curator)
    for d_prime in neighbours:
        assert d_prime != d
        assert seen(base, lambda text=d_prime: path.write_text(text), *cli_args,
                    flow=flow, curator=curator) == first
    return first


# ------------------------------------------------------------------ the replays
@pytest.mark.parametrize("kind", list(NEIGHBOURS))
@pytest.mark.parametrize("path_", ["no cap", "budget exhausted", "bad input"])
def test_every_refusal_is_the_same_on_a_neighbour(seen, tmp_path, kind, path_):
    dataset = f"replay-{kind}-{path_.replace(' ', '-')}"
    data = tmp_path / "data.csv"
    # each dataset id its own data: the curator's registration binds them to one id
    d = _frame(kind, {"no cap": 3, "budget exhausted": 5, "bad input": 7}[path_]).to_csv(
        index=False)
    base = curator = _base(kind, str(data), dataset)
    if path_ == "budget exhausted":
        give_cap(dataset, **CAPS[kind], unit=UNIT[kind])
    role = "value" if kind == "user_level" else "treatment"
    if path_ == "bad input":  # the run asks about a column the registration does not have
        give_cap(dataset, **ENOUGH[kind], unit=UNIT[kind])
        base = {**curator, "columns": {**curator["columns"], role: "not_a_column"}}
    out = _replay(seen, base, data, d, [change(d) for change in NEIGHBOURS[kind].values()],
                  curator=curator)
    expected = {"no cap": (3, "has no privacy budget"), "budget exhausted": (3, "exhausted"),
                "bad input": (2, f"columns.{role} differs from the registration")}[path_]
    assert out["exit"] == expected[0] and expected[1] in out["message"]
    assert out["flow"][0] == "Failed" and expected[1] in out["flow"][1]
    assert out["flow"][2] and all("Nothing was charged" in a for a in out["flow"][2])


@pytest.mark.parametrize("path_", ["no cap", "budget exhausted", "bad input"])
def test_a_partitioned_source_refuses_a_neighbour_alike(seen, tmp_path, path_):
    """The partitioned path reads footers only before the charge: a record whose value differs
    (here an outcome far outside the bounds) changes nothing before it."""
    from dpcausal.ate.partitioned import write_parquet_partitions

    dataset = f"replay-partitioned-{path_.replace(' ', '-')}"
    clean, source = tmp_path / "clean", tmp_path / "parts"
    files = write_parquet_partitions(clean, n=600, d=1, n_partitions=3, seed=2)
    base = {"name": "replay", "data": {"partitions": str(source), "id_column": "id"},
            "columns": {"treatment": "A", "outcome": "Y"},
            "estimator": {"n_folds": 6, "outcome_bounds": [-1.0, 1.0]},
            "ledger": {"dataset_id": dataset}}
    curator = base
    if path_ == "budget exhausted":
        give_cap(dataset, zeta=1.0)
    if path_ == "bad input":
        give_cap(dataset, zeta=50.0)
        base = {**base, "columns": {**base["columns"], "treatment": "not_a_column"}}

    def write(changed: bool):
        def go():
            shutil.rmtree(source, ignore_errors=True)
            shutil.copytree(clean, source)
            if changed:
                part = pd.read_parquet(files[1])
                part.loc[3, "Y"] = 1e300
                part.to_parquet(source / files[1].name, index=False)
        return go

    first = seen(base, write(False), curator=curator)
    assert seen(base, write(True), curator=curator) == first
    assert first["exit"] == (2 if path_ == "bad input" else 3)
    assert first["flow"][0] == "Failed"


@pytest.mark.parametrize("path_", ["budget exhausted", "bad input"])
def test_a_pre_release_is_refused_alike_on_a_neighbour(seen, tmp_path, path_):
    """A release with a pre-release of the planning facts (``estimator.prerelease``, issue 39
    item 5) is checked and charged from its registration before any value is read: its
    refusals are the same on D and on every neighbour D'."""
    dataset = f"replay-prerelease-{path_.replace(' ', '-')}"
    data = tmp_path / "data.csv"
    d = _frame("ate", {"budget exhausted": 21, "bad input": 23}[path_]).to_csv(index=False)
    base = _base("ate", str(data), dataset)
    base = curator = {**base, "estimator": {**base["estimator"], "design": "randomized",
                                            "prerelease": 0.1}}
    if path_ == "budget exhausted":
        give_cap(dataset, zeta=1.0)     # the release asks zeta 1.5, pre-release included
    else:
        give_cap(dataset, zeta=50.0)
        base = {**curator, "columns": {**curator["columns"], "treatment": "not_a_column"}}
    out = _replay(seen, base, data, d, [change(d) for change in NEIGHBOURS["ate"].values()],
                  curator=curator)
    assert out["exit"] == (3 if path_ == "budget exhausted" else 2)
    assert out["flow"][0] == "Failed"


# ------------------------------------------------------------------ after the reservation
@pytest.mark.parametrize("kind, neighbour", [c for c in CASES if c[0] != "ate"])
def test_after_the_charge_the_neighbour_releases(project, tmp_path, kind, neighbour,
                                                 curator_registers):
    """The values that were refused before the charge now take their public rule (clamped,
    mapped to Y, a missing one to the public midpoint) and the release completes, charged once
    in its unit."""
    from flows.release import run_release

    dataset = f"replay-ok-{kind}-{neighbour}"
    data = tmp_path / "data.csv"
    seed = 10 + list(NEIGHBOURS[kind]).index(neighbour)  # own data: a fingerprint binds an id
    data.write_text(NEIGHBOURS[kind][neighbour](_frame(kind, seed).to_csv(index=False)))
    give_cap(dataset, **ENOUGH[kind], unit=UNIT[kind])
    config = load_any(None, base=_base(kind, str(data), dataset))
    curator_registers(config)
    out = run_release(config)
    assert np.isfinite(out["release"]["ate"]) and out["release"]["privacy"]["unit"] == UNIT[kind]
    assert _ledger(dataset) == (["committed"], 1)
    json.dumps(out["release"])  # a plain, published result


@pytest.mark.parametrize("neighbour", ["abc", "huge", "missing"])
def test_after_the_charge_a_pre_released_neighbour_releases(project, tmp_path, neighbour,
                                                            curator_registers):
    """With a pre-release (issue 39 item 5) the neighbours' values take the public rules after
    the charge (unusable outcomes add nothing to the arms' counts, outcomes are clipped), the
    learned facts stay valid planning facts, and the release completes, charged once."""
    from flows.release import run_release

    dataset = f"replay-ok-prerelease-{neighbour}"
    data = tmp_path / "data.csv"
    seed = 30 + list(NEIGHBOURS["ate"]).index(neighbour)
    data.write_text(NEIGHBOURS["ate"][neighbour](_frame("ate", seed).to_csv(index=False)))
    give_cap(dataset, zeta=50.0)
    base = _base("ate", str(data), dataset)
    config = load_any(None, base={**base, "estimator": {
        **base["estimator"], "design": "randomized", "prerelease": 0.2}})
    curator_registers(config)
    out = run_release(config)
    rel = out["release"]
    assert np.isfinite(rel["ate"]) and 0 < rel["params"]["learned_treated_share"] < 1
    assert rel["privacy"]["zeta"] == pytest.approx(1.5, rel=1e-12)
    assert _ledger(dataset) == (["committed"], 1)


def test_probing_the_bounds_through_exit_codes_and_deployments_learns_nothing(
        project, tmp_path, monkeypatch, curator_registers):
    """The audit's attack: under a dataset id with no cap, `--set mechanism.bounds=[0, b]` gave
    exit 2 ("values outside the bounds") for b below one person's maximum and exit 3 above it;
    26 probes recovered that maximum (45.623). Every probe now gets the same answer, through the
    CLI and through a deployment run with overrides (``release_from_config``)."""
    import flows.release
    from flows.deployed import release_from_config

    monkeypatch.setenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    monkeypatch.setenv("MLFLOW_LOGGING_LEVEL", "WARNING")
    data = tmp_path / "data.csv"
    data.write_text(NEIGHBOURS["user_level"]["above_bounds"](
        _frame("user_level").to_csv(index=False)).replace("45.623e3", "45.623"))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(_base("user_level", str(data), "replay-bounds-probe")))
    import conf.deployment

    monkeypatch.setattr(conf.deployment, "REGISTERED_CONFIGS",    # the curator registers it
                        (*conf.deployment.REGISTERED_CONFIGS, str(config)))
    curator_registers(config)
    answers = set()
    for b in (40.0, 45.0, 46.0, 65.0):
        bounds = f"mechanism.bounds=[0, {b}]"
        with monkeypatch.context() as m:
            m.setattr(flows.release, "run_release", None)  # the CLI must refuse before the flow
            code, message = _cli("run", str(config), "--set", bounds, "--no-progress")
        state = release_from_config(
            settings=ReleaseParameters(config=str(config),
                                       overrides={"mechanism.bounds": [0, b]}),
            return_state=True)
        answers.add((code, message, state.name, state.message))
    [(code, message, name, _)] = answers
    assert code == 3 and "has no privacy budget" in message and name == "Failed"
    assert _ledger("replay-bounds-probe") is None
