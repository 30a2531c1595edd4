"""A dataset's registration: what its curator binds to the dataset id once (issue 32 §1).

The curator registers a dataset (:meth:`dpcausal.ledger.Ledger.register`); whoever runs a
release afterwards only asks about it (Tumult Analytics' ``Session``: the data owner builds it
from the sources, the protected change and the budget; analysts only evaluate queries against
it). Everything here is public: the source (file paths, the partition list, or the SQL query
text with its database block and id column), the column roles and their declared types, the
missing-value policy, the unit and public facts of the neighbouring relation, the number of
records ``n`` counted by the curator (public from the registration on: the planner, the charge
and the fold layout use it, and a source that no longer holds ``n`` records fails after the
charge), and whether evaluation mode (a non-private read) is allowed, which the curator grants
only to a source marked synthetic or public. Among the ``facts``, the curator may declare the
core release's planning facts public (issue 39 item 5): ``treated_share``, the share of treated
records (a trial protocol's assignment probability), and ``outcome_sd``, the outcome's standard
deviation; the planner and ``estimator="auto"`` then use them instead of 1/2 and the worst case.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

#: What a curator may mark a source as, to allow evaluation mode on it.
EVALUATION_ORIGINS = ("synthetic", "public")


@dataclass(frozen=True)
class Registration:
    """One registration of ``dataset`` (plain, public values; see the module doc).

    ``version`` counts the dataset's registrations (the latest holds); ``by`` and ``at`` say
    who registered it and when. ``evaluation_allowed`` needs ``origin``, the curator's mark of
    the source as ``"synthetic"`` or ``"public"``."""

    dataset: str
    source: dict[str, Any]
    columns: dict[str, Any]
    n: int
    dtypes: dict[str, str] = field(default_factory=dict)
    missing: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    evaluation_allowed: bool = False
    origin: str | None = None
    version: int = 0
    by: str = ""
    at: datetime | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 0:
            raise ValueError(f"n must be the number of records counted by the curator, an int "
                             f">= 0, got {self.n!r}")
        if self.origin is not None and self.origin not in EVALUATION_ORIGINS:
            raise ValueError(f"origin must be one of {', '.join(EVALUATION_ORIGINS)} or None "
                             f"(a private source), got {self.origin!r}")
        if self.evaluation_allowed and self.origin is None:
            raise ValueError("evaluation_allowed=True needs origin='synthetic' or 'public': "
                             "evaluation mode is a non-private read, allowed only on a source "
                             "the curator marks synthetic or public")
        for name in ("source", "columns", "dtypes", "missing", "facts"):
            if not isinstance(getattr(self, name), dict):
                raise TypeError(f"{name} must be a dict of public values, got "
                                f"{type(getattr(self, name)).__name__}")
        _check_planning_facts(self.facts)

    def bound(self) -> dict[str, Any]:
        """What the registration binds, as one JSON-ready dict (without version, by, at)."""
        return {k: v for k, v in asdict(self).items()
                if k not in ("dataset", "version", "by", "at")}

    def to_json(self) -> str:
        """:meth:`bound` as canonical JSON text (the stored form)."""
        return json.dumps(self.bound(), sort_keys=True, default=str)

    def _shown_facts(self) -> dict[str, Any]:
        """The facts, a long one (a user-level occupancy: one entry per unit and cell) named
        only: it stays in the ledger, where the release checks it."""
        return {k: v if len(json.dumps(v, default=str)) <= 200 else "(stored, not shown)"
                for k, v in self.facts.items()}

    def describe(self) -> str:
        """One paragraph for ``dpcausal ledger show``."""
        where = ", ".join(f"{k}={v}" for k, v in self.source.items() if v not in (None, {}, []))
        evaluation = (f"allowed ({self.origin} source)" if self.evaluation_allowed
                      else "refused")
        return (f"registration {self.version} of {self.dataset} by {self.by} at {self.at}: "
                f"source {where}; columns {self.columns}; dtypes {self.dtypes or 'by role'}; "
                f"missing {self.missing or 'impute'}; facts {self._shown_facts()}; "
                f"n={self.n} records (public); evaluation mode {evaluation}")


def _check_planning_facts(facts: dict[str, Any]) -> None:
    """The registered planning facts (module docstring): ``treated_share`` a number in (0, 1),
    ``outcome_sd`` a finite number > 0; absent or None means undeclared."""
    share, sd = facts.get("treated_share"), facts.get("outcome_sd")

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if share is not None and not (number(share) and 0 < share < 1):
        raise ValueError(f"the registered treated_share must be a number in (0, 1), got "
                         f"{share!r}")
    if sd is not None and not (number(sd) and sd > 0):
        raise ValueError(f"the registered outcome_sd must be a finite number > 0, got {sd!r}")
