"""Dask worker preload for tests: the worker cannot open, list or enter any folder named in
``DPCAUSAL_FORBIDDEN_DIRS`` (os.pathsep-separated), like a machine without the flow's disk.

An audit hook (PEP 578) sees every ``open``/``os.listdir``/``os.scandir``/``os.chdir`` of the
worker process and raises ``PermissionError`` for a path inside a forbidden folder."""

from __future__ import annotations

import os
import sys
from typing import Any

_EVENTS = {"open", "os.listdir", "os.scandir", "os.chdir", "os.mkdir", "os.rename", "os.remove"}


def _inside(path: Any, roots: list[str]) -> bool:
    if not isinstance(path, (str, bytes, os.PathLike)):
        return False                                    # a file descriptor
    real = os.path.realpath(os.fsdecode(path))
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def dask_setup(worker: Any) -> None:
    roots = [os.path.realpath(p) for p in os.environ["DPCAUSAL_FORBIDDEN_DIRS"].split(os.pathsep)]

    def hook(event: str, args: tuple) -> None:
        if event in _EVENTS and args and _inside(args[0], roots):
            raise PermissionError(f"worker sandbox: {args[0]!r} is not reachable from here")

    sys.addaudithook(hook)
