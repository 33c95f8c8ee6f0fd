"""Secrets from the environment never reach the log, a transcript, ``vigil doctor``,
what the agent writes back, or an alert; the agent, the alert hook and command
sensors get an explicit environment, not the daemon's whole one."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from dispatch.environment import BASE_NAMES, NETWORK_VARIABLES
from tests.reliability.support import read_record, run_vigil, write_probe_skill
from vigil.redaction import MASK, RedactingFilter, Redactor, looks_secret

pytestmark = pytest.mark.slow

PASSED = "sk-passed-to-the-agent-0123456789"  # named in pass_env
DAEMON_ONLY = "hunter2-daemon-only-password"  # secret-looking name, not passed
PLAIN = "plain-value-not-secret"
ENV = {"PROBE_API_KEY": PASSED, "DB_PASSWORD": DAEMON_ONLY, "UNRELATED_SETTING": PLAIN}


def test_secrets_the_agent_prints_are_masked_in_log_transcript_output_and_store(home: Path, tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    write_probe_skill(home, record, pass_env=("PROBE_API_KEY",))
    assert run_vigil(home, "task", "add", "leak", "--skills", "probe").returncode == 0
    # the agent prints the secret on stdout and stderr and fails: its error text
    # (the last stderr line) goes into the log line that reports the outcome
    ran = run_vigil(home, "dispatch", "once", env={**ENV, "PROBE_SAY": "the key is {key}", "PROBE_EXIT": "1"})
    assert ran.returncode == 0, ran.stderr

    log = (home / "logs" / "vigil.log").read_text(encoding="utf-8")
    transcript = (home / "logs" / "runs" / "1-1.jsonl").read_text(encoding="utf-8")
    assert f"the key is {MASK}" in log  # the line was written, with the secret masked
    assert f"the key is {MASK}" in transcript
    stored = run_vigil(home, "task", "show", "1", "--json").stdout
    assert f"the key is {MASK}" in stored
    for text in (log, transcript, ran.stderr, ran.stdout, stored):
        assert PASSED not in text
        assert DAEMON_ONLY not in text


def test_the_agent_gets_only_the_explicit_environment(home: Path, tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    write_probe_skill(home, record, pass_env=("PROBE_API_KEY",))
    assert run_vigil(home, "task", "add", "env", "--skills", "probe").returncode == 0
    assert run_vigil(home, "dispatch", "once", env=ENV).returncode == 0
    env = read_record(record)["env"]
    allowed = {*BASE_NAMES, "VIGIL_HOME", "VIGIL_TASK_ID", "VIGIL_RUN_ID", "PROBE_SAY", "PROBE_EXIT", "PROBE_API_KEY"}
    # a Python child may add a few of its own (e.g. LC_CTYPE); none of the daemon's
    extra = set(env) - allowed - {"LC_CTYPE", "PWD"}
    assert extra == set()
    assert env["PROBE_API_KEY"] == PASSED
    assert (env["VIGIL_HOME"], env["VIGIL_TASK_ID"]) == (str(home), "1")
    assert "DB_PASSWORD" not in env
    assert "UNRELATED_SETTING" not in env


def test_doctor_shows_no_secret_from_environment_or_config(home: Path) -> None:
    config = home / "vigil.toml"
    config.write_text(
        '[dispatch]\nexecutor = "claude"\npass_env = ["PROBE_API_KEY"]\n\n'
        f'[executors.claude]\ncommand = ["claude-not-installed"]\nextra_args = ["--token", "{PASSED}"]\n',
        encoding="utf-8",
    )
    assert run_vigil(home, "task", "add", "x").returncode == 0
    doctor = run_vigil(home, "doctor", env=ENV)
    assert "claude-not-installed" in doctor.stdout  # the executor check ran
    for text in (doctor.stdout, doctor.stderr):
        assert PASSED not in text
        assert DAEMON_ONLY not in text


def test_which_names_look_secret() -> None:
    for name in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET", "DB_PASSWORD", "PGPASSWORD", "my_token"):
        assert looks_secret(name), name
    for name in ("PATH", "HOME", "KEYBOARD", "TOKENIZER_PATH", "LANG"):
        assert not looks_secret(name), name


def test_the_log_filter_masks_arguments_and_exceptions() -> None:
    redactor = Redactor.from_env(ENV, pass_env=())
    assert set(redactor.secrets) == {DAEMON_ONLY, PASSED}
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(RedactingFilter(redactor))
    logger = logging.getLogger("tests.reliability.secrets")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("auth with %s failed", PASSED)
        try:
            raise RuntimeError(f"password {DAEMON_ONLY} refused")
        except RuntimeError:
            logger.exception("login")
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    assert f"auth with {MASK} failed" in text
    assert f"password {MASK} refused" in text
    assert PASSED not in text
    assert DAEMON_ONLY not in text
    assert PLAIN not in text


def test_short_values_and_a_secret_inside_another_are_handled() -> None:
    redactor = Redactor.from_env({"A_TOKEN": "abc", "B_TOKEN": "secret-long", "C_KEY": "secret-longer-still"})
    assert redactor.text("abc secret-longer-still secret-long") == f"abc {MASK} {MASK}"
    assert redactor.data(b"x secret-long y") == b"x " + MASK.encode() + b" y"


def _as_agent(task_id: int) -> dict[str, str]:
    """The environment of a command the agent runs inside its run: the dispatcher's
    VIGIL_TASK_ID, and secrets (one it was given through pass_env, one it was not)."""
    return {**ENV, "VIGIL_TASK_ID": str(task_id)}


def test_what_the_agent_writes_back_is_masked_at_the_store(home: Path) -> None:
    """A close summary, a note and a follow-up's subject and description, written
    with the agent's `vigil task …` commands, are stored with its secrets masked; what
    a person writes is kept as written."""
    (home / "vigil.toml").write_text('[dispatch]\npass_env = ["PROBE_API_KEY"]\n', encoding="utf-8")
    assert run_vigil(home, "task", "add", "work").returncode == 0
    agent = _as_agent(1)
    said = f"key {PASSED} and {DAEMON_ONLY}"
    for args in (
        ("task", "note", "1", said),
        ("task", "add", f"follow-up {PASSED}", "-d", said),
        ("task", "close", "1", "--status", "completed", "--summary", said),
    ):
        done = run_vigil(home, *args, env=agent)
        assert done.returncode == 0, done.stderr
    shown = (
        run_vigil(home, "task", "show", "1", "--json").stdout + run_vigil(home, "task", "show", "2", "--json").stdout
    )
    assert PASSED not in shown
    assert DAEMON_ONLY not in shown
    task, follow_up = json.loads(run_vigil(home, "task", "show", "1", "--json").stdout), task_json_of(home, 2)
    assert task["result_summary"] == f"key {MASK} and {MASK}"
    assert task["notes"][0]["text"] == f"key {MASK} and {MASK}"
    assert (follow_up["subject"], follow_up["description"]) == (f"follow-up {MASK}", f"key {MASK} and {MASK}")
    # a person's own words are theirs
    assert run_vigil(home, "task", "note", "2", f"person says {PASSED}", env=ENV).returncode == 0
    assert task_json_of(home, 2)["notes"][0]["text"] == f"person says {PASSED}"


def task_json_of(home: Path, task_id: int) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(run_vigil(home, "task", "show", str(task_id), "--json").stdout)
    return value


async def test_the_store_masks_the_agents_text_whatever_carries_it(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store behaviours the MCP server calls (actor ``agent``) mask alike: the
    secrets come from the process's own environment, which the server inherits from
    the agent."""
    from vigil.config import load_settings
    from vigil.models import NewTask, TaskStatus
    from vigil.store import open_store

    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    (home / "vigil.toml").write_text('[dispatch]\npass_env = ["PROBE_API_KEY"]\n', encoding="utf-8")
    store = await open_store(load_settings(home))
    try:
        said = f"key {PASSED} and {DAEMON_ONLY}"
        first = await store.add_task(NewTask("work"), actor="human")
        assert first.task_id is not None
        await store.add_note(first.task_id, said, author="agent")
        added = await store.add_task(NewTask(f"follow-up {PASSED}", description=said), actor="agent")
        assert added.task_id is not None
        closed = await store.close_task(first.task_id, TaskStatus.COMPLETED, said, actor="agent")
        follow_up = await store.get_task(added.task_id)
        notes = await store.list_notes(first.task_id)
    finally:
        await store.close()
    assert closed.result_summary == notes[0].text == follow_up.description == f"key {MASK} and {MASK}"
    assert follow_up.subject == f"follow-up {MASK}"


