"""``dpcausal check-data``: a NON-PRIVATE look at a config's data values that costs nothing
(issue 25 §2).

The curator already holds the data, so reading them and printing counts on the curator's own
terminal spends no privacy budget: rows, missing and non-finite values per role, the share of
outcomes outside the bounds, arm sizes, and for the core release what the declared missing-value
policy will do and the rows per fold at the planned K. Nothing is charged and nothing is written:
no ledger, no MLflow, no Prefect (neither is imported), no log. The output must not be shared.

For the curator only, enforced (issue 32 §8): it needs the curator's key file of the private
store readable (:func:`store.curator_key_file`), and it reads a database only through
``data.url``, the caller's own credentials, never through a ``data.url_block`` that the runner
holds; otherwise it refuses (exit 2) saying why, before anything is read.
"""

from __future__ import annotations

import click

from cli.common import fail, load_config


@click.command("check-data")
@click.argument("config_path", metavar="CONFIG")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value (dotted key), e.g. --set data.missing=drop.")
def check_data(config_path: str, overrides: tuple[str, ...]) -> None:
    """NON-PRIVATE counts of CONFIG's data values, on this terminal only.

    Charges nothing and records nothing (no ledger, MLflow or Prefect). Its output describes the
    data themselves: keep it to yourself, never share or publish it."""
    from tasks.preflight import check_data as look

    config = load_config(config_path, overrides)
    try:
        check = look(config)  # refuses a caller without the curator's key, before any read
    except (ValueError, TypeError) as exc:     # bad input or configuration
        fail(exc)
    click.echo(str(check))
