"""More cases of the bad-input catalogue: numbers and times beyond what Vigil can
store or show, bytes that are not text, hostile sensor lines, settings that cannot
work, and stored text that would drive the terminal. ``CASES`` is the whole
catalogue, these after those of ``catalogue_inputs``.

The seeded home is ``catalogue_inputs``'s (task 1 pending, 2 canceled, 3 completed,
4 pending); a case that stores something itself does so in ``prepare``.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.reliability.catalogue import Case
from tests.reliability.catalogue_faults import CASES as ROUND_THREE
from tests.reliability.catalogue_inputs import CASES as FIRST_CASES
from tests.reliability.catalogue_inputs import INIT, RESULT, agent, config, line, sensor

BIG = "99999999999999999999"  # beyond a 64-bit integer
FAR = 86_399_999_913_600_000  # epoch ms of year 2739933: what `--in 999999999d` stored before the bound
HOSTILE = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b[8mhidden\x1b[0m\r\u202eevil"
HOSTILE_SHOWN = "\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\x07\\x1b[8mhidden\\x1b[0m\\r\\u202eevil"
ONE_LINE = HOSTILE.replace("\r", "")  # a program's last line of stderr: no \r in it
ONE_LINE_SHOWN = HOSTILE_SHOWN.replace("\\r", "")
MISSING_FOLDER = Path("/tmp/vigil-catalogue-no-such-folder")
GOOD = line({"key": "good", "subject": "a good line"})


def store_sql(sql: str, *params: object) -> Callable[[Path], None]:
    """Change the seeded database as an older Vigil, a bug or a person might have."""

    def prepare(home: Path) -> None:
        conn = sqlite3.connect(home / "data" / "vigil.db")
        with conn:
            conn.execute(sql, params)
        conn.close()

    return prepare


def with_config(extra: str, then: Callable[[Path], None]) -> Callable[[Path], None]:
    """Add ``extra`` to the seeded home's vigil.toml, then ``then``."""

    def prepare(home: Path) -> None:
        path = home / "vigil.toml"
        path.write_text(path.read_text(encoding="utf-8") + extra, encoding="utf-8")
        then(home)

    return prepare


def remove_missing_folder(home: Path) -> None:
    del home
    shutil.rmtree(MISSING_FOLDER, ignore_errors=True)  # made only by a Vigil that creates folders


HOLDER = """\
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA wal_autocheckpoint = 0")
conn.execute("UPDATE tasks SET priority = priority WHERE id = 1")  # a frame in the log, no value changed
print("ready", flush=True)
sys.stdin.readline()
conn.close()  # the last to close: writes the log back
"""
_holders: dict[Path, subprocess.Popen[str]] = {}


def wal_deleted_under_a_holder(home: Path) -> None:
    """Another process has the database open with changes in its log; the log file
    is deleted (``rm vigil.db-wal``)."""
    database = home / "data" / "vigil.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "ready"
    _holders[home] = holder
    Path(f"{database}-wal").unlink()


def holder_closes(home: Path) -> None:
    holder = _holders.pop(home)
    assert holder.stdin is not None
    holder.stdin.write("\n")
    holder.stdin.close()
    holder.wait(timeout=30)
    assert holder.stdout is not None
    holder.stdout.close()


def _cli(title: str, command: tuple[str, ...], message: str, *, usage: bool = False, **extra: str) -> Case:
    return Case("CLI", title, command, 2, message, usage=usage, extra=dict(extra))


NUMBERS = [
    _cli("task id beyond 64 bits", ("task", "show", BIG), "is not a task id", usage=True),
    _cli("task id beyond 64 bits (prio)", ("task", "prio", BIG, "3"), "is not a task id", usage=True),
    _cli("--parent beyond 64 bits", ("task", "add", "x", "--parent", BIG), "is not a task id", usage=True),
    _cli(
        "--max-retries beyond 64 bits",
        ("task", "add", "x", "--max-retries", BIG),
        "is not a number of retries",
        usage=True,
    ),
    _cli("--depends-on beyond 64 bits", ("task", "add", "x", "--depends-on", BIG), "task ids are integers from 1 to"),
    _cli("--limit beyond 64 bits", ("task", "list", "--limit", BIG), "is not a limit", usage=True),
    _cli("events --task beyond 64 bits", ("events", "--task", BIG), "is not a task id", usage=True),
    _cli("--since beyond 64 bits", ("events", "--since", BIG + "d"), "at most 36500d"),
    _cli("stats --since beyond 64 bits", ("stats", "--since", BIG + "d"), "at most 36500d"),
    _cli("--older-than beyond 64 bits", ("store", "prune", "--older-than", BIG + "d"), "at most 36500d"),
    _cli("--in beyond 64 bits", ("task", "add", "x", "--in", BIG + "d"), "at most 36500d"),
    _cli("VIGIL_TASK_ID beyond 64 bits", ("task", "add", "x"), "VIGIL_TASK_ID=", VIGIL_TASK_ID=BIG),
    _cli("argument that is not UTF-8", ("task", "add", "\udcff\udcfe"), "is not valid UTF-8"),
    _cli("note that is not UTF-8", ("task", "note", "1", "x\udcff"), "is not valid UTF-8"),
]

