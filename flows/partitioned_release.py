"""The partitioned release on Dask (issue 19 §3): the flow process never holds a row.

1. Public facts, on the workers: the partition list and each Parquet footer (rows, schema); the
   flow checks the schema and parameters, takes K from the planner (or the caller) and allocates
   each partition its folds (:func:`dpcausal.partitioned.allocate_folds`).
2. The charge is reserved in the ledger by the project's one charged-release task
   (:func:`tasks.release.charged_release`) before any task reads a data value; the phases below
   run inside it (their tasks still go to this flow's task runner).
3. Fit phase: one task per partition reads it and fits the folds it owns; the fold models stay
   Dask results on the workers (no shared disk) and are gathered by one task.
4. Aggregation phase: one task per partition reads it again and returns (n_p, sum Gamma,
   sum Gamma^2) given all K fold models, which Dask moves worker to worker (once per worker):
   only the partitions' sums reach the flow process.
5. The flow combines the sums into (tau_hat, V_hat, n) and makes one noisy release
   (:meth:`dpcausal.PrivateATE.release_sums`), committed before it is returned.

Progress of both phases is logged (partitions done / total) and shown as Prefect progress
artifacts. Folds: keyed hash of the declared id column, per-release key from OS entropy or the
curator's fold key (``<data>/private/fold.key``); the rule is in :mod:`dpcausal.partitioned`.
"""

from __future__ import annotations

from typing import Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.futures import PrefectFuture, as_completed
from prefect.runtime import flow_run
from prefect_dask import DaskTaskRunner

import store
from dpcausal import Prepared, Release
from dpcausal.estimator import PrivateATE
from dpcausal.partitioned import (
    Roles,
    allocate_folds,
    combine,
    fold_rule,
    release_key,
)
from tasks import ledger_ops
from tasks.partitioned import (
    PartitionedATE,
    all_fold_models,
    describe_partition,
    fit_partition_folds,
    list_partitions,
    partition_score_sums,
)
from tasks.release import Checked, EvaluationRefusedError, charged_release

# Threads by default (recipe §7: on 2 cores threads beat processes); pass a scheduler address to
# run on a real cluster.
# No memory limit: a worker never spills task data (rows, models) to its local disk. Port 0:
# the scheduler's HTTP server (on even without a dashboard) takes a free port, not 8787.
DEFAULT_RUNNER = DaskTaskRunner(cluster_kwargs={
    "n_workers": 2, "threads_per_worker": 1, "processes": False, "dashboard_address": ":0",
    "memory_limit": 0})


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
    logger = get_run_logger()
    parts = list_partitions(source)
    described = [f.result() for f in describe_partition.map(parts)]
    rows = [r for r, _ in described]
    roles = _roles(described, id_column, treatment, outcome, covariates)
    n, d = sum(rows), len(roles.covariates)
    est = PrivateATE(**{"compute_budget": compute_budget, **estimator}, folds="secret",
                     n_folds=n_folds or "auto")
    K = est.resolved_n_folds(n, d)                          # n_folds=None: the planner's K
    est.set_params(n_folds=K)
    est._params(n, d)                                       # public refusals, before the charge
    est.check_mode(evaluation)
    folds = allocate_folds(rows, K)
    key = store.fold_key() if fold_key == "curator" else release_key()
    logger.info("partitioned release: %d partitions, n=%d, d=%d, K=%d", len(parts), n, d, K)

    def compute() -> Release:
        models = _fit_phase(parts, roles, est, key, folds, evaluation)
        sums = _aggregation_phase(parts, roles, est, key, folds, models, evaluation)
        total = combine(sums)
        if total.n != n:
            raise AssertionError("bug: the partitions' rows differ from their footers' counts")
        return est.release_sums(n, total.s1, total.s2, n_folds=K, d=d, evaluation=evaluation,
                                params=fold_rule(id_column, len(parts)))

    charge = est.privacy_charge(n, d)
    if evaluation:
        known = ledger_ops.budgeted_as(dataset_id) if dataset_id is not None else None
        if known is not None:
            raise EvaluationRefusedError(
                f"evaluation mode is refused for dataset {dataset_id!r}: it has a budget, and "
                "evaluation is a non-private read of the data")
    elif dataset_id is None:
        raise ValueError("a release needs dataset_id (its budget in the ledger)")
    else:
        ledger_ops.check_budget(dataset_id, charge, unit="row")
    checked = Checked(prepared=Prepared(public={"n": n, "d": d}, data=compute),
                      fingerprint=None, schema=described[0][1], charge=charge)
    published = charged_release(
        PartitionedATE(est), checked, dataset=dataset_id or "", evaluation=evaluation,
        release_id=f"{flow_run.id}/partitioned-ate",
        detail={"mechanism_class": "PrivateATE", "path": "partitioned", "n_folds": K})
    return published.release


# ----------------------------------------------------------------- phases
def _fit_phase(parts: list[str], roles: Roles, est: PrivateATE, key: bytes, folds: list[range],
               evaluation: bool) -> PrefectFuture:
    """The future of all K fold models (gathered on a worker, never fetched by the flow)."""
    futures = [fit_partition_folds.submit(p, roles, est, key, f, evaluation)
               for p, f in zip(parts, folds, strict=True)]
    _track("fit", futures)
    return all_fold_models.submit(futures)


def _aggregation_phase(parts: list[str], roles: Roles, est: PrivateATE, key: bytes,
                       folds: list[range], models: PrefectFuture, evaluation: bool
                       ) -> list[Any]:
    futures = [partition_score_sums.submit(p, roles, est, key, f, models,
                                           evaluation)
               for p, f in zip(parts, folds, strict=True)]
    _track("aggregation", futures)
    return [fut.result() for fut in futures]


def _track(phase: str, futures: list[PrefectFuture]) -> None:
    """Log and show the phase's progress as partitions finish (counts only)."""
    logger = get_run_logger()
    total = len(futures)
    artifact = create_progress_artifact(0.0, description=f"{phase} phase: partitions done")
    for done, _ in enumerate(as_completed(futures), start=1):
        update_progress_artifact(artifact, 100.0 * done / total)
        logger.info("%s phase: %d/%d partitions", phase, done, total)


# ----------------------------------------------------------------- public facts
_NUMERIC = ("int", "uint", "float", "double", "bool", "halffloat")


def _roles(described: list[tuple[int, dict[str, str]]], id_column: str, treatment: str,
           outcome: str, covariates: list[str] | None) -> Roles:
    """Column roles checked against every partition's schema (public facts)."""
    schemas = [s for _, s in described]
    if any(s != schemas[0] for s in schemas[1:]):
        raise ValueError("the partitions do not share one schema (names and types)")
    schema = schemas[0]
    named = [id_column, treatment, outcome]
    if covariates is None:
        covariates = [c for c in schema if c not in named]
    missing = [c for c in named + covariates if c not in schema]
    if missing:
        raise ValueError(f"columns {missing} are not in the partitions (columns: {list(schema)})")
    if not covariates:
        raise ValueError("no covariate columns: name them with covariates=[...]")
    for c in [treatment, outcome, *covariates]:
        if not schema[c].startswith(_NUMERIC):
            raise TypeError(f"column {c!r} must be numeric, got {schema[c]}")
    if not (schema[id_column].startswith(("int", "uint")) or schema[id_column] in
            ("string", "large_string")):
        raise TypeError(f"id column {id_column!r} must hold integers or strings, "
                        f"got {schema[id_column]}")
    return Roles(id=id_column, treatment=treatment, outcome=outcome, covariates=tuple(covariates))
