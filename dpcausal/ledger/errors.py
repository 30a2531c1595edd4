"""Exceptions raised by the ledger. Each message says what happened and what to do about it."""

from __future__ import annotations


class LedgerError(RuntimeError):
    """The ledger database is missing, corrupt or not a dpcausal ledger (never replaced)."""


class BudgetExceededError(ValueError):
    """A release would exceed a dataset's cap; nothing was recorded and no noise may be drawn."""

    def __init__(self, dataset: str, spent: str, requested: str, cap: str, total: str,
                 most: str = "", ledger: str = "", raise_with: str | None = None) -> None:
        self.dataset, self.spent, self.requested, self.cap = dataset, spent, requested, cap
        self.total, self.most, self.ledger = total, most, ledger
        #: the command that raises the cap, in the words of the interface that raised this
        #: refusal (the library's: the Python call; the CLI's: :meth:`in_words_of`)
        self.raise_with = raise_with or f"Ledger.set_budget({dataset!r}, ...)"
        left = f" The most one more release could spend: {most}." if most else ""
        super().__init__(
            f"budget exhausted for dataset {dataset}: spent {spent}, requested {requested}, "
            f"cap {cap} (together: {total}). No noise was drawn and nothing was charged.{left} "
            f"Raise the cap with `{self.raise_with}` or request a smaller "
            f"release.{_at(ledger)}"
        )

    def in_words_of(self, raise_with: str) -> BudgetExceededError:
        """The same refusal naming ``raise_with`` (another interface's command) as the fix."""
        return BudgetExceededError(self.dataset, self.spent, self.requested, self.cap,
                                   self.total, self.most, self.ledger, raise_with)


class IncompatibleChargeError(ValueError):
    """A charge that can never count against the dataset's cap (its mechanism or its unit of
    privacy); refused before anything is recorded or drawn."""

    def __init__(self, dataset: str, reason: str, ledger: str = "") -> None:
        self.dataset, self.reason, self.ledger = dataset, reason, ledger
        super().__init__(f"refused for dataset {dataset}: {reason}. No noise was drawn and "
                         f"nothing was charged.{_at(ledger)}")


class DatasetIdentityError(ValueError):
    """The data's keyed fingerprint (or their source's, or a near copy's row sketch) is bound to
    another dataset id: the same data must not start with a fresh budget under a new id. Nothing
    was recorded or drawn."""

    def __init__(self, dataset: str, original: str, ledger: str = "") -> None:
        self.dataset, self.original, self.ledger = dataset, original, ledger
        super().__init__(
            f"refused for dataset {dataset}: these data (their keyed fingerprint, a near copy by "
            f"their keyed row sketch, or their source's: the same file, query or partitions) are "
            f"already budgeted as dataset "
            f"{original!r}; release them under {original!r} (the same data under a new id would "
            f"start with a fresh budget). No noise was drawn and nothing was charged.{_at(ledger)}")


def _at(ledger: str) -> str:
    return f" Ledger: {ledger}." if ledger else ""


class ReleaseInProgressError(RuntimeError):
    """The release id was reserved before but never committed; its charge stays, no new noise."""
