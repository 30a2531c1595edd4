"""The typed parameters of the release deployments (issue 25 §5): what the Prefect UI's Run form
asks for. Prefect renders this model as a form with its descriptions and validates the bounds
before a run is created; each field left empty keeps the config file's value. Everything here is
public: it is recorded as the flow run's parameters.

The form asks, the curator decides (issue 32 item 6): a run chooses one of the deployment's
registered configs (:data:`REGISTERED_CONFIGS`, never a free path), or a registered ``dataset``,
whose config is the file its curator registered it from (``dpcausal ledger register DATASET
CONFIG``: :func:`registered_config`, issue 42), and may set only the analysis
(:data:`ANALYSIS_KEYS`: the budget, the bounds, K, the estimator, its CI settings, models by their
registry names). Where the data are and what is read (``data.*``), where they go (``runner.*``,
``mlflow.*``), the mode, the ledger and ``module:Class`` models come from the config only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from conf.kinds import KINDS
from conf.registry import ALLOWED_PARAMS, NAMES
from conf.settings import PROJECT_ROOT

#: The configs a deployment run may choose: the curator's release configs in conf/release/,
#: relative to the project root (adding a file there registers it).
REGISTERED_CONFIGS: tuple[str, ...] = tuple(sorted(
    f"conf/release/{p.name}" for p in (Path(__file__).parent / "release").glob("*.yaml")))

#: The dotted config keys a run's parameters may set: the analysis, per kind (issue 32 item 6).
ANALYSIS_KEYS = frozenset({
    "name", "estimator.zeta", "estimator.outcome_bounds", "estimator.n_folds",
    "estimator.block_folds", "estimator.estimator", "estimator.propensity_clip",
    "estimator.ci_share", "estimator.sigma2", "estimator.ci", "estimator.alpha", "estimator.p1",
    "estimator.prerelease",
    "models.propensity.name", "models.outcome.name", "models.propensity.params",
    "models.outcome.params", "mechanism.epsilon", "mechanism.delta", "mechanism.alpha",
    "mechanism.outcome_bounds", "mechanism.bounds", "mechanism.ci_form", "estimate.alpha"})
_MODEL_PARAMS = ("models.propensity.params.", "models.outcome.params.")


def check_analysis_key(key: str, value: Any) -> None:
    """ValueError unless a run may set ``key`` to ``value``: a key of :data:`ANALYSIS_KEYS` (or
    one model parameter), a model by a registry name (:data:`conf.registry.NAMES`)."""
    if key not in ANALYSIS_KEYS and not key.startswith(_MODEL_PARAMS):
        raise ValueError(
            f"overrides: {key!r} is not an analysis key a run may set; data.*, runner.*, "
            "mlflow.*, mode, ledger.* and the model classes come from the deployment's config "
            f"(the curator's). A run may set: {', '.join(sorted(ANALYSIS_KEYS))}, "
            "models.<role>.params.<name>")
    names = (value.keys() if key + "." in _MODEL_PARAMS and isinstance(value, dict) else
             [key.rsplit(".", 1)[1]] if key.startswith(_MODEL_PARAMS) else [])
    for name in names:
        if not any(name in allowed for allowed in ALLOWED_PARAMS.values()):
            raise ValueError(f"overrides: model parameter {name!r} ({key}) is not allowed for "
                             "any registry model (conf/registry.py ALLOWED_PARAMS)")
    if key.endswith(".name") and key.startswith("models.") and value not in NAMES:
        raise ValueError(f"overrides: {key} must be a model of the registry ({', '.join(NAMES)}), "
                         f"got {value!r}; a module:Class model is the curator's, in the config")

def registered_config(dataset: str) -> str | None:
    """The config file the latest registration of ``dataset`` was made from (its absolute path,
    kept in the registration's facts by ``dpcausal ledger register``); None when it was
    registered without a file (``Ledger.register`` from Python, the demo)."""
    from conf.registration import registered

    return registered(dataset).facts.get("config")


def submission(config_path: str, dataset: str, items: tuple[str, ...]) -> dict[str, Any]:
    """The ``settings`` of a deployment run of ``config_path`` (``dpcausal run --submit``):
    a shipped config of :data:`REGISTERED_CONFIGS` by its path, the file ``dataset`` was
    registered from (:func:`registered_config`) by the dataset; ``items`` (``--set``'s
    ``key=value``, values read as YAML) are analysis keys only (:func:`check_analysis_key`).
    ValueError for any other config or key, before anything is submitted."""
    import yaml

    overrides = {key: yaml.safe_load(value) for key, _, value in
                 (item.partition("=") for item in items)}
    for key, value in overrides.items():
        check_analysis_key(key, value)
    resolved = Path(config_path).resolve()
    shipped = (resolved.relative_to(PROJECT_ROOT).as_posix()
               if resolved.is_relative_to(PROJECT_ROOT) else None)
    if shipped in REGISTERED_CONFIGS:
        return {"config": shipped, "overrides": overrides}
    registered = registered_config(dataset)
    if registered != str(resolved):
        raise ValueError(
            f"--submit runs a config its curator registered: dataset {dataset!r} was registered "
            f"from {registered or 'no config file'}, not {config_path}; submit that file (with "
            "--set for the analysis), have the curator register this one (`dpcausal ledger "
            f"register {dataset} {config_path}`), or run it here without --submit")
    return {"dataset": dataset, "overrides": overrides}


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
        description="One of the deployment's registered release configs; its kind "
                    f"({', '.join(KINDS)}) picks the mechanism, and its data, mode, dataset, "
                    "runner and tracking are the curator's.",
        json_schema_extra={"enum": list(REGISTERED_CONFIGS)})
    dataset: Annotated[str, Field(min_length=1)] | _Unset = Field(
        None, description="Instead of config: a registered dataset, released from the config "
                          "file its curator registered it from (`dpcausal ledger register "
                          "DATASET CONFIG`). Empty: the config above.")
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
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description='Advanced: further analysis keys, e.g. {"estimator.propensity_clip": 0.1, '
                    '"models.outcome.name": "random_forest"}; data, runner, tracking, mode and '
                    "ledger are the config's.")

    @field_validator("config")
    @classmethod
    def _registered(cls, config: str) -> str:
        if config not in REGISTERED_CONFIGS:
            raise ValueError(f"config must be one of the deployment's registered configs "
                             f"({', '.join(REGISTERED_CONFIGS)}), got {config!r}")
        return config

    @field_validator("overrides")
    @classmethod
    def _analysis_only(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        for key, value in overrides.items():
            check_analysis_key(key, value)
        return overrides

    @model_validator(mode="after")
    def _config_or_dataset(self) -> "ReleaseParameters":
        if self.dataset is not None and "config" in self.model_fields_set:
            raise ValueError("give config or dataset, not both: a dataset is released from the "
                             "config its curator registered it from")
        return self

    def config_file(self) -> Path:
        """The config file to release: ``dataset``'s registered one, else ``config`` (relative
        to the project root). ValueError when ``dataset`` was registered without a file."""
        if self.dataset is None:
            return PROJECT_ROOT / self.config
        path = registered_config(self.dataset)
        if path is None:
            raise ValueError(f"dataset {self.dataset!r} was registered without a config file; "
                             "its curator registers it with `dpcausal ledger register "
                             f"{self.dataset} CONFIG`, or choose a config")
        return Path(path)

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
            "name": self.name, "estimator.zeta": self.zeta, "estimator.n_folds": self.n_folds,
            "estimator.outcome_bounds": (None if self.outcome_lower is None
                                         else [self.outcome_lower, self.outcome_upper])}
        items = {**self.overrides, **{k: v for k, v in typed.items() if v is not None}}
        return [f"{key}={json.dumps(value)}" for key, value in items.items()]
