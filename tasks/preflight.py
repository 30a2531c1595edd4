"""The public checks of a release, before anything is charged (issue 18 item 3): in release mode
the dataset's cap first, before any value is read (issue 26 §1: no cap is one refusal whatever
the data hold); then read the source's columns as their declared types, fingerprint them (keyed),
``check_input`` (every refusal decided by public facts: schema, n, parameters), the data-free
charge, then the budget (``Ledger.check``) in release mode, or in evaluation mode the refusal of
any dataset the ledger knows (issue 18 item 6). Nothing is charged and nothing is drawn here. A
partitioned source is checked on its Parquet footers only.

No Prefect import: the CLI runs these before it starts (or finds) a Prefect server;
:mod:`tasks.release` runs them as the flow's first task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conf.models import DataSource, Schema
from dpcausal import Mechanism, Prepared
from dpcausal.accounting import PrivacyCharge
from dpcausal.estimator import PrivateATE
from dpcausal.partitioned import plan_partitions
from store import digest, frame_fingerprint
from tasks import ledger_ops
from tasks.data import partition_footers, read_frame


class EvaluationRefusedError(ValueError):
    """Evaluation mode (a non-private read) asked for data the ledger knows."""


@dataclass(frozen=True)
class Checked:
    """A checked input: the mechanism's :class:`Prepared` input (data: never shown), its keyed
    fingerprint (None where the data never sit in one process: the partitioned path), the column
    schema (names and dtypes: public), the data-free charge and the public parameters the
    planner fixed for it (``Mechanism.planned_params``: resolved once, here, before the charge,
    then carried through the release and its records)."""

    prepared: Prepared = field(repr=False)
    fingerprint: str | None
    schema: dict[str, str]
    charge: PrivacyCharge
    digest: str | None = None  # of public facts (footers): the MLflow digest without fingerprint
    planned: dict[str, Any] = field(default_factory=dict)


def check_release(source: DataSource, schema: Schema, mechanism: Mechanism,
                  roles: dict[str, Any], *, dataset: str, evaluation: bool,
                  cap: str) -> Checked:
    """Step 1 (see the module doc); raises ``ValueError``/``TypeError`` for bad input and the
    ledger's errors (``NoCapError``, ``BudgetExceededError`` ...) for a refusal, before anything
    is charged. ``schema`` is the declared types of the columns read
    (:meth:`conf.kinds.Kind.schema`). A partitioned source goes to :func:`check_partitioned`
    (footers only)."""
    if not evaluation:
        ledger_ops.require_cap(dataset, cap)
    if source.partitions is not None:
        return check_partitioned(source, mechanism, roles, dataset=dataset,
                                 evaluation=evaluation, cap=cap)
    frame = read_frame(source, schema)
    fingerprint = frame_fingerprint(frame)
    prepared = mechanism.check_input(frame, **roles)
    charge = mechanism.privacy_charge(**prepared.public)
    check_ledger(dataset, charge, unit=mechanism.unit, fingerprint=fingerprint,
                 evaluation=evaluation, cap=cap)
    dtypes = {str(c): str(t) for c, t in frame.dtypes.items()}
    return Checked(prepared=prepared, fingerprint=fingerprint, schema=dtypes, charge=charge,
                   planned=mechanism.planned_params(**prepared.public))


def check_partitioned(source: DataSource, mechanism: Mechanism, roles: dict[str, Any], *,
                      dataset: str, evaluation: bool, cap: str) -> Checked:
    """Step 1 for a partitioned source (issue 19 §3), reading the Parquet footers only (rows and
    schema: public, no value): :func:`check_footers`, then the ledger, which binds no
    fingerprint (no process reads every value)."""
    if not isinstance(mechanism, PrivateATE) or source.id_column is None:
        raise TypeError("data.partitions needs the core release (PrivateATE) and data.id_column")
    checked = check_footers(partition_footers(str(source.partitions)), mechanism,
                            id_column=source.id_column, treatment=roles["treatment"],
                            outcome=roles["outcome"], covariates=roles.get("covariates"),
                            evaluation=evaluation)
    check_ledger(dataset, checked.charge, unit=mechanism.unit, fingerprint=None,
                 evaluation=evaluation, cap=cap)
    return checked


def check_footers(footers: list[tuple[int, dict[str, str]]], estimator: PrivateATE, *,
                  id_column: str, treatment: str, outcome: str, covariates: list[str] | None,
                  evaluation: bool) -> Checked:
    """The checked input of a partitioned source from its partitions' footers (wherever they
    were read): every public refusal (:func:`dpcausal.partitioned.plan_partitions`) and the
    charge; its data is the plan, its digest one of the footers' public facts."""
    plan = plan_partitions(footers, estimator, id_column=id_column, treatment=treatment,
                           outcome=outcome, covariates=covariates, evaluation=evaluation)
    return Checked(prepared=Prepared(public={"n": plan.n, "d": plan.d}, data=plan),
                   fingerprint=None, schema=plan.schema,
                   charge=plan.estimator.privacy_charge(plan.n, plan.d),
                   digest=digest({"rows": plan.rows, "schema": plan.schema}),
                   planned=estimator.planned_params(plan.n, plan.d))


def check_ledger(dataset: str, charge: PrivacyCharge, *, unit: str, fingerprint: str | None,
                 evaluation: bool, cap: str) -> None:
    """The budget check of a release (``Ledger.check``), or in evaluation mode the refusal of
    any dataset the ledger knows (by id or by the data's keyed fingerprint)."""
    if evaluation:
        known = ledger_ops.budgeted_as(dataset, fingerprint=fingerprint)
        if known is not None:
            raise EvaluationRefusedError(
                f"evaluation mode is refused for dataset {dataset!r}: the ledger knows these "
                f"data (as {known!r}), and evaluation is a non-private read of them; release "
                "them with mode: release, or evaluate on synthetic data")
    else:
        ledger_ops.check_budget(dataset, charge, unit=unit, fingerprint=fingerprint, cap=cap)
