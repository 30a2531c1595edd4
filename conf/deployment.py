"""The typed parameters of the release deployments (issue 25 §5): what the Prefect UI's Run form
asks for. Prefect renders this model as a form with its descriptions and validates the bounds
before a run is created; each field left empty keeps the config file's value. Everything here is
public: it is recorded as the flow run's parameters.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from conf.kinds import KINDS

# An empty form field is None, "keep the config's value". The schema Prefect renders leaves the
# None out (SkipJsonSchema), so the form shows a plain input instead of a "type | None" switch.
_Unset = SkipJsonSchema[None]


def _empty_by_default(schema: dict[str, Any]) -> None:
    """No ``"default": null`` in the form's schema: an empty field is left out of the run's
    parameters (then None), where a null would fail the form's own type check."""
    for field in schema.get("properties", {}).values():
        if "default" in field and field["default"] is None:
            del field["default"]


class ReleaseParameters(BaseModel):
    """A release of a config file, with the settings a curator changes from run to run."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_empty_by_default)

    config: str = Field(
        "conf/release/demo.yaml", min_length=1,
        description="The release config (YAML), relative to the project root; its kind "
                    f"({', '.join(KINDS)}) picks the mechanism.")
    mode: Literal["release", "evaluation"] | _Unset = Field(
        None, description="release: private and charged to the dataset's budget. evaluation: "
                          "NOT private, for simulated or public data only, never charged. "
                          "Empty: the config's mode.")
    dataset_id: Annotated[str, Field(min_length=1)] | _Unset = Field(
        None, description="The ledger's dataset this release is charged to. Empty: "
                                        "the config's ledger.dataset_id.")
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")] | _Unset = Field(
        None, description="The release's name (MLflow run and params). Empty: the config's name.")
    zeta: Annotated[float, Field(gt=0, le=100)] | _Unset = Field(
        None,
        description="Gaussian-DP budget of this release (zeta; epsilon 4.38 at zeta 1, "
                    "delta 1e-5). Core release (kind ate) only. Empty: the config's "
                    "estimator.zeta.")
    outcome_lower: float | _Unset = Field(
        None, description="Public lower bound of the outcome (with outcome_upper; fixed before "
                          "looking at the data). Core release only. Empty: the config's.")
    outcome_upper: float | _Unset = Field(
        None, description="Public upper bound of the outcome (with outcome_lower). Core release "
                          "only. Empty: the config's.")
    n_folds: Annotated[int, Field(ge=2, le=100_000)] | _Unset = Field(
        None,
        description="K, the number of folds (public). Core release only. Empty: the config's "
                    "estimator.n_folds (auto: the planner's choice from n and d).")
    missing: Literal["impute", "drop"] | _Unset = Field(
        None, description="What a missing or non-finite value becomes (public rule): impute (a "
                          "declared fill plus a missingness indicator for covariates) or drop "
                          "(complete cases; n is then the complete-case count). Empty: the "
                          "config's data.missing.")
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description='Advanced: further dotted config keys, e.g. {"runner.max_workers": 1, '
                    '"folds_per_task": 10}.')

    @model_validator(mode="after")
    def _bounds_together(self) -> "ReleaseParameters":
        lo, hi = self.outcome_lower, self.outcome_upper
        if (lo is None) != (hi is None):
            raise ValueError("give both outcome_lower and outcome_upper, or neither")
        if lo is not None and hi is not None and not lo < hi:
            raise ValueError(f"outcome_lower must be below outcome_upper, got [{lo}, {hi}]")
        return self

    def override_items(self) -> list[str]:
        """The settings as ``dotted.key=value`` items (values as JSON, which the loader reads as
        YAML), typed fields after the advanced ``overrides`` so that they win."""
        typed: dict[str, Any] = {
            "mode": self.mode, "ledger.dataset_id": self.dataset_id, "name": self.name,
            "estimator.zeta": self.zeta, "estimator.n_folds": self.n_folds,
            "data.missing": self.missing,
            "estimator.outcome_bounds": (None if self.outcome_lower is None
                                         else [self.outcome_lower, self.outcome_upper])}
        items = {**self.overrides, **{k: v for k, v in typed.items() if v is not None}}
        return [f"{key}={json.dumps(value)}" for key, value in items.items()]
