"""``dpcausal run CONFIG [--set key=value ...]`` and ``dpcausal demo``, for every release kind.

Heavy imports (Prefect, MLflow, scikit-learn) happen inside the commands, so ``dpcausal --help``
stays fast. Before any Prefect server starts, the config, the mechanism, the data's schema and the
budget are checked (charging nothing): bad input exits 2, a refusal by the budget exits 3. The
warnings those public checks raise, and ``plan``'s warning when the release's expected CI is more
than 10 times the non-private one (:func:`tasks.planning.release_warnings`), are printed there,
once, in plain words (``--strict`` refuses the release instead, exit 2). A release that fails
afterwards exits 1 with one ``Error:`` paragraph; in release mode it holds no data-dependent
text (the details go to the curator's private log).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
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
    from store import log_private_errors

    path = log_private_errors()
    logging.getLogger("dpcausal.private").error("release run failed", exc_info=exc)
    what = type(exc).__name__
    if evaluation or exc.__class__.__name__ == "ReleaseFailedError":
        what += f": {' '.join(str(exc).split())}"
    report_error(f"the release run failed ({what}). The temporary services of the run were "
                 f"stopped; the full log is in the curator's private log {path}.", EXIT_FAILED,
                 type(exc).__name__)


def _bounds_notice(config: Any) -> None:
    """A core release whose outcome bounds the ledger has never seen privately checked says so,
    once, before the charge (issue 19 §1), with the charged library call that checks them.
    Only an outcome declared binary (``data.dtypes`` gives it ``bool``: its reader makes any
    value but 0/1 missing, so nothing is clipped) needs no check; bounds [0, 1] alone declare
    nothing, as they are easily copied onto a continuous outcome (issue 34 §2)."""
    from tasks.ledger_ops import bounds_checked

    bounds, dataset = config.estimator.outcome_bounds, config.ledger.dataset_id
    if bounds is None or config.data.dtypes.get(config.columns.outcome) == "bool" or \
            bounds_checked(dataset, tuple(bounds)):
        return
    click.echo(f"Notice: the outcome bounds [{bounds[0]:g}, {bounds[1]:g}] have never been "
               f"checked on dataset {dataset!r}; outcomes outside them are clipped and bias the "
               "release. A private check costs a small stated budget (zeta=0.1 under a zeta or "
               "rho cap, epsilon=0.1 under an epsilon cap), charged to the ledger from Python: "
               f"`with dpcausal.Ledger().charging({dataset!r}): "
               f"BoundsCheck(outcome_bounds=({bounds[0]:g}, {bounds[1]:g}), zeta=0.1)"
               f".fit(df, outcome={config.columns.outcome!r})` (dpcausal.bounds_check)", err=True)


def preflight(config: Any, *, strict: bool, bounds_notice: bool = False
              ) -> tuple[Any, list[str]]:
    """Every check of a release before its charge, with no Prefect import: config, schema,
    source shape, the budget's existence and headroom (``tasks.preflight.check_release``), its
    warnings printed once in plain words (``strict``: a warning refuses, exit 2) and, with
    ``bounds_notice``, a notice when a core release's bounds were never privately checked.
    Returns the checked input and the warnings shown; a failure ends the command (exit 1, 2, 3)."""
    from conf.kinds import KINDS
    from dpcausal.validation import NoiseWiderThanBoundsWarning
    from tasks.planning import release_warnings
    from tasks.preflight import check_release

    kind = KINDS[config.kind]
    failure: Exception | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:  # the flow's first step, here before any Prefect server starts
            mechanism = kind.build(config)
            checked = check_release(config.data, kind.schema(config), mechanism,
                                    kind.roles(config), dataset=config.ledger.dataset_id,
                                    evaluation=config.evaluation, cap=kind.cap(config),
                                    runner=config.runner)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one paragraph
            failure = exc
    # the distinct UserWarning texts, in order, one line each
    shown = list(dict.fromkeys(str(w.message) for w in caught
                               if issubclass(w.category, UserWarning)))
    # the planner's warning (issue 33 §5), unless the noise alone already fills the bounds
    if failure is None and not any(issubclass(w.category, NoiseWiderThanBoundsWarning)
                                   for w in caught):
        shown += release_warnings(config, mechanism, checked)
    for text in shown:
        click.echo(f"Warning: {' '.join(text.split())}", err=True)
    if failure is not None:
        _failed(failure, config.evaluation)
    if strict and shown:
        fail(ValueError(f"refused by --strict: {len(shown)} warning(s) above; nothing was "
                        "charged"))
    if config.kind == "ate" and not config.evaluation and bounds_notice:
        _bounds_notice(config)
    return checked, shown


def execute(config: Any, *, as_json: bool, show_progress: bool, verbose: bool,
            strict: bool = False, bounds_notice: bool = False) -> dict[str, Any]:
    """:func:`preflight`, then the release flow with a progress bar; prints it. The flow takes
    the preflight's checked input in memory (:func:`tasks.preflight.checked_in_process`): the
    data are read once, and the preflight's warnings are not raised again."""
    quiet_console(verbose)
    checked, _ = preflight(config, strict=strict, bounds_notice=bounds_notice)

    import signal

    from cli.printer import print_result
    from cli.progress_bar import progress_bar
    from deploy.prefect_api import prefect_api
    from tasks.preflight import checked_in_process
    from tasks.tracking import connect

    # SIGTERM unwinds like Ctrl-C, so the temporary Prefect server and any Dask cluster of the
    # run stop with it (their context managers and atexit hooks run)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        unit = "partitions" if config.data.partitioned else "folds"
        with prefect_api(meanwhile=lambda: connect(config.mlflow.tracking_uri)), \
                progress_bar(unit, enabled=show_progress and not as_json), \
                checked_in_process(config, checked):
            from flows.release import run_release

            result = run_release(config)
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
    from dpcausal.accounting import gdp_epsilon

    checked, shown = preflight(config, strict=strict, bounds_notice=bounds_notice)
    charge = {k: v for k in ("mechanism", "zeta", "epsilon", "delta")
              if (v := getattr(checked.charge, k)) is not None}
    if charge["mechanism"] == "gaussian":  # zeta-GDP as (epsilon, delta): spec §1.3
        charge["epsilon"] = gdp_epsilon(charge["zeta"], charge["delta"])
    dataset = config.ledger.dataset_id
    if as_json:
        click.echo(json.dumps({"dry_run": True, "config": config_path, "dataset": dataset,
                               "evaluation": config.evaluation, "charge": charge,
                               "warnings": shown}))
        return
    cost = "nothing (evaluation mode)" if config.evaluation else (
        f"gaussian, zeta {charge['zeta']:g} (epsilon {charge['epsilon']:.3g} at delta "
        f"{charge['delta']:g})" if charge["mechanism"] == "gaussian" else ", ".join(
            f"{k} {v:g}" if isinstance(v, float) else str(v) for k, v in charge.items()))
    click.echo(f"Dry run of {config_path}: every check before the charge passed; the release "
               f"would charge {cost} to dataset {dataset!r}. Nothing was charged.")


