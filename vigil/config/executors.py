"""``[executors.NAME]`` (each agent CLI: its command, model, accounts and the
keys of its own, ``vigil.agent_clis``) and ``[prices]``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from vigil.agent_clis import CLI_FACTS
from vigil.config.section import Section, subtable
from vigil.config.settings import ACCOUNT_NAME, Account, AgentCliSettings, Price
from vigil.errors import ConfigError
from vigil.models import model_name_problem


def _accounts(section: Section, executor: str, home: Path, source: Path | None) -> tuple[Account, ...]:
    """``[[executors.NAME.accounts]]``: each a name plus one selector."""
    value = section._get("accounts")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise section._fail("accounts", "[[executors." + executor + ".accounts]] tables")
    dir_key = CLI_FACTS[executor].folder_key  # the key that names an account's folder
    accounts: list[Account] = []
    for number, entry in enumerate(value, start=1):
        table = Section(entry, f"executors.{executor}.accounts #{number}", source)
        if not table.has("name"):
            where = f"{source}: " if source else ""
            raise ConfigError(f"{where}[executors.{executor}.accounts #{number}] name: required")
        name = table.str_("name", "")
        if not ACCOUNT_NAME.fullmatch(name):
            raise table._fail("name", "a name of lowercase letters, digits, '-' or '_' (at most 32)")
        if any(account.name == name for account in accounts):
            raise table._fail("name", "a name no other account of this executor has")
        folder, key_env = table.opt_str(dir_key), table.opt_str("api_key_env")
        reserve = table.opt_float("reserve")
        if reserve is not None and reserve > 1:
            raise table._fail("reserve", "a share of the window between 0 and 1, such as 0.2")
        table.done()
        if (folder is None) == (key_env is None):
            where = f"{source}: " if source else ""
            raise ConfigError(
                f"{where}[executors.{executor}.accounts] {name}: expected one of {dir_key} or api_key_env"
            )
        config_dir = None if folder is None else (home / Path(folder).expanduser()).resolve()
        accounts.append(Account(name, config_dir=config_dir, api_key_env=key_env, reserve=reserve))
    return tuple(accounts)


def read_agent_cli(data: Mapping[str, Any], name: str, source: Path | None, home: Path) -> AgentCliSettings:
    section = Section(subtable(data, name, source), f"executors.{name}", source)
    model = section.opt_str("model")
    if model is not None and model_name_problem(model) is not None:
        raise section._fail("model", "a model name such as claude-sonnet-4-5 (never starting with '-')")
    settings = AgentCliSettings(
        command=section.argv("command", (name,)),
        model=model,
        max_budget_usd=section.opt_float("max_budget_usd"),
        extra_args=section.argv("extra_args", ()),
        accounts=_accounts(section, name, home, source),
        resume_after_failure=section.bool_("resume_after_failure", True),
    )
    facts = CLI_FACTS[name]  # the keys of this CLI's own, with the defaults as read above
    own: dict[str, Any] = {key: section.choice(key, getattr(settings, key), ok) for key, ok in facts.choices.items()}
    own |= {key: section.argv(key, getattr(settings, key)) for key in facts.lists}
    own |= {key: section.bool_(key, getattr(settings, key)) for key in facts.flags}
    settings = replace(settings, **own)
    section.done()
    return settings


def read_prices(data: Mapping[str, Any], source: Path | None) -> dict[str, Price]:
    prices = {}
    for model, table in subtable(data, "prices", source).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [prices] {model}: expected a table of per-million-token prices")
        section = Section(table, f"prices.{model}", source)
        prices[model] = Price(
            input=section.opt_float("input") or 0.0,
            output=section.opt_float("output") or 0.0,
            cache_read=section.opt_float("cache_read") or 0.0,
            cache_write=section.opt_float("cache_write") or 0.0,
        )
        section.done()
    return prices
