"""The curator's deployment settings (issue 40 item 7): where each dataset's releases run
(``runner``: threads, or a Dask cluster with its TLS) and where they are recorded (``mlflow``:
the experiment and the tracking server). They are read from one file of the curator's,
:data:`DEPLOYMENT_FILE` (``conf/deployment.yaml``; ``$DPCAUSAL_DEPLOYMENT_FILE`` names another),
never from a release config: a run only asks (:func:`conf.registration.load_asked` refuses a
config or ``--set`` that holds ``runner`` or ``mlflow``, exit 2, and takes them from here).

The file holds a default ``runner`` and ``mlflow`` and, under ``datasets``, a dataset's own
sections, each of which replaces the default's section whole::

    runner: {kind: threads, max_workers: 2}
    datasets:
      demo-experiment-a: {mlflow: {experiment: dpcausal-demo}}
      trial-2026: {runner: {kind: dask, address: "tls://scheduler:8786", tls: {...}}}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from conf.models import ConfigError, MlflowConfig, RunnerConfig, default_experiment

#: The shipped curator's deployment settings.
DEPLOYMENT_FILE = Path(__file__).parent / "deployment.yaml"
#: The sections of a release config that are the curator's deployment settings.
DEPLOYMENT_SECTIONS = ("runner", "mlflow")


class DatasetDeployment(BaseModel):
    """One dataset's own sections (None: the default's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runner: RunnerConfig | None = None
    mlflow: MlflowConfig | None = None


class Deployment(BaseModel):
    """The whole file: the default sections and the datasets' own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runner: RunnerConfig = RunnerConfig()
    mlflow: MlflowConfig = MlflowConfig()
    datasets: dict[str, DatasetDeployment] = {}


def deployment_file() -> Path:
    """``$DPCAUSAL_DEPLOYMENT_FILE``, else :data:`DEPLOYMENT_FILE`."""
    return Path(os.environ.get("DPCAUSAL_DEPLOYMENT_FILE") or DEPLOYMENT_FILE)


def load_deployment() -> Deployment:
    """The curator's deployment settings (all defaults when the file does not exist);
    :class:`ConfigError` naming the file for an invalid one."""
    path = deployment_file()
    if not path.is_file():
        return Deployment()
    try:
        return Deployment.model_validate(yaml.safe_load(path.read_text()) or {})
    except (yaml.YAMLError, ValidationError) as exc:
        raise ConfigError(f"the curator's deployment settings {str(path)!r} are invalid: "
                          f"{' '.join(str(exc).split())}") from None


def deployment_of(dataset: str) -> dict[str, Any]:
    """``{"runner": ..., "mlflow": ...}`` of ``dataset`` as plain values: its own sections,
    else the default's."""
    settings = load_deployment()
    own = settings.datasets.get(dataset, DatasetDeployment())
    return {name: (getattr(own, name) or getattr(settings, name)).model_dump(mode="json")
            for name in DEPLOYMENT_SECTIONS}


def experiment_of(dataset: str) -> str:
    """The MLflow experiment of ``dataset``'s releases (its evaluation runs go to
    ``<experiment>/evaluation``, which no analyst reads)."""
    return deployment_of(dataset)["mlflow"]["experiment"] or default_experiment(dataset)
