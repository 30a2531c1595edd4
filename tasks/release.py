"""The charged-release path of every kind: public checks, then the ONE task that reserves in the
ledger, releases once and commits (issue 17; issue 18 item 3).

1. :func:`tasks.preflight.check_release` (also the CLI's preflight, before any Prefect server
   starts), run here as the task ``check_release``: the public checks, the charge and the
   budget; nothing is charged and nothing is drawn.
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

from dpcausal import Mechanism, Release
from dpcausal.validation import ReleaseFailedError
from store import log_private_errors
from tasks import ledger_ops
from tasks.preflight import Checked, check_release

_PRIVATE_TASK: dict[str, Any] = dict(persist_result=False, cache_policy=NO_CACHE, retries=0)
_private_log = logging.getLogger("dpcausal.private")


@dataclass(frozen=True)
class Published:
    """What a release published: its dict (:meth:`dpcausal.Release.to_dict`), its text
    (``str(release)``), whether it was the committed release of an earlier attempt, and the
    :class:`dpcausal.Release` itself (None for a committed one, known by its JSON only)."""

    release: dict[str, Any]
    text: str
    reused: bool = False
    result: Release | None = field(default=None, repr=False, compare=False)


check_release_task = task(name="check_release", **_PRIVATE_TASK)(check_release)


@task(name="charged_release", **_PRIVATE_TASK)
def charged_release(mechanism: Mechanism, checked: Checked, *, dataset: str, release_id: str,
                    evaluation: bool, detail: dict[str, Any], cap: str = "--zeta Z",
                    run_url: str | None = None) -> Published:
    """Step 2: the only place in the project that reserves and commits ledger charges.

    Release mode: reserve ``checked.charge`` per ``mechanism.unit`` (binding its identity),
    ``private_release`` once, commit; a release id committed before returns its stored release
    without drawing. Evaluation mode: no ledger; the release is marked not private.
    """
    if evaluation:
        release = mechanism.private_release(checked.prepared, evaluation=True).of_dataset(dataset)
        return Published(release.to_dict(), str(release), result=release)
    log_private_errors()
    with ledger_ops.open_ledger(dataset, cap) as led:
        with led.release(dataset, release_id, checked.charge, run_url=run_url,
                         unit=mechanism.unit, fingerprint=checked.identity,
                         detail=detail) as slot:
            if slot.result is not None:
                stored = json.loads(slot.result)
                return Published(stored, _stored_text(stored), reused=True)
            try:
                release = mechanism.private_release(checked.prepared, evaluation=False
                                                    ).of_dataset(dataset)
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
