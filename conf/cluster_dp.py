"""Typed config of a Cluster-DP release (``kind: cluster_dp`` in a ``conf/release/*.yaml``).

It reuses the core config's data source, MLflow settings and ``--set`` override rules
(:mod:`conf.models`); only the mechanism and the ledger cap differ: Cluster-DP is a label-DP
(epsilon, delta) mechanism, so the dataset's cap is an (epsilon, delta) cap, not a zeta cap.
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
from dpcausal.contract import level_to_alpha


class ClusterColumns(_Strict):
    """Column names; any other column (e.g. a unit id) is dropped when the data are loaded."""

    cluster: str
    treatment: str
    outcome: str


class MechanismConfig(_Strict):
    """Public parameters of :class:`dpcausal.cluster_dp.ClusterDP`; ``None`` keeps its default."""

    values: list[float] = Field(min_length=2)  # the public response space Y
    epsilon: float = Field(gt=0)
    delta: float = Field(0.0, ge=0, lt=1)
    gamma: float | None = None
    sigma: float | None = None
    mechanism: Literal["cluster", "cluster_free", "uniform"] = "cluster"
    accounting: Literal["strict", "paper"] = "strict"
    allow_high_lambda: bool = False
    # an outcome outside `values` (or missing): the nearest value, or this declared value of Y
    out_of_space: Literal["nearest"] | float = "nearest"

    def library_kwargs(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude={"values"})


class EstimateConfig(_Strict):
    """The analyst-side estimate (post-processing of the published release)."""

    strata: Literal["clusters", "none"] = "clusters"
    alpha: float = Field(0.05, gt=0, lt=1)  # the CI's miscoverage: its level is 1 - alpha

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, raw: Any) -> Any:
        return renamed_keys(raw, "estimate", {"level": "alpha"}, {"level": level_to_alpha})


class ClusterDPConfig(ReleaseCommon):
    kind: Literal["cluster_dp"]
    name: str = Field("cluster_dp", pattern=r"^[A-Za-z0-9_.-]+$")
    data: DataSource
    columns: ClusterColumns
    mechanism: MechanismConfig
    estimate: EstimateConfig = EstimateConfig()
    ledger: EpsilonLedgerConfig

    @model_validator(mode="after")
    def _distinct_columns(self) -> "ClusterDPConfig":
        c = self.columns
        if len({c.cluster, c.treatment, c.outcome}) < 3:
            raise ValueError("columns.cluster, columns.treatment and columns.outcome must be "
                             f"three different columns, got {c.model_dump()}")
        return self
