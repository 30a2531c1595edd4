"""``dpcausal meta``: pool private ATE releases (MLflow runs, a query, or a CSV of published
estimates). Post-processing of released numbers: it costs no privacy and charges nothing."""

from __future__ import annotations

import json

import click

from cli.common import fail, quiet_console, verbose_option


@click.command()
@click.option("--runs", multiple=True, metavar="RUN_ID",
              help="MLflow run id of a core release (repeat the option for each study).")
@click.option("--query", default=None, metavar="FILTER",
              help="MLflow filter selecting release runs, e.g. \"tags.dataset_id = 'x'\".")
@click.option("--csv", "csv_path", default=None, metavar="PATH",
              help="CSV of published estimates: ate, variance[, n, zeta, label].")
@click.option("--config", "config_path", default=None, metavar="YAML",
              help="A conf/meta/*.yaml file (options given here override it).")
@click.option("--weights", type=click.Choice(["inverse_variance", "paper_sqrt", "equal"]),
              default=None, help="Pooling weights [default: inverse_variance].")
@click.option("--model", type=click.Choice(["fixed", "random"]), default=None,
              help="Fixed effect or DerSimonian-Laird random effects [default: fixed].")
@click.option("--level", type=float, default=None, help="CI level [default: 0.95].")
@click.option("--shared", multiple=True, metavar="LABEL|RUN_ID|*",
              help="A study that may share people with the other --shared ones ('*': all).")
@click.option("--experiment", default=None, help="MLflow experiment of the meta-analysis run.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@verbose_option
def meta(runs: tuple[str, ...], query: str | None, csv_path: str | None,
         config_path: str | None, weights: str | None, model: str | None, level: float | None,
         shared: tuple[str, ...], experiment: str | None, as_json: bool, verbose: bool) -> None:
    """Pool private ATE releases into one estimate with a forest plot in MLflow."""
    from conf.meta import meta_config_from
    from conf.models import ConfigError

    quiet_console(verbose)
    try:
        config = meta_config_from(config_path, {
            "runs": list(runs) or None, "query": query, "csv": csv_path, "weights": weights,
            "model": model, "level": level, "shared": list(shared) or None,
            "experiment": experiment})
    except ConfigError as exc:
        fail(exc)
    from flows.meta import dp_meta_analysis

    try:
        out = dp_meta_analysis(config=config)
    except (ValueError, TypeError) as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
        return
    click.echo(out["text"])
    for note in out["notes"]:
        click.echo(note)
    click.echo(f"MLflow: experiment {out['experiment']!r}, run {out['mlflow']['run_id']} "
               "(forest.png, studies.csv)")
