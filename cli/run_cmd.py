"""``dpcausal run CONFIG [--set key=value ...]`` and ``dpcausal demo``, for every release kind.

Heavy imports happen inside the commands (``dpcausal --help`` stays fast). Before any Prefect
server starts, the public checks (:func:`tasks.preflight.public_checks`) run, charging nothing:
bad input exits 2, a refusal by the budget 3, their warnings are printed once in plain words
(``--strict`` refuses instead, exit 2). A release that fails afterwards exits 1 with one
``Error:`` paragraph, with no data-dependent text in release mode (:func:`store.log_failure`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from cli.common import (
    EXIT_FAILED,
    exit_code,
    fail,
    load_config,
    no_progress_option,
    quiet_console,
    report_error,
    verbose_option,
)


def _failed(exc: BaseException, evaluation: bool) -> NoReturn:
    """End the command on ``exc``: a refusal or bad input with its message (exit 3 or 2: public
    facts decided it); anything else as one paragraph naming what failed and where the details
    are (exit 1): release mode shows no exception text (it may depend on the data), evaluation
    mode does."""
    if (code := exit_code(exc)) != EXIT_FAILED:
        fail(exc, code)
    from store import log_failure

    what, path = log_failure(exc, evaluation=evaluation)
    report_error(f"the release run failed ({what}). The temporary services of the run were "
                 f"stopped; the full log is in the curator's private log {path}.", EXIT_FAILED,
                 type(exc).__name__)


def preflight(config: Any, *, strict: bool, bounds_notice: bool = False
              ) -> tuple[Any, list[str]]:
    """:func:`tasks.preflight.public_checks`, with no Prefect import: its warnings printed once
    in plain words (``strict``: a warning refuses, exit 2) and, with ``bounds_notice``, a notice
    when a core release's bounds were never privately checked. Returns the checked input and
    the warnings shown; a failure ends the command (exit 1, 2, 3)."""
    from tasks.preflight import public_checks

    checked, shown, failure = public_checks(config)
    for text in shown:
        click.echo(f"Warning: {' '.join(text.split())}", err=True)
    if failure is not None:
        _failed(failure, config.evaluation)
    if strict and shown:
        fail(ValueError(f"refused by --strict: {len(shown)} warning(s) above; nothing was "
                        "charged"))
    if config.kind == "ate" and not config.evaluation and bounds_notice:
        from tasks.ledger_ops import bounds_notice as notice

        if text := notice(config):
            click.echo(text, err=True)
    return checked, shown


def execute(config: Any, *, as_json: bool, show_progress: bool, verbose: bool,
            strict: bool = False, bounds_notice: bool = False) -> dict[str, Any]:
    """:func:`preflight`, then the release flow with a progress bar; prints it. The flow takes
    the preflight's checked input in memory (:func:`tasks.preflight.checked_in_process`): the
    data are read once, and the preflight's warnings are not raised again."""
    quiet_console(verbose)
    from deploy.prefect_api import boot_temporary_server, release_in_process

    server = boot_temporary_server()  # boots during the checks; stopped at exit
    checked, _ = preflight(config, strict=strict, bounds_notice=bounds_notice)

    import signal

    from cli.printer import print_result
    from cli.progress_bar import progress_bar

    # SIGTERM unwinds like Ctrl-C, so the temporary Prefect server and any Dask cluster of the
    # run stop with it (their context managers and atexit hooks run)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        unit = "partitions" if config.data.partitioned else "folds"
        result = release_in_process(config, checked, progress_bar(
            unit, enabled=show_progress and not as_json), server)
    except KeyboardInterrupt:
        report_error("the release run was interrupted (SIGTERM or Ctrl-C); the temporary "
                     "services of the run were stopped; a charge it had reserved stays spent "
                     f"(dpcausal ledger history {config.ledger.dataset_id}).", EXIT_FAILED,
                     "KeyboardInterrupt")
    except Exception as exc:  # noqa: BLE001
        _failed(exc, config.evaluation)
    print_result(result, as_json=as_json)
    return result


def rehearse(config: Any, config_path: str, *, strict: bool, bounds_notice: bool,
             as_json: bool) -> None:
    """``run --dry-run``: :func:`preflight` (which exits as ``run`` would on a failure), then
    what the release would charge; nothing is charged and no server starts."""
    from tasks.preflight import charge_of, describe_charge

    checked, shown = preflight(config, strict=strict, bounds_notice=bounds_notice)
    charge = charge_of(checked)
    dataset = config.ledger.dataset_id
    if as_json:
        click.echo(json.dumps({"dry_run": True, "config": config_path, "dataset": dataset,
                               "evaluation": config.evaluation, "charge": charge,
                               "warnings": shown}))
        return
    cost = "nothing (evaluation mode)" if config.evaluation else describe_charge(charge)
    click.echo(f"Dry run of {config_path}: every check before the charge passed; the release "
               f"would charge {cost} to dataset {dataset!r}. Nothing was charged.")


