"""The ``dp_release`` flow: one charged release of any kind (issue 17). It only composes tasks:

config -> mechanism (once, here) -> the registration (a run only asks: its curator half must
equal the registration, :func:`conf.registration.check_asked`) -> public checks (the core
release's from the registered n, reading nothing) -> MLflow run opened -> the kind's
extra steps plugged into the mechanism -> reserve, release once, commit (the one charged task)
-> MLflow record -> Prefect artifacts. A partitioned source (``data.partitions``) is checked on
its Parquet footers only and released by the subflow
:func:`flows.partitioned_release.partitioned_config_release` on the config's Dask runner.

A release refused by the budget is recorded (an MLflow run tagged ``refused``, a markdown
artifact) and ends the run Failed with the ledger's message; nothing is charged or drawn.
"""

from __future__ import annotations

from typing import Any, Callable

from prefect import flow
from prefect.runtime import flow_run
from prefect.settings import PREFECT_API_URL
from prefect.task_runners import ThreadPoolTaskRunner

from conf.kinds import KINDS, AnyConfig, model_specs, unused_settings, with_planned
from conf.registration import check_asked, registered
from conf.settings import lasting_url
from dpcausal import Mechanism, PrivateATE
from dpcausal.ate.sums import SUM_ESTIMATORS
from dpcausal.federated import FederatedATE
from flows import progress
from store import digest, model_store_dir
from tasks import ledger_ops
from tasks.artifacts import publish_refusal, publish_release
from tasks.data import source_description
from tasks.federated_encoding import EncodePlan, with_chunked_encoding
from tasks.fold_fits import FitPlan, with_stored_fits
from tasks.preflight import (
    BUDGET_REFUSALS,
    Checked,
    checked_before,
    checked_in_process,
    refusal_reason,
)
from tasks.release import charged_release, check_release_task
from tasks.tracking import TrackedRun, lineage, log_refusal, log_release, open_release_run


def _core_steps(config: Any, mechanism: Any, checked: Checked, release_id: str) -> Mechanism:
    """The core's fold fits: chunked on the runner; in evaluation mode stored privately,
    keyed on the keyed hash of the data fitted, in row order; in release mode kept in memory
    (no later run could read them): see :mod:`tasks.fold_fits`. A release from noisy sums
    (``dim``, ``lin``: the estimator given, or ``auto``'s choice from public facts) fits no
    fold: no fold task runs, and its statistic vector is computed inside the one charged task
    (issue 33 §6). With a pre-release of the planning facts (issue 39 item 5) auto chooses
    inside the charged task, after the reservation: the fold plan is plugged in, and runs only
    if the ensemble is chosen."""
    n, d = checked.prepared.public.n, checked.prepared.public.d
    # with a pre-release auto chooses inside the charged task: the fold plan stands ready
    if mechanism.prerelease is None and mechanism.resolved_estimator(n, d) in SUM_ESTIMATORS:
        return mechanism
    progress.phase("fit folds", total=mechanism.resolved_n_folds(n, d))
    return with_stored_fits(mechanism, FitPlan(
        basis=checked.content if config.evaluation else release_id,
        models=digest(model_specs(config)),
        store=str(model_store_dir()) if config.evaluation else None,
        runner=config.runner, folds_per_task=config.folds_per_task,
        on_chunk=progress.advance))


def _federated_steps(config: Any, mechanism: Any, checked: Checked, release_id: str
                     ) -> Mechanism:
    """The federated clients' encoding, chunked on the runner."""
    return with_chunked_encoding(mechanism, EncodePlan(config.chunk_size, config.runner))


# mechanism class -> its extra steps, plugged into the mechanism before the charged release (a
# kind whose mechanism is none of these has none)
EXTRA_STEPS: dict[type[Mechanism], Callable[[Any, Any, Checked, str], Mechanism]] = {
    PrivateATE: _core_steps, FederatedATE: _federated_steps}


def extra_steps(mechanism: Mechanism) -> Callable[[Any, Any, Checked, str], Mechanism] | None:
    """The extra steps of ``mechanism``'s class (or of the nearest class it extends)."""
    return next((steps for cls in type(mechanism).__mro__
                 if (steps := EXTRA_STEPS.get(cls)) is not None), None)


@flow(name="dp_release", persist_result=False, retries=0,
      task_runner=ThreadPoolTaskRunner(max_workers=2))