TIMES = [
    _cli("due a million years from now", ("task", "add", "far", "--in", "999999999d"), "at most 36500d"),
    _cli("due before 1970", ("task", "add", "x", "--at", "0001-01-01"), "must lie from 1970-01-01 to 9999-12-31"),
    _cli("deferred a million years", ("task", "defer", "1", "999999999d"), "at most 36500d"),
    Case(
        "stored text",
        "a stored due time past year 9999",
        ("task", "list", "--json"),
        0,
        f'"scheduled_for": "epoch-ms:{FAR}"',
        store_sql("UPDATE tasks SET scheduled_for = ? WHERE id = 1", FAR),
        kind="shown",
    ),
    Case(
        "stored text",
        "a stored time past year 9999 (show)",
        ("task", "show", "1"),
        0,
        f"scheduled_for     epoch-ms:{FAR}",
        store_sql("UPDATE tasks SET scheduled_for = ? WHERE id = 1", FAR),
        kind="shown",
    ),
]

SMALLER = [
    _cli(
        "--model that is a flag", ("task", "add", "x", "--model", "--dangerously-skip-permissions"), "--model: expected"
    ),
    _cli("--model with control characters", ("task", "add", "x", "--model", "m\x1b]0;t\x07"), "--model: expected"),
    Case(
        "CLI",
        "backup into a folder that does not exist",
        ("backup", str(MISSING_FOLDER / "copy.db")),
        2,
        "does not exist; create it first",
        undo=remove_missing_folder,
    ),
]

SETTINGS = [
    Case(
        "vigil.toml",
        "lease not longer than two heartbeats",
        ("task", "list"),
        2,
        "[dispatch] lease (20000 ms) must be longer than two heartbeats",
        config('[dispatch]\nlease = "20s"\n'),
    ),
    Case(
        "vigil.toml",
        "heartbeat of zero",
        ("task", "list"),
        2,
        "[dispatch] heartbeat: expected a duration of at least 100ms",
        config('[dispatch]\nheartbeat = "0s"\n'),
    ),
    Case(
        "vigil.toml",
        "budget that is not a number",
        ("task", "list"),
        2,
        "[budget] daily_usd: expected a non-negative number, got nan",
        config("[budget]\ndaily_usd = nan\n"),
    ),
    Case(
        "vigil.toml",
        "lease of a million years",
        ("task", "list"),
        2,
        "[dispatch] lease: expected a duration",
        config('[dispatch]\nlease = "99999999999d"\n'),
    ),
    Case(
        "vigil.toml",
        "sensor jitter of a million years",
        ("task", "list"),
        2,
        "[sensor_defaults] jitter: expected a duration",
        config('[sensor_defaults]\njitter = "99999999999d"\n'),
    ),
    Case(
        "vigil.toml",
        "misfire grace of a million years",
        ("task", "list"),
        2,
        "[sensor_defaults] misfire_grace: expected a duration",
        config('[sensor_defaults]\nmisfire_grace = "99999999999d"\n'),
    ),
    Case(
        "vigil.toml",
        "retries beyond 64 bits",
        ("task", "list"),
        2,
        "[dispatch] max_retries: expected an integer ≥ 0 (at most 1000)",
        config(f"[dispatch]\nmax_retries = {BIG}\n"),
    ),
    Case(
        "vigil.toml",
        "model that is a flag",
        ("task", "list"),
        2,
        "[executors.claude] model: expected a model name",
        config('[executors.claude]\nmodel = "--dangerously-skip-permissions"\n'),
    ),
]


def _sensor(title: str, output: bytes, message: str) -> Case:
    return Case("sensor", title, ("sensors", "run", "s"), 0, message, sensor(output), kind="sensor")


def _failing_with(stderr_line: str) -> Callable[[Path], None]:
    """The sensor program fails with ``stderr_line`` as its last line on stderr (its
    error text)."""

    def prepare(home: Path) -> None:
        script = f"import sys\nsys.stderr.write({stderr_line!r} + '\\n')\nsys.exit(3)\n"
        (home / "sensor.py").write_text(script, encoding="utf-8")

    return prepare


def _ten_thousand(home: Path) -> None:
    out = b"".join(line({"key": f"k{n}", "subject": f"found {n}"}) for n in range(10_000))
    extra = "\n[sensor_defaults]\nmax_tasks_per_run = 10000\n\n[limits]\nmax_per_source_per_day = 0\n"
    with_config(extra, sensor(out))(home)


