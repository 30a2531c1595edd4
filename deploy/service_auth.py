"""The curator's credentials for the served stack (issue 40 item 5): ``dpcausal serve`` always
turns on Prefect's API auth string and MLflow's basic-auth app, with these credentials as their
administrator. They live in one 0600 file of the curator's private store,
``<data>/private/service_auth.json`` (:func:`store.private_dir`, beside the ledger's key files):
generated from OS entropy on the first ``serve`` without ``--auth`` and reused on the next, or
the ``--auth USER:PASS`` given (which then replaces them).

Whatever talks to the served stack reads them through :func:`served_stack`: the worker (whose
environment ``serve`` builds from it), the CLI (``run --submit``, a release that uses the served
stack) and the analysts' gateway, a process ``serve`` starts (``served_stack().env``). No one
else holds them: an analyst holds a gateway URL and a token, never these.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from store import private_dir

#: The administrator's user name when ``serve`` generates the credentials.
CURATOR_USER = "dpcausal-curator"
#: MLflow's basic-auth app refuses shorter passwords.
MIN_PASSWORD = 12


@dataclass(frozen=True)
class ServiceCredentials:
    """The curator's user and password on both servers (Prefect's auth string is
    ``user:password``)."""

    user: str
    password: str

    @property
    def auth_string(self) -> str:
        return f"{self.user}:{self.password}"

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP basic-auth header both servers accept."""
        return {"Authorization": "Basic " + base64.b64encode(self.auth_string.encode()).decode()}

    @property
    def client_env(self) -> dict[str, str]:
        """The environment of a Prefect and MLflow client acting as the curator."""
        return {"PREFECT_API_AUTH_STRING": self.auth_string,
                "MLFLOW_TRACKING_USERNAME": self.user, "MLFLOW_TRACKING_PASSWORD": self.password}

    def __repr__(self) -> str:  # never the password in a log or traceback
        return f"ServiceCredentials(user={self.user!r}, password=***)"


def credentials_file() -> Path:
    """``<data>/private/service_auth.json`` (the folder is created 0700)."""
    return private_dir() / "service_auth.json"


def parse_auth(auth: str) -> ServiceCredentials:
    """``USER:PASS`` as credentials; ValueError naming ``--auth`` unless the password has at
    least :data:`MIN_PASSWORD` characters."""
    user, sep, password = auth.partition(":")
    if not sep or not user or len(password) < MIN_PASSWORD:
        raise ValueError(f"expected USER:PASS with a password of at least {MIN_PASSWORD} "
                         "characters (MLflow's basic-auth app refuses shorter ones)")
    return ServiceCredentials(user, password)


def stored_credentials() -> ServiceCredentials | None:
    """The credentials of the private store, or None when ``serve`` never wrote them."""
    path = credentials_file()
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    return ServiceCredentials(raw["user"], raw["password"])


def ensure_credentials(auth: str | None = None) -> tuple[ServiceCredentials, bool]:
    """The credentials ``serve`` starts the servers with, and whether they were generated now:
    ``auth`` (``USER:PASS``) when given, stored in place of any earlier ones; else the stored
    ones; else new ones (:data:`CURATOR_USER`, a 32-byte URL-safe password from
    :mod:`secrets`), stored 0600."""
    given = parse_auth(auth) if auth is not None else None
    found = stored_credentials()
    if given is None and found is not None:
        return found, False
    creds = given or ServiceCredentials(CURATOR_USER, secrets.token_urlsafe(32))
    path = credentials_file()
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"user": creds.user, "password": creds.password}, fh)
    tmp.replace(path)
    return creds, given is None


@dataclass(frozen=True)
class ServedStack:
    """The stack ``dpcausal serve`` started, as a client of it needs it: its URLs and the
    curator's credentials."""

    prefect_api: str  # http://127.0.0.1:<port>/api
    mlflow_url: str  # http://127.0.0.1:<port>
    credentials: ServiceCredentials

    @property
    def env(self) -> dict[str, str]:
        """The environment a child process needs to act on the stack as the curator (Prefect
        API and auth string, MLflow tracking URI, user and password): merge it into
        ``os.environ`` for a subprocess."""
        return {"PREFECT_API_URL": self.prefect_api, "MLFLOW_TRACKING_URI": self.mlflow_url,
                **self.credentials.client_env}


def served_stack() -> ServedStack | None:
    """The running ``dpcausal serve`` stack's URLs and credentials (from
    ``<data>/services/stack.info`` and the private store), or None when no stack was served
    or its credentials are not readable here (then this process is not the curator's)."""
    from deploy.servers import services_dir

    info = services_dir() / "stack.info"
    creds = stored_credentials() if info.is_file() else None
    if creds is None:
        return None
    stack = json.loads(info.read_text())
    return ServedStack(stack["prefect_api"], stack["mlflow_ui"], creds)
