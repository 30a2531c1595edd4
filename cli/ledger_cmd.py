"""`dpcausal ledger`: inspect and set per-dataset privacy budgets (dpcausal/ledger/README.md)."""

from __future__ import annotations

import math

import click
import pandas as pd


def _open(url: str | None, create: bool = False):  # noqa: ANN202 - ledger imported lazily
    from dpcausal.ledger import Ledger, LedgerError

    try:
        return Ledger(url, create=create)
    except (LedgerError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def _fmt(value: object) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "-"
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    if isinstance(value, pd.Timestamp):  # UTC (SQLite drops the zone, PostgreSQL keeps it)
        stamp = value.tz_convert("UTC") if value.tzinfo is not None else value
        return stamp.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _table(frame: pd.DataFrame, title: str) -> None:
    """An aligned plain-text table (columns as given, missing values as '-')."""
    cells = [[_fmt(v) for v in row] for row in frame.itertuples(index=False)]
    head = [str(c) for c in frame.columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(head)]
    click.echo(title)
    for row in [head, ["-" * w for w in widths], *cells]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


url_option = click.option("--url", default=None, metavar="URL",
                          help="Ledger database URL (default: $DPCAUSAL_LEDGER_URL, "
                               "else SQLite at <data>/ledger.db).")


@click.group()
def ledger() -> None:
    """Inspect and set per-dataset privacy budgets."""


@ledger.command()
@url_option
def budgets(url: str | None) -> None:
    """Every dataset's cap, spend (composed) and remaining budget (rounded down)."""
    with _open(url) as led:
        frame = led.budgets()
        where = led.engine.url.render_as_string(hide_password=True)
    if frame.empty:
        click.echo(f"No datasets in the ledger at {where}; add one with "
                   "`dpcausal ledger set-budget DATASET --zeta ...`.")
        return
    _table(frame, f"Privacy budgets ({where})")


@ledger.command("set-budget")
@click.argument("dataset")
@click.option("--zeta", type=float, help="Cap in zeta-GDP.")
@click.option("--rho", type=float, help="Cap in rho-zCDP (zeta = sqrt(2 rho)).")
@click.option("--epsilon", type=float, help="Cap epsilon (with --delta).")
@click.option("--delta", type=float,
              help="Cap delta with --epsilon; with --zeta/--rho the delta at which epsilon is "
                   "reported (default 1e-5).")
@url_option
def set_budget(dataset: str, zeta: float | None, rho: float | None, epsilon: float | None,
               delta: float | None, url: str | None) -> None:
    """Set DATASET's cap: --zeta Z | --rho R | --epsilon E --delta D (creates the ledger)."""
    with _open(url, create=True) as led:
        try:
            cap = led.set_budget(dataset, zeta=zeta, rho=rho, epsilon=epsilon, delta=delta)
            spent = led.spent(dataset)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    click.echo(f"Budget of {dataset}: {cap.describe()}; spent so far: {spent.describe()}.")


@ledger.command()
@click.argument("dataset")
@url_option
def history(dataset: str, url: str | None) -> None:
    """DATASET's charges in order, with status and run links."""
    with _open(url) as led:
        try:
            frame, spent, cap = led.history(dataset), led.spent(dataset), led.cap(dataset)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    if frame.empty:
        click.echo(f"No charges on {dataset} yet (cap {cap.describe()}).")
        return
    _table(frame, f"Charges on {dataset} (cap {cap.describe()}; spent {spent.describe()}; "
                  "times UTC)")

