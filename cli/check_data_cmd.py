"""``dpcausal check-data``: a NON-PRIVATE look at a config's data values that costs nothing
(issue 25 §2).

The curator already holds the data, so reading them and printing counts on the curator's own
terminal spends no privacy budget: rows, missing and non-finite values per role, the share of
outcomes outside the bounds, arm sizes, and for the core release what the declared missing-value
policy will do and the rows per fold at the planned K. Nothing is charged and nothing is written:
no ledger, no MLflow, no Prefect (neither is imported), no log. The output must not be shared.
"""

from __future__ import annotations

from typing import Any

import click
import pandas as pd


@click.command("check-data")
@click.argument("config_path", metavar="CONFIG")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value (dotted key), e.g. --set data.missing=drop.")
def check_data(config_path: str, overrides: tuple[str, ...]) -> None:
    """NON-PRIVATE counts of CONFIG's data values, on this terminal only.

    Charges nothing and records nothing (no ledger, MLflow or Prefect). Its output describes the
    data themselves: keep it to yourself, never share or publish it."""
    from conf.kinds import KINDS, load_any
    from conf.models import ConfigError

    try:
        config = load_any(config_path, overrides)
        kind = KINDS[config.kind]
        frame = _read(config.data, kind.schema(config))
        mechanism = kind.build(config)
        roles = {k: v for k, v in kind.roles(config).items() if v is not None}
        if config.kind == "ate":
            check: Any = mechanism.check_data(frame, **roles)
        else:
            bounds = kind.detail(config).get("bounds")
            check = mechanism.check_data(frame, outcome_bounds=tuple(bounds) if bounds else None,
                                         **roles)
    except (ConfigError, ValueError, TypeError) as exc:     # bad input or configuration
        click.echo(f"Error: {exc}", err=True)
        raise SystemExit(2) from None
    click.echo(str(check))


def _read(source: Any, schema: Any) -> pd.DataFrame:
    """The config's columns from its file, query or partitions (all rows, in memory), read as the
    release reads them: each column coerced to its declared type, so an unparseable cell shows
    as missing here as it will in the release."""
    from tasks.data import partition_files, read_frame

    if source.partitions is not None:
        columns = None if schema.rest is not None else list(schema.columns)
        parts = [pd.read_parquet(p, columns=columns) for p in
                 partition_files(str(source.partitions))]
        frame = pd.concat(parts, ignore_index=True)
        return frame if columns is not None else frame.drop(columns=[source.id_column])
    return read_frame(source, schema)
