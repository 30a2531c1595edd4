"""Release mode leaks nothing non-private: the pre-noise ATE and variance appear nowhere in the
MLflow store (params, metrics, tags, artifacts, the database file), the Prefect result storage,
the flow run's logs or the model-free parts of the data folder.

The secrets come from an evaluation-mode run of the same config (same cached fold models, so the
same tau_hat and V_hat bit for bit), tracked in a separate MLflow store. Negative controls show the
scanner finds them where they are: in that evaluation store and in a planted Prefect-style record.
"""

from __future__ import annotations

import base64
import json
import pickle

from _flowtools import Scanner, flow_logs

from flows.release import run_release


def test_release_mode_leaks_no_nonprivate_value(make_config, project, tmp_path):
    eval_uri = f"sqlite:///{tmp_path / 'eval-mlflow.db'}"
    rel_uri = f"sqlite:///{tmp_path / 'release-mlflow.db'}"
    evaluation = run_release(make_config("mode=evaluation", f"mlflow.tracking_uri={eval_uri}",
                                         "mlflow.experiment=leak-eval"))
    secrets = evaluation["release"]["nonprivate"]
    scanner = Scanner({"tau_hat": secrets["ate"], "V_hat": secrets["variance"]})

    out = run_release(make_config(f"mlflow.tracking_uri={rel_uri}",
                                  "mlflow.experiment=leak-release"))
    rel = out["release"]
    assert rel["nonprivate"] is None

    # positive control on the release itself: the scanner sees the private values it is shown
    assert Scanner({"ate": rel["ate"]}).mlflow_hits(rel_uri)

    hits = scanner.mlflow_hits(rel_uri)
    hits += scanner.file_hits(tmp_path / "release-mlflow.db")
    hits += scanner.tree_hits(project.root / "mlartifacts" / "leak-release")
    hits += scanner.tree_hits(project.results)  # Prefect result storage (the cache)
    hits += [h for m in flow_logs(out["release_id"].split("/")[0])
             for h in scanner.bytes_hits(m.encode(), "flow-run log")]
    hits += scanner.file_hits(project.root / "ledger.db")
    assert hits == []
    assert list(project.results.iterdir()), "the scan must have seen Prefect result records"

    # negative controls: the scanner finds the secrets where evaluation mode put them ...
    found = scanner.mlflow_hits(eval_uri)
    assert any("tau_hat as number" in h and "nonprivate_ate" in h for h in found)
    assert any("V_hat" in h and "release.json" in h for h in found)
    # ... and inside a Prefect-style record (JSON around a base64 pickle)
    planted = tmp_path / "planted" / "record"
    planted.parent.mkdir()
    payload = base64.b64encode(pickle.dumps({"x": [secrets["ate"]]})).decode()
    planted.write_text(json.dumps({"metadata": {}, "result": payload}))
    assert any("tau_hat as binary double" in h for h in scanner.tree_hits(planted.parent))