HOOK = """\
import json, os, sys
with open(sys.argv[1], "a", encoding="utf-8") as out:
    out.write(json.dumps({"event": json.loads(sys.stdin.read()), "env": dict(os.environ)}) + "\\n")
"""


def test_alerts_are_masked_and_the_hook_gets_an_explicit_environment(home: Path, tmp_path: Path) -> None:
    """A task whose subject holds a secret fails: the ``task_failed`` event the hook
    gets has it masked in its subject and message, and the hook's environment is
    PATH, HOME, locale, proxies and ``[alerts] pass_env``, not the daemon's."""
    record, hooked = tmp_path / "record.json", tmp_path / "alerts.jsonl"
    write_probe_skill(home, record, pass_env=("PROBE_API_KEY",))
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK, encoding="utf-8")
    with (home / "vigil.toml").open("a", encoding="utf-8") as config:
        config.write(
            f"\n[alerts]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(hook))}, "
            f'{json.dumps(str(hooked))}]\npass_env = ["HOOK_WEBHOOK"]\n'
        )
    subject = f"deploy with {PASSED} ({DAEMON_ONLY})"
    assert run_vigil(home, "task", "add", subject, "--skills", "probe").returncode == 0
    env = {**ENV, "PROBE_EXIT": "1", "HOOK_WEBHOOK": "https://hooks.example/T0"}
    assert run_vigil(home, "dispatch", "once", env=env).returncode == 0
    (sent,) = [json.loads(line) for line in hooked.read_text(encoding="utf-8").splitlines()]
    event, hook_env = sent["event"], sent["env"]
    assert event["event"] == "task_failed"
    assert event["subject"] == f"deploy with {MASK} ({MASK})"
    text = json.dumps(event)
    assert PASSED not in text
    assert DAEMON_ONLY not in text
    assert hook_env["HOOK_WEBHOOK"] == "https://hooks.example/T0"
    assert hook_env["VIGIL_ALERT_EVENT"] == "task_failed"
    allowed = {*BASE_NAMES, *NETWORK_VARIABLES, "VIGIL_HOME", "VIGIL_ALERT_EVENT", "HOOK_WEBHOOK", "LC_CTYPE", "PWD"}
    extra = set(hook_env) - allowed
    assert extra == set()


