"""``dpcausal meta``: pool private ATE releases (MLflow runs, a query, or a CSV of published
estimates). Post-processing of released numbers: it costs no privacy and charges nothing."""

from __future__ import annotations

import json
from typing import Any

import click


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
@click.option("-v", "--verbose", is_flag=True, help="Show Prefect's and MLflow's logs.")
def meta(runs: tuple[str, ...], query: str | None, csv_path: str | None,
         config_path: str | None, weights: str | None, model: str | None, level: float | None,
         shared: tuple[str, ...], experiment: str | None, as_json: bool, verbose: bool) -> None:
    """Pool private ATE releases into one estimate with a forest plot in MLflow."""
    from cli.run_cmd import _fail, quiet_console
    from conf.meta import load_meta_config
    from conf.models import ConfigError

    quiet_console(verbose)
    given = {"runs": list(runs) or None, "query": query, "csv": csv_path, "weights": weights,
             "model": model, "level": level, "shared": list(shared) or None,
             "experiment": experiment}
    base = {k: v for k, v in given.items() if v is not None}
    try:
        if config_path is not None:
            config = load_meta_config(config_path)
            if base.keys() & {"runs", "query", "csv"}:  # a source given here replaces the file's
                config = config.model_copy(update={"runs": None, "query": None, "csv": None})
            config = load_meta_config(None, base=config.model_dump() | base)
        else:
            config = load_meta_config(None, base=base)
    except ConfigError as exc:
        _fail(exc)
    from flows.meta import dp_meta_analysis

    try:
        out = dp_meta_analysis(config=config)
    except (ValueError, TypeError) as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
    else:
        print_meta(out)


def print_meta(out: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    r = out["result"]
    level = f"{100 * r['level']:g}% CI"
    table = Table(title=f"Meta-analysis of {r['n_studies']} private releases ({r['model']} "
                        f"effect, {r['weighting']} weights)", title_justify="left")
    for col in ("study", "ATE", level, "zeta", "n", "weight"):
        table.add_column(col, justify="left" if col == "study" else "right")
    for s in r["studies"]:
        table.add_row(str(s["label"]), f"{s['ate']:.4g}",
                      f"[{s['ci_low']:.4g}, {s['ci_high']:.4g}]",
                      "-" if s["zeta"] is None else f"{s['zeta']:.3g}",
                      "-" if s["n"] is None else str(s["n"]), f"{s['weight']:.3f}")
    table.add_row("[bold]pooled[/bold]", f"[bold]{r['ate']:.4g}[/bold]",
                  f"[bold][{r['ci'][0]:.4g}, {r['ci'][1]:.4g}][/bold]", "", "", "1.000")
    console = Console()
    console.print(table)
    if r["model"] == "random":
        console.print(f"heterogeneity: tau2={r['tau2']:.4g}, Q={r['q']:.4g}, I2={r['i2']:.1%}")
    p = r["privacy"]
    console.print(f"privacy: {p['statement']}")
    if p.get("max_individual_zeta") is not None:
        console.print(f"  worst exposure of any one person: zeta {p['max_individual_zeta']:.4g}")
    for note in out["notes"]:
        console.print(f"[dim]{note}[/dim]")
    console.print(f"MLflow: experiment {out['experiment']!r}, run {out['mlflow']['run_id']} "
                  "(forest.png, studies.csv)")
