"""An agent on a PostgreSQL home whose URL comes from the environment: its own
``vigil`` calls reach the same store, and the URL's password stays out of logs,
transcripts and stored outcomes."""

from __future__ import annotations

from pathlib import Path

from dispatch.environment import agent_env
from tests.dispatch.agent_support import agent_settings
from vigil.redaction import MASK, Redactor

URL = "postgresql://vigil:pa%24%24word-42@db.example.com:5432/vigil"


def test_the_agent_gets_the_store_url_of_the_loop(home: Path) -> None:
    env = agent_env(agent_settings(home), 1, 2, source={"PATH": "/bin", "VIGIL_STORE_URL": URL})
    assert env["VIGIL_STORE_URL"] == URL


def test_without_a_url_in_the_environment_the_agent_gets_none(home: Path) -> None:
    env = agent_env(agent_settings(home), 1, 2, source={"PATH": "/bin", "VIGIL_STORE_URL": ""})
    assert "VIGIL_STORE_URL" not in env


def test_the_store_urls_password_is_masked_as_written_and_decoded() -> None:
    redactor = Redactor.from_env({"VIGIL_STORE_URL": URL})
    assert redactor.text(f"connecting to {URL}") == f"connecting to postgresql://vigil:{MASK}@db.example.com:5432/vigil"
    assert redactor.text("the password is pa$$word-42") == f"the password is {MASK}"
    assert Redactor.from_env({"VIGIL_STORE_URL": "postgresql://vigil@db/vigil"}).secrets == ()
