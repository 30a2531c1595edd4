"""What the analysts' gateway does, apart from HTTP (:mod:`gateway.app` maps it to routes).

The gateway holds the curator's Prefect credential and a read of the ledger (public facts: caps,
registrations, charges); it never reads data. An analyst, known by their token
(:meth:`dpcausal.ledger.Ledger.authenticate`), may:

- list the datasets they are admitted to, with public facts only: n and d as the curator
  registered them, the deployment's registered configs for the dataset (by name: the file's
  stem), the dataset's cap and spend, and the analyst's own cap and spend;
- ``plan`` a core release (the registration's n and d; nothing read, nothing charged);
- ask for a release: one of the dataset's registered configs and analysis keys from the Run
  form's allow-list (:func:`conf.deployment.check_analysis_key`), submitted to the
  ``release_from_config/from-config`` deployment with the analyst's name, which the ledger
  records with the charge and holds to the analyst's grant and cap in the same reservation;
- follow the request (:meth:`Service.request`) to its release id (the ledger's), and read their
  own releases' JSON;
- pool their own releases, named by release id only (:func:`dpcausal.meta.combine`).

Everything refused here is refused before anything is submitted, so nothing is charged.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from conf.deployment import REGISTERED_CONFIGS, ReleaseParameters, check_analysis_key
from conf.settings import PROJECT_ROOT
from dpcausal.ledger import Analyst, AnalystRefusedError, Ledger


class Refused(Exception):
    """A request the gateway refuses (nothing submitted, nothing charged): ``status`` is the
    HTTP status (400 bad input, 401 bad token, 403 not admitted, 404 not theirs or unknown)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Runs(Protocol):
    """Where the gateway starts releases and reads their state (:mod:`deploy.prefect_api`)."""

    def submit(self, config: str, overrides: dict[str, Any], analyst: str) -> str: ...

    def state(self, request_id: str) -> dict[str, Any] | None: ...


class PrefectRuns:
    """:class:`Runs` on the served stack's Prefect API (the curator's credential)."""

    def submit(self, config: str, overrides: dict[str, Any], analyst: str) -> str:
        from deploy.prefect_api import submit_ask

        return submit_ask(config, overrides, analyst)

    def state(self, request_id: str) -> dict[str, Any] | None:
        from deploy.prefect_api import ask_state

        return ask_state(request_id)


#: Prefect state types -> what an analyst is told while no charge is recorded
_WAITING = {"SCHEDULED", "PENDING", "PAUSED"}
_OVER = {"FAILED", "CRASHED", "CANCELLED", "CANCELLING"}
#: exception names in a failed run's message: refusals by the budget (exit 3), then bad input
_BUDGET = ("BudgetExceededError", "IncompatibleChargeError", "DatasetIdentityError",
           "NoCapError")
_BAD_INPUT = ("ValueError", "TypeError", "ConfigError", "ValidationError", "RefusedError",
              "NotRegisteredError")


@functools.cache
def registered_configs() -> dict[str, dict[str, Any]]:
    """The deployment's registered configs by dataset id, then by name (the file's stem):
    ``{"path", "kind", "design"}`` each (public text of the curator's files)."""
    found: dict[str, dict[str, Any]] = {}
    for path in REGISTERED_CONFIGS:
        raw = yaml.safe_load((PROJECT_ROOT / path).read_text()) or {}
        dataset = (raw.get("ledger") or {}).get("dataset_id")
        if dataset:
            found.setdefault(dataset, {})[Path(path).stem] = {
                "path": path, "kind": raw.get("kind", "ate"),
                "design": (raw.get("estimator") or {}).get("design", "observational")
                if raw.get("kind", "ate") == "ate" else None}
    return found


def _spend(spend: Any) -> dict[str, Any]:
    return {"zeta": spend.zeta, "epsilon": spend.epsilon, "delta": spend.delta,
            "n_charges": spend.n_charges, "text": spend.describe()}


def _refusal_text(message: str) -> str:
    """A failed run's message as an analyst sees it: the exception's text without Prefect's
    preamble and without where the curator's ledger file is."""
    text = re.sub(r"^Flow run encountered an exception[.:]?\s*", "", message.strip())
    return re.sub(r"\s*Ledger: \S.*$", "", text)


