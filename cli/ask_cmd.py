"""``dpcausal ask DATASET CONFIG_NAME [--set KEY=VALUE ...] [--json]``: the analyst's release
through the curator's gateway (issue 40). Reads ``DPCAUSAL_ASK_URL`` and ``DPCAUSAL_ASK_TOKEN``
only; imports neither Prefect, MLflow nor scikit-learn. Options only: asking, waiting, printing
and the exit codes are :func:`dpcausal.client.ask_command` (the wheel's ``dpcausal ask`` too).

Exit codes: 0 released, 2 refused (a bad, revoked or wrong-dataset token, a key or config the
gateway does not allow), 3 refused by the budget, 1 anything else.
"""

from __future__ import annotations

import sys

import click


@click.command()
@click.argument("dataset")
@click.argument("config_name")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="An analysis key of the Run form's allow-list, e.g. --set estimator.zeta=0.5")
@click.option("--json", "as_json", is_flag=True, help="Print the result, or the error, as JSON.")
@click.option("--timeout", default=3600.0, show_default=True, help="Seconds to wait.")
def ask(dataset: str, config_name: str, overrides: tuple[str, ...], as_json: bool,
        timeout: float) -> None:
    """Ask the gateway for a release of DATASET under its registered config CONFIG_NAME, wait,
    and print it (DPCAUSAL_ASK_URL, DPCAUSAL_ASK_TOKEN).

    Exit codes: 0 released, 2 refused, 3 refused by the budget, 1 else."""
    from dpcausal.client import ask_command

    sys.exit(ask_command(dataset, config_name, overrides, as_json=as_json, timeout=timeout))
