"""``dpcausal plan``: the precision of a core release before anything is spent (issue 19).

Reads only the public shape of the data (n from the source's metadata or a row count, d from the
column schema), never a value, and charges nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click


def source_shape(config: Any) -> tuple[int, int]:
    """(n, d) of a release config's source from metadata or a count: no value is read."""
    source, cols = config.data, config.columns
    if source.path is not None:
        path = Path(source.path)
        if not path.is_file():
            raise ValueError(f"data file {str(path)!r} does not exist (data.path)")
        if path.suffix.lower() == ".csv":
            with path.open("rb") as fh:
                names = fh.readline().decode().strip().split(",")
                n = sum(1 for line in fh if line.strip())
        else:
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(path)
            n, names = meta.metadata.num_rows, list(meta.schema_arrow.names)
    else:
        import sqlalchemy

        engine = sqlalchemy.create_engine(os.path.expandvars(source.url or ""))
        try:
            with engine.connect() as conn:
                query = f"SELECT * FROM ({source.sql}) AS q"
                names = list(conn.execute(sqlalchemy.text(query + " LIMIT 0")).keys())
                n = int(conn.execute(sqlalchemy.text(
                    f"SELECT COUNT(*) FROM ({source.sql}) AS q")).scalar_one())
        finally:
            engine.dispose()
    covariates = cols.covariates or [c for c in names if c not in (cols.treatment, cols.outcome)]
    return n, len(covariates)


def plan_table(config: Any, n: int, d: int, *, outcome_sd: float | None,
               compute_budget: float) -> Any:
    """The planner's table for a release config's public parameters."""
    from dpcausal.planner import plan

    kind = "parametric" if {config.models.propensity.name, config.models.outcome.name} <= {
        "logistic", "linear"} else "other"
    return plan(n, d, **public_params(config), model_kind=kind, outcome_sd=outcome_sd,
                compute_budget=compute_budget)


def public_params(config: Any) -> dict[str, Any]:
    """The estimator's public parameters the planner uses (config values over library
    defaults)."""
    from dpcausal import PrivateATE

    p = PrivateATE(**config.estimator.library_kwargs()).get_params()
    if p.get("outcome_bounds") is None:
        raise ValueError("estimator.outcome_bounds is required: the noise is calibrated to them")
    keys = ("estimator", "propensity_clip", "zeta", "ci", "alpha", "p1", "sensitivity")
    return {"outcome_bounds": tuple(p["outcome_bounds"]), **{k: p[k] for k in keys}}


def best_per_k(table: Any) -> Any:
    """For each K, the (sigma2, ci_share) row with the narrowest CI: what the printout shows."""
    order = table.sort_values(["n_folds", "halfwidth"], kind="stable")
    return order.groupby("n_folds", sort=True).head(1).reset_index(drop=True)


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
    from dpcausal.planner import UNINFORMATIVE_RATIO, recommended, zeta_for_halfwidth

    try:
        config = load_config(config_path, overrides)
        n, d = source_shape(config)
        table = plan_table(config, n, d, outcome_sd=outcome_sd, compute_budget=compute_budget)
    except (ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    best = recommended(table)
    checked = run_bounds_check(config, bounds_epsilon, bounds_zeta) if check_bounds else None
    needed = None
    if target_halfwidth is not None:
        p = public_params(config)
        p.pop("zeta")
        needed = zeta_for_halfwidth(target_halfwidth, n, int(best["n_folds"]), **p,
                                    ci_share=float(best["ci_share"]), sigma2=str(best["sigma2"]),
                                    outcome_sd=outcome_sd)
    if as_json:
        click.echo(json.dumps({"n": n, "d": d, "recommended": _plain(best.to_dict()),
                               "zeta_for_target": needed,
                               "bounds_check": None if checked is None else checked.to_dict(),
                               "table": [_plain(r) for r in table.to_dict("records")]}))
        return
    shown = best_per_k(table)
    p = public_params(config)
    click.echo(f"Plan for {config_path}: n={n}, d={d}, estimator={p['estimator']}, "
               f"zeta={p['zeta']:g} (nothing loaded beyond the shape, nothing charged)")
    cols = ["n_folds", "rows_per_fold", "sigma2", "ci_share", "sigma1", "halfwidth", "ratio",
            "seconds", "feasible"]
    text = shown[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}")
    marker = int(best["n_folds"])
    for line in text.splitlines():
        parts = line.split()
        star = " <- recommended" if parts and parts[0] == str(marker) else ""
        click.echo(line + star)
    click.echo(f"Recommended: K={marker} ({int(best['rows_per_fold'])} rows per fold), "
               f"sigma2={best['sigma2']}, ci_share={best['ci_share']:g}: expected 95% CI "
               f"half-width {best['halfwidth']:.4g}, {best['ratio']:.1f}x the non-private one "
               f"(assumed outcome sd: "
               f"{'worst case of the bounds' if outcome_sd is None else outcome_sd}).")
    if best["ratio"] > UNINFORMATIVE_RATIO:
        click.echo(f"Warning: this release would not be informative: its CI is expected to be "
                   f"{best['ratio']:.0f}x wider than the non-private one. Raise zeta, add rows, "
                   "or narrow the outcome bounds.")
    if checked is not None:
        click.echo(f"Bounds check ({checked.privacy.describe()}, charged): "
                   f"{checked.message()}")
    if needed is not None:
        click.echo(f"zeta needed for an expected half-width of {target_halfwidth:g} at "
                   f"K={marker}: "
                   + ("unreachable (the non-private CI is already wider)"
                      if needed == float("inf") else f"{needed:.4g}"))


def run_bounds_check(config: Any, epsilon: float, zeta: float) -> Any:
    """A private check of the outcome bounds, charged like any release: public checks and the
    budget first, then the project's one charged task (reserve, release, commit). It reads the
    outcome column only. Its noise follows the dataset's cap: Gaussian (``zeta``-GDP) under a
    zeta or rho cap, Laplace (``epsilon``-DP) under an epsilon cap."""
    import uuid

    from dpcausal.bounds_check import BoundsCheck
    from tasks import ledger_ops
    from tasks.release import charged_release, check_release

    dataset, outcome = config.ledger.dataset_id, config.columns.outcome
    try:
        with ledger_ops.open_ledger(dataset) as led:
            gaussian = led.cap(dataset).zeta is not None
        check = BoundsCheck(outcome_bounds=public_params(config)["outcome_bounds"],
                            epsilon=epsilon, zeta=zeta if gaussian else None)
        checked = check_release(config.data, [outcome], check, {"outcome": outcome},
                                dataset=dataset, evaluation=False, cap="--zeta Z")
    except ValueError as exc:
        raise click.ClickException(f"bounds check refused: {exc}") from None
    published = charged_release.fn(check, checked, dataset=dataset,
                                   release_id=f"bounds-check/{uuid.uuid4()}", evaluation=False,
                                   detail=dict(checked.charge.detail))
    return published.result


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