@dataclass
class Service:
    """The gateway's operations on the project ledger (``DPCAUSAL_LEDGER_URL``, as every run's)
    and one :class:`Runs`."""

    runs: Runs

    def _ledger(self) -> Ledger:
        return Ledger()

    # ---------------------------------------------------------------- who
    def analyst(self, token: str | None) -> Analyst:
        """The active analyst holding ``token`` (401 otherwise)."""
        if not token:
            raise Refused(401, "no token: send `Authorization: Bearer <token>`")
        with self._ledger() as led:
            try:
                return led.authenticate(token)
            except AnalystRefusedError as exc:
                raise Refused(401, str(exc)) from None

    def _admitted(self, who: Analyst, dataset: str) -> None:
        if dataset not in who.datasets:
            raise Refused(403, f"you are not admitted to dataset {dataset!r}; your datasets: "
                               f"{', '.join(who.datasets)}")

    # ---------------------------------------------------------------- what
    def datasets(self, who: Analyst) -> list[dict[str, Any]]:
        """The analyst's datasets with their public facts and spend."""
        out = []
        with self._ledger() as led:
            for dataset, own_cap in who.datasets.items():
                reg = led.registration(dataset)
                out.append({
                    "dataset": dataset,
                    "n": None if reg is None else reg.n,
                    "d": None if reg is None else reg.facts.get("d"),
                    "unit": led.unit(dataset),
                    "configs": [{"name": name, "kind": c["kind"], "design": c["design"]}
                                for name, c in registered_configs().get(dataset, {}).items()],
                    "cap": led.cap(dataset).describe(),
                    "spent": _spend(led.spent(dataset)),
                    "your_cap_zeta": own_cap,
                    "your_spent": _spend(led.analyst_spent(who.name, dataset))})
        return out

    def _config(self, who: Analyst, dataset: str, config: str,
                settings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The registered config's path and the checked analysis settings (400/403 else)."""
        self._admitted(who, dataset)
        configs = registered_configs().get(dataset, {})
        if config not in configs:
            raise Refused(400, f"config {config!r} is not one of dataset {dataset!r}'s "
                               f"registered configs ({', '.join(configs) or 'none'})")
        if not isinstance(settings, dict):
            raise Refused(400, "settings must be an object of analysis keys")
        path = configs[config]["path"]
        try:
            for key, value in settings.items():
                check_analysis_key(key, value)
            ReleaseParameters(config=path, overrides=settings)
        except ValueError as exc:
            raise Refused(400, " ".join(str(exc).split())) from None
        return path, settings

    def plan(self, who: Analyst, dataset: str, config: str,
             settings: dict[str, Any]) -> dict[str, Any]:
        """:func:`tasks.planning.plan_summary` of a core release (reads no data, charges
        nothing)."""
        from conf.models import ReleaseConfig
        from conf.registration import load_asked
        from tasks.planning import plan_summary

        path, settings = self._config(who, dataset, config, settings)
        items = [f"{k}={json.dumps(v)}" for k, v in settings.items()]
        try:
            loaded, _ = load_asked(PROJECT_ROOT / path, items)
            if not isinstance(loaded, ReleaseConfig):
                raise ValueError(f"plan is for the core release (kind ate); {config} is kind "
                                 f"{loaded.kind!r}")
            return plan_summary(loaded)
        except ValueError as exc:
            raise Refused(400, " ".join(str(exc).split())) from None

    def ask(self, who: Analyst, dataset: str, config: str,
            settings: dict[str, Any]) -> dict[str, Any]:
        """Submit the release; ``{"request_id", "dataset", "config", "state": "waiting"}``."""
        path, settings = self._config(who, dataset, config, settings)
        try:
            request_id = self.runs.submit(path, settings, who.name)
        except LookupError as exc:
            raise Refused(503, f"the release service is not available: {exc}") from None
        return {"request_id": request_id, "dataset": dataset, "config": config,
                "state": "waiting"}

    def request(self, who: Analyst, request_id: str) -> dict[str, Any]:
        """A request's state: ``waiting``, ``running``, ``released`` (with the release),
        ``refused`` (``reason`` ``budget`` or ``bad input``, and the message) or ``failed``
        (after its charge: generic); its ``release_id`` once the ledger holds its charge."""
        run = self.runs.state(request_id)
        if run is None or run.get("analyst") != who.name:
            raise Refused(404, f"no request {request_id!r} of yours")
        charge = None
        with self._ledger() as led:
            for sub in run["release_runs"]:
                found = led.asked_by(who.name, prefix=f"{sub}/")
                charge = found[-1] if found else charge
        out: dict[str, Any] = {"request_id": request_id,
                               "release_id": None if charge is None else charge["release_id"]}
        if charge is not None and charge["status"] == "committed":
            return {**out, **self.release(who, charge["release_id"])}
        if run["state"] in _WAITING:
            return {**out, "state": "waiting"}
        if run["state"] not in _OVER:
            return {**out, "state": "running"}
        if charge is not None:  # failed after its charge: the budget is spent, details private
            return {**out, "state": "failed", "message": "the release failed after its "
                    "charge; its budget is spent and the curator's private log holds why"}
        message = run.get("message") or ""
        if any(name in message for name in _BUDGET):
            reason = "budget"
        elif any(name in message for name in _BAD_INPUT):
            reason = "bad input"
        else:
            return {**out, "state": "failed", "message": "the release run failed before its "
                    "charge; nothing was charged; the curator's logs hold why"}
        return {**out, "state": "refused", "reason": reason, "message": _refusal_text(message)}

    def releases(self, who: Analyst) -> list[dict[str, Any]]:
        """The analyst's charges, oldest first: release id, dataset, status, times, and for a
        committed one its ``release`` dict."""
        with self._ledger() as led:
            rows = led.asked_by(who.name)
        return [{"release_id": r["release_id"], "dataset": r["dataset"], "status": r["status"],
                 "reserved_at": r["reserved_at"].isoformat(),
                 "release": None if r["result"] is None else json.loads(r["result"])}
                for r in rows if r["dataset"] in who.datasets]

    def release(self, who: Analyst, release_id: str) -> dict[str, Any]:
        """One of the analyst's releases: ``state`` (``released`` once committed, else the
        ledger's status), the ``release`` dict, its printed ``text`` and the ``spent`` so far
        (404 for a release id that is not theirs)."""
        from dpcausal import Release

        with self._ledger() as led:
            found = led.asked_by(who.name, prefix=release_id)
            found = [r for r in found if r["release_id"] == release_id
                     and r["dataset"] in who.datasets]
            if not found:
                raise Refused(404, f"no release {release_id!r} of yours")
            row = found[0]
            spent = {"dataset": _spend(led.spent(row["dataset"])),
                     "yours": _spend(led.analyst_spent(who.name, row["dataset"]))}
        base = {"release_id": release_id, "dataset": row["dataset"], "spent": spent}
        if row["status"] != "committed":
            return {**base, "state": "running" if row["status"] == "reserved" else "failed"}
        release = Release.from_json(row["result"])
        return {**base, "state": "released", "release": release.to_dict(),
                "text": str(release)}

    def meta(self, who: Analyst, release_ids: list[str], model: str = "fixed",
             level: float = 0.95) -> dict[str, Any]:
        """Pool the analyst's own releases named by ``release_ids`` (no paths, no servers):
        :func:`dpcausal.meta.combine`; costs nothing (post-processing)."""
        from dpcausal import Release
        from dpcausal.meta import combine

        if not isinstance(release_ids, list) or not release_ids or \
                not all(isinstance(r, str) for r in release_ids):
            raise Refused(400, "release_ids must be a non-empty list of your release ids")
        releases = []
        for rid in release_ids:
            one = self.release(who, rid)
            if one["state"] != "released":
                raise Refused(400, f"release {rid!r} is not released ({one['state']})")
            releases.append(Release.from_dict(one["release"]))
        try:
            pooled = combine(releases, model=model, level=level)
        except ValueError as exc:
            raise Refused(400, " ".join(str(exc).split())) from None
        return {"meta": pooled.to_dict(), "text": str(pooled)}
