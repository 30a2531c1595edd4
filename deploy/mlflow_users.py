"""Each analyst's MLflow user on the served stack (issue 40 item 5): its name is the analyst's,
its password the analyst's token, and it may READ the experiments of the analyst's datasets
(:func:`conf.deployment_settings.experiment_of`: where their releases are recorded) and nothing
else. MLflow's ``default_permission`` is ``NO_PERMISSIONS`` on the served stack
(:mod:`deploy.servers`), and the stack's guard (:mod:`deploy.mlflow_guard`) refuses every request
of a non-admin user that is not a read, so such a user cannot create, change or delete anything,
nor read another dataset's runs. Evaluation experiments (``<experiment>/evaluation``) are never
granted.

The curator's commands (``dpcausal analyst add/revoke``) call :func:`set_analyst_user` and
:func:`delete_analyst_user`; they talk to MLflow's REST API as the stack's administrator
(:func:`deploy.service_auth.served_stack`), so nothing here imports MLflow.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any

from conf.deployment_settings import experiment_of
from deploy.service_auth import ServedStack, served_stack

#: MLflow's experiment kind tag of a model-development experiment (tasks.tracking's).
_EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


class MlflowAdminError(RuntimeError):
    """MLflow refused an administrator's request; the message names it and MLflow's answer."""


def _stack(stack: ServedStack | None) -> ServedStack:
    found = stack or served_stack()
    if found is None:
        raise MlflowAdminError("no served stack with the curator's credentials: start it with "
                               "`dpcausal serve`")
    return found


def _call(stack: ServedStack, method: str, path: str, body: Any = None, *,
          version: str = "2.0", missing_ok: bool = False) -> Any:
    """One request to MLflow's REST API as the administrator; the JSON answer (None for a 404
    when ``missing_ok``)."""
    url = f"{stack.mlflow_url}/api/{version}/mlflow{path}"
    data = None
    if body is not None and method == "GET":
        url += "?" + urllib.parse.urlencode(body)
    elif body is not None:
        data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={
        **stack.credentials.headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        answer = exc.read().decode(errors="replace")[:300]
        exc.close()
        if missing_ok and exc.code == 404:
            return None
        raise MlflowAdminError(f"MLflow refused {method} {path} ({exc.code}): {answer}") from None


def _experiment_id(stack: ServedStack, name: str) -> str:
    """The id of experiment ``name``, created (empty, as a model-development experiment) when
    the dataset has no release yet, so that its analysts' grant is in place for the first."""
    found = _call(stack, "GET", "/experiments/get-by-name", {"experiment_name": name},
                  missing_ok=True)
    if found is None:
        try:
            return str(_call(stack, "POST", "/experiments/create", {
                "name": name, "tags": [{"key": k, "value": v}
                                       for k, v in _EXPERIMENT_KIND.items()]})["experiment_id"])
        except MlflowAdminError:  # created concurrently
            found = _call(stack, "GET", "/experiments/get-by-name", {"experiment_name": name})
    return str(found["experiment"]["experiment_id"])


def _granted(stack: ServedStack, name: str) -> set[str]:
    """The experiment ids user ``name`` holds a grant on."""
    listed = _call(stack, "GET", "/users/permissions/list", {"username": name}, version="3.0")
    return {p["resource_pattern"] for p in listed.get("permissions", [])
            if p["resource_type"] == "experiment"}


def set_analyst_user(name: str, token: str, datasets: Iterable[str],
                     stack: ServedStack | None = None) -> dict[str, str]:
    """Create MLflow user ``name`` with password ``token`` (or set the password of an existing
    one), take back every grant it holds, then grant it READ on the experiment of each dataset
    of ``datasets``. Returns ``{experiment name: id}`` of what it may read. The name of the
    stack's administrator is refused (ValueError)."""
    stack = _stack(stack)
    if name == stack.credentials.user:
        raise ValueError(f"analyst name {name!r} is the MLflow administrator's: choose another")
    if _call(stack, "GET", "/users/get", {"username": name}, missing_ok=True) is None:
        _call(stack, "POST", "/users/create", {"username": name, "password": token})
    else:
        _call(stack, "PATCH", "/users/update-password", {"username": name, "password": token})
    readable = {exp: _experiment_id(stack, exp) for exp in map(experiment_of, datasets)}
    for held in _granted(stack, name):  # READ, whatever was held before, on these only
        _call(stack, "POST", "/users/permissions/revoke", {
            "username": name, "resource_type": "experiment", "resource_id": held},
            version="3.0")
    for exp_id in readable.values():
        _call(stack, "POST", "/users/permissions/grant", {
            "username": name, "resource_type": "experiment", "resource_id": exp_id,
            "permission": "READ"}, version="3.0")
    return readable


def delete_analyst_user(name: str, stack: ServedStack | None = None) -> bool:
    """Delete MLflow user ``name`` and its grants (an analyst revoked); False when there was
    none."""
    stack = _stack(stack)
    if name == stack.credentials.user:
        raise ValueError(f"{name!r} is the MLflow administrator, not an analyst")
    if _call(stack, "GET", "/users/get", {"username": name}, missing_ok=True) is None:
        return False
    _call(stack, "DELETE", "/users/delete", {"username": name})
    return True


def mirror_added(name: str, token: str, datasets: Iterable[str]) -> str:
    """``dpcausal analyst add``'s MLflow step: on the served stack, if one runs, the analyst's
    user (:func:`set_analyst_user`); the line the command prints either way. The ledger's
    admission stands whatever MLflow answers: without a stack the analyst has no MLflow user,
    and their token (hashed in the ledger) cannot make one later."""
    datasets = list(datasets)
    stack = served_stack()
    if stack is None:
        return ("MLflow: no served stack, so no MLflow user for them; to let them read their "
                "runs there, admit them (a new name) while `dpcausal serve` runs.")
    try:
        readable = set_analyst_user(name, token, datasets, stack)
    except (MlflowAdminError, ValueError, OSError) as exc:
        return f"MLflow: no user made ({exc}); the gateway admits them all the same."
    return (f"MLflow: user {name} (password: the token) may read the experiments "
            f"{', '.join(sorted(readable))} and nothing else.")


def mirror_revoked(name: str) -> str:
    """``dpcausal analyst revoke``'s MLflow step: the analyst's user deleted on the served
    stack, if one runs (:func:`delete_analyst_user`); the line the command prints."""
    stack = served_stack()
    if stack is None:
        return "MLflow: no served stack; no user to delete there."
    try:
        deleted = delete_analyst_user(name, stack)
    except (MlflowAdminError, ValueError, OSError) as exc:
        return f"MLflow: the user was not deleted ({exc}); delete {name} in MLflow's admin."
    return f"MLflow: user {name} deleted." if deleted else f"MLflow: {name} had no user."
