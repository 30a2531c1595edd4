"""``dpcausal plan``: the precision of a core release before anything is spent (issue 19).

Reads no data: n and d are the dataset's registration's (counted by its curator, public), and it
charges nothing.
"""

from __future__ import annotations

import json

import click

from cli.common import fail, load_config, planning_options


@click.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value (dotted key), e.g. --set estimator.zeta=1.0.")
@click.option("--target-halfwidth", type=float, default=None,
              help="Also print the zeta needed to reach this expected CI half-width.")
@planning_options("Public assumption on", "the config's estimator.* value, else the "
                  "curator's registered one")
@click.option("--compute-budget", type=float, default=60.0, show_default=True,
              help="Seconds of fit + aggregation allowed for the recommended K.")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def plan(config_path: str, overrides: tuple[str, ...], target_halfwidth: float | None,
         outcome_sd: float | None, treated_share: float | None, compute_budget: float,
         as_json: bool) -> None:
    """Precision of a core release for CONFIG before anything is spent: charges nothing.

    A private check of the outcome bounds spends budget, so it is a charged library call
    (:class:`dpcausal.bounds_check.BoundsCheck` under ``ledger.charging``), not part of plan."""
    from conf.models import ConfigError, ReleaseConfig
    from tasks.planning import (
        TABLE_COLUMNS,
        best_per_k,
        estimator_lines,
        plan_summary,
        recommendation_lines,
        target_line,
    )

    config = load_config(config_path, overrides, asked=True)  # the registered data half
    try:
        if not isinstance(config, ReleaseConfig):
            raise ConfigError(f"plan is for the core release (kind ate); {config_path} is kind "
                              f"{config.kind!r}, whose noise does not depend on K")
        summary = plan_summary(config, outcome_sd=outcome_sd, compute_budget=compute_budget,
                               target_halfwidth=target_halfwidth, treated_share=treated_share)
    except (ConfigError, ValueError) as exc:  # exit 2, as `run` reports the same input
        fail(exc)
    if as_json:
        click.echo(json.dumps(summary))
        return
    import pandas as pd

    best = summary["recommended"]
    click.echo(f"Plan for {config_path}: n={summary['n']}, d={summary['d']}, "
               f"design={summary['design']}, estimator={config.estimator.estimator}"
               + ("" if config.estimator.estimator == summary["estimator"]
                  else f" -> {summary['estimator']}")
               + f", zeta={summary['zeta']:g} (from the registration; nothing read, nothing "
               "charged)")
    if config.data.missing == "drop_public_count":  # the curator declared the count public
        click.echo("data.missing: drop_public_count: the release's n is the exact complete-case "
                   f"count, and K is resolved from it; this table uses all {summary['n']} rows "
                   f"(`dpcausal check-data {config_path}` shows the count; it charges nothing)")
    click.echo("Estimators compared (expected 95% CI; ratio to the non-private CI):")
    for line in estimator_lines(summary):
        click.echo(line)
    ensemble = summary["ensemble"]
    click.echo(f"The {ensemble['estimator']} ensemble over K:")
    shown = best_per_k(pd.DataFrame(summary["table"]))
    text = shown[TABLE_COLUMNS].to_string(index=False, float_format=lambda v: f"{v:.4g}")
    marker = (" <- recommended" if best["estimator"] == ensemble["estimator"]
              else " <- its best K")
    for line in text.splitlines():
        parts = line.split()
        click.echo(line + (marker if parts and parts[0] == str(int(ensemble["n_folds"]))
                           else ""))
    for line in recommendation_lines(summary, outcome_sd):
        click.echo(line)
    if target_halfwidth is not None:
        click.echo(target_line(summary, target_halfwidth))

