"""The curator's private model store and the cache policy of the fold fits.

Fitted fold models are NON-PRIVATE (each one is a function of one fold's rows). They never enter
Prefect's result store: a fit task writes its chunk of fold models to
``<data>/private/fold_models/<key>.pkl`` (trusted storage, readable by the curator only) and returns
just ``key``. The task's Prefect cache record then holds that string, nothing else.

Keys and fingerprints:

* the dataset fingerprint is an HMAC-SHA256 of the validated arrays under a secret kept in the
  private store, so the key reveals nothing about the data to whoever sees the Prefect records
  (a plain content hash would let anyone confirm a guessed dataset);
* a chunk key hashes (fingerprint, fold plan, fold ids of the chunk, model specs, CODE_VERSION).
  Estimator type, zeta, bounds on the propensity and CI settings are not in it, so changing them
  reuses every fitted fold model.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pickle
import secrets
from pathlib import Path
from typing import Any

import numpy as np
from prefect.cache_policies import CachePolicy

# Bump when fit_fold_chunk or the library's fold fitting changes meaning (TASK_SOURCE cannot see
# it).
CODE_VERSION = "fold-fit-v1"


def private_dir() -> Path:
    """``<data>/private``: the curator's trusted storage (DPCAUSAL_DATA overrides <data>)."""
    from conf.settings import data_dir

    return data_dir() / "private"


def model_store_dir() -> Path:
    return private_dir() / "fold_models"


def _secret() -> bytes:
    """The fingerprint key, created once (mode 0600) in the private store."""
    path = private_dir() / "fingerprint.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
    return path.read_bytes()


def fingerprint(*arrays: np.ndarray) -> str:
    """Keyed content hash of the arrays as fed to the fits (shape and dtype included)."""
    mac = hmac.new(_secret(), digestmod=hashlib.sha256)
    for arr in arrays:
        arr = np.ascontiguousarray(arr)
        mac.update(f"{arr.dtype.str}{arr.shape}".encode())
        mac.update(arr.tobytes())
    return mac.hexdigest()[:32]


def digest(obj: Any) -> str:
    """Stable short hash of a JSON-able object or an array (public values only)."""
    if isinstance(obj, np.ndarray):
        payload = np.ascontiguousarray(obj).tobytes() + obj.dtype.str.encode()
    else:
        payload = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:24]


def chunk_key(data_fp: str, plan: str, folds: list[int], models: str) -> str:
    """Key of one stored chunk of fold models (also the file name)."""
    return digest({"data": data_fp, "plan": plan, "folds": list(map(int, folds)),
                   "models": models, "code": CODE_VERSION})


def chunk_path(store: str | Path, key: str) -> Path:
    return Path(store) / f"{key}.pkl"


def save_chunk(store: str | Path, key: str, fold_models: list[Any]) -> None:
    path = chunk_path(store, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        pickle.dump(fold_models, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)  # atomic: a reader never sees half a chunk


def load_chunk(store: str | Path, key: str) -> list[Any]:
    path = chunk_path(store, key)
    if not path.exists():
        raise FileNotFoundError(
            f"fold-model chunk {key} is missing from the private store {store}; re-run the release "
            "(the fit cache notices the missing file and refits)"
        )
    with open(path, "rb") as fh:
        return pickle.load(fh)


class StoredChunkPolicy(CachePolicy):
    """Cache key of a fit task = its chunk key, valid only while the chunk file exists.

    When the file is gone, the stale cache record is dropped from the result store before the
    key is returned, so the task runs again and rewrites both.
    """

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        key = chunk_key(inputs["data_fp"], inputs["plan"], inputs["folds"], inputs["models"])
        if not chunk_path(inputs["store"], key).exists():
            _forget(task_ctx, key)
        return key


def _forget(task_ctx: Any, key: str) -> None:
    """Remove a cache record from a local-filesystem result store (no-op when absent)."""
    storage = getattr(getattr(task_ctx, "result_store", None), "result_storage", None)
    basepath = getattr(storage, "basepath", None)
    if basepath is None:
        from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH

        basepath = PREFECT_RESULTS_LOCAL_STORAGE_PATH.value()
    Path(os.path.expanduser(str(basepath)), key).unlink(missing_ok=True)
