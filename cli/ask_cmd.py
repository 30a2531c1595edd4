"""``dpcausal ask DATASET CONFIG_NAME [--set KEY=VALUE ...] [--json]``: the analyst's release
through the curator's gateway (issue 40). Reads ``DPCAUSAL_ASK_URL`` and ``DPCAUSAL_ASK_TOKEN``
only; imports neither Prefect, MLflow nor scikit-learn (:mod:`dpcausal.client`). Options and
printing only.

Exit codes: 0 released, 2 refused (a bad, revoked or wrong-dataset token, a key or config the
gateway does not allow), 3 refused by the budget, 1 anything else.
"""

from __future__ import annotations

import json

import click

from cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, fail


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
    from dpcausal.client import AskBudgetError, AskRefusedError, Gateway

    try:
        settings = {}
        for item in overrides:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise AskRefusedError(f"--set expects KEY=VALUE, got {item!r}")
            settings[key.strip()] = _value(value)
        gateway = Gateway(timeout=30.0)
        asked = gateway.submit(dataset, config_name, settings)
        click.echo(f"asked: request {asked['request_id']}", err=True)
        done = gateway.wait(asked["request_id"], timeout=timeout,
                            progress=lambda state: click.echo(f"  {state}", err=True))
    except AskBudgetError as exc:
        fail(exc, EXIT_REFUSED)
    except AskRefusedError as exc:
        fail(exc, EXIT_BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the gateway or the release failed
        fail(exc, EXIT_FAILED)
    if as_json:
        click.echo(json.dumps(done, indent=2))
        return
    click.echo(done["text"])
    spent = done["spent"]
    click.echo(f"dataset spend: {spent['dataset']['text']}; yours: {spent['yours']['text']}")
    click.echo(f"release id: {done['release_id']}")


def _value(text: str) -> object:
    """A --set value as JSON when it parses (numbers, lists, true/false), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text

