"""The partitioned release on Dask (issue 19 §3): the flow process never holds a row.

1. Public facts, on the workers: the partition list and each Parquet footer (rows, schema); the
   flow checks the schema and parameters, takes K from the planner (or the caller) and allocates
   each partition its folds (:func:`dpcausal.ate.partitioned.allocate_folds`).
2. The charge is reserved in the ledger by the project's one charged-release task
   (:func:`tasks.release.charged_release`) before any task reads a data value; the phases below
   run inside it (their tasks still go to this flow's task runner).
3. Fit phase: one task per partition reads it and fits the folds it owns; the fold models stay
   Dask results on the workers (no shared disk) and are gathered by one task.
4. Aggregation phase: one task per partition reads it again and returns (n_p, sum Gamma,
   sum Gamma^2) given all K fold models, which Dask moves worker to worker (once per worker):
   only the partitions' sums reach the flow process.
5. The flow combines the sums into (tau_hat, V_hat, n) and makes one noisy release
   (``dpcausal.PrivateATE._release_sums``), committed before it is returned.

A release from noisy sums (``dim``, ``lin``; the plan has ``sums``, issue 33 §6) replaces steps
3-4 by one sums phase: one task per partition reads it and returns only its statistic vector;
the vectors are added and the noise drawn once on the total.

A block ensemble (spec §2.5b, issue 28 §3; the plan has ``blocks``) replaces steps 3-4 by one
block phase: one task per partition reads it, fits, aggregates and scores the blocks it owns and
returns only (n_b, sum Gamma, sum Gamma^2) per block; no fold model travels, and the release is
calibrated on the plan's public block layout.

Progress of both phases is logged (partitions done / total) and shown as Prefect progress
artifacts. Folds: keyed hash of the declared id column, per-release key from OS entropy or the
curator's fold key (``<data>/private/fold.key``); the rule is in :mod:`dpcausal.ate.partitioned`.

A SQL query is a source too (issue 28 §3, issue 35, :mod:`tasks.sql_partitions`): the fold key
is drawn first, step 1 is :func:`tasks.sql_partitions.count_sql`, the query's column names and
one aggregate query over the id column (partition p holds the p-th of P consecutive ranges of the
ids; under ``dp_release`` its checks counted, and the subflow reads with their counts and key:
one count per release, by one function), and every read of a partition is the query restricted
to its id range, so each row crosses from the database once per phase.

Three entry points share these steps: :func:`partitioned_release` (Parquet, plain parameters,
from Python), :func:`partitioned_sql_release` (a SQL query, plain parameters) and
:func:`partitioned_config_release`, the subflow of ``dp_release`` for a release config whose
``data.partitions`` or ``data.sql_partitions`` is set (``dpcausal run``), which keeps
dp_release's MLflow run, artifacts and result.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.futures import PrefectFuture, as_completed
from prefect.runtime import flow_run
from prefect_dask import DaskTaskRunner

import store
from conf.kinds import KINDS, build_mechanism, with_planned
from conf.models import DataSource, ReleaseConfig, RunnerConfig
from dpcausal import Prepared, Release
from dpcausal.ate.estimator import PrivateATE
from dpcausal.ate.partitioned import (
    PartitionPlan,
    combine,
    combine_blocks,
    combine_statistics,
    fold_rule,
    release_key,
)
from dpcausal.session import Charged
from flows import progress
from tasks.partitioned import (
    PartitionedATE,
    all_fold_models,
    block_score_sums,
    describe_partition,
    fit_partition_folds,
    list_partitions,
    partition_score_sums,
    partition_sum_statistics,
)
from tasks.preflight import (
    Checked,
    SourceChangedError,
    check_evaluation_allowed,
    check_footers,
    check_ledger,
    checked_before,
)
from tasks.release import charged_release
from tasks.runners import dask_security
from tasks.sql_partitions import (
    SqlCounted,
    SqlPartition,
    SqlPartitions,
    count_sql,
)
from tasks.sql_partitions import sql_partitions as sql_partitions_of

# Threads by default (recipe §7: on 2 cores threads beat processes); pass a scheduler address to
# run on a real cluster.
# No memory limit: a worker never spills task data (rows, models) to its local disk. Port 0:
# the scheduler's HTTP server (on even without a dashboard) takes a free port, not 8787.
_LOCAL_CLUSTER = {"threads_per_worker": 1, "processes": False, "dashboard_address": ":0",
                  "memory_limit": 0}


def dask_runner(runner: RunnerConfig) -> DaskTaskRunner:
    """The partitioned path's task runner: the Dask scheduler at ``runner.address``, else a
    LocalCluster of ``runner.max_workers`` in-process workers for the run."""
    if runner.address:
        return DaskTaskRunner(address=runner.address,
                              client_kwargs={"security": dask_security(runner)})
    return DaskTaskRunner(cluster_kwargs={**_LOCAL_CLUSTER, "n_workers": runner.max_workers})


DEFAULT_RUNNER = dask_runner(RunnerConfig(kind="dask"))


@flow(name="dp_partitioned_release", task_runner=DEFAULT_RUNNER, persist_result=False)
def partitioned_release(
    source: str,
    *,
    id_column: str,
    treatment: str,
    outcome: str,
    covariates: list[str] | None = None,
    estimator: dict[str, Any],
    n_folds: int | None = None,
    compute_budget: float = 300.0,
    dataset_id: str | None = None,
    fold_key: Literal["release", "curator"] = "release",
    evaluation: bool = False,
) -> dict[str, Any]:
    """One private ATE release from a directory of Parquet partitions (module docstring).

    ``estimator`` holds :class:`dpcausal.PrivateATE`'s public parameters (``outcome_bounds``
    required); ``n_folds=None`` takes the planner's K (``n_folds="auto"``) within
    ``compute_budget`` seconds. Release mode charges ``dataset_id`` in the project's ledger
    (``DPCAUSAL_LEDGER_URL``) and returns the committed release as a dict;
    evaluation mode charges nothing, is refused for a dataset the ledger knows, and returns the
    non-private estimates too.
    """
    est = PrivateATE(**{"compute_budget": compute_budget, **estimator},
                     n_folds=n_folds or "auto")
    parts, checked = _checked(source, est, id_column=id_column, treatment=treatment,
                              outcome=outcome, covariates=covariates, evaluation=evaluation)
    return _plain_release(parts, checked, dataset_id, _key(fold_key), evaluation)


@flow(name="dp_partitioned_sql_release", task_runner=DEFAULT_RUNNER, persist_result=False)
def partitioned_sql_release(
    sql: str,
    *,
    url: str,
    sql_partitions: int | Literal["auto"],
    id_column: str,
    treatment: str,
    outcome: str,
    id_type: Literal["int", "str"] = "str",
    covariates: list[str] | None = None,
    estimator: dict[str, Any],
    n_folds: int | None = None,
    compute_budget: float = 300.0,
    dataset_id: str | None = None,
    fold_key: Literal["release", "curator"] = "release",
    evaluation: bool = False,
    chunk_rows: int = 50_000,
) -> dict[str, Any]:
    """:func:`partitioned_release` from a SQL query instead of Parquet files (issue 28 §3):
    ``url`` is a SQLAlchemy URL (``${VAR}`` expanded from the environment at load time), the
    query is split into ``sql_partitions`` partitions by ranges of ``id_column`` (declared
    ``int`` or ``str``; ``"auto"``: P from n and the default LocalCluster's memory), and each
    worker streams its range of the query in chunks of ``chunk_rows`` rows
    (:mod:`tasks.sql_partitions`). Before the charge only the column names and the partitions'
    row counts and id ranges are read, by one aggregate query."""
    est = PrivateATE(**{"compute_budget": compute_budget, **estimator},
                     n_folds=n_folds or "auto")
    source = replace(sql_partitions_of(DataSource(
        sql=sql, url=url, sql_partitions=sql_partitions, id_column=id_column,
        dtypes={id_column: id_type})), chunk_rows=chunk_rows)
    key = _key(fold_key)
    counted = count_sql(source, key, {"treatment": treatment, "outcome": outcome,
                                      "covariates": covariates})
    parts, checked = _checked_sql(source, counted, est, treatment=treatment, outcome=outcome,
                                  covariates=covariates, evaluation=evaluation)
    return _plain_release(parts, checked, dataset_id, key, evaluation, source="sql")


def _plain_release(parts: list[Any], checked: Checked, dataset_id: str | None, key: bytes,
                   evaluation: bool, source: str = "parquet") -> dict[str, Any]:
    """The checked partitions' release as a dict: the dataset's budget checked first (release
    mode needs ``dataset_id``; evaluation mode needs a registration that allows it, as every
    release path does (:func:`tasks.preflight.check_evaluation_allowed`), and is refused for
    data the ledger binds to another id, or to any id without ``dataset_id``), then the charged
    release of :func:`_charged`."""
    if evaluation and dataset_id is not None:
        check_evaluation_allowed(dataset_id)
    check_ledger(dataset_id, checked.charge, unit="row", identity=checked.identity,
                 evaluation=evaluation, cap="--zeta Z")
    plan: PartitionPlan = checked.prepared.data
    return _charged(parts, checked, dataset=dataset_id or "", key=key,
                    release_id=f"{flow_run.id}/partitioned-ate", evaluation=evaluation,
                    detail={"mechanism_class": "PrivateATE", "path": "partitioned",
                            "source": source, "n_folds": plan.n_folds,
                            "n_blocks": plan.n_blocks,
                            "block_folds": plan.block_folds}).release.to_dict()


def _key(fold_key: str) -> bytes:
    """The fold key: the curator's (``<data>/private/fold.key``) or a fresh one."""
    return store.fold_key() if fold_key == "curator" else release_key()


@flow(name="dp_partitioned_config_release", task_runner=DEFAULT_RUNNER, persist_result=False,
      retries=0)
def partitioned_config_release(config: ReleaseConfig, release_id: str,
                               run_url: str | None = None, analyst: str | None = None
                               ) -> Charged:
    """The partitioned path of ``dp_release`` (:mod:`flows.release`), its subflow on the
    config's Dask runner (:func:`dask_runner`): the public checks again on the footers the
    workers read, then the charged release under ``release_id``, recording ``run_url`` (the
    MLflow run ``dp_release`` opened) in the ledger. ``dp_release`` checked the budget first
    and logs the release. A SQL source's partitions counted by ``dp_release``'s checks, held
    in memory (:func:`tasks.preflight.checked_before`), are read with the key they were counted
    under, not counted again; the subflow run on its own counts them by the same function
    (:func:`tasks.sql_partitions.count_sql`). ``analyst``: the remote analyst who asked
    (recorded with the charge and held to their cap; None: the curator)."""
    data, c = config.data, config.columns
    held = checked_before(config)
    counted = held.counted if held is not None else None
    key = counted.key if counted is not None else _key(data.fold_key or "release")
    roles = {"treatment": c.treatment, "outcome": c.outcome, "covariates": c.covariates,
             "evaluation": config.evaluation}
    if held is not None and held.prepared.data is None:  # checked from the registration
        return _registered_release(config, held, key, roles, release_id, run_url, analyst)
    parts: list[Any]
    if data.sql_partitions is not None:   # a SQL query split by ranges of its id
        source = sql_partitions_of(data, config.runner)
        parts, checked = _checked_sql(source, counted or count_sql(source, key, roles),
                                      build_mechanism(config), **roles)
    else:
        parts, checked = _checked(str(data.partitions), build_mechanism(config),
                                  id_column=str(data.id_column), **roles)
    plan: PartitionPlan = checked.prepared.data
    return _charged(parts, checked, dataset=config.ledger.dataset_id, release_id=release_id,
                    key=key, evaluation=config.evaluation,
                    detail={**KINDS["ate"].detail(config), "path": "partitioned", **(
                        {} if plan.sums is not None else {"K": plan.n_folds, "B": plan.n_blocks,
                                                         "K'": plan.block_folds})},
                    cap=KINDS["ate"].cap(config), run_url=run_url, analyst=analyst)


def _checked(source: str, estimator: Any, *, id_column: str, treatment: str, outcome: str,
             covariates: list[str] | None, evaluation: bool) -> tuple[list[str], Checked]:
    """Step 1: the partition list and footers read on the workers, then
    :func:`tasks.preflight.check_footers` (every public refusal and the charge)."""
    parts = list_partitions(source)
    footers = [f.result() for f in describe_partition.map(parts)]
    return parts, check_footers(parts, footers, estimator, id_column=id_column,
                                treatment=treatment, outcome=outcome, covariates=covariates,
                                evaluation=evaluation)


def _checked_sql(source: SqlPartitions, counted: SqlCounted, estimator: Any, *,
                 treatment: str, outcome: str, covariates: list[str] | None, evaluation: bool
                 ) -> tuple[list[SqlPartition], Checked]:
    """Step 1 for a SQL source: its partitions ``counted`` (:func:`tasks.sql_partitions.
    count_sql`, once per release), then :func:`tasks.preflight.check_footers`, the source
    bound by its database, query, id column and P."""
    if any(p.of.identity() != source.identity() for p in counted.parts):
        raise AssertionError("bug: SQL partitions counted for another source")
    parts, footers = list(counted.parts), list(counted.footers)
    return parts, check_footers(parts, footers, estimator, id_column=source.id_column,
                                treatment=treatment, outcome=outcome, covariates=covariates,
                                evaluation=evaluation, identity=source.identity())


def _charged(parts: list[Any], checked: Checked, *, dataset: str, release_id: str,
             key: bytes, evaluation: bool, detail: dict[str, Any], cap: str = "--zeta Z",
             run_url: str | None = None, analyst: str | None = None) -> Charged:
    """Steps 2-5: the one charged task, which runs the phases after the reservation, with the
    fold key drawn before (a SQL source's partition counts need it)."""
    plan: PartitionPlan = checked.prepared.data
    get_run_logger().info("partitioned release: %d partitions, n=%d, d=%d, estimator %s, K=%d, "
                          "B=%d, K'=%d", len(parts), plan.n, plan.d, plan.estimator.estimator,
                          plan.n_folds, plan.n_blocks, plan.block_folds)

    computing = replace(checked, prepared=Prepared(
        public=checked.prepared.public, data=lambda: _compute(parts, plan, key, evaluation)))
    return charged_release(PartitionedATE(plan.estimator), computing, dataset=dataset,
                           release_id=release_id, evaluation=evaluation, detail=detail, cap=cap,
                           run_url=run_url, analyst=analyst)


def _compute(parts: list[Any], plan: PartitionPlan, key: bytes, evaluation: bool) -> Release:
    """Steps 3-5 on checked partitions: the phases on the workers, then the one noisy release
    of their combined sums (dim, lin: the partitions' statistic vectors, added)."""
    if plan.sums is not None:
        return plan.estimator._release_statistics(
            plan.n, combine_statistics(_sums_phase(parts, plan, evaluation)),
            estimator=plan.sums, d=plan.d, evaluation=evaluation,
            params=fold_rule(plan.roles.id, len(parts), sums=True),
            columns=list(plan.roles.covariates))
    if plan.blocks is not None:
        total = combine_blocks(_block_phase(parts, plan.blocks, plan, key, evaluation))
    else:
        models = _fit_phase(parts, plan, key, evaluation)
        total = combine(_aggregation_phase(parts, plan, key, models, evaluation))
    if total.n != plan.n:
        raise AssertionError("bug: the partitions' rows differ from their footers' counts")
    return plan.estimator._release_sums(
        plan.n, total.s1, total.s2, n_folds=plan.n_folds, d=plan.d, evaluation=evaluation,
        params=fold_rule(plan.roles.id, len(parts), blocks=plan.blocks is not None),
        layout=plan.layout)


def _registered_release(config: ReleaseConfig, held: Checked, key: bytes,
                        roles: dict[str, Any], release_id: str, run_url: str | None,
                        analyst: str | None = None) -> Charged:
    """The release of a partitioned source checked from its registration (issue 32 §3): the
    charge is reserved on the registered facts first; only then are the partitions listed and
    their footers read, or a SQL source's partitions counted (``count_sql``, on a worker), all
    inside the charged task, so no answer before the charge depends on the source. Partitions
    that no longer hold the registered n records fail there, charged and generic."""
    data, estimator = config.data, build_mechanism(config)

    def compute() -> Release:
        parts: list[Any]
        if data.sql_partitions is not None:
            source = sql_partitions_of(data, config.runner)
            parts, checked = _checked_sql(source, count_sql(source, key, roles), estimator,
                                          **roles)
        else:
            parts, checked = _checked(str(data.partitions), estimator,
                                      id_column=str(data.id_column), **roles)
        if checked.prepared.public.n != held.prepared.public.n:
            raise SourceChangedError(
                f"the partitions hold {checked.prepared.public.n} records, the registration "
                f"{held.prepared.public.n}: the curator registers the new version")
        return _compute(parts, checked.prepared.data, key, config.evaluation)

    computing = replace(held, prepared=Prepared(public=held.prepared.public, data=compute))
    return charged_release(PartitionedATE(estimator), computing,
                           dataset=config.ledger.dataset_id, release_id=release_id,
                           evaluation=config.evaluation,
                           detail={**KINDS["ate"].detail(with_planned(config, held.planned)),
                                   "path": "partitioned"},
                           cap=KINDS["ate"].cap(config), run_url=run_url, analyst=analyst)


# ----------------------------------------------------------------- phases
def _fit_phase(parts: list[Any], plan: PartitionPlan, key: bytes, evaluation: bool
               ) -> PrefectFuture:
    """The future of all K fold models (gathered on a worker, never fetched by the flow)."""
    futures = [fit_partition_folds.submit(p, plan.roles, plan.estimator, key, f, evaluation)
               for p, f in zip(parts, plan.folds, strict=True)]
    _track("fit", futures)
    return all_fold_models.submit(futures)


def _block_phase(parts: list[Any], blocks: tuple[range, ...], plan: PartitionPlan, key: bytes,
                 evaluation: bool) -> list[Any]:
    """Each partition's per-block sums (spec §2.5b), one task per partition."""
    futures = [block_score_sums.submit(p, plan.roles, plan.estimator, key, b, evaluation)
               for p, b in zip(parts, blocks, strict=True)]
    _track("block", futures)
    return [fut.result() for fut in futures]


def _sums_phase(parts: list[Any], plan: PartitionPlan, evaluation: bool) -> list[Any]:
    """Each partition's ``dim``/``lin`` statistic vector, one task per partition."""
    futures = [partition_sum_statistics.submit(p, plan.roles, plan.estimator, evaluation)
               for p in parts]
    _track("sums", futures)
    return [fut.result() for fut in futures]


def _aggregation_phase(parts: list[Any], plan: PartitionPlan, key: bytes,
                       models: PrefectFuture, evaluation: bool) -> list[Any]:
    futures = [partition_score_sums.submit(p, plan.roles, plan.estimator, key, f, models,
                                           evaluation)
               for p, f in zip(parts, plan.folds, strict=True)]
    _track("aggregation", futures)
    return [fut.result() for fut in futures]


def _track(phase: str, futures: list[PrefectFuture]) -> None:
    """Log and show the phase's progress as partitions finish (counts only), also to the CLI's
    progress bar (:mod:`flows.progress`)."""
    logger = get_run_logger()
    total = len(futures)
    progress.phase(f"{phase} partitions", total=total)
    artifact = create_progress_artifact(0.0, description=f"{phase} phase: partitions done")
    for done, _ in enumerate(as_completed(futures), start=1):
        update_progress_artifact(artifact, 100.0 * done / total)
        logger.info("%s phase: %d/%d partitions", phase, done, total)
        progress.advance()
