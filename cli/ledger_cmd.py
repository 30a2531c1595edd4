"""`dpcausal ledger`: inspect and set per-dataset privacy budgets (dpcausal/ledger/README.md).

Exit codes: 0 done, 2 bad input (unknown dataset, bad cap, missing or unreadable ledger),
1 anything else. ``--json`` prints one JSON document instead of the table.
"""

from __future__ import annotations

import json

import click

from cli.common import planning_options
from tasks import ledger_view as view


class InputError(click.ClickException):
    """A mistake in what was asked (exit code 2)."""

    exit_code = 2


def _open(url: str | None, create: bool = False):  # noqa: ANN202 - ledger imported lazily
    from dpcausal.ledger import Ledger, LedgerError

    try:
        return Ledger(url, create=create)
    except (LedgerError, ValueError) as exc:
        raise InputError(str(exc)) from exc


url_option = click.option("--url", default=None, metavar="URL",
                          help="Ledger database URL (default: $DPCAUSAL_LEDGER_URL, "
                               "else SQLite at <data>/ledger.db).")
public_option = click.option(
    "--public", default=None, metavar="FACTS",
    help="What the neighbouring relation holds public besides n, comma-separated among arm, "
         "arm_sizes, cluster, complete_cases, occupancy (default: the unit's mechanisms': user "
         "occupancy, client arm_sizes, label arm,cluster, row none; '' for none).")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print one JSON document instead of the table.")

BUDGET_COLUMNS = ["dataset", "unit", "public", "cap", "charges", "unfinished", "spent_zeta",
                  "spent_epsilon", "next_zeta", "next_epsilon", "next_pure_epsilon"]
HISTORY_COLUMNS = ["release_id", "status", "analyst", "mechanism", "unit", "public", "epsilon",
                   "delta", "detail", "reserved_at", "run_url"]


@click.group()
def ledger() -> None:
    """Inspect and set per-dataset privacy budgets.

    Exit codes: 0 done, 2 bad input (unknown dataset, bad cap, no ledger), 1 anything else.
    """


@ledger.command()
@url_option
@json_option
def budgets(url: str | None, as_json: bool) -> None:
    """Every dataset's cap, spend, and what one more release could still spend."""
    with _open(url) as led:
        frame = led.budgets()
        where = led.engine.url.render_as_string(hide_password=True)
    if as_json:
        click.echo(json.dumps({"ledger": where, "datasets": view.records(frame)}, indent=2))
        return
    if frame.empty:
        click.echo(f"No datasets in the ledger at {where}; add one with "
                   "`dpcausal ledger set-budget DATASET --zeta ...`.")
        return
    click.echo(view.table(frame[BUDGET_COLUMNS],
                     f"Privacy budgets ({where}; epsilon at each dataset's delta)"))
    click.echo("next_*: the most ONE more release could spend: a Gaussian release of next_zeta "
               "(= next_epsilon at the delta), or a pure next_pure_epsilon. Spend composes, so "
               "this is not cap minus spent.")


@ledger.command("set-budget")
@click.argument("dataset")
@click.option("--zeta", type=float, help="Cap in zeta-GDP (admits Gaussian charges only).")
@click.option("--rho", type=float, help="Cap in rho-zCDP (Gaussian zeta^2/2, pure eps^2/2).")
@click.option("--epsilon", type=float, help="Cap epsilon (with --delta); admits every charge.")
@click.option("--delta", type=float,
              help="Cap delta with --epsilon; with --zeta/--rho the delta at which epsilon is "
                   "reported (default 1e-5).")
@click.option("--unit", type=click.Choice(["row", "user", "label", "client"]), default="row",
              show_default=True, help="Unit of privacy the cap protects.")
@public_option
@click.option("--fingerprint", default=None, metavar="F",
              help="The data's keyed fingerprint: binds these data to DATASET (refused if it is "
                   "bound to another dataset id).")
@url_option
def set_budget(dataset: str, zeta: float | None, rho: float | None, epsilon: float | None,
               delta: float | None, unit: str, public: str | None, fingerprint: str | None,
               url: str | None) -> None:
    """Set DATASET's cap: --zeta Z | --rho R | --epsilon E --delta D (creates the ledger)."""
    with _open(url, create=True) as led:
        try:
            cap = led.set_budget(dataset, zeta=zeta, rho=rho, epsilon=epsilon, delta=delta,
                                 unit=unit, public=public, fingerprint=fingerprint)
            spent, relation = led.spent(dataset), led.relation(dataset)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
    bound = " (fingerprint bound)" if fingerprint else ""
    click.echo(f"Budget of {dataset}: {cap.describe()} {relation.describe()}{bound}; spent so "
               f"far: {spent.describe()}.")


