"""A release config with a partitioned source (``data.partitions``, issue 19 §3) through
``dpcausal run`` and :func:`flows.release.run_release`: the dp_release contract (result, MLflow
run, Prefect artifact, ledger charge with its run URL, exit codes) on the Dask path, and the
evaluation equal to the in-memory estimator on the same rows and folds."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np
import pandas as pd
import pytest
import yaml
from _flowtools import artifacts_of, give_cap

N, D, PARTS, K = 3000, 2, 3, 12
ESTIMATOR = {"estimator": "aipw", "n_folds": K, "outcome_bounds": [-1.0, 1.0], "zeta": 1.0,
             "propensity_clip": 0.1, "ci_share": 0.1}


@pytest.fixture
def parts(tmp_path_factory):
    """Each test's own partitions: the ledger binds a released source to its dataset id (issue
    26 §3), so another id, or evaluation mode, is refused on the same folder."""
    from dpcausal.ate.partitioned import write_parquet_partitions

    path = tmp_path_factory.mktemp("run-partitions")
    write_parquet_partitions(path, n=N, d=D, n_partitions=PARTS, seed=21)
    return path


def _raw(parts, dataset: str, **top):
    return {"name": "parts", "data": {"partitions": str(parts), "id_column": "id"},
            "columns": {"treatment": "A", "outcome": "Y"},
            "estimator": ESTIMATOR, "ledger": {"dataset_id": dataset}, **top}


def test_dpcausal_run_releases_partitions_with_the_release_contract(parts, tmp_path, invoke,
                                                                    curator_registers):
    from mlflow import MlflowClient

    from dpcausal.ledger import Ledger

    dataset = "parts-cli"
    give_cap(dataset, zeta=1.5)
    path = tmp_path / "parts.yaml"
    path.write_text(yaml.safe_dump(_raw(parts, dataset)))
    assert curator_registers(path).n == N   # the curator's registration (issue 32 §1)
    res = invoke("run", str(path), "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"kind", "release", "text", "release_id", "reused", "spent", "mlflow",
                        "experiment", "artifact"}
    rel = out["release"]
    assert (out["kind"], out["reused"], out["artifact"]) == ("ate", False, "release-parts-cli")
    assert rel["n"] == N and rel["n_folds"] == K and rel["nonprivate"] is None
    assert rel["params"]["folds"] == "keyed_hash(id)" and rel["params"]["partitions"] == PARTS
    assert rel["privacy"]["zeta"] == 1.0 and out["spent"]["n_charges"] == 1

    run = MlflowClient().get_run(out["mlflow"]["run_id"])
    flow_run_id = out["release_id"].split("/")[0]
    assert run.data.tags["prefect.flow_run_url"].endswith(flow_run_id)
    assert run.data.params["data.partitions"] == str(parts)
    m = run.data.metrics
    assert m["ate"] == rel["ate"] and (m["ci_low"], m["ci_high"]) == tuple(rel["ci"])
    assert m["dataset_zeta_spent"] == 1.0
    assert not any(k.startswith("nonprivate") for k in m)
    [inp] = run.inputs.dataset_inputs
    assert inp.dataset.source.startswith(f"partitions {parts}")
    with Ledger() as led:
        [charge] = led.history(dataset).to_dict("records")
    assert charge["status"] == "committed" and charge["run_url"] == out["mlflow"]["url"]

    # zeta-GDP composes in quadrature: sqrt(1^2 + 1.2^2) > 1.5, the cap
    again = invoke("run", str(path), "--no-progress", "--set", "estimator.zeta=1.2")
    assert again.exit_code == 3, again.output
    assert "budget exhausted" in again.stderr


def test_a_registered_partitioned_run_with_the_planners_K_releases(parts, tmp_path, invoke,
                                                                   curator_registers):
    """The planner's K (``n_folds`` left to it) on a registered partitioned source: ``run``'s
    pre-charge warnings come from the registered n and d (the footers are read only after the
    charge), and the release completes (it failed with an AttributeError on 60ffb67)."""
    dataset = "parts-auto"
    give_cap(dataset, zeta=1.5)
    estimator = {k: v for k, v in ESTIMATOR.items() if k != "n_folds"}
    path = tmp_path / "parts.yaml"
    path.write_text(yaml.safe_dump({**_raw(parts, dataset), "estimator": estimator}))
    assert curator_registers(path).n == N
    res = invoke("run", str(path), "--no-progress", "--json")
    assert res.exit_code == 0, res.output
    rel = json.loads(res.stdout)["release"]
    assert rel["n"] == N and rel["n_folds"] > 1 and rel["params"]["partitions"] == PARTS


def test_bad_partitioned_input_exits_2_before_any_charge(parts, tmp_path, invoke,
                                                         curator_registers):
    """Roles the partitions do not hold are refused where the footers are first read, the
    curator's registration (exit 2, nothing registered); a run that asks for another role than
    the registered one is refused before anything is read (exit 2, nothing charged)."""
    from dpcausal.ledger import Ledger

    dataset = "parts-bad"
    give_cap(dataset, zeta=1.5)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_raw(parts, dataset, columns={"treatment": "T",
                                                                "outcome": "Y"})))
    res = invoke("ledger", "register", dataset, str(bad))
    assert res.exit_code == 2, res.output
    assert "columns ['T'] are not in the partitions" in res.stderr
    with Ledger() as led:
        assert led.registration(dataset) is None

    path = tmp_path / "parts.yaml"
    path.write_text(yaml.safe_dump(_raw(parts, dataset)))
    assert curator_registers(path).n == N
    res = invoke("run", str(path), "--no-progress", "--set", "columns.treatment=T")
    assert res.exit_code == 2, res.output
    assert "columns.treatment differs from the registration" in res.stderr
    with Ledger() as led:
        assert led.history(dataset).empty


def test_evaluation_equals_the_in_memory_estimator_on_the_same_folds(parts, project,
                                                                      curator_registers):
    from conf.models import load_config
    from dpcausal import PrivateATE
    from dpcausal.ate.partitioned import allocate_folds, assign_folds
    from flows.release import run_release
    from store import fold_key

    config = load_config(None, ["mode=evaluation", "noise_seed=3", "data.fold_key=curator"],
                         base=_raw(parts, "parts-eval"))
    assert curator_registers(config).evaluation_allowed   # synthetic partitions
    out = run_release(config)
    assert set(out) >= {"release", "text", "mlflow", "artifact"} and out["spent"] is None
    frames = [pd.read_parquet(f) for f in sorted(parts.glob("*.parquet"))]
    folds = allocate_folds([len(f) for f in frames], K)
    fold_ids = np.concatenate([assign_folds(f["id"].to_numpy(), fold_key(), r)
                               for f, r in zip(frames, folds, strict=True)])
    whole = pd.concat(frames, ignore_index=True)
    ref = PrivateATE(**{**ESTIMATOR, "outcome_bounds": (-1.0, 1.0)}, folds=fold_ids,
                     noise_seed=3).fit(whole[["x1", "x2"]].to_numpy(), whole["A"].to_numpy(),
                                       whole["Y"].to_numpy(), evaluation=True)
    rel = out["release"]
    assert rel["params"]["folds"] == "keyed_hash(id)" and rel["evaluation"] is True
    assert rel["nonprivate"]["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9)
    assert rel["nonprivate"]["variance"] == pytest.approx(ref.nonprivate["variance"], rel=1e-9)
    assert rel["ate"] == pytest.approx(ref.ate, rel=1e-9)  # the same seeded noise on top


def test_partitioned_release_mode_leaks_no_nonprivate_value(parts, project, tmp_path,
                                                            monkeypatch, curator_registers):
    """The leak scan of tests/service/flows/test_leak_scan.py on the partitioned path: tau_hat,
    V_hat and every partition's sum of scores appear in no MLflow record, Prefect result,
    artifact or log (dp_release's and its subflow's), ledger or result."""
    from _flowtools import Scanner, flow_logs
    from prefect.client.orchestration import get_client

    import dpcausal.ate.estimator as estimator_module
    import flows.partitioned_release as partitioned_flow
    from conf.models import load_config
    from flows.release import run_release

    seen, sums = [], []
    real_draw, real_combine = estimator_module.draw_release, partitioned_flow.combine

    def spy_draw(tau_hat, v_hat, *args, **kwargs):
        seen.append((tau_hat, v_hat))
        return real_draw(tau_hat, v_hat, *args, **kwargs)

    def spy_combine(per_partition):  # the partitions' sums, as they reach the flow
        sums.extend(per_partition)
        return real_combine(per_partition)

    monkeypatch.setattr(estimator_module, "draw_release", spy_draw)
    monkeypatch.setattr(partitioned_flow, "combine", spy_combine)
    dataset, uri = "parts-leak", f"sqlite:///{tmp_path / 'mlflow.db'}"
    give_cap(dataset, zeta=1.5)
    config = load_config(None, [f"mlflow.tracking_uri={uri}"], base=_raw(parts, dataset))
    assert curator_registers(config).n == N
    out = run_release(config)
    [(tau_hat, v_hat)] = seen
    assert len(sums) == PARTS
    secrets = {"tau_hat": tau_hat, "V_hat": v_hat,
               **{f"sum_gamma_{i}": s.s1 for i, s in enumerate(sums)},
               **{f"sum_gamma_sq_{i}": s.s2 for i, s in enumerate(sums)}}
    scanner = Scanner(secrets)
    assert Scanner({"ate": out["release"]["ate"]}).mlflow_hits(uri)  # the scanner sees values

    parent = out["release_id"].split("/")[0]
    with get_client(sync_client=True) as client:
        runs = [r for r in client.read_flow_runs()
                if str(r.id) == parent or r.parent_task_run_id is not None]
        run_ids = {str(r.id) for r in runs}
        artifacts = artifacts_of(run_ids)
    assert len(run_ids) >= 2 and artifacts  # dp_release and its partitioned subflow
    hits = scanner.mlflow_hits(uri) + scanner.file_hits(tmp_path / "mlflow.db")
    # the artifact folders of this store's experiments (other tests' figures share the parent, and
    # their thousands of 6-digit numbers would sooner or later match a random partition sum)
    from mlflow import MlflowClient

    folders = [Path(url2pathname(urlparse(e.artifact_location).path))
               for e in MlflowClient(tracking_uri=uri).search_experiments()
               if e.name != "Default"]  # MLflow's own, unused: ./mlruns/0
    assert folders and all(f.is_relative_to(project.root / "mlartifacts") for f in folders)
    # the control is the released se: a clamped ATE is a round bound such as 2.0, too short for
    # the scanner's text match
    assert any(Scanner({"se": out["release"]["se"]}).tree_hits(f) for f in folders)
    hits += [h for f in folders for h in scanner.tree_hits(f)]
    if project.results.exists():
        hits += scanner.tree_hits(project.results)
    hits += [h for r in run_ids for m in flow_logs(r)
             for h in scanner.bytes_hits(m.encode(), "flow-run log")]
    hits += [h for a in artifacts for h in scanner.bytes_hits(str(a.data).encode(), a.key)]
    hits += scanner.bytes_hits(json.dumps(out, default=str).encode(), "flow result")
    hits += scanner.file_hits(project.root / "ledger.db")
    assert hits == []
