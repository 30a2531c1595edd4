"""Build the library's estimator from a validated release config (no Prefect, no I/O)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from conf.models import ReleaseConfig
from conf.registry import build_model, resolve
from dpcausal import PrivateATE

# Fold models are fitted once for every estimator type: all three nuisances, with a propensity
# clip below any valid eta_c (the library clips predictions again at aggregation with the real
# eta_c, and clip(clip(p, tiny), eta) == clip(p, eta)), so the cached fits do not depend on the
# estimator type or on the bounds.
_FIT_ESTIMATOR = "aipw"
_FIT_PROPENSITY_CLIP = 1e-12


def build_estimator(config: ReleaseConfig, *, for_fitting: bool = False) -> PrivateATE:
    """A fresh PrivateATE with the config's public parameters and freshly built models."""
    kwargs = config.estimator.library_kwargs()
    if for_fitting:
        kwargs.update(estimator=_FIT_ESTIMATOR, propensity_clip=_FIT_PROPENSITY_CLIP)
    models = config.models
    return PrivateATE(
        propensity_model=build_model(models.propensity.name, models.propensity.params,
                                     "propensity"),
        outcome_model=build_model(models.outcome.name, models.outcome.params, "outcome"),
        **kwargs,
    )


def model_specs(config: ReleaseConfig) -> dict[str, Any]:
    """The public description of the fold models that keys their cache (names, classes, params,
    versions of the libraries that fit them)."""
    versions = {}
    for dist in ("scikit-learn", "xgboost", "xgboost-cpu", "numpy"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "propensity": {"class": resolve(config.models.propensity.name, "propensity"),
                       **config.models.propensity.model_dump()},
        "outcome": {"class": resolve(config.models.outcome.name, "outcome"),
                    **config.models.outcome.model_dump()},
        "versions": versions,
    }