@ledger.command()
@click.argument("dataset")
@url_option
@json_option
def history(dataset: str, url: str | None, as_json: bool) -> None:
    """DATASET's charges in order: status, epsilon, unit, what was released, run link."""
    with _open(url) as led:
        try:
            h = view.dataset_history(led, dataset)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
    frame, spent, cap, relation, fixes = (h[k] for k in ("charges", "spent", "cap", "relation",
                                                         "corrections"))
    if as_json:
        click.echo(json.dumps(view.history_json(dataset, h), indent=2))
        return
    if frame.empty:
        click.echo(f"No charges on {dataset} yet (cap {cap.describe()} {relation.describe()}).")
        return
    shown = frame.assign(analyst=frame["analyst"].fillna("(curator)"))[HISTORY_COLUMNS]
    click.echo(view.table(shown, f"Charges on {dataset} (cap {cap.describe()} "
                     f"{relation.describe()}; spent {spent.describe()}; analyst: who asked, "
                     "(curator) for the curator's own runs; times UTC)"))
    if not fixes.empty:
        click.echo(view.table(fixes, "Corrections of a charge's unit (`dpcausal ledger "
                              "correct-unit`)"))


@ledger.command("correct-unit")
@click.argument("release_id")
@click.option("--unit", type=click.Choice(["row", "user", "label", "client"]), required=True,
              help="The unit of privacy the charge's guarantee is stated in.")
@public_option
@click.option("--reason", required=True, help="Why (logged in the ledger with who and when).")
@url_option
def correct_unit(release_id: str, unit: str, public: str | None, reason: str,
                 url: str | None) -> None:
    """Correct the neighbouring relation of the recorded charge RELEASE_ID (logged)."""
    with _open(url) as led:
        try:
            relation = led.correct_unit(release_id, unit, public=public, reason=reason)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
    click.echo(f"Charge {release_id} is now recorded {relation.describe()}; the correction is "
               "logged (`dpcausal ledger history DATASET`).")


@ledger.command()
@click.argument("dataset")
@click.argument("config_path", metavar="CONFIG")
@click.option("--zeta", type=float, default=None,
              help="Also set DATASET's zeta cap (otherwise `set-budget` does).")
@click.option("--evaluation-allowed", "origin", type=click.Choice(["synthetic", "public"]),
              default=None,
              help="Allow evaluation mode (a non-private read) on this source, which you mark "
                   "synthetic or public; never for private data.")
@public_option
@planning_options("Declare public, for plan and estimator auto (a trial protocol's, say),",
                  "none registered")
def register(dataset: str, config_path: str, zeta: float | None, origin: str | None,
             public: str | None, treated_share: float | None, outcome_sd: float | None
             ) -> None:
    """Register DATASET from the data section of CONFIG (the curator, once per dataset).

    Binds to DATASET the source, the column roles and declared types, the missing-value policy,
    the unit, n counted now (records, public from now on), the planning facts declared public
    and whether evaluation mode is allowed; a run then only asks about DATASET. Registering
    again records a new version."""
    from cli.common import load_config
    from tasks.registration import register as register_config

    config = load_config(config_path, ())
    try:
        reg = register_config(config, zeta=zeta, origin=origin, public=public, path=config_path,
                              dataset=dataset, planning={"treated_share": treated_share,
                                                         "outcome_sd": outcome_sd})
    except ValueError as exc:
        raise InputError(" ".join(str(exc).split())) from exc
    click.echo(f"Registered {dataset} (version {reg.version}): n={reg.n} records, public from "
               f"now on; evaluation mode {'allowed' if reg.evaluation_allowed else 'refused'}. "
               f"`dpcausal ledger show {dataset}` shows the registration.")


@ledger.command()
@click.argument("dataset")
@url_option
@json_option
def show(dataset: str, url: str | None, as_json: bool) -> None:
    """DATASET's registration (what a run may only ask about) and its earlier versions."""
    with _open(url) as led:
        versions = led.registrations(dataset)
        if not versions:
            raise InputError(f"dataset {dataset!r} is not registered; its curator registers "
                             f"it: `dpcausal ledger register {dataset} CONFIG`")
        lines = view.registration_lines(led, dataset, versions)
    if as_json:
        click.echo(json.dumps(view.registrations_json(versions), indent=2))
        return
    for line in lines:
        click.echo(line)
