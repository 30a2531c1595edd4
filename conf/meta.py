"""Typed parameters of the ``dp_meta_analysis`` flow (``conf/meta/*.yaml``, ``dpcausal meta``).

Exactly one source of studies: MLflow run ids of core releases, an MLflow filter query selecting
them, or a CSV of published estimates (columns ate, variance[, n, zeta, label]).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from conf.models import load_typed


class MetaConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: list[str] | None = None
    query: str | None = None
    csv: str | None = None
    weights: Literal["inverse_variance", "paper_sqrt", "equal"] = "inverse_variance"
    model: Literal["fixed", "random"] = "fixed"
    level: float = Field(0.95, gt=0, lt=1)
    shared: list[str] = []  # labels or run ids of studies that may share people
    experiment: str = "dpcausal-meta"
    tracking_uri: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "MetaConfig":
        given = [name for name in ("runs", "query", "csv") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(f"give exactly one source of studies (runs, query or csv), got "
                             f"{given or 'none'}")
        return self


def load_meta_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = (),
                     base: dict[str, Any] | None = None) -> MetaConfig:
    """Read a meta-analysis YAML (or start from ``base``), apply overrides, validate."""
    return load_typed(MetaConfig, path, overrides, base, example="conf/meta/demo.yaml")


def meta_config_from(path: str | Path | None, given: dict[str, Any]) -> MetaConfig:
    """The config of ``dpcausal meta``: the file at ``path`` (if any) with the options
    ``given`` (None: not given) in place of its values; a source given (``runs``, ``query`` or
    ``csv``) replaces the file's source."""
    base = {k: v for k, v in given.items() if v is not None}
    if path is None:
        return load_meta_config(None, base=base)
    config = load_meta_config(path)
    if base.keys() & {"runs", "query", "csv"}:
        config = config.model_copy(update={"runs": None, "query": None, "csv": None})
    return load_meta_config(None, base=config.model_dump() | base)
