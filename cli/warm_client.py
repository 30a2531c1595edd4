"""The client side of the warm runner (``cli/warm_runner.py``): hand a ``dpcausal`` command to the
runner ``dpcausal serve`` started, when there is one and this process's settings match its own.

Imports only the standard library and ``conf.settings``, so a forwarded command costs the client
about 0.1 s instead of the 2.5 s of importing scikit-learn, Prefect and MLflow. The runner forks a
child that runs the command with this process's terminal (stdin, stdout and stderr are passed as
file descriptors), working directory and environment; SIGINT, SIGTERM and SIGHUP received here
are passed on to it, and its exit code becomes this process's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from conf.settings import apply_defaults, data_dir

# the commands that import the heavy libraries (the others start fast on their own)
WARM_COMMANDS = frozenset({"run", "demo", "plan", "meta"})
# variables read when the runner imported its libraries: a command whose values differ runs here
SETTINGS_PREFIXES = ("PREFECT_", "MLFLOW_", "DPCAUSAL_", "MPL", "OMP_", "OPENBLAS_", "MKL_",
                     "DO_NOT_TRACK", "PYTHONPATH")
HEADER = struct.Struct("!I")  # length of the JSON request that follows the descriptors
AF_UNIX_PATH_MAX = 107


def socket_path() -> Path:
    """The runner's socket, in a folder only its owner can enter."""
    return data_dir() / "services" / "runner" / "runner.sock"


def runner_supported() -> bool:
    """Whether ``dpcausal serve`` can start a runner here: Linux (a fork of a process that has
    imported the libraries), and a socket path within the kernel's limit."""
    return sys.platform == "linux" and len(str(socket_path())) <= AF_UNIX_PATH_MAX


def settings_env(env: dict[str, str]) -> dict[str, str]:
    """The part of an environment the runner's imported libraries depend on (the data folder is
    compared as a resolved path by finding the socket, so ``DPCAUSAL_DATA`` is left out)."""
    return {k: v for k, v in env.items()
            if k.startswith(SETTINGS_PREFIXES) and k != "DPCAUSAL_DATA"}


def read_message(sock: socket.socket) -> dict[str, Any] | None:
    """One newline-terminated JSON message, or None at end of stream."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return dict(json.loads(data))


def forward(argv: list[str]) -> int | None:
    """Run ``dpcausal ARGV`` in the warm runner and return its exit code; None when there is no
    runner, it declined (settings, sources or Python differ), ``argv`` is not a heavy command or
    asks for ``-v``, or ``DPCAUSAL_WARM_RUNNER=off``: the caller then runs the command itself."""
    if (not argv or argv[0] not in WARM_COMMANDS
            or os.environ.get("DPCAUSAL_WARM_RUNNER") == "off"
            or {"-v", "--verbose"} & set(argv)):  # -v: logging the runner configured quietly
        return None
    try:
        apply_defaults()
    except OSError:  # an unusable data folder: the command itself says so
        return None
    path = socket_path()
    if not path.exists():  # no runner (serve starts one only where runner_supported())
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5.0)
    try:
        sock.connect(str(path))
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                              "python": sys.executable, "encoding": sys.stdout.encoding}
                             ).encode()
        socket.send_fds(sock, [HEADER.pack(len(request))], [0, 1, 2])
        sock.sendall(request)
        reply = read_message(sock)
        if reply is None or not reply.get("accepted"):
            sock.close()
            return None
        sock.sendall(b"go\n")  # committed: the runner starts the command once it reads this
    except OSError:  # no command was started: run it here
        sock.close()
        return None
    sock.settimeout(None)
    started = read_message(sock)
    if started is None:
        sock.close()
        print("Error: the warm runner of `dpcausal serve` did not start the command.",
              file=sys.stderr)
        return 1
    pid = int(started["pid"])

    def pass_on(signum: int, _frame: Any) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, pass_on)
    done = read_message(sock)  # a signal passed on does not interrupt the wait (PEP 475)
    sock.close()
    if done is None:
        print("Error: the warm runner of `dpcausal serve` ended before the command did "
              "(was `dpcausal stop` run?).", file=sys.stderr)
        return 1
    return int(done["exit"])
