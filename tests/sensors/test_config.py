"""[[sensors]] entries: validation at start-up, with messages that name the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sensors.builtin.inbox import inbox
from sensors.config import load_sensor_specs
from vigil.config import settings_from_mapping
from vigil.errors import ConfigError


def specs_for(home: Path, *entries: dict[str, Any], **top: Any) -> Any:
    settings = settings_from_mapping({"sensors": list(entries), **top}, home, home / "vigil.toml")
    return load_sensor_specs(settings)


def test_builtins_with_their_defaults_and_overrides(tmp_path: Path) -> None:
    specs = specs_for(
        tmp_path,
        {"use": "inbox"},
        {"use": "http", "name": "site", "url": "https://example.org", "cron": "*/5 * * * *", "priority": 2},
        {"use": "queue_health", "every": "2m", "skills": ["triage"], "enabled": False, "max_tasks_per_run": 5},
        sensor_defaults={"timeout": "45s", "max_tasks_per_run": 20},
    )
    by_name = {s.name: s for s in specs}
    assert list(by_name) == ["inbox", "site", "queue_health"]
    assert by_name["inbox"].func is inbox
    assert str(by_name["inbox"].schedule) == "every 30s"  # the decorator's default
    assert (by_name["inbox"].timeout_ms, by_name["inbox"].max_tasks) == (45_000, 20)
    assert str(by_name["site"].schedule) == "cron */5 * * * *"
    assert by_name["site"].priority == 2
    assert by_name["site"].options == {"url": "https://example.org"}
    qh = by_name["queue_health"]
    assert (str(qh.schedule), qh.skills, qh.enabled, qh.max_tasks) == ("every 2m", ("triage",), False, 5)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"use": "inbx"}], "vigil.toml: [[sensors]] #1 (use 'inbx'): unknown use 'inbx' (built-ins: command, feed"),
        (
            [{"use": "inbox"}, {"use": "inbox", "name": "inbox", "every": "nope"}],
            "vigil.toml: [[sensors]] #2 (name 'inbox'): every: invalid duration 'nope'",
        ),
        ([{"use": "http"}], "[[sensors]] #1 (use 'http'): missing option 'url'"),
        ([{"use": "http", "url": "ftp://x"}], "url: expected http:// or https://"),
        ([{"use": "inbox", "pth": "x"}], "[[sensors]] #1 (use 'inbox'): unknown option 'pth'"),
        ([{"use": "schedule", "subject": "x"}], "no schedule: set every or cron"),
        ([{"use": "schedule", "every": "1h", "subject": "{nope}"}], "subject: unknown placeholder {nope}"),
        ([{"use": "inbox", "cron": "* * *"}], "cron '* * *': expected 5 fields"),
        ([{"use": "inbox", "cron": "0 25 * * *"}], "cron '0 25 * * *': hour '25': the last value (25) is higher"),
        ([{"use": "inbox", "catch_up": "later"}], 'catch_up: expected "once" or "skip", got \'later\''),
        ([{"use": "inbox", "every": "1m", "cron": "* * * * *"}], "give every or cron, not both"),
        ([{"use": "inbox"}, {"use": "inbox"}], "#2 (use 'inbox'): name 'inbox' is already used by entry #1"),
        ([{"use": "inbox", "name": "a:b"}], "name: expected letters, digits"),
        ([{"use": "inbox", "priority": 0}], "priority: expected an integer 1-9, got 0"),
        ([{"use": "command", "command": "ls -l"}], "command: expected a non-empty list of strings"),
        ([{"name": "x"}], "[[sensors]] #1 (name 'x'): missing 'use'"),
        ([{"use": "no_such_module:func"}], "cannot import 'no_such_module': ModuleNotFoundError"),
        ([{"use": "json:dumps"}], "use 'json:dumps': dumps must be an 'async def' function"),
        ([{"use": "sensors/missing.py:f"}], "sensor file"),
    ],
)
def test_a_bad_entry_fails_at_start_up_naming_it(tmp_path: Path, entries: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        specs_for(tmp_path, *entries)
    assert message in str(caught.value)


def test_a_python_file_in_the_home_is_a_sensor(tmp_path: Path) -> None:
    (tmp_path / "my_sensors").mkdir()
    (tmp_path / "my_sensors" / "disk.py").write_text(
        "from sensors import FoundTask, SensorContext, sensor\n"
        "@sensor(every='10m', timeout='5s')\n"
        "async def disk_full(ctx: SensorContext) -> list[FoundTask]:\n"
        "    '''Warns when a disk fills up.'''\n"
        "    return []\n"
        "async def plain(ctx):\n"
        "    return []\n"
    )
    specs = specs_for(
        tmp_path,
        {"use": "my_sensors/disk.py:disk_full", "threshold": 90},
        {"use": "my_sensors/disk.py:plain", "every": "1h"},
    )
    disk, plain = specs
    assert (disk.name, str(disk.schedule), disk.timeout_ms) == ("disk_full", "every 10m", 5000)
    assert disk.options == {"threshold": 90}  # a user sensor's options are passed through
    assert disk.description == "Warns when a disk fills up."
    assert plain.name == "plain"
    assert (disk.catch_up, plain.catch_up) == ("once", "once")  # the default
    (skipping,) = specs_for(tmp_path, {"use": "my_sensors/disk.py:plain", "every": "1h", "catch_up": "skip"})
    assert skipping.catch_up == "skip"
    with pytest.raises(ConfigError, match="no schedule"):
        specs_for(tmp_path, {"use": "my_sensors/disk.py:plain"})


def test_a_user_file_that_fails_to_import_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('half-written')\n")
    with pytest.raises(ConfigError, match=r"cannot import .*broken.py: RuntimeError: half-written"):
        specs_for(tmp_path, {"use": "broken.py:f"})
