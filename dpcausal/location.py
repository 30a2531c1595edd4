"""Where dpcausal keeps what it writes: one rule for the library and the CLI.

The library's :class:`dpcausal.Ledger` and the project's CLI, flows and services all put their
stores under :func:`data_dir`, so Python and ``dpcausal`` on one installation, from any working
directory, charge the same ledger (docs/guide/where-things-live.md).
"""

from __future__ import annotations

import os
from pathlib import Path

#: A source checkout of dpcausal: the folder that holds this package and its pyproject.toml.
CHECKOUT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The data folder: ``$DPCAUSAL_DATA``; else ``<checkout>/data`` when dpcausal runs from its
    source checkout (where the CLI and its configs live); else ``~/.dpcausal`` (an installed
    wheel). Never the working directory."""
    given = os.environ.get("DPCAUSAL_DATA")
    if given:
        return Path(given).expanduser().resolve()
    if _is_checkout(CHECKOUT):
        return CHECKOUT / "data"
    return (Path.home() / ".dpcausal").resolve()


def _is_checkout(root: Path) -> bool:
    project = root / "pyproject.toml"
    try:
        return project.is_file() and 'name = "dpcausal"' in project.read_text(encoding="utf-8")
    except OSError:
        return False
