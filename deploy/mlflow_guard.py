"""MLflow's authorization function on the served stack (``authorization_function`` of the
basic-auth ini that :mod:`deploy.servers` writes; issue 40 item 5): MLflow's own basic auth,
then one rule of the project's: a user who is not an administrator (an analyst, whose MLflow user
:mod:`deploy.mlflow_users` makes) only reads.

MLflow's basic-auth app lets any signed-in user create experiments (and registered models,
prompts, ...) of which they become the manager, whatever ``default_permission`` says, unless
workspaces are on. An analyst's user is for reading the releases of their datasets, so every
request of theirs that is not a read (:func:`is_read`) is refused with 403 here, before MLflow's
per-experiment permissions (READ on their experiments, nothing elsewhere) decide what they read.
Imported by the MLflow server process only (it needs Flask and MLflow's auth app).
"""

from __future__ import annotations

from typing import Any

#: The POST endpoints that only read (searches and bulk reads), by path ending.
READ_POSTS = ("/runs/search", "/experiments/search", "/logged-models/search",
              "/datasets/search", "/metrics/get-history-bulk-interval", "/graphql")


def is_read(method: str, path: str) -> bool:
    """Whether an HTTP request only reads: GET/HEAD/OPTIONS, or a POST to :data:`READ_POSTS`."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return True
    return method == "POST" and path.rstrip("/").endswith(READ_POSTS)


def authenticate() -> Any:
    """MLflow's basic auth (its ``Authorization`` or its 401 response); a non-admin user's
    request that is not a read gets MLflow's 403 response."""
    from flask import request
    from mlflow.server.auth import (
        authenticate_request_basic_auth,
        make_forbidden_response,
        store,
    )

    found = authenticate_request_basic_auth()
    username = getattr(found, "username", None)
    if username is None or is_read(request.method, request.path):
        return found
    if not store.get_user(username).is_admin:
        return make_forbidden_response()
    return found
