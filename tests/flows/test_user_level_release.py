"""The user_level_release flow (Clip-User): ledger charge K * eps, MLflow run, plan cache,
refusals before any noise, bad input before any charge, no unit id or raw value anywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conf.models import ConfigError
from dpcausal.ledger import BudgetExceededError, Ledger
from dpcausal.user_level import make_user_level_panel

BOUNDS = (0.0, 65.0)


@pytest.fixture(scope="module")
def ul_data(project):
    """600 units over 3 strata x 2 arms, some heavy users; unit ids are secret strings."""
    frame = make_user_level_panel(n_units=600, n_strata=3, cells_per_unit=2.5, seed=11)
    frame = frame.assign(unit_id=[f"secret-unit-{u:05d}" for u in frame["unit_id"]])
    path = project.root / "user_level.csv"
    frame.to_csv(path, index=False)
    return path, frame


@pytest.fixture
def make_ul(ul_data, request):
    from conf.user_level import load_user_level_config

    def make(*overrides: str, dataset: str | None = None, path=None):
        ds = dataset or "ul-" + request.node.name.replace("[", "-").replace("]", "")[:40]
        base = {"kind": "user_level", "name": "u", "data": {"path": str(path or ul_data[0])},
                "columns": {"unit": "unit_id", "cell": ["stratum", "arm"], "value": "y",
                            "order": "ts"},
                "mechanism": {"bounds": list(BOUNDS), "epsilon": 1.0, "occupancy_public": True},
                "ledger": {"dataset_id": ds, "epsilon": 30.0, "delta": 1e-5},
                "mlflow": {"experiment": f"test-{ds}"}}
        return load_user_level_config(None, list(overrides), base=base)

    return make


def run(config):
    from flows.user_level_release import run_user_level_from_config

    return run_user_level_from_config(config)


@pytest.fixture
def draws(monkeypatch):
    """Counts the library releases (the only place noise is drawn) in this process."""
    from dpcausal.user_level import UserLevelRelease

    calls = []
    real = UserLevelRelease.release
    monkeypatch.setattr(UserLevelRelease, "release",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    return calls


def _occupancy(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.crosstab(frame["unit_id"], [frame["stratum"], frame["arm"]])


def test_release_is_charged_k_eps_and_tracked_in_mlflow(make_ul, ul_data, draws, tmp_path):
    from mlflow import MlflowClient

    cfg = make_ul()
    out = run(cfg)
    p = out["release"]["privacy"]
    occ = _occupancy(ul_data[1])
    # G_1 and the cell count straight from the data (hand-computed occupancy)
    assert p["G1"] == int((occ > 0).sum(axis=1).max()) and p["n_cells"] == occ.shape[1]
    assert 1 <= p["K"] <= p["G1"] and p["epsilon_total"] == pytest.approx(p["K"] * 1.0)
    assert p["epsilon_parallel"] == p["G1"] and p["epsilon_naive"] == occ.shape[1]
    assert len(draws) == 1 and out["reused"] is False
    with Ledger() as led:
        spend = led.spent(cfg.ledger.dataset_id)
        [charge] = led.history(cfg.ledger.dataset_id).to_dict(orient="records")
    assert charge["epsilon"] == pytest.approx(p["K"]) and charge["status"] == "committed"
    # one pure epsilon-DP charge, reported by the ledger's PLD at delta=1e-5: at most K * eps
    assert spend.n_charges == 1 and p["K"] * (1 - 1e-4) <= spend.epsilon <= p["K"]

    client = MlflowClient()
    r = client.get_run(out["mlflow"]["run_id"])
    assert r.info.status == "FINISHED" and r.data.tags["kind"] == "user_level"
    m = r.data.metrics
    assert (m["K"], m["G_1"]) == (p["K"], p["G1"])
    assert m["epsilon_total"] == p["epsilon_total"] and m["eps_naive"] == p["epsilon_naive"]
    assert m["ate_pooled"] == out["release"]["ate_pooled"]["ate"]
    assert m["dataset_epsilon_spent"] == pytest.approx(spend.epsilon)
    assert {"cells.csv", "ate.csv", "release.json", "release.png"} <= {
        a.path for a in client.list_artifacts(r.info.run_id)}
    ate = pd.read_csv(client.download_artifacts(r.info.run_id, "ate.csv", str(tmp_path)))
    assert list(ate["stratum"]) == [0, 1, 2] and np.isfinite(ate["ate"]).all()


def test_plan_is_cached_on_data_and_mechanism(make_ul):
    from _flowtools import task_states

    cfg = make_ul()
    run(cfg)
    again = run(make_ul(dataset=cfg.ledger.dataset_id))
    other = run(make_ul("mechanism.epsilon=0.5", dataset=cfg.ledger.dataset_id))
    states = [set(task_states(o["release_id"].split("/")[0], "plan_user_level").values())
              for o in (again, other)]
    assert states == [{"Cached"}, {"Completed"}]
    assert again["release"]["cells"]["mean"] != other["release"]["cells"]["mean"]


def test_release_over_the_cap_is_refused_before_any_noise(make_ul, draws):
    from mlflow import MlflowClient

    first = run(make_ul())
    k = first["release"]["privacy"]["K"]
    cfg = make_ul(f"ledger.epsilon={k + 0.5}", dataset="ul-cap")
    run(cfg)
    assert len(draws) == 2
    with pytest.raises(BudgetExceededError, match=r"budget exhausted for dataset ul-cap"):
        run(cfg)
    assert len(draws) == 2  # no noise for the refused release
    with Ledger() as led:
        assert led.spent("ul-cap").n_charges == 1
    exp = MlflowClient().get_experiment_by_name(cfg.experiment_name)
    [refused] = MlflowClient().search_runs([exp.experiment_id], "tags.refused = 'true'")
    assert refused.info.status == "FAILED" and not refused.data.metrics


@pytest.mark.parametrize("override, data_fix, match", [
    ("columns.value=score", None, r"columns \['score'\] named in the config are not in the data"),
    (None, lambda f: f.assign(y=f.y.where(f.index != 5, 99.0)), r"inside the public bounds"),
    (None, lambda f: f.iloc[:0], r"no rows"),
    ("mechanism.occupancy_public=false", None, r"occupancy_public is not True"),
])
def test_bad_input_is_refused_before_any_charge(make_ul, ul_data, project, draws, override,
                                                data_fix, match, request):
    path = None
    if data_fix is not None:
        path = project.root / f"ul-bad-{request.node.callspec.id[-12:]}.csv"
        data_fix(ul_data[1]).to_csv(path, index=False)
    cfg = make_ul(*([override] if override else []), path=path)
    with pytest.raises(ValueError, match=match):
        run(cfg)
    assert draws == []
    with Ledger(create=True) as led:
        assert not led.has_dataset(cfg.ledger.dataset_id) or \
            led.spent(cfg.ledger.dataset_id).n_charges == 0


@pytest.mark.parametrize("override, match", [
    ("mechanism.epsilon=0", "mechanism.epsilon: Input should be greater than 0"),
    ("columns.value=unit_id", "columns must name different columns"),
    ("columns.arm=site", r"columns.arm='site' must be one of columns.cell"),
])
def test_bad_config_is_a_config_error(make_ul, override, match):
    with pytest.raises(ConfigError, match=match):
        make_ul(override)


def test_release_mode_leaks_no_unit_id_or_raw_value(make_ul, ul_data, project, tmp_path):
    from _flowtools import Scanner, flow_logs

    frame = ul_data[1]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # its own store: the scan sees this release only
    out = run(make_ul(f"mlflow.tracking_uri={uri}", dataset="ul-leak"))
    by_cell = frame.groupby(["stratum", "arm"])["y"]
    secrets = {f"y_{i}": frame.y.iloc[i] for i in range(5)}
    secrets |= {f"raw_mean_{k}": v for k, v in by_cell.mean().items()}
    secrets |= {f"raw_var_{k}": v for k, v in by_cell.var(ddof=0).items()}
    scanner = Scanner(secrets)
    hits = scanner.mlflow_hits(uri) + scanner.tree_hits(project.results)
    hits += [h for msg in flow_logs(out["release_id"].split("/")[0])
             for h in scanner.bytes_hits(msg.encode(), "flow log")]
    assert hits == []
    # no unit id in MLflow's store (params, tags, metrics, artifacts) or Prefect's results
    stores = [Path(uri.removeprefix("sqlite:///")), *_files(project.root / "mlartifacts"),
              *_files(project.results)]
    assert not [p for p in stores if b"secret-unit-" in p.read_bytes()]
    # negative controls: the scans find the released (public) values and a planted unit id
    assert Scanner({"pooled": out["release"]["ate_pooled"]["ate"]}).mlflow_hits(uri)
    planted = project.root / "mlartifacts" / "planted.txt"
    planted.write_text(frame.unit_id.iloc[0])
    try:
        assert any(b"secret-unit-" in p.read_bytes() for p in _files(project.root / "mlartifacts"))
    finally:
        planted.unlink()


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_cli_runs_the_user_level_config_and_demo(ul_data, invoke):
    import json

    import conf

    demo_yaml = Path(conf.__file__).parent / "release" / "user_level_demo.yaml"
    out = invoke("run", str(demo_yaml), "--set", f"data.path={ul_data[0]}",
                 "--set", "ledger.dataset_id=ul-cli")
    assert out.exit_code == 0, out.output
    assert "privacy loss per unit" in out.stdout and "without Clip-User" in out.stdout
    demo = invoke("demo", "--kind", "user_level", "--json")
    assert demo.exit_code == 0, demo.output
    assert json.loads(demo.stdout)["release"]["privacy"]["clip"] == "clip_user"
