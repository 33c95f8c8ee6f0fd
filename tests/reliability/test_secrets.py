"""Secrets from the environment never reach the log, a transcript or ``vigil doctor``;
the agent gets an explicit environment, not the daemon's whole one."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from dispatch.environment import BASE_NAMES
from tests.reliability.support import read_record, run_vigil, write_probe_skill
from vigil.redaction import MASK, RedactingFilter, Redactor, looks_secret

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
