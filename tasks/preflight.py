"""The public checks of a release, before anything is charged (issue 18 item 3): in release mode
the dataset's cap first, before any value is read (issue 26 §1: no cap is one refusal whatever
the data hold); then read the source as its declared types, fingerprint the table and its
source (keyed), keep the release's columns, ``check_input`` (every refusal decided by public
facts: schema, n, parameters), the data-free charge, then the budget (``Ledger.check``) in
release mode, or in evaluation mode the refusal of any dataset the ledger knows, by id, by its
data or by its source (issue 18 item 6, issue 26 §3). Nothing is charged and nothing is drawn
here. A partitioned source is checked on its Parquet footers only.

No Prefect import: the CLI runs these before it starts (or finds) a Prefect server;
:mod:`tasks.release` runs them as the flow's first task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conf.models import DataSource, Schema
from dpcausal import Mechanism, Prepared
from dpcausal.accounting import PrivacyCharge
from dpcausal.estimator import ATEFacts, PrivateATE
from dpcausal.partitioned import plan_partitions
from store import content_fingerprint, frame_fingerprint, source_fingerprint
from tasks import ledger_ops
from tasks.data import (
    data_file,
    parquet_footer,
    partition_files,
    partition_identity,
    read_frame,
    select,
    source_identity,
)


class EvaluationRefusedError(ValueError):
    """Evaluation mode (a non-private read) asked for data the ledger knows."""


@dataclass(frozen=True)
class Checked:
    """A checked input: the mechanism's :class:`Prepared` input (data: never shown), the keyed
    identities the ledger binds to the dataset id (:attr:`identity`: the table's order-invariant
    ``fingerprint``, None where the data never sit in one process, the partitioned path; and the
    ``source``'s), the keyed ``content`` hash of the columns fitted, in row order (the key of
    evaluation-mode fold models), the column names of the release (``schema``: public, the
    header or the footers; no dtype, which a CSV reader infers from the values), the data-free
    charge and the public parameters the planner fixed for it (``Mechanism.planned_params``:
    resolved once, here, before the charge, then carried through the release and its
    records)."""

    prepared: Prepared = field(repr=False)
    fingerprint: str | None
    source: str
    schema: tuple[str, ...]
    charge: PrivacyCharge
    content: str | None = None
    planned: dict[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> tuple[str, ...]:
        """What the ledger binds to one dataset id: the data's fingerprint and the source's."""
        return tuple(x for x in (self.fingerprint, self.source) if x is not None)


def check_release(source: DataSource, schema: Schema, mechanism: Mechanism,
                  roles: dict[str, Any], *, dataset: str, evaluation: bool,
                  cap: str) -> Checked:
    """Step 1 (see the module doc); raises ``ValueError``/``TypeError`` for bad input and the
    ledger's errors (``NoCapError``, ``BudgetExceededError`` ...) for a refusal, before anything
    is charged. ``schema`` is the declared types of the columns read
    (:meth:`conf.kinds.Kind.schema`). A partitioned source goes to :func:`check_partitioned`
    (footers only). Whether the data file exists is a public fact, not a value: a missing file
    is reported (exit 2, as ``plan`` does) before the cap."""
    if source.path is not None:
        data_file(source.path)
    if not evaluation:
        ledger_ops.require_cap(dataset, cap)
    if source.partitions is not None:
        return check_partitioned(source, mechanism, roles, dataset=dataset,
                                 evaluation=evaluation, cap=cap)
    # every column, as its declared type (others as numbers), so that a release of fewer or
    # reordered columns keeps the table's identity
    table = read_frame(source, Schema(schema.columns, rest=schema.rest or "float"))
    fingerprint, where = frame_fingerprint(table), source_fingerprint(source_identity(source))
    frame = select(table, None if schema.rest is not None else list(schema.columns))
    prepared = mechanism.check_input(frame, **roles)
    charge = mechanism.charge_of(prepared)
    check_ledger(dataset, charge, unit=mechanism.unit, identity=(fingerprint, where),
                 evaluation=evaluation, cap=cap)
    return Checked(prepared=prepared, fingerprint=fingerprint, source=where,
                   schema=tuple(map(str, frame.columns)), charge=charge,
                   content=content_fingerprint(frame),
                   planned=mechanism.planned_params(prepared.public))


def check_partitioned(source: DataSource, mechanism: Mechanism, roles: dict[str, Any], *,
                      dataset: str, evaluation: bool, cap: str) -> Checked:
    """Step 1 for a partitioned source (issue 19 §3), reading the Parquet footers only (rows and
    schema: public, no value): :func:`check_footers`, then the ledger, which binds the source
    (the partition list and footers), not the data (no process reads every value)."""
    if not isinstance(mechanism, PrivateATE) or source.id_column is None:
        raise TypeError("data.partitions needs the core release (PrivateATE) and data.id_column")
    parts = partition_files(str(source.partitions))
    checked = check_footers(parts, [parquet_footer(p) for p in parts], mechanism,
                            id_column=source.id_column, treatment=roles["treatment"],
                            outcome=roles["outcome"], covariates=roles.get("covariates"),
                            evaluation=evaluation)
    check_ledger(dataset, checked.charge, unit=mechanism.unit, identity=checked.identity,
                 evaluation=evaluation, cap=cap)
    return checked


def check_footers(parts: list[str], footers: list[tuple[int, dict[str, str]]],
                  estimator: PrivateATE, *, id_column: str, treatment: str, outcome: str,
                  covariates: list[str] | None, evaluation: bool) -> Checked:
    """The checked input of a partitioned source from its partition list and their footers
    (wherever they were read): every public refusal
    (:func:`dpcausal.partitioned.plan_partitions`) and the charge; its data is the plan, its
    identity the keyed partition list with footers."""
    plan = plan_partitions(footers, estimator, id_column=id_column, treatment=treatment,
                           outcome=outcome, covariates=covariates, evaluation=evaluation)
    return Checked(prepared=Prepared(public=ATEFacts(plan.n, plan.d), data=plan),
                   fingerprint=None,
                   source=source_fingerprint(partition_identity(parts, footers)),
                   schema=tuple(plan.schema), charge=plan.estimator.privacy_charge(plan.n, plan.d),
                   planned=estimator.planned_params(plan.n, plan.d))


def check_ledger(dataset: str, charge: PrivacyCharge, *, unit: str, identity: tuple[str, ...],
                 evaluation: bool, cap: str) -> None:
    """The budget check of a release (``Ledger.check``, also refusing an ``identity`` bound to
    another dataset id), or in evaluation mode the refusal of any dataset the ledger knows: by
    id (a cap), by the data's keyed fingerprint or by its source's, under any id."""
    if evaluation:
        known = ledger_ops.budgeted_as(dataset, fingerprint=identity)
        if known is not None:
            raise EvaluationRefusedError(
                f"evaluation mode is refused for dataset {dataset!r}: the ledger knows these "
                f"data (as {known!r}), and evaluation is a non-private read of them; release "
                "them with mode: release, or evaluate on synthetic data")
    else:
        ledger_ops.check_budget(dataset, charge, unit=unit, fingerprint=identity, cap=cap)
