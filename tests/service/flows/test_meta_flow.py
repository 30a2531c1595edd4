"""dp_meta_analysis and ``dpcausal meta``: pools released values only, records the pooled run
with its forest plot, states the privacy position; bad sources refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from _flowtools import artifacts_of

from conf.meta import load_meta_config
from flows.meta import dp_meta_analysis
from flows.release import run_release

DATASET = "meta-studies"


@pytest.fixture(scope="module")
def releases(project):
    """Three private core releases of three datasets (independent studies: releases of one
    dataset are not) and one evaluation run of other data (whose non-private and seeded values
    must never enter the pool), each dataset registered by its curator first (issue 32 §1; the
    evaluation data as synthetic, which allows evaluation mode on them)."""
    from _flowtools import give_cap, write_exp_a

    from conf.models import load_config
    from tasks.registration import register

    def config(path, dataset, *overrides):
        base = {"name": "m", "data": {"path": str(path)},
                "columns": {"treatment": "A", "outcome": "Y"},
                "estimator": {"estimator": "aipw", "n_folds": 20, "fold_seed": 3,
                              "outcome_bounds": [-1.0, 1.0]},
                "folds_per_task": 10, "ledger": {"dataset_id": dataset, "budget": 50.0},
                "mlflow": {"experiment": "test-meta-sources"}}
        return load_config(None, list(overrides), base=base)

    def registered(cfg, **origin):
        register(cfg, **origin)
        return cfg

    private = []
    for i, e in enumerate(("aipw", "aipw", "ipw")):  # G releases no CI to pool (issue 26 §6)
        give_cap(f"{DATASET}-{i}")
        data = write_exp_a(project.root / f"meta-{i}.csv", 31 + i)
        private.append(run_release(registered(
            config(data, f"{DATASET}-{i}", f"estimator.estimator={e}"))))
    other = write_exp_a(project.root / "meta-eval.csv", 39)
    evaluation = run_release(registered(
        config(other, f"{DATASET}-eval", "mode=evaluation", "noise_seed=1", "estimator.zeta=50"),
        origin="synthetic"))
    return private, evaluation


def _by_hand(outs):
    ate = np.array([o["release"]["ate"] for o in outs])
    var = np.array([o["release"]["variance"] for o in outs])
    w = (1 / var) / np.sum(1 / var)
    return float(w @ ate), float(w**2 @ var)


def test_pools_named_runs_with_inverse_variance_weights(releases, tmp_path):
    from mlflow import MlflowClient

    private, _ = releases
    ids = [o["mlflow"]["run_id"] for o in private]
    out = dp_meta_analysis(load_meta_config(None, base={"runs": ids, "shared": ["*"]}))
    r = out["result"]
    want_ate, want_var = _by_hand(private)
    assert r["ate"] == pytest.approx(want_ate, rel=1e-12)
    assert r["variance"] == pytest.approx(want_var, rel=1e-12)
    assert sum(r["weights"]) == pytest.approx(1.0)
    assert r["privacy"]["composed_zeta"] == pytest.approx(1.5 * math.sqrt(3))

    client = MlflowClient()
    run = client.get_run(out["mlflow"]["run_id"])
    assert run.data.params["source_runs"].split(",") == ids
    assert run.data.params["weights"] == "inverse_variance"
    assert run.data.metrics["pooled_ate"] == r["ate"] and run.data.metrics["additional_zeta"] == 0
    assert run.data.tags["privacy_cost"].startswith("0")
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"forest.png", "studies.csv", "privacy.json"} <= arts
    arts = {a.key: a for a in artifacts_of(key_like="meta-analysis%")}
    rows = arts["meta-analysis"].data
    rows = json.loads(rows) if isinstance(rows, str) else rows
    assert rows[-1]["label"] == "pooled" and float(rows[-1]["ate"]) == pytest.approx(r["ate"],
                                                                                    rel=1e-5)
    assert out["mlflow"]["run_id"] in arts["meta-analysis-mlflow"].data
    table = pd.read_csv(client.download_artifacts(run.info.run_id, "studies.csv", str(tmp_path)))
    assert list(table["ate"]) == [o["release"]["ate"] for o in private]


def test_reads_only_released_values(releases):
    private, evaluation = releases
    # the evaluation run would change the pooled answer if it were read
    assert _by_hand([*private, evaluation])[0] != pytest.approx(_by_hand(private)[0], rel=1e-6)
    out = dp_meta_analysis(load_meta_config(
        None, base={"query": f"tags.dataset_id LIKE '{DATASET}%'"}))
    assert out["result"]["ate"] == pytest.approx(_by_hand(private)[0], rel=1e-12)
    assert out["result"]["n_studies"] == 3
    assert any("evaluation-mode" in note for note in out["notes"])
    with pytest.raises(ValueError, match=r"is an evaluation-mode run .*cannot be pooled"):
        dp_meta_analysis(load_meta_config(
            None, base={"runs": [private[0]["mlflow"]["run_id"], evaluation["mlflow"]["run_id"]]}))


def test_csv_and_cli(tmp_path, invoke):
    path = tmp_path / "published.csv"
    pd.DataFrame({"label": ["site A", "site B", "site C"], "ate": [0.1, 0.3, 0.2],
                  "variance": [0.01, 0.04, 0.02], "zeta": [1.0, 1.5, 0.5]}).to_csv(path,
                                                                                 index=False)
    out = invoke("meta", "--csv", str(path), "--model", "random", "--json")
    assert out.exit_code == 0, out.output
    r = json.loads(out.stdout)["result"]
    assert r["n_studies"] == 3 and r["tau2"] is not None and r["model"] == "random"
    table = invoke("meta", "--csv", str(path), "--shared", "site A", "--shared", "site B")
    assert table.exit_code == 0, table.output
    assert "pooled" in table.stdout and "no additional privacy charge" in table.stdout
    assert "worst exposure of any one person: zeta 1.803" in table.stdout  # sqrt(1^2 + 1.5^2)
    for args, match in [(("--csv", str(tmp_path / "none.csv")), "does not exist"),
                        ((), "give exactly one source"),
                        (("--csv", str(path), "--runs", "abc"), "give exactly one source")]:
        bad = invoke("meta", *args)
        assert bad.exit_code == 2 and bad.stderr.startswith("Error: ") and match in bad.stderr


def test_the_cli_pools_releases_of_one_dataset_by_the_python_rule(make_config):
    """Issue 25 §6 / 26 §6: two releases of one dataset are one study of composed exposure, in
    the flow (MLflow runs) as in Python (the releases themselves). Old: the flow read no noise
    share and refused them, while Python pooled them as independent studies."""
    from dpcausal.meta import combine

    same = [run_release(make_config()) for _ in range(2)]
    other = run_release(make_config(dataset="meta-flow-other"))
    outs = [*same, other]
    out = dp_meta_analysis(load_meta_config(
        None, base={"runs": [o["mlflow"]["run_id"] for o in outs]}))
    r = out["result"]
    in_python = combine([o["release"] for o in outs])
    assert r["n_studies"] == in_python.n_studies == 2
    assert r["ate"] == pytest.approx(in_python.ate, rel=1e-9)
    assert r["variance"] == pytest.approx(in_python.variance, rel=1e-9)
    dataset = same[0]["release"]["dataset"]
    assert dataset == make_config().ledger.dataset_id
    assert [s["label"] for s in r["studies"]][0] == f"{dataset} (2 releases)"
    assert r["privacy"]["same_data"][0]["composed_zeta"] == pytest.approx(1.5 * math.sqrt(2))


def _deployed_meta_parameters():
    """The parameter models of the deployed meta-analysis (deploy/prefect.yaml's entry point)."""
    import importlib
    import typing
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    (dep,) = [d for d in yaml.safe_load((root / "deploy" / "prefect.yaml").read_text())[
        "deployments"] if "meta" in d["tags"]]
    path, name = dep["entrypoint"].split(":")
    flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)
    return {k: v for k, v in typing.get_type_hints(flow.fn).items() if k != "return"}


