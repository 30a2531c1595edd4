"""The two halves of a release config and their two owners (issue 32 §2; style notes "Who owns
which half").

* The curator's half, :data:`CURATOR_KEYS`: where the data are and what they hold (``data``:
  the source, its declared ``dtypes``, the ``missing`` policy; ``columns``: the roles). The
  curator registers it once per dataset (``dpcausal ledger register DATASET CONFIG``,
  :func:`registration_values` -> :meth:`dpcausal.ledger.Ledger.register`), with n counted then
  and whether evaluation mode is allowed; the ledger stores it.
* The analyst's half: everything else a run sends (the dataset id, the estimator and its public
  knobs, the models, ``mode``). Where a release runs and is recorded (``runner``, ``mlflow``) is
  neither: it is the curator's deployment settings (:mod:`conf.deployment_settings`), which a
  run's config may not hold (refused, exit 2). A run only asks: a curator's key it leaves out
  is taken from the registration (:func:`load_asked`), one it gives must equal the
  registration, compared as public text before anything is read (:func:`check_asked`), or the
  run is refused (exit 2) naming the differing key. Evaluation mode is refused unless the
  registration allows it.

The curator may also register public planning facts of the core release (issue 39 item 5:
``treated_share``, e.g. a trial protocol's assignment probability, and ``outcome_sd``), which
a run's planner and ``auto`` take where the run states none (:func:`planning_facts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conf.deployment_settings import DEPLOYMENT_SECTIONS, deployment_file, deployment_of
from conf.models import ConfigError, read_raw
from dpcausal.ledger import Ledger, Registration

#: The config sections the curator owns: registered once, never changed by a run.
CURATOR_KEYS = ("data", "columns")
#: The ``data`` keys that the registration stores apart from the source.
_POLICY = ("missing", "missing_fill")
#: The core release's planning facts a curator may register as public (issue 39 item 5).
PLANNING_FACTS = ("treated_share", "outcome_sd")


class EvaluationRefusedError(ValueError):
    """Evaluation mode (a non-private read) asked for data its registration does not open to
    it (exit 2)."""


class NotRegisteredError(ValueError):
    """A run named a dataset id its curator never registered (exit 2)."""


def curator_half(config: Any) -> dict[str, Any]:
    """The curator's half of a validated config (any kind), as public JSON values; a local
    ``data.path`` or ``data.partitions`` resolved (``conf/release/../../data/x.csv`` and
    ``data/x.csv`` name one file)."""
    half = {key: getattr(config, key).model_dump(mode="json") for key in CURATOR_KEYS}
    for key in ("path", "partitions"):
        where = half["data"].get(key)
        if where is not None and "://" not in where:
            half["data"][key] = str(Path(where).resolve())
    return half


def registration_values(config: Any) -> dict[str, Any]:
    """The keyword arguments of :meth:`dpcausal.ledger.Ledger.register` that a config's
    curator half gives (plain values: the library takes no config object)."""
    half = curator_half(config)
    data = half["data"]
    return {"source": {k: v for k, v in data.items() if k not in ("dtypes", *_POLICY)},
            "dtypes": data["dtypes"], "missing": {k: data[k] for k in _POLICY},
            "columns": half["columns"]}


def registered_half(registration: Registration) -> dict[str, Any]:
    """The curator's half as the registration stores it (the inverse of
    :func:`registration_values`)."""
    return {"data": {**registration.source, "dtypes": registration.dtypes,
                     **registration.missing},
            "columns": registration.columns}


def registered(dataset: str) -> Registration:
    """The latest registration of ``dataset`` in the project ledger; :class:`NotRegisteredError`
    if there is none (a public fact: the ledger's, never the data's)."""
    found = None
    if Ledger.exists():
        with Ledger() as led:
            found, where = led.registration(dataset), led.where
    else:
        where = "(no ledger yet)"
    if found is None:
        raise NotRegisteredError(
            f"dataset {dataset!r} is not registered in the ledger {where}: its curator "
            f"registers it once, `dpcausal ledger register {dataset} CONFIG` (the source, "
            "columns, types, missing-value policy and n); a run only asks about a registered "
            "dataset")
    return found


def planning_facts(registration: Registration, estimator: dict[str, Any]) -> dict[str, Any]:
    """The planning facts the curator registered (:data:`PLANNING_FACTS`) that the core
    release's ``estimator`` settings (a config section or the mechanism's parameters) leave
    unstated: the analyst's stated value wins. A registered ``outcome_sd`` above half the
    width of the stated outcome bounds is left out: the bounds' worst case is then the
    tighter true statement (and the library refuses a larger one)."""
    out = {k: registration.facts[k] for k in PLANNING_FACTS
           if registration.facts.get(k) is not None and estimator.get(k) is None}
    try:
        lo, hi = (float(b) for b in estimator.get("outcome_bounds"))  # type: ignore[union-attr]
    except (TypeError, ValueError):     # unset or malformed: the config's own check says so
        return out
    if out.get("outcome_sd", 0) > (hi - lo) / 2:
        del out["outcome_sd"]
    return out


def check_asked(config: Any, registration: Registration) -> None:
    """Refuse a run whose curator half differs from the registration (ConfigError naming the
    first differing key; public text only: nothing is read), and evaluation mode on a dataset
    whose registration does not allow it (:class:`EvaluationRefusedError`)."""
    dataset = config.ledger.dataset_id
    asked, held = _flat(curator_half(config)), _flat(registered_half(registration))
    differing = sorted(k for k in asked.keys() | held.keys() if asked.get(k) != held.get(k))
    if differing:
        raise ConfigError(
            f"{differing[0]} differs from the registration of dataset {dataset!r} (version "
            f"{registration.version}): a run only asks about a registered dataset, so its "
            f"{' and '.join(CURATOR_KEYS)} come from the registration (`dpcausal ledger show "
            f"{dataset}`); leave them out of the config, or have the curator register the new "
            "version")
    if config.evaluation and not registration.evaluation_allowed:
        raise EvaluationRefusedError(
            f"evaluation mode is refused for dataset {dataset!r}: evaluation is a non-private "
            "read, and the registration does not allow it (only its curator allows it, for a "
            "source marked synthetic or public); release it with mode: release")


def load_asked(path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
               base: dict[str, Any] | None = None) -> tuple[Any, Registration]:
    """A run's config (any kind) with its curator half from the registration of the dataset
    it names, checked against it (:func:`check_asked`); and that registration."""
    from conf.kinds import load_any

    raw, where = read_raw(path, overrides, base)
    dataset = (raw.get("ledger") or {}).get("dataset_id")
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError("ledger.dataset_id is required: a run names the registered dataset "
                          "it asks about")
    given = [key for key in DEPLOYMENT_SECTIONS if key in raw]
    if given:
        blamed = [item for item in overrides if item.split(".", 1)[0].split("=", 1)[0] in given]
        raise ConfigError(
            f"invalid {'--set ' + blamed[0] if blamed else where}: {' and '.join(given)} "
            "(where a release runs and is recorded): the curator's deployment settings "
            f"({deployment_file()}), never a release config's; remove "
            f"{'them' if len(given) > 1 else 'it'}")
    registration = registered(dataset)
    # the registration and the curator's deployment settings under the run's settings: a
    # curator key the run leaves out is the registration's; one it gives is checked below; so
    # is a registered planning fact the core release's estimator section leaves unstated
    held = {**registered_half(registration), **deployment_of(dataset)}
    if raw.get("kind", "ate") == "ate":
        section = raw.get("estimator")
        facts = planning_facts(registration, section if isinstance(section, dict) else {})
        if facts:
            held["estimator"] = facts
    config = load_any(path, overrides, base={**held, **(base or {})})
    check_asked(config, registration)
    return config, registration


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a nested dict (lists stay whole values)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
