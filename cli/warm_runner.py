"""``python -m cli.warm_runner``: a process that has imported what a release uses, started by
``dpcausal serve`` so that a CLI release against the served stack costs little more than its
computation (issue 21: at most 3 s above it; importing scikit-learn, Prefect and MLflow alone
takes about 2.5 s).

For each command a client hands over (``cli/warm_client.py``), the runner forks a child: the child
takes the client's terminal, working directory and environment and runs the command exactly as
``dpcausal`` would (same checks, same flow, same output and exit code); the runner sends the
child's exit code back. A command runs in the client's own process instead when:

- the settings the libraries read at import (``warm_client.settings_env``) or the Python differ;
- a source file of the project, or the installed packages, changed since the runner imported them
  (the runner then restarts itself once no command is running);
- the runner has a thread besides its main one (a fork would copy its locks mid-use).

Only the owner reaches the socket (a 0700 folder, and the peer's uid is checked). The log holds
command names, pids and exit codes, nothing of a command's arguments or data. ``dpcausal stop``
ends the runner and any command it is running (SIGTERM to its process group).
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import sysconfig
import threading
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from cli.warm_client import HEADER, settings_env, socket_path
from conf.settings import PROJECT_ROOT, apply_defaults

PRELOAD = ("cli.main", "cli.run_cmd", "cli.plan_cmd", "cli.meta_cmd", "conf.kinds",
           "tasks.preflight", "tasks.tracking", "flows.release", "flows.meta", "mlflow",
           "mlflow.entities", "mlflow.tracking", "sklearn.linear_model", "sklearn.ensemble")
PROJECT_PACKAGES = ("cli", "conf", "demo", "dpcausal", "flows", "plots", "reproduce", "store",
                    "tasks")


def sources_stamp() -> tuple[float, int, float]:
    """Newest mtime and count of the project's Python files, and the mtime of site-packages
    (an install or uninstall changes it)."""
    newest, count = 0.0, 0
    for package in PROJECT_PACKAGES:
        for path in (PROJECT_ROOT / package).rglob("*.py"):
            newest = max(newest, path.stat().st_mtime)
            count += 1
    return newest, count, os.stat(sysconfig.get_paths()["purelib"]).st_mtime


def log(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}", flush=True)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:  # the client is gone
        pass


def _receive(conn: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The client's request and its three descriptors (stdin, stdout, stderr)."""
    header, fds, _flags, _addr = socket.recv_fds(conn, HEADER.size, 3)
    if len(header) != HEADER.size or len(fds) != 3:
        return None, fds
    (length,) = HEADER.unpack(header)
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            return None, fds
        body += chunk
    return dict(json.loads(body)), fds


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def exit_code(status: int) -> int:
    """A child's wait status as a shell reports it (128 + N when signal N ended it)."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Runner:
    """The accept loop (module docstring); one instance per process."""

    def __init__(self, path: Path, environ: dict[str, str]) -> None:
        self.path = path
        self.environ = environ  # as the runner started, before preload() set its own
        self.env = settings_env(environ)
        self.stamp = sources_stamp()
        self.stale = False
        self.children: dict[int, socket.socket | None] = {}  # pid -> its client (None: gone)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        os.chmod(path, 0o600)
        self.listener.listen(16)

    def decline_reason(self, request: dict[str, Any]) -> str | None:
        if request.get("python") != sys.executable:
            return "another Python"
        if settings_env(request.get("env", {})) != self.env:
            return "other settings in the environment"
        if self.stale or sources_stamp() != self.stamp:
            self.stale = True
            return "sources changed since the runner started (it restarts when idle)"
        if threading.active_count() != 1:
            return "the runner has threads"
        return None

    def serve_forever(self) -> NoReturn:
        log(f"ready on {self.path} (pid {os.getpid()})")
        while True:
            clients = {conn: pid for pid, conn in self.children.items() if conn is not None}
            readable, _, _ = select.select([self.listener, *clients], [], [], 0.2)
            for conn in readable:
                if conn is self.listener:
                    self.accept()
                else:  # a client sends nothing after its request: this is its hang-up
                    self.client_gone(clients[conn])
            self.reap()
            if self.stale and not self.children:
                self.restart()

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        fds: list[int] = []
        try:
            conn.settimeout(5.0)
            if _peer_uid(conn) != os.getuid():
                conn.close()
                return
            request, fds = _receive(conn)
            reason = "a malformed request" if request is None else self.decline_reason(request)
            if request is not None and reason is None:
                # the client commits only now: one that gave up before this never gets a child
                _send(conn, {"accepted": True})
                if conn.recv(3) != b"go\n":
                    reason = "the client left before its command started"
        except (OSError, ValueError) as exc:
            request, reason = None, f"a failed handshake ({type(exc).__name__})"
        if request is None or reason is not None:
            log(f"declined: {reason}")
            _send(conn, {"accepted": False, "reason": reason})
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            self.child(conn, request, fds)
        for fd in fds:
            os.close(fd)
        _send(conn, {"pid": pid})
        self.children[pid] = conn
        log(f"dpcausal {request['argv'][0]}: child {pid}")

    def client_gone(self, pid: int) -> None:
        """The client ended without waiting (e.g. SIGKILL): its command ends too."""
        conn = self.children[pid]
        if conn is not None:
            conn.close()
        self.children[pid] = None
        log(f"child {pid}: its client hung up; SIGTERM")
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            code = exit_code(status)
            log(f"child {pid}: exit {code}")
            if conn is not None:
                _send(conn, {"exit": code})
                conn.close()

    def restart(self) -> NoReturn:
        """Re-import everything: the same process (pid and process group, as ``serve`` recorded
        them) executes the runner again."""
        log("sources changed: restarting")
        self.listener.close()
        self.path.unlink(missing_ok=True)
        os.execve(sys.executable, [sys.executable, "-P", "-m", "cli.warm_runner"], self.environ)

    def child(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> NoReturn:
        """Run the client's command in this forked process, as its own ``dpcausal`` would."""
        code = 1
        try:
            self.listener.close()
            conn.close()
            for other in self.children.values():
                if other is not None:
                    other.close()
            for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            encoding = request.get("encoding") or "utf-8"
            sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding=encoding, closefd=False,  # noqa: SIM115
                              buffering=1 if os.isatty(1) else -1)
            sys.stderr = open(2, "w", encoding=encoding, closefd=False,  # noqa: SIM115
                              buffering=1)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            sys.argv = ["dpcausal", *request["argv"]]
            atexit._clear()  # the runner's own exit hooks are not this command's
            from cli.main import main

            main(args=request["argv"], prog_name="dpcausal")
            code = 0
        except SystemExit as exc:
            if isinstance(exc.code, int) or exc.code is None:
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - as the interpreter would report it
            traceback.print_exc()
        finally:
            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)


def preload() -> None:
    """Import what a release uses, with the console settings a command sets before Prefect and
    MLflow configure their logging; opens no connection and starts no thread (each request
    checks)."""
    from cli.run_cmd import quiet_console

    quiet_console(verbose=False)
    for name in PRELOAD:
        importlib.import_module(name)
    from plots.figures import pyplot

    pyplot()


def main() -> None:
    """Import, then listen: a client finds the socket only once the runner is warm."""
    apply_defaults()
    environ = dict(os.environ)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    preload()
    runner = Runner(socket_path(), environ)
    atexit.register(runner.path.unlink, missing_ok=True)
    runner.serve_forever()


if __name__ == "__main__":
    main()
