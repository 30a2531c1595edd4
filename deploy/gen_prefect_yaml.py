"""Prints deploy/prefect.yaml: every flow's deployment, with the config dicts read from conf/.

    python deploy/gen_prefect_yaml.py > deploy/prefect.yaml
"""
from pathlib import Path

import yaml

from conf.kinds import KINDS

ROOT = Path(__file__).resolve().parents[1]


def settings(config: str) -> dict:
    """The typed Run-form parameters of a release deployment (conf/deployment.py): the config
    file, every other field empty (the config's value)."""
    return {"config": config}


def render() -> str:
    """The text of deploy/prefect.yaml."""
    pool = {"name": "dpcausal-pool", "work_queue_name": "default"}
    deps = [
      {"name": "demo", "entrypoint": "flows/deployed.py:release_from_config",
       "description": "Core DP ATE release of conf/release/demo.yaml; the UI's Run > Custom run "
                      "form sets the analysis: zeta, the outcome bounds, K, registry models "
                      "(empty fields keep the config's values). The data, the mode, the dataset, "
                      "the runner and the tracking server are the config's (the curator's).",
       "parameters": {"settings": settings("conf/release/demo.yaml"),
                      "refresh_demo_data": True},
       "tags": ["release", "ate"]},
      {"name": "nightly", "entrypoint": "flows/deployed.py:release_from_config",
       "description": "Nightly: refresh the demo dataset (data/demo/experiment_a.csv), then "
                      "release its ATE. Refused (Failed, recorded in MLflow) once the "
                      "dataset's budget is spent.",
       "parameters": {"settings": settings("conf/release/demo.yaml"),
                      "refresh_demo_data": True},
       "schedules": [{"cron": "0 2 * * *", "timezone": "UTC", "active": True}],
       "tags": ["release", "ate", "nightly"]},
      {"name": "from-config", "entrypoint": "flows/deployed.py:release_from_config",
       "description": f"Any release kind ({', '.join(KINDS)}) from one of the shipped "
                      "configs (conf/release/), or a registered dataset from the config its "
                      "curator registered it from, with the Run form's analysis settings.",
       "parameters": {"settings": settings("conf/release/cluster_dp_demo.yaml"),
                      "refresh_demo_data": False},
       "tags": ["release"]},
      {"name": "releases", "entrypoint": "flows/meta.py:meta_analysis_of_releases",
       "description": "Pool committed releases named by their release ids (no privacy cost): "
                      "read from the curator's ledger, logged to the curator's MLflow; no path "
                      "or server is a parameter.",
       "parameters": {}, "tags": ["meta"]},
      {"name": "default", "entrypoint": "flows/experiments.py:reproduce_experiments",
       "parameters": {"which": ["A", "B", "C", "D"], "out_dir": "reports"}, "tags": ["reproduce"]},
      {"name": "default", "entrypoint": "flows/reproduce_cluster_dp.py:reproduce_cluster_dp",
       "parameters": {"out_dir": "reports"}, "tags": ["reproduce"]},
      {"name": "default", "entrypoint": "flows/reproduce_user_level.py:reproduce_user_level",
       "parameters": {"out_dir": "reports"}, "tags": ["reproduce"]},
      {"name": "default", "entrypoint": "flows/reproduce_federated.py:reproduce_federated",
       "parameters": {"out_dir": "reports"}, "tags": ["reproduce"]},
    ]
    for d in deps:
        d["work_pool"] = dict(pool)
    doc = {"name": "dpcausal", "prefect-version": "3.8.8", "build": None, "push": None,
           "pull": [{"prefect.deployments.steps.set_working_directory":
                     {"directory": "{{ $DPCAUSAL_ROOT }}"}}],
           "deployments": deps}
    head = ("# Prefect deployments of every dpcausal flow (issue 8). Deployed by `dpcausal serve`, "
            "or by hand\n"
            "# from the project root:   DPCAUSAL_ROOT=$PWD prefect --no-prompt deploy --all "
            "--prefect-file deploy/prefect.yaml\n"
            "# Parameters are JSON: `release_from_config/*` take typed `settings` "
            "(conf/deployment.py): a registered\n"
            "# config and analysis keys only; no deployment takes a whole release config "
            "(data, runner, mlflow are the curator's).\n"
            "# Regenerate the config dicts after editing conf/:  python deploy/gen_prefect_yaml.py "
            "> deploy/prefect.yaml\n"
            "# Work pool: `dpcausal-pool` (type process):  prefect work-pool create dpcausal-pool "
            "--type process\n")
    return head + yaml.safe_dump(doc, sort_keys=False, width=100)


if __name__ == "__main__":
    print(render(), end="")
