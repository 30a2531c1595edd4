"""Typed parameters of the ``dp_meta_analysis`` flow (``conf/meta/*.yaml``, ``dpcausal meta``).

Exactly one source of studies: release ids of committed charges in the ledger (what was
released, as released), MLflow run ids of core releases, an MLflow filter query selecting them,
or a CSV of published estimates (columns ate, variance[, n, zeta, label]). The deployed
meta-analysis takes release ids only (:class:`MetaParameters`: no paths, no servers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from conf.models import load_typed

#: The sources of studies a meta-analysis config may name (exactly one).
SOURCES = ("releases", "runs", "query", "csv")


class MetaConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    releases: list[str] | None = None  # ledger release ids of committed charges
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
        given = [name for name in SOURCES if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(f"give exactly one source of studies (releases, runs, query or "
                             f"csv), got {given or 'none'}")
        return self


class MetaParameters(BaseModel):
    """The deployed meta-analysis' parameters (issue 40 item 7): the releases to pool, named by
    their ledger release ids, and the pooling; never a path or a server (the studies are read
    from the curator's ledger, the result logged to the curator's MLflow)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    release_ids: list[Annotated[str, Field(min_length=1, max_length=512)]] = Field(
        min_length=1, description="Release ids of committed releases (`dpcausal ledger history`, "
                                  "a release's MLflow tag release_id).")
    weights: Literal["inverse_variance", "paper_sqrt", "equal"] = "inverse_variance"
    model: Literal["fixed", "random"] = "fixed"
    level: float = Field(0.95, gt=0, lt=1)
    shared: list[str] = Field(default_factory=list, description="Release ids of studies that may "
                                                               "share people ('*': all).")

    def meta_config(self) -> MetaConfig:
        """The meta-analysis these parameters ask for, in the curator's experiment."""
        return MetaConfig(releases=self.release_ids, weights=self.weights, model=self.model,
                          level=self.level, shared=self.shared)


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
    if base.keys() & set(SOURCES):
        config = config.model_copy(update=dict.fromkeys(SOURCES))
    return load_meta_config(None, base=config.model_dump() | base)
