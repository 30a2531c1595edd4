"""The privacy-budget ledger every release goes through (reserve -> release -> commit).

See ``ledger/README.md`` for the protocol and the composition each mechanism gets.
"""

from ledger.composition import Cap, Spend, compose
from ledger.errors import BudgetExceededError, LedgerError, ReleaseInProgressError
from ledger.store import Ledger, ReleaseSlot

__all__ = ["BudgetExceededError", "Cap", "Ledger", "LedgerError", "ReleaseInProgressError",
           "ReleaseSlot", "Spend", "compose"]
