"""Choosing the store: ``[store] url`` / ``VIGIL_STORE_URL`` → PostgreSQL, else SQLite.

Bad URLs and unreachable servers are one line on stderr and a non-zero exit through
the real CLI; a password never reaches the terminal.
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import VigilRunner
from tests.postgres_server import PASSWORD_ROLE, URL_ENV
from vigil.config import load_settings, settings_from_mapping
from vigil.errors import ConfigError
from vigil.store_url import mask_password

SECRET = "s3cret-pw"


def _with(url: str, *, user: str | None = None, password: str | None = None, database: str | None = None) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{user or parts.username or ''}{':' + password if password else ''}@{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc, path="/" + (database or parts.path.lstrip("/"))))


def _one_line_error(proc: subprocess.CompletedProcess[str], *, code: int | None = None) -> str:
    stderr = proc.stderr
    assert proc.returncode != 0, proc
    if code is not None:
        assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("vigil: error: ")
    return str(lines[0])


# --- settings -------------------------------------------------------------------------


def test_no_url_means_the_homes_sqlite_file(tmp_path: Path) -> None:
    settings = settings_from_mapping({}, tmp_path, None, env={})
    assert settings.store.url is None
    assert settings.store.location == str((tmp_path / "data" / "vigil.db").resolve())


def test_url_from_the_file_and_the_environment_wins(tmp_path: Path) -> None:
    data = {"store": {"url": "postgresql://vigil@db1/vigil"}}
    assert settings_from_mapping(data, tmp_path, None, env={}).store.url == "postgresql://vigil@db1/vigil"
    env = {"VIGIL_STORE_URL": "postgres://vigil:pw@db2/vigil"}
    settings = settings_from_mapping(data, tmp_path, None, env=env)
    assert settings.store.url == "postgres://vigil:pw@db2/vigil"
    assert settings.store.location == "postgres://vigil:***@db2/vigil"


@pytest.mark.parametrize("url", ["mysql://u:pw@h/db", "sqlite:///data/vigil.db", "db.example.com/vigil", ""])
def test_a_url_of_another_scheme_names_the_key_and_hides_the_password(tmp_path: Path, url: str) -> None:
    source = tmp_path / "vigil.toml"
    with pytest.raises(ConfigError) as err:
        settings_from_mapping({"store": {"url": url}}, tmp_path, source, env={})
    assert f"{source}: [store] url: expected a postgresql:// or postgres:// URL" in str(err.value)
    assert "pw" not in str(err.value)


def test_a_bad_url_in_the_environment_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^VIGIL_STORE_URL: expected a postgresql://"):
        settings_from_mapping({}, tmp_path, None, env={"VIGIL_STORE_URL": "http://x"})


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://vigil:pw@db:5432/vigil", "postgresql://vigil:***@db:5432/vigil"),
        ("postgresql://vigil@db/vigil", "postgresql://vigil@db/vigil"),
        (
            "postgresql://db/vigil?user=v&password=pw&sslmode=require",
            "postgresql://db/vigil?user=v&password=***&sslmode=require",
        ),
        ("postgresql://vigil:p%40ss:w@db/vigil", "postgresql://vigil:***@db/vigil"),
        ("postgresql://vigil:pw@db:notaport/vigil", "postgresql://vigil:***@db:notaport/vigil"),
    ],
)
def test_mask_password(url: str, shown: str) -> None:
    assert mask_password(url) == shown


# --- through the real CLI -------------------------------------------------------------


def test_wrong_scheme_in_vigil_toml_is_refused(vigil: VigilRunner, home: Path) -> None:
    config = home / "vigil.toml"
    config.write_text(config.read_text() + f'\n[store]\nurl = "mysql://vigil:{SECRET}@db/vigil"\n')
    line = _one_line_error(vigil("task", "list"), code=2)
    assert f"{config}: [store] url: expected a postgresql:// or postgres:// URL" in line
    assert SECRET not in line
    assert not (home / "data" / "vigil.db").exists()  # nothing fell back to SQLite


def test_wrong_scheme_in_the_environment_is_refused(vigil: VigilRunner) -> None:
    line = _one_line_error(vigil("status", env={"VIGIL_STORE_URL": f"http://u:{SECRET}@h/db"}), code=2)
    assert "VIGIL_STORE_URL: expected a postgresql:// or postgres:// URL" in line
    assert SECRET not in line


def test_server_down_is_one_line(vigil: VigilRunner) -> None:
    with socket.socket() as sock:  # a local port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://vigil:{SECRET}@127.0.0.1:{port}/vigil"
    line = _one_line_error(vigil("task", "add", "lost?", env={"VIGIL_STORE_URL": url}), code=1)
    assert line == (
        f"vigil: error: cannot connect to PostgreSQL at 127.0.0.1:{port}/vigil: "
        "the server is not running or not listening there (connection refused)"
    )


def test_login_refused_is_one_line(vigil: VigilRunner, postgres_url: str) -> None:
    role = "nobody_" + uuid.uuid4().hex[:8]
    url = _with(postgres_url, user=role, password=SECRET)
    line = _one_line_error(vigil("task", "list", env={"VIGIL_STORE_URL": url}), code=1)
    where = url.split("@", 1)[1]
    assert (
        line
        == f"vigil: error: cannot connect to PostgreSQL at {where}: the login was refused: role {role!r} does not exist"
    )
    assert SECRET not in line


def test_missing_database_is_one_line(vigil: VigilRunner, postgres_server: str) -> None:
    name = "vigil_missing_" + uuid.uuid4().hex[:8]
    url = _with(postgres_server, database=name)
    line = _one_line_error(vigil("status", env={"VIGIL_STORE_URL": url}), code=1)
    where = url.split("@", 1)[1]
    assert line == f"vigil: error: cannot connect to PostgreSQL at {where}: database {name!r} does not exist"


def test_without_psycopg_postgres_says_what_to_install(vigil: VigilRunner, tmp_path: Path) -> None:
    blocker = tmp_path / "no_psycopg"
    blocker.mkdir()
    # Python imports sitecustomize at start-up; a None entry makes `import psycopg` fail.
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['psycopg'] = None\n")
    env = {"PYTHONPATH": str(blocker)}
    vigil("task", "add", "sqlite needs no psycopg", env=env, check=True)

    url = f"postgresql://vigil:{SECRET}@127.0.0.1:1/vigil"
    line = _one_line_error(vigil("task", "list", env={**env, "VIGIL_STORE_URL": url}), code=1)
    assert line == (
        "vigil: error: postgresql://vigil:***@127.0.0.1:1/vigil needs PostgreSQL support, "
        "which is not installed: pip install 'vigil-agent-loop[postgres]'"
    )


def test_backup_on_postgres_points_to_pg_dump(vigil: VigilRunner, home: Path) -> None:
    url = f"postgresql://vigil:{SECRET}@127.0.0.1:1/vigil"
    line = _one_line_error(vigil("backup", str(home / "copy.db"), env={"VIGIL_STORE_URL": url}), code=2)
    assert "back it up with pg_dump" in line
    assert SECRET not in line
    assert not (home / "copy.db").exists()


def test_service_install_says_how_to_pass_the_url(vigil: VigilRunner, tmp_path: Path) -> None:
    env = {"VIGIL_STORE_URL": f"postgresql://vigil:{SECRET}@db/vigil", "XDG_CONFIG_HOME": str(tmp_path)}
    proc = vigil("service", "install", "--print", env=env, check=True)
    assert "[Service]" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr
    assert "VIGIL_STORE_URL, which the service does not inherit" in proc.stderr


def test_settings_loaded_from_a_home_read_the_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_STORE_URL", "postgresql://vigil@db/vigil")
    assert load_settings(home).store.url == "postgresql://vigil@db/vigil"
    monkeypatch.delenv("VIGIL_STORE_URL")
    assert load_settings(home).store.url is None


def test_doctor_checks_the_postgres_store(vigil: VigilRunner, postgres_url: str) -> None:
    url = _with(postgres_url, password=SECRET)  # the test server trusts local logins
    vigil("task", "add", "one on postgres", env={"VIGIL_STORE_URL": url}, check=True)
    proc = vigil("doctor", env={"VIGIL_STORE_URL": url})
    assert proc.returncode == 0, proc.stdout
    line = next(line for line in proc.stdout.splitlines() if " database " in line)
    assert line.startswith(f"ok    database   {mask_password(url)} (PostgreSQL, psycopg ")
    assert line.endswith(", 1 tasks)")
    assert SECRET not in proc.stdout


def test_doctor_fails_when_the_server_is_down(vigil: VigilRunner) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = vigil("doctor", env={"VIGIL_STORE_URL": f"postgresql://vigil@127.0.0.1:{port}/vigil"})
    assert proc.returncode == 1
    assert f"FAIL  database   cannot connect to PostgreSQL at 127.0.0.1:{port}/vigil" in proc.stdout


def test_wrong_password_is_one_line(vigil: VigilRunner, postgres_server: str) -> None:
    import psycopg

    right = "right-" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (PASSWORD_ROLE,)).fetchone() is None:
            admin.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN")
        admin.execute(f"ALTER ROLE {PASSWORD_ROLE} PASSWORD '{right}'")
    url = _with(postgres_server, user=PASSWORD_ROLE, password=SECRET)
    try:
        psycopg.connect(url).close()
    except psycopg.OperationalError:
        pass
    else:
        pytest.skip(f"the server at {URL_ENV} lets {PASSWORD_ROLE} in without checking the password")
    psycopg.connect(_with(postgres_server, user=PASSWORD_ROLE, password=right)).close()  # the role itself may log in
    line = _one_line_error(vigil("task", "list", env={"VIGIL_STORE_URL": url}), code=1)
    where = url.split("@", 1)[1]
    assert line == (
        f"vigil: error: cannot connect to PostgreSQL at {where}: the login was refused (wrong user or password)"
    )
    assert SECRET not in line