SENSOR = """\
import json, os, sys
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump(dict(os.environ), out)
"""


def test_a_command_sensor_gets_an_explicit_environment(home: Path, tmp_path: Path) -> None:
    record, program = tmp_path / "sensor-env.json", tmp_path / "sensor.py"
    program.write_text(SENSOR, encoding="utf-8")
    argv = json.dumps([sys.executable, str(program), str(record)])
    (home / "vigil.toml").write_text(
        f'[[sensors]]\nuse = "command"\nname = "s"\nevery = "1h"\ncommand = {argv}\n'
        'pass_env = ["SENSOR_FEED_URL"]\nenv = { FIXED = "1" }\n',
        encoding="utf-8",
    )
    done = run_vigil(home, "sensors", "run", "s", env={**ENV, "SENSOR_FEED_URL": "https://feed.example"})
    assert done.returncode == 0, done.stderr
    env = read_record(record)
    assert (env["SENSOR_FEED_URL"], env["FIXED"], env["VIGIL_SENSOR"]) == ("https://feed.example", "1", "s")
    for name in ENV:
        assert name not in env
    given = {"VIGIL_HOME", "VIGIL_SENSOR", "VIGIL_SENSOR_STATE", "SENSOR_FEED_URL", "FIXED", "LC_CTYPE", "PWD"}
    assert set(env) - {*BASE_NAMES, *NETWORK_VARIABLES} - given == set()