def dp_release(config: AnyConfig, analyst: str | None = None) -> dict[str, Any]:
    """One release of ``config`` (any kind); returns ``{"kind", "release" (the release's dict),
    "text" (its printed form), "release_id", "reused", "spent", "mlflow", "experiment",
    "artifact"}``. Release mode publishes private values only. ``analyst``: the remote analyst
    who asked through the gateway (recorded with the charge, held to their cap; evaluation mode
    refused); None for the curator's own runs."""
    kind = KINDS[config.kind]
    mechanism = kind.build(config)
    dataset, evaluation = config.ledger.dataset_id, config.evaluation
    if analyst is not None and evaluation:
        raise ValueError("evaluation mode is the curator's (a non-private read); an analyst's "
                         "release runs in mode: release")
    release_id = f"{flow_run.id}/{config.name}"
    # no link to a flow run page that dies with the command's temporary server (issue 42)
    url = lasting_url(flow_run.ui_url, PREFECT_API_URL.value())
    tags = {"prefect.flow_run_id": str(flow_run.id), "prefect.flow_run_name": str(flow_run.name),
            **({"prefect.flow_run_url": url} if url else {}), "release_id": release_id,
            "dataset_id": dataset, "kind": config.kind, "mode": config.mode,
            "evaluation": str(evaluation).lower()}
    where = dict(experiment=config.experiment_name, tracking_uri=config.mlflow.tracking_uri,
                 run_name=f"{config.name}-{flow_run.name}", tags=tags)

    progress.phase("load and check")
    checked = checked_before(config)  # the CLI's preflight, in this process: the data read once
    if checked is None:
        try:
            registration = registered(dataset)
            check_asked(config, registration)
            checked = check_release_task(config.data, kind.schema(config), mechanism,
                                         kind.roles(config), dataset=dataset,
                                         evaluation=evaluation, cap=kind.cap(config),
                                         registration=registration, runner=config.runner)
        except Exception as exc:
            reason = refusal_reason(exc)
            if reason == "budget":
                log_refusal(None, str(exc), **where)
            if reason is not None:
                publish_refusal(dataset, reason, str(exc))
            raise

    asked, config = config, with_planned(config, checked.planned)
    settings = config.model_dump(mode="json")
    run: TrackedRun = open_release_run(
        config.experiment_name, config.mlflow.tracking_uri, where["run_name"], tags, settings,
        lineage(dataset, source_description(config.data), kind.roles(config), checked.schema,
                settings), unused_settings(config))
    partitioned = config.data.partitioned
    steps = None if partitioned else extra_steps(mechanism)
    if steps is not None:
        mechanism = steps(config, mechanism, checked, release_id)

    progress.phase("release")
    try:
        if partitioned:  # the workers read the partitions (issue 19 §3)
            from flows.partitioned_release import dask_runner, partitioned_config_release

            # the checked input in memory (a SQL source's partitions counted once, under the
            # fold key drawn for them: never a parameter); the config as asked, whose "auto"
            # K and K' the subflow plans on the partitions' footers (plan_partitions)
            with checked_in_process(asked, checked):
                published = partitioned_config_release.with_options(
                    task_runner=dask_runner(config.runner))(asked, release_id, run.url,
                                                            analyst)
        else:
            published = charged_release(mechanism, checked, dataset=dataset,
                                        release_id=release_id, evaluation=evaluation,
                                        detail=kind.detail(config), cap=kind.cap(config),
                                        run_url=run.url, analyst=analyst)
    except BUDGET_REFUSALS as exc:
        log_refusal(run, str(exc), **where)
        publish_refusal(dataset, "budget", str(exc))
        raise
    spent = None if evaluation else ledger_ops.spent(dataset)

    progress.phase("log to MLflow")
    release = published.release
    # a reused release is rebuilt from its committed JSON, which holds no published tables
    tables = (kind.published(release)
              if kind.published is not None and not published.reused else None)
    log_release(run, release, evaluation, spent, tables)
    artifact = publish_release(dataset, release, release_id, spent, run.url)
    progress.phase("done")
    return {"kind": config.kind, "release": release.to_dict(), "text": str(release),
            "release_id": release_id, "reused": published.reused, "spent": spent,
            "mlflow": {"run_id": run.run_id, "experiment_id": run.experiment_id,
                       "tracking_uri": run.tracking_uri, "url": run.url},
            "experiment": config.experiment_name, "artifact": artifact}


def run_release(config: Any) -> dict[str, Any]:
    """Run :func:`dp_release` (the entry point of ``dpcausal run`` and of the tests)."""
    return dp_release(config=config)
