"""MLflow records of a release of any kind (the project's MLflow client code; ``mlflow`` is
imported lazily).

One MLflow run per release, opened before the charge (so the ledger records its URL) in the
config's experiment (evaluation runs in ``<experiment>/evaluation``): system tags (user, source,
git commit, dpcausal version), the Prefect flow-run link, the validated config as a dict and a
dataset input of public facts only (issue 26 §4: :func:`lineage`): the dataset id, the source
without password, the declared schema, the config's hash and a random digest per release, never a
hash of the data or of anything counted in them. After the
release: its released values as metrics, ``release.json`` and a plot. In release mode nothing
non-private reaches MLflow: a result carrying ``nonprivate`` values is refused here.
"""

from __future__ import annotations

import getpass
import json
import math
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from conf.settings import PROJECT_ROOT
from dpcausal import Release


@dataclass(frozen=True)
class TrackedRun:
    run_id: str
    experiment_id: str
    tracking_uri: str
    url: str  # the run's page on an MLflow server, else its ``runs:/`` URI


def flatten_params(prefix: str, value: Any, out: dict[str, str]) -> None:
    """Nested dicts as MLflow params: dotted keys, lists as JSON, the rest as str."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten_params(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)


def release_metrics(release: dict[str, Any], spent: dict[str, Any] | None) -> dict[str, float]:
    """Released figures (estimate, se, CI, privacy, n and the mechanism's released scalars) and
    the dataset's cumulative spend; evaluation runs add their ``nonprivate_*`` values."""
    m: dict[str, Any] = {k: v for k, v in release.items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if release.get("ci"):
        m["ci_low"], m["ci_high"] = release["ci"]
    p = release.get("privacy") or {}
    m.update({k: p.get(k) for k in ("epsilon", "delta", "zeta", "rho")})
    for k, v in (p.get("detail") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            m[k] = v
    if release.get("evaluation"):
        m.update({f"nonprivate_{k}": v for k, v in (release.get("nonprivate") or {}).items()})
    if spent is not None:
        m |= {"dataset_epsilon_spent": spent["epsilon"], "dataset_delta": spent["delta"],
              "dataset_n_charges": spent["n_charges"], "dataset_zeta_spent": spent.get("zeta")}
    return {k: float(v) for k, v in m.items()
            if isinstance(v, (int, float)) and math.isfinite(float(v))}


# MLflow 3's experiment kind: a model-development experiment (the tag the UI read before its
# workflow switch, and what other clients read; issue 25 §5).
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}

#: The query that opens an MLflow 3 UI page in its model-training view. Since its workflow switch
#: (MLflow >= 3.5; 3.17 checked) the UI ignores the experiment's kind tag: it takes the view from
#: the URL's ``workflowType`` (``genai`` or ``machine_learning``), else from the browser's
#: localStorage ``mlflow.workflowType``, whose default is ``genai`` (its Traces/Token usage view,
#: and "Evaluation runs", which would read as the project's non-private evaluation mode). So a
#: fresh browser opens every link the project prints in the right view (issue 34 §4).
MODEL_TRAINING_VIEW = "workflowType=machine_learning"


def ensure_experiment(name: str, tracking_uri: str | None = None) -> str:
    """Experiment id, of a model-development experiment (:data:`EXPERIMENT_KIND`, also set on an
    existing experiment that has no kind). Tracking to a server, artifacts go through it
    (``mlflow-artifacts:``); to a local store, under <data>/mlartifacts/<name> (recipe §6)."""
    import mlflow

    from conf.settings import data_dir

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        for key, value in EXPERIMENT_KIND.items():
            if key not in exp.tags:
                client.set_experiment_tag(exp.experiment_id, key, value)
        return str(exp.experiment_id)
    remote = str(client.tracking_uri).startswith(("http://", "https://"))
    location = None if remote else (data_dir() / "mlartifacts" / name.replace("/", "_")).as_uri()
    try:
        return str(client.create_experiment(name, artifact_location=location,
                                            tags=EXPERIMENT_KIND))
    except mlflow.exceptions.MlflowException:  # created concurrently
        return str(client.get_experiment_by_name(name).experiment_id)


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    if tracking_uri.startswith(("http://", "https://")):
        return (f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
                f"?{MODEL_TRAINING_VIEW}")
    return f"runs:/{run_id}"


def system_tags() -> dict[str, str]:
    """user, source name, git commit (when in a repository) and the dpcausal version."""
    import dpcausal

    tags = {"mlflow.user": getpass.getuser(), "mlflow.source.name": "dpcausal dp_release",
            "mlflow.source.type": "JOB", "dpcausal_version": dpcausal.__version__}
    try:
        commit = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=5)
        if commit.returncode == 0:
            tags["mlflow.source.git.commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return tags


def _client(tracking_uri: str | None) -> Any:
    import mlflow

    return mlflow.MlflowClient(tracking_uri=tracking_uri or mlflow.get_tracking_uri())


def connect(tracking_uri: str | None) -> None:
    """Open the tracking store once (MLflow keeps it per URI; a database store checks its
    schema on first use) and load matplotlib for the release figure: what the CLI does while
    its Prefect server boots."""
    from plots.figures import pyplot

    _client(tracking_uri).search_experiments(max_results=1)
    pyplot()


#: The MLflow column type of a role whose dtype the config does not declare: a public convention
#: of the role (spec dp_ate_ensemble.md §1: a 0/1 treatment, a bounded real outcome), never
#: read from the values.
ROLE_TYPES = {"treatment": "long", "outcome": "double", "covariates": "double"}


def lineage(dataset: str, source: str, roles: Mapping[str, Any], columns: Sequence[str],
            config: Mapping[str, Any], declared: Mapping[str, str] | None = None
            ) -> dict[str, str]:
    """The run's dataset input, public facts only (issue 26 §4): ``name`` the dataset id,
    ``source`` where the data come from (no password), ``schema`` each column of the release
    with its role and its declared type (``declared``: column -> dtype from the config; else the
    role's convention :data:`ROLE_TYPES`, else ``"declared: none"``), ``profile`` the config's
    hash, and ``digest`` a random id per release (MLflow needs one; a hash of the data would
    tell every reader whether the data changed)."""
    from store import digest

    role_of = {}
    for role, names in roles.items():
        for name in [names] if isinstance(names, str) else (names or []):
            role_of.setdefault(str(name), role)
    declared = declared or {}
    spec = []
    for name in columns:
        role = role_of.get(name, "covariates" if "covariates" in roles else "other")
        spec.append({"name": name, "role": role,
                     "type": declared.get(name) or ROLE_TYPES.get(role, "declared: none")})
    return {"name": dataset, "source": source, "digest": uuid.uuid4().hex,
            "schema": json.dumps({"mlflow_colspec": spec}),
            "profile": json.dumps({"config_digest": digest(dict(config))})}


#: Config values that leave a setting to the release ("unset", "the planner's"): never logged
#: as params; the release's own public parameters give their values (:func:`release_params`).
UNRESOLVED = ("None", "auto")


def release_params(release: Release) -> dict[str, str]:
    """The public parameters a release used, as MLflow params (issue 34 §3): the core's
    ``params`` (the values it resolved: ``sigma2``, ``ci_share``, ``delta``, ``block_folds``
    ...) under the config's section ``estimator``; the other kinds publish theirs as fields and
    take every value from their config, which the run's params hold."""
    out: dict[str, str] = {}
    flatten_params("estimator", dict(getattr(release, "params", None) or {}), out)
    return {k: v for k, v in out.items() if v != "None"}  # None: a setting it did not use


@task(name="open_release_run", cache_policy=NO_CACHE, persist_result=False, retries=2,
      retry_delay_seconds=1)
def open_release_run(experiment: str, tracking_uri: str | None, run_name: str,
                     tags: dict[str, str], config: dict[str, Any],
                     dataset: dict[str, str], unused: tuple[str, ...] = ()) -> TrackedRun:
    """An MLflow run for one release (public values only): ``tags`` plus the system tags, the
    config flattened as params (but its :data:`UNRESOLVED` values: the release logs what it
    used; and the ``unused`` keys or sections, :func:`conf.kinds.unused_settings`) and logged
    whole as ``config.json``, and ``dataset`` (:func:`lineage`) as the run's dataset input."""
    from mlflow.entities import Dataset, DatasetInput, InputTag, Param

    client = _client(tracking_uri)
    uri = str(client.tracking_uri)
    exp_id = ensure_experiment(experiment, uri)
    run_id = client.create_run(exp_id, run_name=run_name,
                               tags={**system_tags(), **tags}).info.run_id
    params: dict[str, str] = {}
    flatten_params("", config, params)
    client.log_batch(run_id, params=[
        Param(k, v[:6000]) for k, v in params.items() if v not in UNRESOLVED
        and not any(k == u or k.startswith(f"{u}.") for u in unused)])
    client.log_dict(run_id, config, "config.json")
    client.log_inputs(run_id, datasets=[DatasetInput(
        Dataset(name=dataset["name"], digest=dataset["digest"], source_type="dpcausal",
                source=dataset["source"], schema=dataset["schema"],
                profile=dataset["profile"]),
        tags=[InputTag("mlflow.data.context", "release")])])
    return TrackedRun(run_id, exp_id, uri, run_url(uri, exp_id, run_id))


@task(name="log_release", cache_policy=NO_CACHE, persist_result=False, retries=2,
      retry_delay_seconds=1)
def log_release(run: TrackedRun, release: Release, evaluation: bool,
                spent: dict[str, Any] | None, tables: dict[str, Any] | None = None) -> None:
    """The released values into ``run`` (metrics, the public parameters the release used as
    params (:func:`release_params`), ``release.json`` = ``release.to_dict()``,
    ``release.png`` = ``release.plot()`` and the kind's published ``tables``, as CSV or Parquet
    by their names); ends it FINISHED. Idempotent: a retry logs the same values again."""
    from mlflow.entities import Metric, Param

    from plots.figures import pyplot, save

    if not evaluation and release.evaluation:
        raise AssertionError("bug: a release-mode result carries non-private values")
    as_dict = release.to_dict()
    client = _client(run.tracking_uri)
    now = int(time.time() * 1000)
    logged = client.get_run(run.run_id).data.params  # the config's (a retry: also these)
    client.log_batch(run.run_id, metrics=[Metric(k, v, now, 0)
                                          for k, v in release_metrics(as_dict, spent).items()],
                     params=[Param(k, v[:6000]) for k, v in release_params(release).items()
                             if k not in logged])
    client.log_dict(run.run_id, as_dict, "release.json")
    with tempfile.TemporaryDirectory() as tmp:
        pyplot()  # the headless backend, before the release draws its figure
        client.log_artifact(run.run_id, save(release.plot().figure, Path(tmp) / "release.png",
                                             dpi=100))
        for name, table in (tables or {}).items():
            if name.endswith(".csv"):  # small tables: MLflow's UI shows CSV
                table.to_csv(Path(tmp) / name, index=False)
            else:
                table.to_parquet(Path(tmp) / name, index=False)
            client.log_artifact(run.run_id, str(Path(tmp) / name))
    client.set_terminated(run.run_id, "FINISHED")


@task(name="log_refusal", cache_policy=NO_CACHE, persist_result=False, retries=2,
      retry_delay_seconds=1)
def log_refusal(run: TrackedRun | None, message: str, *, experiment: str,
                tracking_uri: str | None, run_name: str, tags: dict[str, str]) -> str:
    """Record a release refused by the budget: ``run`` (opened before the reservation refused)
    or a new run, tagged ``refused=true`` with the ledger's message, no estimate, ended FAILED.
    Returns the run id."""
    client = _client(tracking_uri)
    if run is None:
        exp_id = ensure_experiment(experiment, str(client.tracking_uri))
        run_id = client.create_run(exp_id, run_name=f"{run_name}-refused",
                                   tags={**system_tags(), **tags}).info.run_id
    else:
        run_id = run.run_id
    client.set_tag(run_id, "refused", "true")
    client.set_tag(run_id, "refusal", message[:5000])
    client.set_terminated(run_id, "FAILED")
    return str(run_id)
