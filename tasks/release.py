"""The charged-release path of every kind: public checks, then the ONE task that reserves in the
ledger, releases once and commits (issue 17; issue 18 item 3).

1. :func:`check_release` (also the CLI's preflight, before any Prefect server starts): read the
   source, keep the release's columns, fingerprint them (keyed), ``check_input`` (every refusal
   decided by public facts: schema, n, parameters), the data-free charge, then the budget
   (``Ledger.check``) in release mode, or in evaluation mode the refusal of any dataset the
   ledger knows (issue 18 item 6). Nothing is charged and nothing is drawn here. A partitioned
   source is checked on its Parquet footers only (:func:`check_partitioned`).
2. :func:`charged_release`: reserve the charge, run ``mechanism.private_release`` once (all work
   on data values: value checks, fold fits, aggregation, the noise), commit its JSON before
   anything is shown. In release mode any failure there is charged and generic; its details go
   to the curator's private log (``<data>/private/errors.log``).

The tasks keep nothing: ``persist_result=False``, no cache, no retries (the ledger makes a rerun
of a committed release id return the committed release).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from conf.models import DataSource
from dpcausal import Mechanism, Prepared, Release
from dpcausal.accounting import PrivacyCharge
from dpcausal.estimator import PrivateATE
from dpcausal.partitioned import plan_partitions
from dpcausal.validation import ReleaseFailedError
from store import digest, frame_fingerprint, log_private_errors
from tasks import ledger_ops
from tasks.data import parquet_footer, partition_files, read_frame, select

_PRIVATE_TASK: dict[str, Any] = dict(persist_result=False, cache_policy=NO_CACHE, retries=0)
_private_log = logging.getLogger("dpcausal.private")


class EvaluationRefusedError(ValueError):
    """Evaluation mode (a non-private read) asked for data the ledger knows."""


@dataclass(frozen=True)
class Checked:
    """A checked input: the mechanism's :class:`Prepared` input (data: never shown), its keyed
    fingerprint (None where the data never sit in one process: the partitioned path), the column
    schema (names and dtypes: public) and the data-free charge."""

    prepared: Prepared = field(repr=False)
    fingerprint: str | None
    schema: dict[str, str]
    charge: PrivacyCharge
    digest: str | None = None  # of public facts (footers): the MLflow digest without fingerprint


@dataclass(frozen=True)
class Published:
    """What a release published: its dict (:meth:`dpcausal.Release.to_dict`), its text
    (``str(release)``), whether it was the committed release of an earlier attempt, and the
    :class:`dpcausal.Release` itself (None for a committed one, known by its JSON only)."""

    release: dict[str, Any]
    text: str
    reused: bool = False
    result: Release | None = field(default=None, repr=False, compare=False)


def check_release(source: DataSource, columns: list[str] | None, mechanism: Mechanism,
                  roles: dict[str, Any], *, dataset: str, evaluation: bool,
                  cap: str) -> Checked:
    """Step 1 (see the module doc); raises ``ValueError``/``TypeError`` for bad input and the
    ledger's errors (``BudgetExceededError`` ...) for a refusal, before anything is charged. A
    partitioned source goes to :func:`check_partitioned` (footers only)."""
    if source.partitions is not None:
        return check_partitioned(source, mechanism, roles, dataset=dataset,
                                 evaluation=evaluation, cap=cap)
    frame = select(read_frame(source), columns)
    fingerprint = frame_fingerprint(frame)
    prepared = mechanism.check_input(frame, **roles)
    charge = mechanism.privacy_charge(**prepared.public)
    check_ledger(dataset, charge, unit=mechanism.unit, fingerprint=fingerprint,
                 evaluation=evaluation, cap=cap)
    schema = {str(c): str(t) for c, t in frame.dtypes.items()}
    return Checked(prepared=prepared, fingerprint=fingerprint, schema=schema, charge=charge)


def check_partitioned(source: DataSource, mechanism: Mechanism, roles: dict[str, Any], *,
                      dataset: str, evaluation: bool, cap: str) -> Checked:
    """Step 1 for a partitioned source (issue 19 §3), reading the Parquet footers only (rows and
    schema: public, no value): :func:`dpcausal.partitioned.plan_partitions`, the charge, the
    ledger. The :class:`Checked` input's data is that plan; the ledger binds no fingerprint (no
    process reads every value)."""
    if not isinstance(mechanism, PrivateATE) or source.id_column is None:
        raise TypeError("data.partitions needs the core release (PrivateATE) and data.id_column")
    footers = [parquet_footer(p) for p in partition_files(str(source.partitions))]
    plan = plan_partitions(footers, mechanism, id_column=source.id_column,
                           treatment=roles["treatment"], outcome=roles["outcome"],
                           covariates=roles.get("covariates"), evaluation=evaluation)
    charge = plan.estimator.privacy_charge(plan.n, plan.d)
    check_ledger(dataset, charge, unit=mechanism.unit, fingerprint=None, evaluation=evaluation,
                 cap=cap)
    return Checked(prepared=Prepared(public={"n": plan.n, "d": plan.d}, data=plan),
                   fingerprint=None, schema=plan.schema, charge=charge,
                   digest=digest({"rows": plan.rows, "schema": plan.schema}))


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


check_release_task = task(name="check_release", **_PRIVATE_TASK)(check_release)


@task(name="charged_release", **_PRIVATE_TASK)
def charged_release(mechanism: Mechanism, checked: Checked, *, dataset: str, release_id: str,
                    evaluation: bool, detail: dict[str, Any], cap: str = "--zeta Z",
                    run_url: str | None = None) -> Published:
    """Step 2: the only place in the project that reserves and commits ledger charges.

    Release mode: reserve ``checked.charge`` per ``mechanism.unit`` (binding the fingerprint),
    ``private_release`` once, commit; a release id committed before returns its stored release
    without drawing. Evaluation mode: no ledger; the release is marked not private.
    """
    if evaluation:
        release = mechanism.private_release(checked.prepared, evaluation=True)
        return Published(release.to_dict(), str(release), result=release)
    log_private_errors()
    with ledger_ops.open_ledger(dataset, cap) as led:
        with led.release(dataset, release_id, checked.charge, run_url=run_url,
                         unit=mechanism.unit, fingerprint=checked.fingerprint,
                         detail=detail) as slot:
            if slot.result is not None:
                stored = json.loads(slot.result)
                return Published(stored, _stored_text(stored), reused=True)
            try:
                release = mechanism.private_release(checked.prepared, evaluation=False)
            except ReleaseFailedError:
                raise
            except Exception as exc:  # noqa: BLE001 - any data-dependent failure is generic
                _private_log.error("release %s failed", release_id, exc_info=exc)
                raise ReleaseFailedError(
                    "the release failed after its charge for a reason that may depend on the "
                    "data; its budget is spent; the curator's private log holds the details"
                ) from None
            slot.commit(release.to_json())
    return Published(release.to_dict(), str(release), result=release)


def _stored_text(stored: dict[str, Any]) -> str:
    """A committed release's text when only its JSON is at hand (a retried release id)."""
    lo, hi = stored.get("ci") or (None, None)
    ci = "" if lo is None else f"  {100 * stored['level']:g}% CI [{lo:.6g}, {hi:.6g}]"
    se = "" if stored.get("se") is None else f"  se {stored['se']:.4g}"
    ate = "-" if stored.get("ate") is None else f"{stored['ate']:.6g}"
    return f"{stored.get('kind', 'release')} (committed earlier)\nATE  {ate}{ci}{se}"
