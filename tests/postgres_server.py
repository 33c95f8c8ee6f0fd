"""A real PostgreSQL server for the tests, and a fresh empty database per test.

``VIGIL_TEST_POSTGRES_URL`` (set by ``.ci/run``) names a running server whose user
may create databases. Without it, the session starts a throwaway server itself from
the system's PostgreSQL binaries (``initdb``/``pg_ctl``) in a temporary folder on a
free local port, and stops it at the end. When neither is possible, PostgreSQL
tests are skipped with the reason.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

URL_ENV = "VIGIL_TEST_POSTGRES_URL"
# The one login the throwaway server checks a password for (every other one is
# trusted): the tests of a wrong password log in as this role.
PASSWORD_ROLE = "vigil_password"


class NoServer(Exception):
    """No PostgreSQL server can be reached or started here (the message says why)."""


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a server in a temporary folder; yield its admin URL; stop and remove it.

    PostgreSQL refuses to run as root, so as root the server runs as the system's
    ``postgres`` user."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise NoServer(f"no PostgreSQL binaries (initdb, pg_ctl); install postgresql or set {URL_ENV}")
    run_as: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="vigil-pg-"))
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError as err:
            raise NoServer("running as root and no 'postgres' user to run the server as") from err
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", _free_port()
    try:
        subprocess.run(
            [*run_as, initdb, "-D", str(data), "-A", "trust", "-U", "vigil", "--no-sync"],
            check=True,
            capture_output=True,
        )
        hba = data / "pg_hba.conf"  # the first matching line wins
        hba.write_text(f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=300"
        subprocess.run(
            [*run_as, pg_ctl, "-D", str(data), "-l", str(folder / "log"), "-o", options, "-w", "start"],
            check=True,
            capture_output=True,
        )
    except subprocess.CalledProcessError as err:
        shutil.rmtree(folder, ignore_errors=True)
        raise NoServer(f"could not start PostgreSQL: {err.stderr.decode(errors='replace').strip()}") from err
    try:
        yield f"postgresql://vigil@127.0.0.1:{port}/postgres"
    finally:
        stop = [*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]
        subprocess.run(stop, check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """Create an empty database; yield its URL; drop it (closing its sessions)."""
    import psycopg

    name = "vigil_t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
