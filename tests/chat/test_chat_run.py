"""The bot inside the real ``vigil run``: Telegram down for a while (the scripted
Bot API away, ``retry`` short) → the loop keeps dispatching, ``vigil status`` says
the chat is down, and when Telegram is back the bot catches up with what waits for
a person and acts on it. The token is nowhere: not in the logs, the database, the
console, nor the environment of an agent the loop ran."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.chat.bot_api import TOKEN, BotApi, labels
from tests.chat.support import PERSON, cards_to, chat_toml
from tests.conftest import VigilRunner
from tests.daemon.conftest import clean_env, wait_until

pytestmark = pytest.mark.slow

WAIT_S = 90.0
CONFIG = """\
[dispatch]
executor = "dry-run"
heartbeat = "500ms"
shutdown_grace = "1s"
"""
# an "agent" that keeps its whole environment where the test can read it
DUMP = "import json, os, sys; sys.stdin.read(); open({path!r}, 'w').write(json.dumps(dict(os.environ))); " + (
    "print(json.dumps({{'status': 'completed', 'summary': 'dumped'}}))"
)


def _task(vigil: VigilRunner, task_id: int) -> dict[str, Any]:
    return dict(json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout))


def _add(vigil: VigilRunner, *args: str) -> int:
    return int(json.loads(vigil("task", "add", *args, "--json", check=True).stdout)["id"])


def _chat_status(vigil: VigilRunner) -> dict[str, Any]:
    chat = json.loads(vigil("status", "--json", check=True).stdout)["chat"]
    assert isinstance(chat, dict)
    return chat


def test_telegram_down_the_loop_runs_on_status_says_so_and_the_bot_catches_up(
    home: Path, vigil: VigilRunner, tmp_path: Path
) -> None:
    api = BotApi()
    api.start()
    api.stop()  # the port is known, nothing answers on it: Telegram is unreachable
    dumped = tmp_path / "agent-env.json"
    skill = home / "skills" / "envdump"
    skill.mkdir(parents=True)
    command = json.dumps([sys.executable, "-c", DUMP.format(path=str(dumped))])
    (skill / "SKILL.md").write_text(f"---\ndescription: Dumps its environment.\ncommand: {command}\n---\nDump.\n")
    # a variable whose name does not look secret: masked because it holds the token
    (home / "vigil.toml").write_text(CONFIG + chat_toml(api, extra='token_env = "TELEGRAM_BOT"\n'))
    console = tmp_path / "run.log"
    with console.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**clean_env(), "TELEGRAM_BOT": TOKEN},
        )
    try:
        dumping = _add(vigil, "Dump the environment", "--skills", "envdump")
        wait_until("the loop to run a task", lambda: _task(vigil, dumping)["status"] == "completed", WAIT_S)
        wait_until("status to say the chat is down", lambda: _chat_status(vigil)["state"] == "down", WAIT_S)
        chat = _chat_status(vigil)
        assert "NetworkError" in chat["error"]
        assert chat["since"] is not None
        text = vigil("status", check=True).stdout
        assert f"chat: telegram down since {chat['since']}: " in text

        waiting = _add(vigil, "Rotate the keys", "--requires-approval")
        later = _add(vigil, "Write the changelog")
        wait_until("the loop to run on", lambda: _task(vigil, later)["status"] == "completed", WAIT_S)

        api.start()  # Telegram is back: the bot catches up with what waits for a person
        wait_until("the approval's card", lambda: cards_to(api, PERSON, "Task #2: Rotate the keys"), WAIT_S)
        (card,) = cards_to(api, PERSON, f"Task #{waiting}: Rotate the keys")
        assert labels(card) == ["Approve", "Reject…"]
        api.press(PERSON, card, "Approve")
        wait_until("the approved task to run", lambda: _task(vigil, waiting)["status"] == "completed", WAIT_S)
        wait_until("status to say the chat is up", lambda: _chat_status(vigil)["state"] == "up", WAIT_S)
        assert "chat: telegram up" in vigil("status", check=True).stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=WAIT_S)
        api.stop()
    assert proc.returncode == 0
    assert _chat_status(vigil)["state"] == "stopped"
    assert api.problems == []
    events = _task(vigil, waiting)["events"]
    assert any(e["actor"] == f"human via telegram @ada{PERSON} ({PERSON})" for e in events), events

    # nothing leaks: the home (logs, database, transcripts), the console, the agent's environment
    leaked = [str(p) for p in home.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaked == []
    assert TOKEN not in console.read_text(errors="replace")
    agent_env = json.loads(dumped.read_text())
    assert "TELEGRAM_BOT" not in agent_env
    assert TOKEN not in json.dumps(agent_env)
