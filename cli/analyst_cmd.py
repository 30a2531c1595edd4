"""``dpcausal analyst add|list|revoke``: the curator admits remote analysts (issue 40). Options
and printing only; the records, tokens and caps are :mod:`dpcausal.ledger.analysts`'.

Exit codes: 0 done, 2 bad input (unknown dataset, a name in use, a cap over a dataset's cap).
"""

from __future__ import annotations

import json

import click

from cli.ledger_cmd import InputError, _open, json_option, url_option
from deploy.mlflow_users import mirror_added, mirror_revoked
from tasks.ledger_view import analyst_lines, analyst_records


@click.group()
def analyst() -> None:
    """Admit remote analysts: each holds the gateway's URL and a token, nothing else."""


@analyst.command()
@click.argument("name")
@click.option("--datasets", required=True, metavar="A,B",
              help="The dataset ids NAME may ask about, comma-separated (each must have a cap).")
@click.option("--zeta", type=float, default=None,
              help="NAME's own zeta-GDP cap on each of the datasets, within each dataset's cap "
                   "(default: the datasets' caps only).")
@url_option
def add(name: str, datasets: str, zeta: float | None, url: str | None) -> None:
    """Admit analyst NAME; prints their token as the last line, once (it is stored hashed)."""
    wanted = [d.strip() for d in datasets.split(",") if d.strip()]
    with _open(url) as led:
        try:
            found, token = led.add_analyst(name, wanted, zeta=zeta)
        except ValueError as exc:
            raise InputError(" ".join(str(exc).split())) from exc
    cap = "the dataset's cap" if zeta is None else f"their own cap zeta={zeta:g} on each"
    click.echo(f"Analyst {found.name} may ask about {', '.join(found.datasets)} within {cap}.")
    click.echo(mirror_added(found.name, token, found.datasets))
    click.echo("Their token follows, shown this once (the ledger keeps a salted hash only); "
               "give it to them with the gateway's URL (DPCAUSAL_ASK_URL, DPCAUSAL_ASK_TOKEN):")
    click.echo(token)


@analyst.command("list")
@url_option
@json_option
def list_(url: str | None, as_json: bool) -> None:
    """Every analyst: datasets, own caps and spend, when added and revoked."""
    with _open(url) as led:
        rows = analyst_records(led)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for line in analyst_lines(rows):
        click.echo(line)


@analyst.command()
@click.argument("name")
@url_option
def revoke(name: str, url: str | None) -> None:
    """Revoke analyst NAME: their token is refused from now on (their charges stay)."""
    with _open(url) as led:
        try:
            found = led.revoke_analyst(name)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
    click.echo(f"Analyst {found.name} revoked at {found.revoked_at:%Y-%m-%d %H:%M:%S} UTC; "
               "their token is refused from now on. The name is never reused.")
    click.echo(mirror_revoked(found.name))
