"""The curator's private store: ``<data>/private`` (DPCAUSAL_DATA moves ``<data>``).

What it holds is NON-PRIVATE and stays on the curator's disk, readable by the curator only
(folders 0700, files 0600; issue 18 item 12):

* ``fold.key``: the curator's key of the partitioned fold rule (per-release keys are never stored).
* ``fingerprint.key``: the secret of the keyed dataset fingerprints. A fingerprint is an
  HMAC-SHA256 of the data under it, so it reveals nothing about the data to whoever sees it in the
  ledger or MLflow (a plain content hash would let anyone confirm a guessed dataset). The code is
  the library's (:mod:`dpcausal.fingerprints`), which finds the same file beside the default
  ledger, so a library fit and a CLI run bind the same identities;
* ``fold_models/<key>.pkl``: fitted fold models of the core's evaluation-mode releases (each one
  a function of one fold's rows: a tree can memorise rows; release mode keeps its fits in memory,
  :mod:`tasks.fold_fits`). They are pickles, which execute code when loaded, so a file not owned
  by the current user, or writable by others, is refused;
* ``errors.log``: the details of release failures that depend on the data (the library's
  ``dpcausal.private`` logger); the CLI, Prefect and MLflow only ever see a generic message.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcausal.curator_log import attach
from dpcausal.fingerprints import identities, keyed_hash, secret

# Bump when the fold fitting changes meaning or the pickled classes move (v3: the core moved to
# dpcausal.ate, so a v2 chunk names FoldModels by its old module): it is part of every chunk's key.
CODE_VERSION = "fold-fit-v3"


def private_dir() -> Path:
    """``<data>/private``, created 0700 (an existing folder is tightened to 0700)."""
    from conf.settings import data_dir

    return _private_folder(data_dir() / "private")


def model_store_dir() -> Path:
    return _private_folder(private_dir() / "fold_models")


def error_log_path() -> Path:
    return private_dir() / "errors.log"


def _private_folder(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) != 0o700:
        path.chmod(0o700)
    return path


def _private_file(path: Path) -> int:
    """A file descriptor for writing ``path`` created 0600 (truncated if it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def _secret(name: str = "fingerprint.key") -> bytes:
    """A 32-byte secret of the private store (the fingerprint key by default), created once
    from OS entropy (0600; :func:`dpcausal.fingerprints.secret`)."""
    return secret(private_dir(), name)


def fold_key() -> bytes:
    """The curator's key of the partitioned fold rule (:mod:`dpcausal.ate.partitioned`): the same
    folds in every release of the same ids."""
    return _secret("fold.key")


def curator_key_file() -> Path | None:
    """The curator's key file this user can read (``fingerprint.key``, else ``fold.key``, under
    ``<data>/private``; found, never created), or None: what proves the caller is the curator,
    who holds the private store (issue 32 §8)."""
    from conf.settings import data_dir

    folder = data_dir() / "private"
    return next((path for name in ("fingerprint.key", "fold.key")
                 if (path := folder / name).is_file() and os.access(path, os.R_OK)), None)


def fingerprint(*arrays: np.ndarray) -> str:
    """Keyed content hash of arrays (values, shape and dtype; not the memory layout)."""
    return keyed_hash(_secret(), *arrays)


def frame_identities(frame: pd.DataFrame) -> tuple[str, ...]:
    """What the ledger binds for a table (issue 26 §3, issue 32 item 7): its keyed
    order-invariant fingerprint (:func:`dpcausal.fingerprint`), then its keyed row sketch, which
    catches a near copy (:func:`dpcausal.fingerprints.identities`), under the curator's key."""
    return identities(frame, key=_secret())


def content_fingerprint(frame: pd.DataFrame) -> str:
    """Keyed hash of a table exactly as given (column names, every value, in row order): the key
    of fold models fitted on it in evaluation mode (:mod:`tasks.fold_fits`), where the row order
    decides the folds."""
    names = np.array([json.dumps(list(map(str, frame.columns)))])
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return fingerprint(names.astype("U"), rows)


def source_fingerprint(description: Any) -> str:
    """Keyed identity of where the data come from (a resolved path, a query with its database,
    or a partition list with its footers: :func:`tasks.data.source_identity`), which the ledger
    binds to one dataset id beside the data's own (issue 26 §3)."""
    payload = json.dumps(description, sort_keys=True, default=str)
    return fingerprint(np.array([f"source:{payload}"]).astype("U"))


def digest(obj: Any) -> str:
    """Stable short hash of a JSON-able object or an array (public values only)."""
    if isinstance(obj, np.ndarray):
        payload = np.ascontiguousarray(obj).tobytes() + obj.dtype.str.encode()
    else:
        payload = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:24]


def chunk_key(basis: str, plan: str, folds: list[int], models: str) -> str:
    """Key of one stored chunk of fold models (also its file name), in evaluation mode:
    ``basis`` is the keyed data fingerprint, ``plan`` a digest of the fold ids."""
    return digest({"basis": basis, "plan": plan, "folds": list(map(int, folds)),
                   "models": models, "code": CODE_VERSION})


def chunk_path(store: str | Path, key: str) -> Path:
    return Path(store) / f"{key}.pkl"


def save_chunk(store: str | Path, key: str, fold_models: list[Any]) -> None:
    path = chunk_path(store, key)
    _private_folder(path.parent)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with os.fdopen(_private_file(tmp), "wb") as fh:
        pickle.dump(fold_models, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)  # atomic: a reader never sees half a chunk


def load_chunk(store: str | Path, key: str) -> list[Any] | None:
    """The stored chunk, or None when there is none. A pickle not owned by the current user or
    writable by group/others is refused (PermissionError): loading it would run its code."""
    path = chunk_path(store, key)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PermissionError(
                f"refusing to load {path}: a fold-model pickle must be owned by the current user "
                "and writable by nobody else (loading a pickle runs its code); delete it and run "
                "again")
        return pickle.load(fh)


def log_private_errors() -> Path:
    """Send the library's ``dpcausal.private`` log (what releases did with values, details of
    failures) to the curator's ``errors.log`` (0600, :func:`dpcausal.curator_log.attach`);
    returns its path."""
    return attach(error_log_path())


def log_failure(exc: BaseException, *, evaluation: bool) -> tuple[str, Path]:
    """Log a failed release's ``exc``, traceback included, to the curator's private log
    (:func:`log_private_errors`); returns what may be shown of it, and the log's path: its class
    name, with its text only in evaluation mode or for a ``ReleaseFailedError`` (whose text is
    public by construction). A release-mode exception's text may depend on the data."""
    import logging

    path = log_private_errors()
    logging.getLogger("dpcausal.private").error("release run failed", exc_info=exc)
    what = type(exc).__name__
    if evaluation or what == "ReleaseFailedError":
        what += f": {' '.join(str(exc).split())}"
    return what, path
