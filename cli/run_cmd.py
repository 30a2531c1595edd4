"""``dpcausal run CONFIG [--set key=value ...]`` and ``dpcausal demo``, for every release kind.

Heavy imports (Prefect, MLflow, scikit-learn) happen inside the commands, so ``dpcausal --help``
stays fast. Before any Prefect server starts, the config, the mechanism, the data's schema and the
budget are checked (charging nothing): bad input exits 2, a refusal by the budget exits 3. The
warnings those public checks raise are printed there, once, in plain words (``--strict`` refuses
the release instead, exit 2). A release that fails afterwards exits 1 with one ``Error:``
paragraph; in release mode it holds no data-dependent text (the details go to the curator's
private log).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

import click

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_REFUSED = 1, 2, 3


def quiet_console(verbose: bool) -> None:
    """Keep Prefect's and MLflow's console chatter from drawing over the progress bar."""
    if verbose:
        return
    # failures reach the user as one paragraph from this command, not as Prefect log tracebacks
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def exit_now() -> NoReturn:
    """End a command whose release was printed, exit code 0: send Prefect's queued logs and
    events to its API, run the exit hooks (the temporary server's stop among them), flush the
    streams, then skip the interpreter's teardown of the libraries a release loads (1.3 s,
    measured; nothing is left to write)."""
    import atexit

    if "prefect" in sys.modules:
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all()
        EventsWorker.drain_all()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _fail(exc: BaseException, code: int = EXIT_BAD_INPUT) -> NoReturn:
    message = " ".join(str(exc).split()) or type(exc).__name__
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def exit_code(exc: BaseException) -> int:
    """3 for a refusal by the budget, 2 for bad input or configuration, 1 for anything else."""
    from dpcausal.ledger import (
        BudgetExceededError,
        DatasetIdentityError,
        IncompatibleChargeError,
    )
    from dpcausal.validation import ReleaseFailedError
    from tasks.ledger_ops import NoCapError

    if isinstance(exc, (BudgetExceededError, IncompatibleChargeError, DatasetIdentityError,
                        NoCapError)):
        return EXIT_REFUSED
    if isinstance(exc, (ValueError, TypeError)) and not isinstance(exc, ReleaseFailedError):
        return EXIT_BAD_INPUT
    return EXIT_FAILED


def _unexpected(exc: BaseException, evaluation: bool) -> NoReturn:
    """One paragraph naming what failed and where the details are; release mode shows no
    exception text (it may depend on the data), evaluation mode does."""
    from store import log_private_errors

    path = log_private_errors()
    logging.getLogger("dpcausal.private").error("release run failed", exc_info=exc)
    what = type(exc).__name__
    if evaluation or exc.__class__.__name__ == "ReleaseFailedError":
        what += f": {' '.join(str(exc).split())}"
    click.echo(f"Error: the release run failed ({what}). The temporary services of the run "
               f"were stopped; the full log is in the curator's private log {path}.", err=True)
    sys.exit(EXIT_FAILED)


def public_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """The distinct ``UserWarning`` texts of the public checks, in order, one line each."""
    texts: list[str] = []
    for w in caught:
        if issubclass(w.category, UserWarning) and str(w.message) not in texts:
            texts.append(str(w.message))
    return texts


def _bounds_notice(config: Any, check_command: str) -> None:
    """A core release whose outcome bounds the ledger has never seen privately checked says so,
    once, before the charge (issue 19 §1)."""
    from tasks.ledger_ops import bounds_checked

    bounds = config.estimator.outcome_bounds
    if bounds is None or bounds_checked(config.ledger.dataset_id, tuple(bounds)):
        return
    click.echo(f"Notice: the outcome bounds [{bounds[0]:g}, {bounds[1]:g}] have never been "
               f"checked on dataset {config.ledger.dataset_id!r}; outcomes outside them are "
               "clipped and bias the release. A private check costs a small stated budget: "
               f"{check_command}", err=True)


def execute(config: Any, *, as_json: bool, show_progress: bool, verbose: bool,
            strict: bool = False, check_command: str | None = None) -> dict[str, Any]:
    """Public checks (no Prefect), their warnings, then the release flow with a progress bar;
    prints it. A core release whose bounds were never privately checked says so first, advising
    ``check_command`` (when given)."""
    quiet_console(verbose)
    from conf.kinds import KINDS
    from tasks.preflight import check_release

    kind = KINDS[config.kind]
    failure: Exception | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:  # the flow's first step, here before any Prefect server starts
            check_release(config.data, kind.schema(config), kind.build(config),
                          kind.roles(config), dataset=config.ledger.dataset_id,
                          evaluation=config.evaluation, cap=kind.cap(config))
        except Exception as exc:  # noqa: BLE001 - every failure becomes one paragraph
            failure = exc
    shown = public_warnings(caught)
    for text in shown:
        click.echo(f"Warning: {' '.join(text.split())}", err=True)
    if failure is not None:
        if exit_code(failure) == EXIT_FAILED:
            _unexpected(failure, config.evaluation)
        _fail(failure, exit_code(failure))
    if strict and shown:
        _fail(ValueError(f"refused by --strict: {len(shown)} warning(s) above; nothing was "
                         "charged"))
    if config.kind == "ate" and not config.evaluation and check_command is not None:
        _bounds_notice(config, check_command)

    import signal

    from cli.prefect_api import prefect_api
    from cli.printer import print_result
    from cli.progress_bar import progress_bar
    from tasks.tracking import connect

    # SIGTERM unwinds like Ctrl-C, so the temporary Prefect server and any Dask cluster of the
    # run stop with it (their context managers and atexit hooks run)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        unit = "partitions" if config.data.partitions is not None else "folds"
        with prefect_api(meanwhile=lambda: connect(config.mlflow.tracking_uri)), \
                progress_bar(unit, enabled=show_progress and not as_json), \
                warnings.catch_warnings():
            from flows.release import run_release

            for text in shown:  # shown once, above: the flow's own check raises them again
                warnings.filterwarnings("ignore", message=re.escape(text))
            result = run_release(config)
    except KeyboardInterrupt:
        click.echo("Error: the release run was interrupted (SIGTERM or Ctrl-C); the temporary "
                   "services of the run were stopped; a charge it had reserved stays spent "
                   f"(dpcausal ledger history {config.ledger.dataset_id}).", err=True)
        sys.exit(EXIT_FAILED)
    except Exception as exc:  # noqa: BLE001
        code = exit_code(exc)
        if code == EXIT_FAILED:
            _unexpected(exc, config.evaluation)
        _fail(exc, code)
    print_result(result, as_json=as_json)
    return result


def _load(path: str | None, overrides: tuple[str, ...], base: dict[str, Any] | None = None) -> Any:
    """The validated config of the kind it declares, with its mechanism built once to refuse an
    unknown or unbuildable model before any data is read."""
    from conf.kinds import build_mechanism, load_any
    from conf.models import ConfigError

    try:
        config = load_any(path, overrides, base=base)
        build_mechanism(config)
    except (ConfigError, ValueError, TypeError) as exc:
        _fail(exc)
    return config


@click.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value by dotted key, e.g. --set estimator.zeta=1.0")
@click.option("--dry-run", is_flag=True,
              help="Print what `dpcausal plan` prints for CONFIG and stop (charges nothing).")
@click.option("--strict", is_flag=True,
              help="Refuse the release (exit 2, nothing charged) if its public checks warn.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("-v", "--verbose", is_flag=True, help="Show Prefect's and MLflow's logs.")
@click.pass_context
def run(ctx: click.Context, config_path: str, overrides: tuple[str, ...], dry_run: bool,
        strict: bool, as_json: bool, no_progress: bool, verbose: bool) -> None:
    """Run the release of CONFIG (a conf/release/*.yaml file) through the dp_release flow; its
    top-level `kind:` (ate when absent, cluster_dp, federated, user_level) picks the mechanism.

    Exit codes: 0 released, 2 bad input or configuration, 3 refused by the budget, 1 else."""
    if dry_run:
        from cli.plan_cmd import plan

        ctx.invoke(plan, config_path=config_path, overrides=overrides, as_json=as_json)
        return
    config = _load(config_path, overrides)
    check = ["dpcausal", "plan", config_path, *(x for o in overrides for x in ("--set", o)),
             "--check-bounds"]
    partitioned = config.data.partitions is not None  # no bounds check there (plan_cmd)
    execute(config, as_json=as_json, show_progress=not no_progress, verbose=verbose,
            strict=strict, check_command=None if partitioned else shlex.join(check))
    exit_now()


@click.command()
@click.option("--kind", type=click.Choice(["ate", "cluster_dp", "federated", "user_level"]),
              default="ate", show_default=True,
              help="The core ATE release, or a further mechanism's demo release.")
@click.option("--n", "n_rows", default=5000, show_default=True,
              help="Rows of synthetic data (core ATE demo).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a value of the embedded demo config.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("-v", "--verbose", is_flag=True, help="Show Prefect's and MLflow's logs.")
def demo(kind: str, n_rows: int, overrides: tuple[str, ...], as_json: bool, no_progress: bool,
         verbose: bool) -> None:
    """Write synthetic data, give the demo dataset its cap (if it has none), then run a full
    private release on it (conf/release/*demo.yaml)."""
    import yaml

    import conf
    from conf.settings import data_dir
    from demo import DEMO, write_demo
    from tasks.ledger_ops import set_initial_budget

    path = write_demo(kind, data_dir() / "demo", n_rows)
    config_file = "demo.yaml" if kind == "ate" else f"{kind}_demo.yaml"
    base = yaml.safe_load((Path(conf.__file__).parent / "release" / config_file).read_text())
    base["data"] = {"path": str(path)}
    config = _load(None, overrides, base=base)
    set_initial_budget(config.ledger.dataset_id, **DEMO[kind][1])
    if not as_json:
        click.echo(f"demo data: {path} ({kind} demo)", err=True)
    execute(config, as_json=as_json, show_progress=not no_progress, verbose=verbose)
    if not as_json:
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        mlflow_bin = Path(sys.executable).with_name("mlflow")
        click.echo(f"\nMLflow run recorded in {uri}. Browse it with:\n"
                   f"  {mlflow_bin} ui --backend-store-uri {uri} --workers 1\n"
                   f"then open http://127.0.0.1:5000 (experiment {config.experiment_name!r}).\n"
                   "Privacy spend per dataset: ./dev ledger budgets")
    exit_now()
