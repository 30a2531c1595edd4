"""``dpcausal run CONFIG [--set key=value ...]`` and ``dpcausal demo``.

Heavy imports (Prefect, MLflow, scikit-learn) happen inside the commands, so ``dpcausal --help``
stays fast. Bad input ends with one paragraph on stderr, exit code 2 and no ledger charge: the
config, the models and the data are checked before the flow starts and before any noise.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

EXIT_BAD_INPUT = 2
_DEMO_SEED = 2026  # the demo dataset is the same on every run, so its fold fits are cached


def _quiet_console(verbose: bool) -> None:
    """Keep Prefect's and MLflow's console chatter from drawing over the progress bar."""
    if verbose:
        return
    # failures reach the user as one paragraph from this command, not as Prefect log tracebacks
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _fail(exc: BaseException) -> None:
    message = " ".join(str(exc).split()) or type(exc).__name__
    click.echo(f"Error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def execute(config: Any, *, as_json: bool, show_progress: bool, verbose: bool) -> dict[str, Any]:
    """Preflight (data and models, no Prefect), then the flow with a progress bar; prints the
    release. Bad input exits with code 2 before anything is charged."""
    _quiet_console(verbose)
    from dpcausal.ledger import BudgetExceededError, LedgerError, ReleaseInProgressError
    from tasks.data import load_data

    try:
        # the same checks the flow runs first: fail fast, before Prefect starts
        load_data.fn(config)
    except (ValueError, TypeError) as exc:
        _fail(exc)

    from rich.console import Console

    from cli.progress_bar import progress_bar
    from flows.release import run_release

    try:
        with progress_bar("folds", enabled=show_progress):
            result = run_release(config)
    except (BudgetExceededError, ReleaseInProgressError, LedgerError, ValueError, TypeError) as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(result, indent=2, default=str))
    else:
        print_release(result, Console())
    return result


def print_release(result: dict[str, Any], console: Any) -> None:
    """The release as a table (private values, privacy figures, where it was recorded)."""
    from rich.table import Table

    rel = result["release"]
    p, z = rel["privacy"], rel["noise"]
    table = Table(title=f"{'EVALUATION (not private)' if rel['evaluation'] else 'Private'} "
                        "ATE release",
                  show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    level = f"{100 * (1 - rel['alpha']):g}% CI"
    table.add_row("estimator", f"{rel['estimator'].upper()}  (n={rel['n']}, K={rel['n_folds']})")
    table.add_row("ATE (private)", f"{rel['ate']:.6g}")
    table.add_row(level, "not released (ci_share=0)" if rel["ci"] is None
                  else f"[{rel['ci'][0]:.6g}, {rel['ci'][1]:.6g}]")
    if rel["variance"] is not None:
        table.add_row("variance (private)", f"{rel['variance']:.6g}")
    table.add_row("privacy", f"{p['zeta']:.4g}-GDP (zeta1={p['zeta1']:.4g}, zeta2={p['zeta2']:.4g})"
                  f" = ({p['epsilon']:.4g}, {p['delta']:g})-DP = {p['rho']:.4g}-zCDP")
    table.add_row("noise sd", f"ATE {z['sigma_ate']:.4g}, sqrt(V) {z['sigma_var']:.4g}")
    if rel["evaluation"]:
        table.add_row("non-private ATE", f"{rel['nonprivate']['ate']:.6g}")
    spent = result.get("spent")
    if spent:
        zeta = "" if spent["zeta"] is None else f"zeta={spent['zeta']:.4g}, "
        table.add_row("dataset spend", f"{zeta}epsilon={spent['epsilon']:.4g} over "
                      f"{spent['n_charges']} release(s)")
    table.add_row("release id", result["release_id"] + ("  (stored result, no new noise)"
                                                        if result.get("reused") else ""))
    ml = result["mlflow"]
    table.add_row("MLflow", f"experiment {result['experiment']!r}, run {ml['run_id']}")
    console.print(table)


def _load(path: str | None, overrides: tuple[str, ...], base: dict[str, Any] | None = None) -> Any:
    """The validated config of the kind it declares; a core config's models are also built, so an
    unknown or unbuildable model fails here, before any data is read."""
    from conf.kinds import load_any
    from conf.models import ConfigError

    try:
        config = load_any(path, overrides, base=base)
        if config.kind == "ate":
            from tasks.build import build_estimator

            build_estimator(config)
    except (ConfigError, ValueError, TypeError) as exc:
        _fail(exc)
    return config


def execute_mechanism(config: Any, *, as_json: bool, verbose: bool) -> dict[str, Any]:
    """Run the release flow of a further mechanism (``flows/<kind>_release.py``: its
    ``run_<kind>_from_config`` and ``print_<kind>_release``); bad input and refusals exit 2."""
    import importlib

    from rich.console import Console

    from dpcausal.ledger import BudgetExceededError, LedgerError, ReleaseInProgressError

    _quiet_console(verbose)
    flow_module = importlib.import_module(f"flows.{config.kind}_release")
    err = Console(stderr=True)
    try:
        with err.status(f"{config.kind} release {config.name!r}: load, charge, release, log..."):
            result = getattr(flow_module, f"run_{config.kind}_from_config")(config)
    except (BudgetExceededError, ReleaseInProgressError, LedgerError, ValueError, TypeError) as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(result, indent=2, default=str))
    else:
        getattr(flow_module, f"print_{config.kind}_release")(result, Console())
    return result


def _execute(config: Any, *, as_json: bool, show_progress: bool, verbose: bool) -> dict[str, Any]:
    if config.kind == "ate":
        return execute(config, as_json=as_json, show_progress=show_progress, verbose=verbose)
    return execute_mechanism(config, as_json=as_json, verbose=verbose)


@click.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value by dotted key, e.g. --set estimator.zeta=1.0")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("-v", "--verbose", is_flag=True, help="Show Prefect's and MLflow's logs.")
def run(config_path: str, overrides: tuple[str, ...], as_json: bool, no_progress: bool,
        verbose: bool) -> None:
    """Run the release flow of CONFIG (a conf/release/*.yaml file): the core dp_ate_release, or
    the flow of the mechanism its top-level `kind:` names (cluster_dp, federated, user_level)."""
    config = _load(config_path, overrides)
    _execute(config, as_json=as_json, show_progress=not no_progress, verbose=verbose)


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
    """Write synthetic data, then run a full private release on it (conf/release/*demo.yaml)."""
    import importlib

    import yaml

    import conf
    from conf.settings import data_dir

    if kind == "ate":
        path = write_demo_data(data_dir() / "demo" / "experiment_a.csv", n_rows)
        about = f"experiment A, n={n_rows}, true ATE 0.1"
        config_file = "demo.yaml"
    else:
        writer = importlib.import_module(f"tasks.{kind}_demo_data").write_demo_csv
        path = writer(data_dir() / "demo" / f"{kind}.csv")
        about = f"synthetic {kind} demo data"
        config_file = f"{kind}_demo.yaml"
    base = yaml.safe_load((Path(conf.__file__).parent / "release" / config_file).read_text())
    base["data"] = {"path": str(path)}
    config = _load(None, overrides, base=base)
    if not as_json:
        click.echo(f"demo data: {path} ({about})", err=True)
    _execute(config, as_json=as_json, show_progress=not no_progress, verbose=verbose)
    if not as_json:
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        mlflow_bin = Path(sys.executable).with_name("mlflow")
        click.echo(f"\nMLflow run recorded in {uri}. Browse it with:\n"
                   f"  {mlflow_bin} ui --backend-store-uri {uri} --workers 1\n"
                   f"then open http://127.0.0.1:5000 (experiment {config.experiment_name!r}).\n"
                   "Privacy spend per dataset: ./dev ledger budgets")


def write_demo_data(path: Path, n: int) -> Path:
    """Experiment A (spec §6.2) with a fixed seed, as CSV with columns X1, A, Y."""
    import pandas as pd

    from dpcausal.datasets import make_experiment_a

    X, A, Y, _ = make_experiment_a(n, random_state=_DEMO_SEED)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"X1": X[:, 0], "A": A, "Y": Y}).to_csv(path, index=False)
    return path
