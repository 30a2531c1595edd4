"""What the commands share: the exit codes, the one ``Error:`` paragraph a command ends with,
loading a config, quiet consoles and the options of the commands that run flows."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, NoReturn

import click

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_REFUSED = 1, 2, 3
ERROR_KINDS = {EXIT_FAILED: "failed", EXIT_BAD_INPUT: "bad_input", EXIT_REFUSED: "refused"}

no_progress_option = click.option("--no-progress", is_flag=True, help="No progress bar.")
verbose_option = click.option("-v", "--verbose", is_flag=True,
                              help="Show Prefect's and MLflow's logs.")


def planning_options(stated_as: str, default: str) -> Any:
    """``--treated-share`` and ``--outcome-sd``: the core release's planning facts (issue 39
    item 5), ``stated_as`` what the value is (a plan's public assumption, or a fact the curator
    registers public), ``default`` what holds without it."""
    facts = (("--treated-share", "the share of treated rows", "1/2"),
             ("--outcome-sd", "the outcome's standard deviation", "the worst case of the bounds"))

    def decorate(command: Any) -> Any:
        for name, what, fallback in reversed(facts):
            command = click.option(name, type=float, default=None,
                                   help=f"{stated_as} {what} [default: {default}, else "
                                        f"{fallback}].")(command)
        return command
    return decorate


def quiet_console(verbose: bool) -> None:
    """Keep Prefect's and MLflow's console chatter from drawing over the progress bar."""
    if verbose:
        return
    # failures reach the user as one paragraph from this command, not as Prefect log tracebacks
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def fail(exc: BaseException, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """:func:`report_error` of ``exc``'s message on one line (exit 2 unless ``code`` says)."""
    report_error(" ".join(str(exc).split()) or type(exc).__name__, code, type(exc).__name__)


def report_error(message: str, code: int, error: str) -> NoReturn:
    """End the command with exit ``code`` and one ``Error:`` paragraph on stderr; under the
    command's ``--json`` also a JSON object on stdout: ``{"error": kind, "type": error,
    "message": message, "exit_code": code}`` (kind: failed, bad_input or refused)."""
    click.echo(f"Error: {message}", err=True)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("as_json"):
        click.echo(json.dumps({"error": ERROR_KINDS.get(code, "failed"), "type": error,
                               "message": message, "exit_code": code}))
    sys.exit(code)


def exit_code(exc: BaseException) -> int:
    """3 for a refusal by the budget, 2 for bad input or configuration, 1 for anything else
    (:func:`tasks.preflight.refusal_reason`, the flows' reading of the same refusals)."""
    from tasks.preflight import refusal_reason

    return {"budget": EXIT_REFUSED, "bad input or configuration": EXIT_BAD_INPUT}.get(
        refusal_reason(exc) or "", EXIT_FAILED)


def load_config(path: str | None, overrides: tuple[str, ...],
                base: dict[str, Any] | None = None, *, asked: bool = False) -> Any:
    """The validated config of the kind it declares, with its mechanism built once to refuse an
    unknown or unbuildable model before any data is read; bad input ends the command (exit 2).
    ``asked``: a run's config, which only asks about a registered dataset
    (:func:`conf.registration.load_asked`: the curator's half from the registration, and a
    refusal naming a key that differs from it); else the curator's own config, read as given."""
    from conf.kinds import build_mechanism, load_any
    from conf.registration import load_asked

    try:
        config = load_asked(path, overrides, base)[0] if asked else load_any(path, overrides,
                                                                             base=base)
        build_mechanism(config)
    except (ValueError, TypeError) as exc:  # conf.models.ConfigError is a ValueError
        fail(exc)
    return config
