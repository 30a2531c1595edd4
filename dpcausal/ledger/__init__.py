"""The privacy-budget ledger every release goes through (reserve -> release -> commit).

See ``dpcausal/ledger/README.md`` for the protocol and the composition each mechanism gets.
"""

from dpcausal.ledger.analysts import Analyst, AnalystBudgetExceededError, AnalystRefusedError
from dpcausal.ledger.composition import Cap, Spend, compose, group_privacy
from dpcausal.ledger.errors import (
    BudgetExceededError,
    DatasetIdentityError,
    IncompatibleChargeError,
    LedgerError,
    ReleaseInProgressError,
)
from dpcausal.ledger.registration import Registration
from dpcausal.ledger.store import Ledger, ReleaseSlot

__all__ = ["Analyst", "AnalystBudgetExceededError", "AnalystRefusedError",
           "BudgetExceededError", "Cap", "DatasetIdentityError", "IncompatibleChargeError",
           "Ledger", "LedgerError", "Registration", "ReleaseInProgressError", "ReleaseSlot",
           "Spend", "compose", "group_privacy"]