@pytest.mark.parametrize("asked", [{"csv": "/etc/passwd"},
                                   {"runs": ["0" * 32], "tracking_uri": "http://attacker.example:5000"},
                                   {"query": "tags.kind = 'ate'"}, {"runs": ["0" * 32]}])
def test_the_deployed_meta_analysis_takes_release_ids_only(asked):
    """Issue 40 item 7: the deployment's parameters were a whole MetaConfig, so a run could
    name any CSV path and any MLflow server."""
    import pydantic

    for hint in _deployed_meta_parameters().values():
        with pytest.raises(pydantic.ValidationError):
            pydantic.TypeAdapter(hint).validate_python(asked)


def test_the_deployed_meta_analysis_pools_committed_releases_from_the_ledger(releases):
    from conf.meta import MetaParameters
    from flows.meta import meta_analysis_of_releases

    private, evaluation = releases
    ids = [o["release_id"] for o in private]
    out = meta_analysis_of_releases(MetaParameters(release_ids=ids, shared=["*"]))
    want_ate, want_var = _by_hand(private)
    assert out["result"]["ate"] == pytest.approx(want_ate, rel=1e-12)
    assert out["result"]["variance"] == pytest.approx(want_var, rel=1e-12)
    assert out["result"]["privacy"]["composed_zeta"] == pytest.approx(1.5 * math.sqrt(3))
    # an evaluation run was never charged: it is no committed release
    for unknown in (evaluation["release_id"], "no-such-release"):
        with pytest.raises(ValueError, match="is not a committed release of the ledger"):
            meta_analysis_of_releases(MetaParameters(release_ids=[ids[0], unknown]))
