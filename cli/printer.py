"""The one printer of a release of any kind: the release's own text (``str(Release)``: its
summary and one line saying what the CI covers), then where it was recorded; or its JSON."""

from __future__ import annotations

import json
from typing import Any

import click


def print_result(result: dict[str, Any], *, as_json: bool = False) -> None:
    """``result`` is what :func:`flows.release.dp_release` returns."""
    if as_json:
        click.echo(json.dumps(result, indent=2, default=str))
        return
    click.echo(result["text"])
    spent = result.get("spent")
    if spent:
        zeta = "" if spent.get("zeta") is None else f"zeta {spent['zeta']:.4g}, "
        nxt = spent.get("next_epsilon")
        more = "" if nxt is None else f"; one more release could spend epsilon {nxt:.4g}"
        click.echo(f"dataset spend: {zeta}epsilon {spent['epsilon']:.4g} at delta "
                   f"{spent['delta']:g} over {spent['n_charges']} release(s){more}")
        click.echo(f"ledger: {spent['ledger']}")
    reused = "  (the committed release; no new noise)" if result.get("reused") else ""
    click.echo(f"release id: {result['release_id']}{reused}")
    click.echo(f"MLflow: experiment {result['experiment']!r}, run {result['mlflow']['run_id']} "
               f"({result['mlflow']['url']})")
