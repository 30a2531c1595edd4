"""``release_from_config``: the release deployments' entry point. Its Run form is the typed
:class:`conf.deployment.ReleaseParameters` (a config file plus the settings a curator changes from
run to run); it loads the config exactly as ``dpcausal run CONFIG --set k=v`` does and runs
:func:`flows.release.dp_release` as a subflow. The release table, the MLflow link and a refusal
note are published on this flow run too, the one a deployment run or the UI's Run button opens
(issue 25 §5). No estimation here."""

from __future__ import annotations

import json
from typing import Any

from prefect import flow

from conf.deployment import ReleaseParameters
from conf.kinds import KINDS, load_any
from conf.registration import load_asked
from conf.settings import data_dir
from dpcausal import Release
from flows.release import dp_release, refusal_reason
from tasks.artifacts import publish_refusal, publish_release

# the Run form's defaults: the demo config, every other field empty (the config's values)
DEFAULT_SETTINGS = ReleaseParameters()


@flow(name="release_from_config", persist_result=False, retries=0)
def release_from_config(settings: ReleaseParameters = DEFAULT_SETTINGS,
                        refresh_demo_data: bool = False,
                        analyst: str | None = None) -> dict[str, Any]:
    """Load ``settings.config`` (one of the registered configs, relative to the project root),
    or the file ``settings.dataset`` was registered from, with ``settings`` (analysis keys
    only: :mod:`conf.deployment`) as a run asks (:func:`conf.registration.load_asked`: the data
    from the registration, the runner and MLflow from the curator's deployment settings) and
    release.

    ``refresh_demo_data`` first re-writes the demo dataset of the config's kind under the data
    folder, points the config at it, gives the demo dataset its cap if it has none and registers
    it as synthetic (the demo's own data only: refused for any config but its kind's demo
    config): the nightly deployment's stand-in for an upstream job that refreshes a dataset
    before its scheduled release. A refused release ends this run Failed with the ledger's
    message, recorded in MLflow and as an artifact here and on the subflow.

    ``analyst`` names the remote analyst who asked through the gateway (issue 40; set by the
    gateway, which holds the curator's Prefect credential): the ledger records it with the
    charge and holds the release to the analyst's grant and cap in the same reservation.
    """
    from demo import write_demo
    from tasks.registration import register_demo

    items = settings.override_items()
    dataset = settings.dataset or "dataset"
    try:
        path = settings.config_file()
        config = load_any(path, items)
        if settings.dataset not in (None, config.ledger.dataset_id):
            raise ValueError(f"the config registered for dataset {settings.dataset!r} ({path}) "
                             f"now names dataset {config.ledger.dataset_id!r}; its curator "
                             "registers it again")
        dataset = config.ledger.dataset_id
        if refresh_demo_data and KINDS[config.kind].example != settings.config:
            raise ValueError(f"refresh_demo_data rewrites the demo data of the {config.kind} "
                             f"demo config ({KINDS[config.kind].example}) only, not "
                             f"{settings.config}")
        if refresh_demo_data and analyst is not None:
            raise ValueError("refresh_demo_data is the curator's step, not an analyst's")
        if refresh_demo_data:  # the curator's step: the demo data registered (synthetic)
            data = write_demo(config.kind, data_dir() / "demo")
            register_demo(load_any(path, [f"data.path={json.dumps(str(data))}", *items]))
        # as `dpcausal run` reads it: the registration's data, the curator's deployment settings
        config = load_asked(path, items)[0]
        out = dp_release(config=config, analyst=analyst)
    except Exception as exc:
        reason = refusal_reason(exc)
        if reason is not None:
            publish_refusal(dataset, reason, str(exc))
        raise
    publish_release(dataset, Release.from_dict(out["release"]), out["release_id"], out["spent"],
                    out["mlflow"]["url"])
    return out
