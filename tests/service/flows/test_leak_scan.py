"""Release mode leaks nothing non-private: the pre-noise ATE and variance of the release appear
nowhere in the MLflow store (params, metrics, tags, artifacts, the database file), the Prefect
result storage and artifacts, the flow run's logs, the ledger or the printed text.

The secrets are the release's own tau_hat and V_hat, caught where the library draws the noise.
Negative controls show the scanner finds them where they are: in an evaluation run's store and
in a planted Prefect-style record.
"""

from __future__ import annotations

import base64
import json
import pickle

from _flowtools import Scanner, flow_logs

import dpcausal.ate.estimator as estimator_module
from flows.release import run_release


def test_release_mode_leaks_no_nonprivate_value(make_config, project, tmp_path, monkeypatch):
    seen = []
    real = estimator_module.draw_release

    def spy(tau_hat, v_hat, *args, **kwargs):
        seen.append((tau_hat, v_hat))
        return real(tau_hat, v_hat, *args, **kwargs)

    monkeypatch.setattr(estimator_module, "draw_release", spy)
    rel_uri = f"sqlite:///{tmp_path / 'release-mlflow.db'}"
    out = run_release(make_config(f"mlflow.tracking_uri={rel_uri}",
                                  "mlflow.experiment=leak-release"))
    [(tau_hat, v_hat)] = seen
    scanner = Scanner({"tau_hat": tau_hat, "V_hat": v_hat})
    rel = out["release"]
    assert rel["nonprivate"] is None

    # positive control on the release itself: the scanner sees the private values it is shown
    assert Scanner({"ate": rel["ate"]}).mlflow_hits(rel_uri)

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        artifacts = [a for a in client.read_artifacts()
                     if str(a.flow_run_id) == out["release_id"].split("/")[0]]
    assert artifacts
    hits = scanner.mlflow_hits(rel_uri)
    hits += scanner.file_hits(tmp_path / "release-mlflow.db")
    hits += scanner.tree_hits(project.root / "mlartifacts" / "leak-release")
    if project.results.exists():
        hits += scanner.tree_hits(project.results)  # Prefect result storage
    hits += [h for m in flow_logs(out["release_id"].split("/")[0])
             for h in scanner.bytes_hits(m.encode(), "flow-run log")]
    hits += [h for a in artifacts for h in scanner.bytes_hits(str(a.data).encode(), a.key)]
    hits += scanner.bytes_hits(json.dumps(out, default=str).encode(), "flow result")
    hits += scanner.file_hits(project.root / "ledger.db")
    assert hits == []

    # negative controls: the scanner finds an evaluation run's secrets where it puts them ...
    eval_uri = f"sqlite:///{tmp_path / 'eval-mlflow.db'}"
    evaluation = run_release(make_config("mode=evaluation", f"mlflow.tracking_uri={eval_uri}",
                                         "mlflow.experiment=leak-eval", dataset="leak-eval"))
    secrets = evaluation["release"]["nonprivate"]
    found = Scanner({"tau_hat": secrets["ate"], "V_hat": secrets["variance"]}).mlflow_hits(
        eval_uri)
    assert any("tau_hat as number" in h and "nonprivate_ate" in h for h in found)
    assert any("V_hat" in h and "release.json" in h for h in found)
    # ... and inside a Prefect-style record (JSON around a base64 pickle)
    planted = tmp_path / "planted" / "record"
    planted.parent.mkdir()
    payload = base64.b64encode(pickle.dumps({"x": [tau_hat]})).decode()
    planted.write_text(json.dumps({"metadata": {}, "result": payload}))
    assert any("tau_hat as binary double" in h for h in scanner.tree_hits(planted.parent))
