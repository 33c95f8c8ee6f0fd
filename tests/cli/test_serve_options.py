"""``vigil tui --serve``'s options, its token and ``[serve]``: bad input is one line
and exit 2, the token file is 0600 and rotates, and a non-loopback address is
served only when the command line names it. (Serving itself is driven by a real
browser in tests/tui/test_served.py.)"""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from vigil.config import load_settings
from vigil.dashboard_access import dashboard_url, digest_of, read_digest, token_matches, token_path
from vigil.errors import ConfigError, HomeError


def _configure(home: Path, toml: str) -> None:
    config = home / "vigil.toml"
    config.write_text(config.read_text() + "\n" + toml)


def test_the_link_is_printed_once_only_the_hash_is_kept_0600_and_rotate_token_replaces_it(
    home: Path, vigil_in_process: VigilRunner
) -> None:
    first = vigil_in_process("tui", "--serve", "--print-url")
    assert first.returncode == 0, first.stderr
    made, link = first.stdout.splitlines()
    assert made.startswith("a token was made (only its SHA-256 is kept, in ")
    assert link.startswith("http://127.0.0.1:8377/?token=")
    token = link.split("token=", 1)[1]
    assert len(token) >= 40
    assert token not in token_path(home).read_text()  # an agent that reads the home cannot use it
    assert read_digest(home) == digest_of(token)
    assert token_matches(read_digest(home), token)
    assert stat.S_IMODE(token_path(home).stat().st_mode) == 0o600
    again = vigil_in_process("tui", "--serve", "--print-url")
    assert again.returncode == 2
    assert "the token is shown only when it is made" in again.stderr
    assert "--rotate-token --print-url" in again.stderr
    rotated = vigil_in_process("tui", "--serve", "--print-url", "--rotate-token", "--port", "9000")
    assert rotated.returncode == 0, rotated.stderr
    said, new_link = rotated.stdout.splitlines()
    assert "links and logins made before no longer work" in said
    new = new_link.removeprefix("http://127.0.0.1:9000/?token=")
    assert new != token
    assert token_matches(read_digest(home), new)
    assert not token_matches(read_digest(home), token)
    assert stat.S_IMODE(token_path(home).stat().st_mode) == 0o600
    assert not [p for p in token_path(home).parent.iterdir() if p.name.startswith(".serve.token")]


def test_print_url_uses_the_public_url(home: Path, vigil_in_process: VigilRunner) -> None:
    _configure(home, '[serve]\npublic_url = "https://agent.tailnet.ts.net/"')
    printed = vigil_in_process("tui", "--serve", "--print-url")
    assert printed.stdout.splitlines()[-1].startswith("https://agent.tailnet.ts.net/?token=")
    given = vigil_in_process(
        "tui", "--serve", "--print-url", "--rotate-token", "--public-url", "https://proxy.example/v"
    )
    assert given.stdout.splitlines()[-1].startswith("https://proxy.example/v/?token=")


def test_a_token_file_open_to_others_is_refused_not_used(home: Path, vigil_in_process: VigilRunner) -> None:
    vigil_in_process("tui", "--serve", "--print-url")
    token_path(home).chmod(0o644)
    refused = vigil_in_process("tui", "--serve", "--print-url")
    assert refused.returncode == 2
    assert "is open to other users (mode 644)" in refused.stderr
    assert "--rotate-token" in refused.stderr
    assert refused.stdout == ""
    with pytest.raises(HomeError):
        read_digest(home)
    replaced = vigil_in_process("tui", "--serve", "--print-url", "--rotate-token")
    assert replaced.returncode == 0, replaced.stderr
    assert stat.S_IMODE(token_path(home).stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tui", "--host", "0.0.0.0"), "--host goes with --serve"),
        (("tui", "--print-url"), "--print-url goes with --serve"),
        (("tui", "--rotate-token"), "--rotate-token goes with --serve"),
        (("tui", "--serve", "--with-loop"), "--serve starts no loop"),
        (("tui", "--serve", "--public-url", "ftp://x"), "--public-url: expected an http:// or https:// address"),
        (("tui", "--serve", "--public-url", "https://x/?a=1"), "--public-url: expected"),
        (("tui", "--serve", "--port", "0"), "Invalid value for '--port'"),
        (("tui", "--browser-session", "a b"), "--browser-session: expected"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    vigil_in_process: VigilRunner, args: tuple[str, ...], message: str
) -> None:
    result = vigil_in_process(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_a_non_loopback_host_from_the_config_needs_host_on_the_command_line(
    home: Path, vigil_in_process: VigilRunner
) -> None:
    _configure(home, '[serve]\nhost = "0.0.0.0"')
    refused = vigil_in_process("tui", "--serve", "--print-url")
    assert refused.returncode == 2
    assert "[serve] host = '0.0.0.0' would expose the dashboard beyond this machine: pass --host 0.0.0.0" in (
        refused.stderr
    )
    assert not token_path(home).exists()  # refused before anything was made
    meant = vigil_in_process("tui", "--serve", "--print-url", "--host", "0.0.0.0")
    assert meant.returncode == 0, meant.stderr


def test_serve_is_person_only(vigil_in_process: VigilRunner) -> None:
    refused = vigil_in_process("tui", "--serve", env={"VIGIL_TASK_ID": "4"})
    assert refused.returncode == 2
    assert "only a person can" in refused.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[serve]\npublic_url = "vigil.example"', "[serve] public_url: expected an http:// or https:// address"),
        ("[serve]\nport = 70000", "[serve] port: expected an integer"),
        ("[serve]\nlink_token = true", "[serve] unknown key 'link_token'"),  # the token is not kept: no link has it
        ('[serve]\nhots = "x"', "[serve] unknown key 'hots'"),
    ],
)
def test_bad_serve_settings_name_the_key(home: Path, toml: str, message: str) -> None:
    _configure(home, toml)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_settings(home)


def test_the_token_is_compared_whole() -> None:
    kept = digest_of("abc")
    assert token_matches(kept, "abc")
    assert not token_matches(kept, "abd")
    assert not token_matches(kept, "ab")
    assert not token_matches(None, "abc")
    assert not token_matches(kept, "")
    assert not token_matches(kept, kept)  # the digest itself is no token
    assert dashboard_url("https://h/p", task_id=5, token="t-_") == "https://h/p/?task=5&token=t-_"
    assert dashboard_url("http://h:1") == "http://h:1/"


def test_a_port_that_is_taken_is_one_line_and_exit_1(vigil: VigilRunner) -> None:
    assert vigil("tui", "--serve", "--print-url").returncode == 0  # the token exists: nothing else to say
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = vigil("tui", "--serve", "--port", str(port))
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_start_up_line_says_what_is_exposed_and_to_whom() -> None:
    from tui.serving import exposure_line, is_loopback

    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "192.168.1.4", "box.lan")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    local = exposure_line("http://127.0.0.1:8377", "127.0.0.1", 8377, readonly=False)
    assert "loopback only (127.0.0.1:8377): reachable from this machine alone" in local
    assert "can watch and steer" in local
    exposed = exposure_line("http://0.0.0.0:8377", "0.0.0.0", 8377, readonly=True)
    assert "WARNING: listening on 0.0.0.0:8377, reachable by every machine that can route to it" in exposed
    assert "in clear text" in exposed
    assert "watch only (read-only)" in exposed
