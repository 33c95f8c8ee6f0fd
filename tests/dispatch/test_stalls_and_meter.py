"""A run whose program goes silent is ended as stalled, its whole group with it; one
that keeps talking is not. The meter counts each message once, prices it, and
gives a run that was cut short the tokens its stream carried."""

from __future__ import annotations

import sys
from pathlib import Path

from dispatch.agents.pricing import TokenUsage
from dispatch.executors.child import ended_early, run_child
from dispatch.meter import Meter, SpendLimit
from dispatch.process import group_alive
from tests.dispatch.agent_support import Started
from vigil.config import Price
from vigil.models import Outcome, OutcomeKind

# prints one line, then starts a child that outlives it and goes silent
SILENT = (
    "import subprocess, sys, time\n"
    "print('started', flush=True)\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "time.sleep(600)\n"
)
CHATTY = "import time\nfor n in range(12):\n    print(n, flush=True)\n    time.sleep(0.1)\n"


async def test_a_program_silent_for_the_stall_timeout_is_ended_with_its_group(home: Path) -> None:
    lines: list[bytes] = []
    started = Started()
    result = await run_child(
        [sys.executable, "-c", SILENT], env={"PATH": "/usr/bin:/bin"}, cwd=home, stdin=b"", timeout_s=120,
        grace_s=0.3, on_start=started, on_line=lines.append, stall_s=1.0,
    )  # fmt: skip
    assert (result.stalled, result.timed_out, lines) == (True, False, [b"started"])
    [(_, pgid, _)] = started.calls
    assert not group_alive(pgid)
    outcome = ended_early(result, 120, "t.jsonl", 1.0)
    assert outcome is not None
    assert outcome.kind is OutcomeKind.STALLED
    assert outcome.error == "stalled: the agent printed nothing for 1s; its process group was ended"


async def test_a_program_that_keeps_talking_is_not_stalled(home: Path) -> None:
    lines: list[bytes] = []
    result = await run_child(
        [sys.executable, "-c", CHATTY], env={"PATH": "/usr/bin:/bin"}, cwd=home, stdin=b"", timeout_s=120,
        grace_s=0.3, on_start=Started(), on_line=lines.append, stall_s=1.0,
    )  # fmt: skip
    assert (result.stalled, result.exit_code, len(lines)) == (False, 0, 12)


def test_the_meter_counts_a_message_once_and_prices_it() -> None:
    meter = Meter({"m": Price(input=10.0, output=20.0)}, SpendLimit(0.05, "the task's max_cost_usd of $0.05"))
    meter.record("msg_1", "m", TokenUsage(input=1000, output=1))
    meter.record("msg_1", "m", TokenUsage(input=1000, output=1))  # a second block of the same message
    assert (meter.total, meter.over) == (TokenUsage(input=1000, output=1), False)
    meter.record("msg_2", "m", TokenUsage(input=4000, output=1))
    assert meter.cost_usd == (5000 * 10.0 + 2 * 20.0) / 1_000_000
    assert meter.over
    assert meter.over_budget_error().startswith("over budget: the run had spent $0.0500, past the task's max_cost")


def test_a_run_cut_short_keeps_what_its_stream_carried() -> None:
    meter = Meter({"m": Price(input=10.0, output=20.0)})
    cut = Outcome(OutcomeKind.TIMEOUT, error="timed out")
    assert meter.charge(cut) == cut  # nothing metered: nothing to add
    meter.record("msg_1", "m", TokenUsage(input=1000, output=10, cache_read=5, cache_write=2))
    charged = meter.charge(cut)
    assert (charged.tokens_in, charged.tokens_out, charged.cache_read_tokens, charged.cache_write_tokens) == (
        1000,
        10,
        5,
        2,
    )
    assert (charged.cost_usd, charged.api_cost_usd, charged.model) == (meter.cost_usd, meter.cost_usd, "m")
    reported = Outcome(OutcomeKind.SUCCESS, tokens_in=7, cost_usd=0.5)
    assert meter.charge(reported) == reported  # the CLI's own totals win
