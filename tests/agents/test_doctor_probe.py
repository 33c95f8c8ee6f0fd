"""``vigil doctor --probe``: one live request per account through the real Claude
Code and Codex, against the scripted model server answering, refusing the key
(401 on every request) and gone (nothing listening on its port); and the limit
state each CLI reports: a subscription's window and reset (Claude Code's
rate-limit event), a limited subscription, Codex's windows and their use.

Plain ``vigil doctor`` makes no call: the same dead URL and refused key are
``ok login`` there (``test_claude_doctor``, ``test_codex_doctor``).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agents import anthropic_api, openai_api
from tests.agents.clis import needs_claude, needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Reply, Script, rate_limited, unauthorized
from tests.agents.outages import subscription_login

pytestmark = pytest.mark.slow


@dataclass
class Probed:
    home: ClaudeHome
    scripts: tuple[Script, ...]  # every script the CLI's requests are answered from
    refusal: Reply  # how this API refuses a key
    requests: Callable[[], int]  # how many requests the server was sent


def dead_url() -> str:
    """A local URL nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def claude_probed(tmp_path: Path, dead: bool) -> Iterator[Probed]:
    with anthropic_api.anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, dead_url() if dead else api.server.url)
        count = lambda: len(api.server.recorded("/v1/messages"))  # noqa: E731
        yield Probed(home, (api.script, api.side), unauthorized(), count)


@contextmanager
def codex_probed(tmp_path: Path, dead: bool) -> Iterator[Probed]:
    with openai_api.openai_server() as api:
        home = CodexHome.create(tmp_path, dead_url() if dead else api.server.url)
        count = lambda: len(api.server.recorded("/v1/responses"))  # noqa: E731
        yield Probed(home, (api.script,), openai_api.unauthorized(), count)


CLIS = [
    pytest.param(claude_probed, "claude", id="claude", marks=needs_claude),
    pytest.param(codex_probed, "codex", id="codex", marks=needs_codex),
]
ProbedWith = Callable[[Path, bool], AbstractContextManager[Probed]]


def probe_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.split()[1:2] == ["probe"]]


@pytest.mark.parametrize(("probed_with", "cli"), CLIS)
def test_a_working_account_answers_and_says_what_it_cost(tmp_path: Path, probed_with: ProbedWith, cli: str) -> None:
    with probed_with(tmp_path, False) as probed:
        plain = probed.home.vigil("doctor")
        assert probed.requests() == 0  # without --probe, no call
        proc = probed.home.vigil("doctor", "--probe")
        assert probed.requests() == 1  # one request, however many retries the CLI would make
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    note, *_ = proc.stdout.splitlines()  # said before it runs
    assert note.startswith(f"probe: one live request per account (1: {cli}:default)")
    assert "input tokens" in note
    (line,) = probe_lines(proc.stdout)
    assert line.startswith(f"ok    probe      {cli}:default: answered in ")
    assert " tokens, $" in line


@pytest.mark.parametrize(("probed_with", "cli"), CLIS)
def test_a_refused_key_fails_the_probe(tmp_path: Path, probed_with: ProbedWith, cli: str) -> None:
    with probed_with(tmp_path, False) as probed:
        for script in probed.scripts:
            script.default = probed.refusal
        plain = probed.home.vigil("doctor")
        proc = probed.home.vigil("doctor", "--probe", "--json")
    assert plain.returncode == 0, plain.stdout  # plain doctor cannot tell
    assert proc.returncode == 1
    assert proc.stderr.startswith("probe: one live request per account")  # not in the JSON
    report = json.loads(proc.stdout)
    (check,) = [c for c in report["checks"] if c["what"] == "probe"]
    assert (report["ok"], check["level"]) == (False, "fail")
    assert check["detail"].startswith(f"{cli}:default: refused: ")
    assert "401" in check["detail"]


@pytest.mark.parametrize(("probed_with", "cli"), CLIS)
def test_a_dead_base_url_fails_the_probe(tmp_path: Path, probed_with: ProbedWith, cli: str) -> None:
    with probed_with(tmp_path, True) as probed:
        proc = probed.home.vigil("doctor", "--probe")
    assert proc.returncode == 1, proc.stdout
    (line,) = probe_lines(proc.stdout)
    assert line.startswith(f"FAIL  probe      {cli}:default: unreachable: ")
    assert "base URL" in line


def subscription_toml(tmp_path: Path) -> str:
    """One Claude Code account, a folder logged in to a subscription."""
    folder = subscription_login(tmp_path / "claude-a", "sk-ant-oat01-test-token")
    return f'\n[[executors.claude.accounts]]\nname = "a"\nconfig_dir = "{folder}"\n'


@needs_claude
def test_a_subscription_says_its_limit_window_and_reset(tmp_path: Path) -> None:
    reset_s = int(time.time()) + 7200
    with anthropic_api.anthropic_server() as api:
        api.headers = (
            ("anthropic-ratelimit-unified-status", "allowed"),
            ("anthropic-ratelimit-unified-reset", str(reset_s)),
            ("anthropic-ratelimit-unified-representative-claim", "seven_day"),
        )
        home = ClaudeHome.make(tmp_path, api.server.url, toml=subscription_toml(tmp_path))
        proc = home.vigil("doctor", "--probe")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = probe_lines(proc.stdout)
    assert line.startswith("ok    probe      claude:a: answered in "), line
    reset = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(reset_s))
    assert f"limit allowed (seven_day, resets {reset}" in line


@needs_claude
def test_a_limited_subscription_is_a_warning_with_its_window_and_reset(tmp_path: Path) -> None:
    reset_s = int(time.time()) + 3600
    with anthropic_api.anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, toml=subscription_toml(tmp_path))
        api.side.default = api.script.default = rate_limited(reset_s, retry_after_s=1)
        proc = home.vigil("doctor", "--probe")
    (line,) = probe_lines(proc.stdout)
    assert line.startswith("warn  probe      claude:a: limited"), line
    assert "five_hour" in line
    assert time.strftime("%Y-%m-%dT%H:%M", time.gmtime(reset_s)) in line
    assert proc.returncode == 0, proc.stdout  # a limit ends by itself: not a failure


@needs_codex
def test_codex_reports_how_much_of_its_windows_is_used(tmp_path: Path) -> None:
    reset_s = int(time.time()) + 3600
    with openai_api.openai_server() as api:
        api.headers = openai_api.codex_limits(42, reset_s, 7)
        home = CodexHome.create(tmp_path, api.server.url)
        proc = home.vigil("doctor", "--probe")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = probe_lines(proc.stdout)
    assert line.startswith("ok    probe      codex:default: answered in "), line
    reset = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(reset_s))
    assert f"limit: 5h00m window 42% used (resets {reset}" in line
    assert "7d00h window 7% used" in line
