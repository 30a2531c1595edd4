"""The ``dpcausal`` command line. Subcommands live in their own modules and load lazily,
so ``dpcausal --help`` stays fast (no Prefect/MLflow import until a command runs)."""

from __future__ import annotations

import importlib
import importlib.util

import click

from conf import settings

# name -> "module:attribute" of a click command or group
COMMANDS: dict[str, str] = {
    "plan": "cli.plan_cmd:plan",
    "check-data": "cli.check_data_cmd:check_data",
    "run": "cli.run_cmd:run",
    "demo": "cli.run_cmd:demo",
    "ledger": "cli.ledger_cmd:ledger",
    "analyst": "cli.analyst_cmd:analyst",
    "ask": "cli.ask_cmd:ask",
    "meta": "cli.meta_cmd:meta",
    "reproduce": "cli.reproduce_cmd:reproduce",
    "serve": "cli.serve_cmd:serve",
    "stop": "cli.serve_cmd:stop",
}

HELP = {
    "plan": "Precision of a release before anything is spent (charges nothing).",
    "check-data": "NON-PRIVATE counts of the data's values, for the curator only (free).",
    "run": "Run a release flow from a YAML config.",
    "demo": "Synthetic data, then a full private release with embedded defaults.",
    "ledger": "Inspect and set per-dataset privacy budgets.",
    "analyst": "Admit, list and revoke remote analysts and their tokens (the curator).",
    "ask": "An analyst's release through the gateway (DPCAUSAL_ASK_URL, DPCAUSAL_ASK_TOKEN).",
    "meta": "Pool private releases (no privacy cost).",
    "reproduce": "Reproduce the papers' experiments and write reports/.",
    "serve": "Start Prefect + MLflow servers, deploy, start a worker.",
    "stop": "Stop the services started by `dpcausal serve`.",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _available(name):
            return None
        module, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, HELP.get(name, "")) for name in self.list_commands(ctx)]
        if not rows:
            return
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _available(name: str) -> bool:
    module = COMMANDS[name].split(":")[0]
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 released (or done), 2 bad input or configuration, "
                    "3 refused by the privacy budget, 1 anything else.")
@click.version_option(package_name="dpcausal", prog_name="dpcausal")
def main() -> None:
    """dpcausal: orchestrated, differentially private causal-effect releases."""
    if click.get_current_context().invoked_subcommand == "ask":
        return  # the analyst's seat: a URL and a token, no data folder
    try:
        settings.apply_defaults()
    except OSError as exc:  # e.g. DPCAUSAL_DATA names a file
        click.echo(f"Error: the data folder {str(settings.data_dir())!r} cannot be used "
                   f"({exc.strerror or type(exc).__name__}); set DPCAUSAL_DATA to a folder you "
                   "can write to.", err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