def submit_run(config: Any, config_path: str, overrides: tuple[str, ...]) -> None:
    """``run --submit``, after :func:`preflight` passed (a refusal exits as ``run`` would,
    before anything is submitted): the release through the served stack's deployment
    (:func:`conf.deployment.submission`: a shipped config, or the file the dataset was
    registered from; analysis keys only, else exit 2); prints the flow run's URL at once."""
    from conf.deployment import submission
    from deploy.prefect_api import submit_release

    try:
        url = submit_release(submission(config_path, config.ledger.dataset_id, overrides))
    except (LookupError, ValueError) as exc:
        fail(exc)
    click.echo(url)


@click.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value by dotted key, e.g. --set estimator.zeta=1.0")
@click.option("--dry-run", is_flag=True,
              help="Every check the release makes before its charge, then stop with the exit "
                   "code the release would have (charges nothing, starts no server).")
@click.option("--submit", is_flag=True,
              help="Run the release through the deployment of the `dpcausal serve` stack and "
                   "print its flow run's URL at once.")
@click.option("--strict", is_flag=True,
              help="Refuse the release (exit 2, nothing charged) if its public checks warn.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the result, or the error, as JSON.")
@no_progress_option
@verbose_option
def run(config_path: str, overrides: tuple[str, ...], dry_run: bool, submit: bool, strict: bool,
        as_json: bool, no_progress: bool, verbose: bool) -> None:
    """Run the release of CONFIG (a conf/release/*.yaml file) through the dp_release flow; its
    top-level `kind:` (ate when absent; `dpcausal demo --help` lists the kinds) picks the
    mechanism.

    Exit codes: 0 released, 2 bad input or configuration, 3 refused by the budget, 1 else."""
    if submit and dry_run:
        fail(ValueError("--submit and --dry-run exclude each other: rehearse first, then submit"))
    config = load_config(config_path, overrides, asked=True)
    partitioned = config.data.partitioned  # the check reads the outcome in memory
    if submit:  # the same public checks and budget test first: run's exit code, nothing sent
        preflight(config, strict=strict)
        submit_run(config, config_path, overrides)
        return
    if dry_run:
        rehearse(config, config_path, strict=strict, bounds_notice=not partitioned,
                 as_json=as_json)
        return
    execute(config, as_json=as_json, show_progress=not no_progress, verbose=verbose,
            strict=strict, bounds_notice=not partitioned)


class KindChoice(click.Choice):
    """The release kinds of :data:`conf.kinds.KINDS`, read when the option is parsed or shown
    (importing the registry at start-up would import the library)."""

    def __init__(self) -> None:  # no super().__init__: the choices are the registry's
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        from conf.kinds import KINDS

        return tuple(KINDS)


@click.command()
@click.option("--kind", type=KindChoice(), default="ate", show_default=True,
              help="The core ATE release, or a further mechanism's demo release.")
@click.option("--n", "n_rows", default=5000, show_default=True,
              help="Rows of synthetic data (core ATE demo).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a value of the embedded demo config.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@no_progress_option
@verbose_option
def demo(kind: str, n_rows: int, overrides: tuple[str, ...], as_json: bool, no_progress: bool,
         verbose: bool) -> None:
    """Write synthetic data, register it as the curator would (synthetic, with its cap if it
    has none), then run a full private release on it (conf/release/*demo.yaml)."""
    from tasks.registration import prepare_demo

    try:
        base, note = prepare_demo(kind, n_rows)  # the curator's step
    except (ValueError, TypeError) as exc:
        fail(exc)
    config = load_config(None, overrides, base=base, asked=True)
    if not as_json:
        click.echo(note, err=True)
    execute(config, as_json=as_json, show_progress=not no_progress, verbose=verbose)
    if not as_json:
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        mlflow_bin = Path(sys.executable).with_name("mlflow")
        click.echo(f"\nMLflow run recorded in {uri}. Browse it with:\n"
                   f"  {mlflow_bin} ui --backend-store-uri {uri} --workers 1\n"
                   f"then open http://127.0.0.1:5000 (experiment {config.experiment_name!r}).\n"
                   "Privacy spend per dataset: ./dev ledger budgets")