def submit_run(config: Any, config_path: str, overrides: tuple[str, ...]) -> None:
    """``run --submit``, after :func:`preflight` passed (a refusal exits as ``run`` would,
    before anything is submitted): the config's release through the served stack's
    deployment; prints the flow run's URL at once (no wait). The deployment runs registered
    configs only, with analysis keys only (:mod:`conf.deployment`): anything else is refused
    here (exit 2), before anything is submitted."""
    import yaml

    from conf.deployment import REGISTERED_CONFIGS, check_analysis_key
    from conf.settings import PROJECT_ROOT
    from deploy.prefect_api import submit_release

    items = {key: yaml.safe_load(value) for key, _, value in
             (item.partition("=") for item in overrides)}
    resolved = Path(config_path).resolve()
    registered = (resolved.relative_to(PROJECT_ROOT).as_posix()
                  if resolved.is_relative_to(PROJECT_ROOT) else str(resolved))
    try:
        if registered not in REGISTERED_CONFIGS:
            raise ValueError(f"--submit runs one of the deployment's registered configs "
                             f"({', '.join(REGISTERED_CONFIGS)}), not {config_path}; run it "
                             "here without --submit, or have the curator register it")
        for key, value in items.items():
            check_analysis_key(key, value)
        url = submit_release(registered, items)
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
    import yaml

    import conf
    from conf.kinds import KINDS
    from conf.settings import data_dir
    from demo import write_demo
    from tasks.registration import register_demo

    path = write_demo(kind, data_dir() / "demo", n_rows)
    example = Path(conf.__file__).parents[1] / KINDS[kind].example
    base = yaml.safe_load(example.read_text())
    base["data"] = {"path": str(path)}
    registration = register_demo(load_config(None, (), base=base))  # the curator's step
    config = load_config(None, overrides, base=base, asked=True)
    if not as_json:
        click.echo(f"demo data: {path} ({kind} demo), registered as dataset "
                   f"{registration.dataset!r} (n={registration.n}, version "
                   f"{registration.version}; `dpcausal ledger show {registration.dataset}`)",
                   err=True)
    execute(config, as_json=as_json, show_progress=not no_progress, verbose=verbose)
    if not as_json:
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        mlflow_bin = Path(sys.executable).with_name("mlflow")
        click.echo(f"\nMLflow run recorded in {uri}. Browse it with:\n"
                   f"  {mlflow_bin} ui --backend-store-uri {uri} --workers 1\n"
                   f"then open http://127.0.0.1:5000 (experiment {config.experiment_name!r}).\n"
                   "Privacy spend per dataset: ./dev ledger budgets")
