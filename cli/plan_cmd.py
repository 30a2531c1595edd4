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
    from tasks.planning import plan_lines, plan_summary

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
    for line in plan_lines(summary, config, config_path, outcome_sd=outcome_sd,
                           target_halfwidth=target_halfwidth):
        click.echo(line)
