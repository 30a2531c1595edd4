"""Ledger fixtures: a SQLite ledger per test, and a real PostgreSQL server on loopback per session.

The PostgreSQL server is Debian's ``postgresql`` package: found under /usr/lib/postgresql/*/bin (or
on PATH), installed with apt-get if absent (CI does the same), initialised as a throw-away cluster
owned by the ``postgres`` user (the server refuses to run as root), started on a free 127.0.0.1 port
and stopped at the end. If it cannot be installed or started, the tests FAIL, they never skip.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from dpcausal.ledger import Ledger

PG_SETUP_SECONDS: dict[str, float] = {}


def _pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if
                   Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).resolve().parent if on_path and shutil.which("pg_ctl") else None


def _install_postgres() -> Path:
    if shutil.which("apt-get") is None:
        pytest.fail("PostgreSQL (initdb/pg_ctl) is not installed and apt-get is unavailable: "
                    "install PostgreSQL server binaries to run the ledger's PostgreSQL tests.")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "-q", "postgresql"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"installing PostgreSQL failed at `{' '.join(cmd)}` (exit "
                        f"{done.returncode}):\n{done.stderr[-2000:]}")
    bindir = _pg_bindir()
    if bindir is None:
        pytest.fail("apt-get installed postgresql but no initdb was found under "
                    "/usr/lib/postgresql/*/bin")
    return bindir


def _as_server_user(cmd: list[str]) -> list[str]:
    """Postgres refuses to run as root: run its tools as the `postgres` user when we are root."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"PostgreSQL setup failed at {what} (`{' '.join(cmd)}`, exit "
                    f"{done.returncode}):\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of the `postgres` database on a fresh local PostgreSQL server (psycopg 3 driver)."""
    t0 = time.monotonic()
    bindir = _pg_bindir() or _install_postgres()
    t_install = time.monotonic() - t0
    root = Path(tempfile.mkdtemp(prefix="dpcausal-pg-"))
    root.chmod(0o755)
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    _run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-U", "ledger", "-A", "trust",
                          "-E", "UTF8", "--no-locale", "--no-sync"]), "initdb")
    port = _free_port()
    # a throw-away server: no fsync (the tests are about transactions, not the server's disk)
    options = (f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c max_connections=60 "
               "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
    _run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-t", "60",
                          "-l", str(root / "server.log"), "start"]), "pg_ctl start")
    PG_SETUP_SECONDS.update(install=t_install, total=time.monotonic() - t0)
    print(f"\n[postgres] {bindir.parent.name}: setup {PG_SETUP_SECONDS['total']:.1f} s "
          f"(install {t_install:.1f} s), port {port}", file=sys.stderr)
    try:
        yield f"postgresql+psycopg://ledger@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast",
                                        "-w", "stop"]), capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A new, empty database on the session's server (one per test)."""
    name = f"ledger_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest) -> str:
    """A fresh ledger URL on each back end (the PostgreSQL one on the session's real server)."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return request.getfixturevalue(name)


@pytest.fixture
def led(ledger_url: str):
    with Ledger(ledger_url, create=True) as ledger:
        yield ledger
