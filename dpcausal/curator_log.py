"""The curator's private log file: where :data:`dpcausal.validation.private_log`
writes what a release did with values (imputations, fallbacks, model errors, failures).

Every release attaches it, from Python as from the CLI: the file the user pointed at with
:func:`log_private_to`, else beside the ledger the release is charged to
(``<ledger folder>/private/errors.log`` for a SQLite ledger), else in the library's data folder
(``$DPCAUSAL_DATA``, default ``~/.dpcausal``). Like the rest of the private store, the folder
is 0700 and the file 0600. Its content is non-private: it stays on the curator's disk.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from dpcausal.validation import PrivateFileHandler, private_log

_pointed: Path | None = None


def log_private_to(path: str | Path | None) -> Path | None:
    """Send every later release's private log to ``path`` (its folder created 0700, the file
    0600); ``None`` goes back to the default (beside the ledger). Returns the path."""
    global _pointed
    _pointed = None if path is None else Path(path).expanduser().resolve()
    return _pointed


def default_folder() -> Path:
    """The library's data folder: ``$DPCAUSAL_DATA``, else ``~/.dpcausal`` (the default
    ledger's folder too)."""
    return Path(os.environ.get("DPCAUSAL_DATA") or Path.home() / ".dpcausal").resolve()


def private_log_path(ledger_url: str | None = None) -> Path:
    """Where a release's private log goes: the pointed file, else beside the SQLite ledger at
    ``ledger_url``, else ``<default folder>/private/errors.log``."""
    if _pointed is not None:
        return _pointed
    folder = default_folder()
    if ledger_url and ledger_url.startswith("sqlite:///") and ":memory:" not in ledger_url:
        folder = Path(ledger_url.removeprefix("sqlite:///").split("?")[0]).resolve().parent
    return folder / "private" / "errors.log"


def attach(path: str | Path) -> Path:
    """Make ``path`` the one file the private log writes to (0600, folder 0700); returns it."""
    target = Path(path)
    folder = target.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(folder.stat().st_mode) != 0o700:
        folder.chmod(0o700)
    for handler in list(private_log.handlers):
        if isinstance(handler, PrivateFileHandler):
            if handler.baseFilename == str(target.resolve()):
                return target
            private_log.removeHandler(handler)
            handler.close()
    handler = PrivateFileHandler(target, delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    private_log.addHandler(handler)
    return target
