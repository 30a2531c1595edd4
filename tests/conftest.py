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
def _environment_restored():
    """An in-process CLI call sets environment defaults for its process (``cli.main`` and
    ``quiet_console`` use ``os.environ.setdefault``): each test's environment is restored after
    it, so no test runs under another's (a quietened Prefect console hid the log line an
    interrupt test waits for)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _fresh_session_accountant():
    """Each test starts with an empty in-memory accountant (releases of earlier tests forgotten)."""
    from dpcausal import session
    from dpcausal.curator_log import log_private_to

    session.reset()
    log_private_to(os.path.join(_private, "errors.log"))
    yield


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A ledger URL in the test's own folder (the library's and the CLI's ledger tests)."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def curator_registers():
    """``register(config, overrides=())``: the curator's registration of a release config's
    dataset (a config object, or a YAML path with ``--set`` overrides), as ``dpcausal ledger
    register`` makes it (issue 32 §1): a service test registers what it runs. Evaluation is
    allowed for an evaluation config (the test data are synthetic). Returns the registration,
    or None where the curator could not register it (a bad config, a missing file, data bound to
    another id): the run is then refused as not registered."""
    from pathlib import Path

    def register(config, overrides=(), **kw):
        from conf.kinds import load_any
        from tasks.registration import register as register_config

        try:
            if isinstance(config, (str, Path)):
                config = load_any(config, list(overrides))
            return register_config(config, origin="synthetic" if config.evaluation else None,
                                   **kw)
        except (ValueError, TypeError, OSError):
            return None

    return register
