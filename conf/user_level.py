"""Typed config of a user-level DP release (``kind: user_level`` in a ``conf/release/*.yaml``).

Per-cell DP means and variances with Clip-User (spec user_level_clip.md §3.7, §7). Records are in
long format: one row per record, with the privacy unit, the disjoint cell keys and the value. The
release costs each unit at most ``K * epsilon`` (pure epsilon-DP, charged to the ledger against an
(epsilon, delta) cap).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from conf.models import (
    DataSource,
    EpsilonLedgerConfig,
    ReleaseCommon,
    _Strict,
    renamed_keys,
)


class UserLevelColumns(_Strict):
    """The privacy unit, the cell keys (strata and arm), the value; optional record order/id."""

    unit: str
    cell: list[str] = Field(["stratum", "arm"], min_length=1)
    value: str
    order: str | None = None   # data-independent order deciding which records are kept (A11)
    record: str | None = None  # record id: one in two cells means overlapping cells (refused)
    arm: str | None = None     # the binary cell column for the derived ATEs (default "arm")


class UserLevelMechanism(_Strict):
    """Public parameters of :class:`dpcausal.user_level.UserLevelATE` (spec §7.4)."""

    outcome_bounds: tuple[float, float]
    epsilon: float = Field(gt=0)   # per cell; the release costs K * epsilon per unit
    clip: Literal["clip_user", "none"] = "clip_user"
    split: tuple[float, float] = (0.5, 0.5)
    weights: tuple[float, float] = (1.0, 1.0)
    protect_min_grid: bool = True
    error_target: float | None = Field(None, gt=0)
    occupancy_public: bool  # the curator's declaration (spec §7.2-1): required, never defaulted
    rollback_partial_stage: bool = True

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, raw: Any) -> Any:
        return renamed_keys(raw, "mechanism", {"bounds": "outcome_bounds"})

    def library_kwargs(self) -> dict[str, Any]:
        return self.model_dump()


class UserLevelConfig(ReleaseCommon):
    kind: Literal["user_level"]
    name: str = Field("user_level", pattern=r"^[A-Za-z0-9_.-]+$")
    data: DataSource
    columns: UserLevelColumns
    mechanism: UserLevelMechanism
    ledger: EpsilonLedgerConfig

    @model_validator(mode="after")
    def _distinct_columns(self) -> "UserLevelConfig":
        c = self.columns
        named = [c.unit, *c.cell, c.value] + [x for x in (c.order, c.record) if x is not None]
        if len(set(named)) < len(named):
            raise ValueError(f"columns must name different columns, got {c.model_dump()}")
        if c.arm is not None and c.arm not in c.cell:
            raise ValueError(f"columns.arm={c.arm!r} must be one of columns.cell {c.cell}")
        return self
