"""``choose_executor``: the pure choice of an attempt's executor, model, account,
timeout and command from the task, its skills, the settings and the accounts'
usage limits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dispatch.attempt import ExecutorChoice, choose_executor
from dispatch.skills import Skill
from vigil.accounts import AccountLimit, account_key
from vigil.config import Account, Settings, load_settings
from vigil.models import NewTask, Task
from vigil.store.sqlite import SqliteStore

NOW = 1_700_000_000_000
HOUR = 3_600_000


def skill(name: str, **fields: object) -> Skill:
    return Skill(name, "d", "body", Path("/skills") / name, **fields)  # type: ignore[arg-type]


async def task(db: SqliteStore, model: str | None = None) -> Task:
    """A task as the store gives it."""
    added = await db.add_task(NewTask("s", model=model))
    assert added.task_id is not None
    return await db.get_task(added.task_id)


def configured(home: Path) -> Settings:
    base = load_settings(home)
    claude = replace(base.claude, model="opus", accounts=(Account("a", Path("/a")), Account("b", Path("/b"))))
    dispatch = replace(base.dispatch, executor="claude", fallback=("codex",), timeout_ms=HOUR)
    return replace(base, dispatch=dispatch, claude=claude, codex=replace(base.codex, model="gpt-5-codex"))


def limited(*keys: str, until: int = NOW + HOUR) -> dict[str, AccountLimit]:
    return {key: AccountLimit(until=until + n, since=NOW) for n, key in enumerate(keys)}


async def test_the_configuration_decides_when_no_skill_does(home: Path, db: SqliteStore) -> None:
    chosen = choose_executor(await task(db), [skill("plain")], configured(home), {}, NOW)
    assert chosen == ExecutorChoice("claude", "opus", "a", HOUR, None)
    assert chosen.starts_process


async def test_the_first_skill_that_names_one_wins_and_the_tasks_model_over_both(home: Path, db: SqliteStore) -> None:
    skills = [skill("first", timeout_ms=60_000), skill("second", executor="codex", model="o3", timeout_ms=1)]
    assert choose_executor(await task(db), skills, configured(home), {}, NOW) == ExecutorChoice(
        "codex", "o3", "default", 60_000, None
    )
    assert choose_executor(await task(db, model="o4"), skills, configured(home), {}, NOW).model == "o4"


async def test_a_command_skill_and_dry_run(home: Path, db: SqliteStore) -> None:
    run = skill("script", executor="command", command=("python3", "./check.py"))
    chosen = choose_executor(await task(db), [run], configured(home), {}, NOW)
    assert (chosen.executor, chosen.command, chosen.account) == ("command", ("python3", "./check.py"), None)
    dry = choose_executor(await task(db), [skill("dry", executor="dry-run")], configured(home), {}, NOW)
    assert not dry.starts_process


async def test_a_limited_account_gives_way_to_the_next_then_to_the_fallback(home: Path, db: SqliteStore) -> None:
    settings = configured(home)
    assert choose_executor(await task(db), [], settings, limited(account_key("claude", "a")), NOW).account == "b"
    both = limited(account_key("claude", "a"), account_key("claude", "b"))
    # the fallback runs it with its own default model: the one named for claude means nothing there
    assert choose_executor(await task(db, model="opus"), [], settings, both, NOW) == ExecutorChoice(
        "codex", "gpt-5-codex", "default", HOUR, None
    )


async def test_with_no_fallback_allowed_the_account_free_soonest(home: Path, db: SqliteStore) -> None:
    settings = configured(home)
    both = limited(account_key("claude", "b"), account_key("claude", "a"))  # a's limit ends later
    chosen = choose_executor(await task(db), [skill("own", fallback=False)], settings, both, NOW)
    assert (chosen.executor, chosen.account) == ("claude", "b")
