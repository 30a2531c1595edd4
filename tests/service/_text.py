"""Text helpers of the service tests."""

from __future__ import annotations

import re

_PATH = re.compile(r"(?<![\w.])/[^\s'\"`),;]+")


def without_paths(text: str) -> str:
    """``text`` with every absolute path (and the ``//host:port/...`` of a URL) removed. Pytest
    numbers its temporary folders (``/tmp/pytest-of-root/pytest-299/...``) and servers take
    free ports, so a test that checks a number is absent from an output must not meet it inside
    a path or address the output names (a fresh-clone CI run failed that way on "299")."""
    return _PATH.sub("", text)
