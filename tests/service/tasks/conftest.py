"""The PostgreSQL server of the ledger's tests (tests/library/ledger/conftest.py, the same
fixtures) for the SQL source tests here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_LEDGER_CONFTEST = Path(__file__).parents[2] / "library" / "ledger" / "conftest.py"
_spec = importlib.util.spec_from_file_location("ledger_conftest", _LEDGER_CONFTEST)
assert _spec is not None and _spec.loader is not None
_ledger = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ledger)
postgres_server, postgres_url = _ledger.postgres_server, _ledger.postgres_url
