"""``dpcausal plan``: the precision of a core release before anything is spent (issue 19).

Reads only the public shape of the data (n from the source's metadata or a row count, d from the
column schema), never a value, and charges nothing.
"""

from __future__ import annotations

import json
from typing import Any

import click


@click.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value (dotted key), e.g. --set estimator.zeta=1.0.")
@click.option("--target-halfwidth", type=float, default=None,
              help="Also print the zeta needed to reach this expected CI half-width.")
@click.option("--outcome-sd", type=float, default=None,
              help="Public assumption on the outcome's sd [default: half the bounds' width].")
@click.option("--compute-budget", type=float, default=60.0, show_default=True,
              help="Seconds of fit + aggregation allowed for the recommended K.")
@click.option("--check-bounds", is_flag=True,
              help="Spend a small budget on a private check of the outcome bounds (charged to "
                   "the config's dataset in the ledger).")
@click.option("--bounds-epsilon", type=float, default=0.1, show_default=True,
              help="Pure-DP epsilon of the bounds check (datasets with an epsilon cap).")
@click.option("--bounds-zeta", type=float, default=0.1, show_default=True,
              help="Gaussian-DP zeta of the bounds check (datasets with a zeta or rho cap).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def plan(config_path: str, overrides: tuple[str, ...], target_halfwidth: float | None,
         outcome_sd: float | None, compute_budget: float, check_bounds: bool,
         bounds_epsilon: float, bounds_zeta: float, as_json: bool) -> None:
    """Precision of a core release for CONFIG before anything is spent.

    Charges nothing, unless --check-bounds asks for a private check of the outcome bounds."""
    from conf.models import ConfigError, load_config
    from tasks.planning import (
        TABLE_COLUMNS,
        best_per_k,
        plan_summary,
        recommendation_lines,
        target_line,
    )

    try:
        config = load_config(config_path, overrides)
        summary = plan_summary(config, outcome_sd=outcome_sd, compute_budget=compute_budget,
                               target_halfwidth=target_halfwidth)
    except (ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    checked = run_bounds_check(config, bounds_epsilon, bounds_zeta) if check_bounds else None
    if as_json:
        click.echo(json.dumps({**summary, "bounds_check": None if checked is None
                               else checked.to_dict()}))
        return
    import pandas as pd

    best = summary["recommended"]
    click.echo(f"Plan for {config_path}: n={summary['n']}, d={summary['d']}, "
               f"estimator={best['estimator']}, zeta={summary['zeta']:g} "
               "(nothing loaded beyond the shape, nothing charged)")
    shown = best_per_k(pd.DataFrame(summary["table"]))
    text = shown[TABLE_COLUMNS].to_string(index=False, float_format=lambda v: f"{v:.4g}")
    marker = str(int(best["n_folds"]))
    for line in text.splitlines():
        parts = line.split()
        click.echo(line + (" <- recommended" if parts and parts[0] == marker else ""))
    for line in recommendation_lines(summary, outcome_sd):
        click.echo(line)
    if checked is not None:
        click.echo(f"Bounds check ({checked.privacy.describe()}, charged): "
                   f"{checked.message()}")
    if target_halfwidth is not None:
        click.echo(target_line(summary, target_halfwidth))


def run_bounds_check(config: Any, epsilon: float, zeta: float) -> Any:
    """A private check of the outcome bounds, charged like any release: public checks and the
    budget first, then the project's one charged task (reserve, release, commit). It reads the
    outcome column only. Its noise follows the dataset's cap: Gaussian (``zeta``-GDP) under a
    zeta or rho cap, Laplace (``epsilon``-DP) under an epsilon cap."""
    import uuid

    from conf.kinds import KINDS
    from conf.models import Schema
    from dpcausal.bounds_check import BoundsCheck
    from tasks import ledger_ops
    from tasks.planning import public_params
    from tasks.preflight import check_release
    from tasks.release import charged_release

    dataset, outcome = config.ledger.dataset_id, config.columns.outcome
    if config.data.partitions is not None:
        raise click.ClickException("--check-bounds needs the outcome column in one process, so "
                                   "it does not work with data.partitions: check the bounds on "
                                   "a data.path or data.sql source of the same outcomes")
    try:
        with ledger_ops.open_ledger(dataset) as led:
            gaussian = led.cap(dataset).zeta is not None
        check = BoundsCheck(outcome_bounds=public_params(config)["outcome_bounds"],
                            epsilon=epsilon, zeta=zeta if gaussian else None)
        schema = Schema({outcome: KINDS["ate"].schema(config).columns[outcome]})
        checked = check_release(config.data, schema, check, {"outcome": outcome},
                                dataset=dataset, evaluation=False, cap="--zeta Z")
    except ValueError as exc:
        raise click.ClickException(f"bounds check refused: {exc}") from None
    published = charged_release.fn(check, checked, dataset=dataset,
                                   release_id=f"bounds-check/{uuid.uuid4()}", evaluation=False,
                                   detail=dict(checked.charge.detail))
    return published.result