SENSOR_LINES = [
    _sensor(
        "a lone surrogate escape, then a good line",
        b'{"key": "a", "subject": "\\ud800"}\n' + GOOD,
        "created 1 (#5), ignored 0 — 1 malformed output line(s): line 1: a text holds a lone surrogate",
    ),
    _sensor(
        "nesting 100,000 deep, then a good line",
        b"[" * 100_000 + b"]" * 100_000 + b"\n" + GOOD,
        "created 1 (#5), ignored 0 — 1 malformed output line(s): line 1: nested deeper than 100 levels",
    ),
    _sensor(
        "scheduled_for beyond 64 bits, then a good line",
        line({"key": "a", "subject": "s", "scheduled_for": int(BIG)}) + GOOD,
        "created 1 (#5), ignored 0 — 1 malformed output line(s): line 1: 'scheduled_for' must lie from 1970",
    ),
    Case(
        "sensor",
        "10,000 tasks in one run",
        ("sensors", "run", "s"),
        0,
        "s: ok, created 10000 (#5-#10004), ignored 0",
        _ten_thousand,
        kind="sensor",
    ),
    Case(
        "sensor",
        "terminal escapes in its error",
        ("sensors", "run", "s"),
        1,
        f"error: CommandFailed: exited with status 3: {ONE_LINE_SHOWN}",
        _failing_with(ONE_LINE),
        kind="sensor",
    ),
]

STORED_TEXT = [
    Case(
        "stored text",
        "terminal escapes in a subject (list)",
        ("task", "list"),
        0,
        HOSTILE_SHOWN[:40],
        store_sql("UPDATE tasks SET subject = ? WHERE id = 1", HOSTILE),
        kind="shown",
    ),
    Case(
        "stored text",
        "terminal escapes in a summary (show)",
        ("task", "show", "1"),
        0,
        f"result_summary    {HOSTILE_SHOWN}",
        store_sql("UPDATE tasks SET result_summary = ? WHERE id = 1", HOSTILE),
        kind="shown",
    ),
    Case(
        "stored text",
        "terminal escapes in an audit row (events)",
        ("events", "--task", "1"),
        0,
        "\\x1b]52;c;",
        store_sql("UPDATE task_events SET to_value = ? WHERE task_id = 1 AND kind = 'created'", HOSTILE),
        kind="shown",
    ),
    Case(
        "stored text",
        "terminal escapes in JSON output",
        ("task", "show", "1", "--json"),
        0,
        'hidden\\u001b[0m\\r\\u202eevil",',  # JSON escapes the C0 controls itself; U+202E it left raw
        store_sql("UPDATE tasks SET subject = ? WHERE id = 1", HOSTILE),
        kind="shown",
    ),
]

# The agent closes its task three times in one run through `vigil task close` (as
# pending with a retry, then blocked, then completed): the first close decides, the
# later ones are refused with what was decided, and the run's record keeps it.
CLOSING_AGENT = """\
import os, subprocess, sys
from pathlib import Path
sys.stdin.buffer.read()
for args in (
    ["--status", "pending", "--in", "1h", "--summary", "first close: the release is not out"],
    ["--status", "blocked", "--summary", "second close: blocked"],
    ["--status", "completed", "--summary", "third close: done"],
):
    subprocess.run([sys.executable, "-m", "vigil", "task", "close", os.environ["VIGIL_TASK_ID"], *args], check=False)
sys.stdout.buffer.write((Path(__file__).parent / "agent.out").read_bytes())
"""


def closes_three_times(home: Path) -> None:
    store_sql("UPDATE tasks SET max_retries = 3 WHERE id = 4")(home)  # a retry left: pending stays pending
    agent(line(INIT) + line(RESULT))(home)
    (home / "agent.py").write_text(CLOSING_AGENT, encoding="utf-8")


AGENT_CLOSES = [
    Case(
        "agent output",
        "closes its task 3 times in one run (pending, blocked, completed)",
        ("dispatch", "once"),
        0,
        "first close: the release is not out",
        closes_three_times,
        kind="run",
        status="pending",
    ),
]

FILES = [
    Case(
        "database",
        "write-ahead log deleted under an open database",
        ("task", "add", "x"),
        1,
        "its write-ahead log vigil.db-wal is missing",
        wal_deleted_under_a_holder,
        undo=holder_closes,
    ),
]

MORE_CASES: list[Case] = [*NUMBERS, *TIMES, *SMALLER, *SETTINGS, *SENSOR_LINES, *STORED_TEXT, *FILES, *AGENT_CLOSES]
CASES: list[Case] = [*FIRST_CASES, *MORE_CASES, *ROUND_THREE]
