"""A real PostgreSQL server for the tests, and a fresh database per test.

``VIGIL_TEST_POSTGRES_URL`` names a running server whose user may create
databases. Without it, the session starts a throwaway server itself from the
system's PostgreSQL binaries (``initdb``/``pg_ctl``) in a temporary folder on a
free local port, and stops it at the end. When neither is possible, PostgreSQL
tests are skipped with the reason.

The throwaway server runs without fsync, ``synchronous_commit`` or full-page
writes, and keeps its data in memory (``/dev/shm``) where the system has it: its
data dies with the test session, so durability buys nothing but time. On disk,
copying the template for each test (about 7 MB of files and their log) cost 50 to
300 ms of CPU, mostly the kernel writing it back; in memory, 10 ms.
A test gets either an empty database (``fresh_database``) or a copy of one that
Vigil's migrations already ran on (``migrated_template`` once per session, then
``fresh_database(…, template=…)``): ``CREATE DATABASE … TEMPLATE`` copies a few
files, where migrating costs a few dozen DDL statements per test.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

URL_ENV = "VIGIL_TEST_POSTGRES_URL"
# The one login the throwaway server checks a password for (every other one is
# trusted): the tests of a wrong password log in as this role.
PASSWORD_ROLE = "vigil_password"
MEMORY = "/dev/shm"  # a tmpfs on Linux: the throwaway server's data folder when it has room
MEMORY_NEEDED_BYTES = 1 << 30  # the data, a log of up to max_wal_size, and room to spare


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


def _memory_folder() -> str | None:
    """``MEMORY`` when it is a writable folder with room for a server (a container's
    default ``/dev/shm`` is 64 MB), else None: the default temporary folder."""
    try:
        free = os.statvfs(MEMORY)
    except OSError:
        return None
    room = free.f_bavail * free.f_frsize >= MEMORY_NEEDED_BYTES
    return MEMORY if room and os.access(MEMORY, os.W_OK) else None


@contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a server in a temporary folder; yield its admin URL; stop and remove it.

    PostgreSQL refuses to run as root, so as root the server runs as the system's
    ``postgres`` user."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise NoServer(f"no PostgreSQL binaries (initdb, pg_ctl); install postgresql or set {URL_ENV}")
    run_as: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="vigil-pg-", dir=_memory_folder()))
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
        options = (
            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=300"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c max_wal_size=128MB"  # in memory: recycle the log long before the default 1 GB
        )
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


def migrated_template(admin_url: str) -> str:
    """Create a database and let Vigil's PostgreSQL store migrate it (open, close);
    returns its name, for ``fresh_database(…, template=…)``. Its sessions are all
    gone when this returns (a template must have none), and it accepts no more."""
    import psycopg

    from vigil.store.postgres import PostgresStore

    name = "vigil_template_" + uuid.uuid4().hex[:12]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    async def migrate() -> None:
        store = await PostgresStore.open(with_database(admin_url, name))
        await store.close()

    # in a thread of its own: the caller may be inside a running event loop
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, migrate()).result()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        # a closed client's server process may still be on its way out
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
    return name


@contextmanager
def fresh_database(admin_url: str, template: str | None = None) -> Iterator[str]:
    """Create a database, empty or a copy of ``template`` (a database no session is
    connected to); yield its URL; drop it (closing its sessions)."""
    import psycopg

    name = "vigil_t_" + uuid.uuid4().hex[:12]
    create = f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template is not None else "")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for attempt in range(50):
            try:
                conn.execute(create)
                break
            except psycopg.errors.ObjectInUse:
                # a terminated session still leaving the template: wait for it
                if attempt == 49:
                    raise
                time.sleep(0.02)
    try:
        yield with_database(admin_url, name)
    finally:
        drop_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name``, closing its sessions; nothing when it is gone."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
