"""Whole-suite isolation: Prefect's home lives in a fresh temporary folder, set before any test
module imports Prefect, so a clean checkout (no ./data yet) and a user's own ./data both stay
untouched by the tests."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_home = tempfile.mkdtemp(prefix="dpcausal-prefect-home-")
os.environ["PREFECT_HOME"] = _home
atexit.register(shutil.rmtree, _home, ignore_errors=True)


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_session_accountant():
    """Each test starts with an empty in-memory accountant (releases of earlier tests forgotten)."""
    from dpcausal import session

    session.reset()
    yield
