"""Typed config of a federated ATE release (``kind: federated`` in a ``conf/release/*.yaml``).

PBM + secure aggregation (spec federated_secagg.md). It reuses the core config's data source,
MLflow settings and ``--set`` override rules (:mod:`conf.models`). The release is charged to the
ledger as an RDP curve; a dataset seen for the first time gets an (epsilon, delta) cap.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from conf.models import (
    DataSource,
    EpsilonLedgerConfig,
    ReleaseCommon,
    _Strict,
)


class FederatedColumns(_Strict):
    """Public group label (0 control / 1 treated) and the client outcome; others are dropped."""

    treatment: str
    outcome: str


class FederatedMechanism(_Strict):
    """Public parameters of :class:`dpcausal.federated.FederatedATE` (spec §7.1 defaults)."""

    R: float = Field(gt=0)
    epsilon: float = Field(gt=0)
    delta: float = Field(gt=0, lt=1)
    m1: int = Field(1024, ge=1)
    m2: int = Field(1024, ge=1)
    mean_share: float = Field(0.99, gt=0, lt=1)
    estimand: Literal["PATE", "SATE"] = "PATE"
    ci_form: Literal["quadrature", "sum_sd", "paper", "corrected", "hoeffding"] = "quadrature"
    variance_mode: Literal["private", "oracle_nonprivate"] = "private"
    secagg: Literal["pairwise", "none"] = "pairwise"
    dropout: float = Field(0.0, ge=0, lt=1)
    alpha: float = Field(0.1, gt=0, lt=1)
    debias: bool = True


class FederatedConfig(ReleaseCommon):
    kind: Literal["federated"]
    name: str = Field("federated", pattern=r"^[A-Za-z0-9_.-]+$")
    data: DataSource
    columns: FederatedColumns
    mechanism: FederatedMechanism
    chunk_size: int = Field(100_000, ge=1)  # clients encoded per chunk
    ledger: EpsilonLedgerConfig

    @model_validator(mode="after")
    def _checks(self) -> "FederatedConfig":
        if self.columns.treatment == self.columns.outcome:
            raise ValueError(f"columns.treatment and columns.outcome must differ, got "
                             f"{self.columns.treatment!r} for both")
        if self.mechanism.variance_mode == "oracle_nonprivate" and self.mode != "evaluation":
            raise ValueError("mechanism.variance_mode='oracle_nonprivate' uses exact sample "
                             "variances and is NOT differentially private (spec §3.3); it is "
                             "refused in release mode: use variance_mode='private', or "
                             "mode='evaluation' for a reproduction on synthetic data")
        return self
