"""The analyst's client of the gateway (issue 40): a URL and a token, nothing else.

``dpcausal.ask("trial-A", "demo", {"estimator.zeta": 0.5})`` asks the gateway at
``DPCAUSAL_ASK_URL`` with the token in ``DPCAUSAL_ASK_TOKEN`` for a release of one of the
dataset's registered configs, waits for it and returns the :class:`dpcausal.Release`. It needs no
ledger, data folder, key, Prefect or MLflow: only the standard library's ``urllib`` (the
``Release`` class is imported when a release is returned). A refusal (bad, revoked or
wrong-dataset token, a key or config the gateway does not allow) raises :class:`AskRefusedError`;
a refusal by the budget :class:`AskBudgetError`; nothing is charged for either.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpcausal.contract import Release

URL_ENV, TOKEN_ENV = "DPCAUSAL_ASK_URL", "DPCAUSAL_ASK_TOKEN"


class AskRefusedError(ValueError):
    """The gateway refused the request (bad input, a bad or revoked token, a dataset the token
    is not admitted to); nothing was charged."""


class AskBudgetError(AskRefusedError):
    """The release was refused by the privacy budget (the dataset's or the analyst's cap);
    nothing was charged."""


class AskFailedError(RuntimeError):
    """The gateway or the release failed (a release that failed after its charge spent its
    budget; the curator's logs hold why)."""


class Gateway:
    """The gateway's JSON API (``url``, ``token``: default the environment's
    ``DPCAUSAL_ASK_URL`` and ``DPCAUSAL_ASK_TOKEN``)."""

    def __init__(self, url: str | None = None, token: str | None = None,
                 timeout: float = 30.0) -> None:
        url = url or os.environ.get(URL_ENV)
        token = token or os.environ.get(TOKEN_ENV)
        if not url or not token:
            raise AskRefusedError(f"set {URL_ENV} (the gateway's address, from your curator) "
                                  f"and {TOKEN_ENV} (your token), or pass url= and token=")
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One JSON request; refusals raise :class:`AskRefusedError`, anything else
        :class:`AskFailedError`."""
        req = urllib.request.Request(
            self.url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = _detail(exc)
            if exc.code in (400, 401, 403, 404, 422):
                raise AskRefusedError(f"refused by the gateway ({exc.code}): {detail}; "
                                      "nothing was charged") from None
            raise AskFailedError(f"the gateway answered {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise AskFailedError(f"cannot reach the gateway at {self.url}: {exc}") from None

    def datasets(self) -> list[dict[str, Any]]:
        """Your datasets with their public facts, configs and spend."""
        return list(self.call("GET", "/api/datasets")["datasets"])

    def submit(self, dataset: str, config: str,
               settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Ask for a release; ``{"request_id", ...}`` at once (no wait)."""
        return dict(self.call("POST", "/api/releases", {
            "dataset": dataset, "config": config, "settings": dict(settings or {})}))

    def wait(self, request_id: str, poll: float = 1.0, timeout: float = 3600.0,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Poll the request until it is released (its state with ``release``, ``text`` and
        ``spent``); :class:`AskBudgetError` / :class:`AskRefusedError` when refused,
        :class:`AskFailedError` when failed or after ``timeout`` seconds. ``progress`` gets
        each new state."""
        deadline, seen = time.monotonic() + timeout, None
        path = f"/api/requests/{urllib.parse.quote(request_id, safe='')}"
        while True:
            state = self.call("GET", path)
            if state["state"] != seen and progress is not None:
                progress(state["state"])
            seen = state["state"]
            if seen == "released":
                return dict(state)
            if seen == "refused":
                kind = AskBudgetError if state.get("reason") == "budget" else AskRefusedError
                raise kind(f"refused ({state.get('reason')}): {state.get('message')}")
            if seen == "failed":
                raise AskFailedError(str(state.get("message")))
            if time.monotonic() > deadline:
                raise AskFailedError(f"request {request_id} still {seen} after {timeout:.0f} s; "
                                     "it may still complete: ask the gateway for it later")
            time.sleep(poll)


def ask(dataset: str, config: str, settings: Mapping[str, Any] | None = None, *,
        url: str | None = None, token: str | None = None, timeout: float = 3600.0) -> Release:
    """Ask the gateway for a release of ``dataset`` under its registered ``config`` (by name)
    with analysis ``settings`` (dotted keys of the Run form's allow-list), wait, and return it.

    Parameters
    ----------
    dataset, config : str
        A dataset you are admitted to and one of its registered configs.
    settings : mapping, optional
        Analysis keys, e.g. ``{"estimator.zeta": 0.5}``.
    url, token : str, optional
        Default ``DPCAUSAL_ASK_URL`` and ``DPCAUSAL_ASK_TOKEN``.
    timeout : float
        Seconds to wait for the release.

    Returns
    -------
    Release
        The release as committed to the curator's ledger.

    Raises
    ------
    AskBudgetError
        Refused by the dataset's or your own cap (nothing charged).
    AskRefusedError
        A bad token, a dataset you are not admitted to, a config or key not allowed.
    AskFailedError
        The gateway or the release failed.
    """
    from dpcausal.contract import Release

    gateway = Gateway(url, token)
    done = gateway.wait(gateway.submit(dataset, config, settings)["request_id"],
                        timeout=timeout)
    return Release.from_dict(done["release"])


#: exit codes of ``dpcausal ask`` (those of ``dpcausal run``)
EXIT_RELEASED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_BUDGET = 0, 1, 2, 3


def ask_command(dataset: str, config: str, sets: Sequence[str] = (), *, as_json: bool = False,
                timeout: float = 3600.0) -> int:
    """``dpcausal ask``: ask, wait (progress on stderr), print the release as ``dpcausal run``
    does (or its JSON) and return the exit code: 0 released, 2 refused, 3 refused by the
    budget, 1 anything else (an ``Error:`` line on stderr; with ``as_json`` also
    ``{"error", "type", "message", "exit_code"}`` on stdout)."""
    try:
        settings = dict(_setting(item) for item in sets)
        gateway = Gateway()
        asked = gateway.submit(dataset, config, settings)
        print(f"asked: request {asked['request_id']}", file=sys.stderr, flush=True)
        done = gateway.wait(asked["request_id"], timeout=timeout,
                            progress=lambda s: print(f"  {s}", file=sys.stderr, flush=True))
    except Exception as exc:  # noqa: BLE001 - every failure ends as one line and a code
        code = (EXIT_BUDGET if isinstance(exc, AskBudgetError) else
                EXIT_BAD_INPUT if isinstance(exc, AskRefusedError) else EXIT_FAILED)
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"Error: {message}", file=sys.stderr)
        if as_json:
            kind = {EXIT_BUDGET: "refused", EXIT_BAD_INPUT: "bad_input"}.get(code, "failed")
            print(json.dumps({"error": kind, "type": type(exc).__name__, "message": message,
                              "exit_code": code}))
        return code
    if as_json:
        print(json.dumps(done, indent=2))
        return EXIT_RELEASED
    spent = done["spent"]
    print(done["text"])
    print(f"dataset spend: {spent['dataset']['text']}; yours: {spent['yours']['text']}")
    print(f"release id: {done['release_id']}")
    return EXIT_RELEASED


def main(argv: Sequence[str] | None = None) -> int:
    """The wheel's ``dpcausal`` command: ``dpcausal ask`` for an analyst who installed the
    library alone (the checkout's ``dpcausal`` has every command, this one too)."""
    parser = argparse.ArgumentParser(
        prog="dpcausal", description="dpcausal for analysts: ask the curator's gateway "
        f"({URL_ENV}, {TOKEN_ENV}). Exit codes: 0 released, 2 refused, 3 refused by the "
        "budget, 1 else.")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser(
        "ask", help="ask for a release of DATASET under its registered config CONFIG_NAME, "
                    "wait, and print it",
        description=f"Ask the curator's gateway at ${URL_ENV} with the token in ${TOKEN_ENV} "
                    "for a release of DATASET under its registered config CONFIG_NAME, wait "
                    "for it and print it. Exit codes: 0 released, 2 refused, 3 refused by the "
                    "budget, 1 else.")
    one.add_argument("dataset", metavar="DATASET")
    one.add_argument("config", metavar="CONFIG_NAME")
    one.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="an analysis key of the Run form's allow-list, e.g. "
                          "--set estimator.zeta=0.5")
    one.add_argument("--json", dest="as_json", action="store_true",
                     help="print the result, or the error, as JSON")
    one.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
    args = parser.parse_args(argv)
    return ask_command(args.dataset, args.config, args.sets, as_json=args.as_json,
                       timeout=args.timeout)


def _setting(item: str) -> tuple[str, Any]:
    """A ``--set KEY=VALUE`` item; the value as JSON when it parses (numbers, lists, true),
    else the string."""
    key, eq, value = item.partition("=")
    if not eq or not key.strip():
        raise AskRefusedError(f"--set expects KEY=VALUE, got {item!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
    except ValueError:
        return exc.reason
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return detail if isinstance(detail, str) else json.dumps(detail)


__all__ = ["AskBudgetError", "AskFailedError", "AskRefusedError", "Gateway", "ask",
           "ask_command", "main"]
