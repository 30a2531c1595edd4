"""Whole-suite isolation: Prefect's home and the library's private log live in fresh temporary
folders, set before any test module imports Prefect, so a clean checkout (no ./data yet), a user's
own ./data and ~/.dpcausal all stay untouched by the tests."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_home = tempfile.mkdtemp(prefix="dpcausal-prefect-home-")
os.environ["PREFECT_HOME"] = _home
atexit.register(shutil.rmtree, _home, ignore_errors=True)

# library fits write the curator's private log here, not under ~/.dpcausal (issue 25 §2)
_private = tempfile.mkdtemp(prefix="dpcausal-private-log-")
atexit.register(shutil.rmtree, _private, ignore_errors=True)


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_session_accountant():
    """Each test starts with an empty in-memory accountant (releases of earlier tests forgotten)."""
    from dpcausal import session
    from dpcausal.curator_log import log_private_to

    session.reset()
    log_private_to(os.path.join(_private, "errors.log"))
    yield
