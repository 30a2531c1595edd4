"""The charged-release path of every kind: public checks, then the ONE task that charges a
release (issue 17; issue 18 item 3; issue 27 §3).

1. :func:`tasks.preflight.check_release` (also the CLI's preflight, before any Prefect server
   starts), run here as the task ``check_release``: the public checks, the charge and the
   budget; nothing is charged and nothing is drawn.
2. :func:`charged_release`: the library's one reserve -> draw -> commit function,
   :func:`dpcausal.session.charged_release` (the one notebooks' ``ledger.charging`` uses too),
   on the project ledger: reserve the charge, run the mechanism's release phase once (all work on
   data values: value checks, fold fits, aggregation, the noise), commit its JSON before anything
   is shown. A failure there is charged and generic; its details go to the curator's private
   log (``<data>/private/errors.log``).

The tasks keep nothing: ``persist_result=False``, no cache, no retries (the ledger makes a rerun
of a committed release id return the committed release). They hand the
:class:`dpcausal.Release` itself to the flow, which logs and prints it through its own methods.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import TerminationSignal

from dpcausal import Mechanism
from dpcausal.session import Charged, evaluation_release
from dpcausal.session import charged_release as charge_to_ledger
from dpcausal.validation import treat_as_interrupt
from store import log_private_errors
from tasks import ledger_ops
from tasks.preflight import Checked, check_release

# SIGTERM reaches a flow as Prefect's TerminationSignal: an interrupt, never a model's failure
treat_as_interrupt(TerminationSignal)

_PRIVATE_TASK: dict[str, Any] = dict(persist_result=False, cache_policy=NO_CACHE, retries=0)


check_release_task = task(name="check_release", **_PRIVATE_TASK)(check_release)


@task(name="charged_release", **_PRIVATE_TASK)
def charged_release(mechanism: Mechanism, checked: Checked, *, dataset: str, release_id: str,
                    evaluation: bool, detail: dict[str, Any], cap: str = "--zeta Z",
                    run_url: str | None = None, analyst: str | None = None) -> Charged:
    """Step 2: the only place in the orchestration that charges a release.

    Release mode: :func:`dpcausal.session.charged_release` on the project ledger (reserve
    ``checked.charge`` per ``mechanism.unit`` binding the fingerprint, read the input if it was
    checked from the registration (``checked.load``), release once, commit; a
    release id committed before returns its stored release without drawing). Evaluation mode:
    no ledger; the release is marked not private. Returns the :class:`dpcausal.Release`
    (rebuilt from its committed JSON when ``reused``). ``analyst``: the remote analyst who
    asked, recorded with the charge and held to their own cap in the same reservation.
    """
    if evaluation:
        return Charged(evaluation_release(mechanism, checked.prepared).of_dataset(dataset))
    log_private_errors()
    with ledger_ops.in_cli_words(dataset, cap), ledger_ops.open_ledger(dataset, cap) as led:
        # a release checked from its registration reads its input here, after the reservation
        return charge_to_ledger(led, dataset, release_id, mechanism,
                                checked.load or checked.prepared, checked.charge,
                                fingerprint=checked.identity, run_url=run_url, detail=detail,
                                analyst=analyst)
