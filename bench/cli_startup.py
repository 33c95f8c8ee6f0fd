"""``vigil task add`` end to end, a new process each time, vs ``python -c pass``.

What a person or the agent pays for one command: interpreter start-up, imports,
finding the home, loading ``vigil.toml``, opening the database (WAL,
``synchronous=FULL``), one durable insert, printing. The floor is the interpreter
itself; ``FLOOR`` (click and sqlite3 imported: a one-shot command runs the store's
blocking behaviours on a plain connection, with no event loop) is what the design
costs before any Vigil code runs, and ``STACK`` (those and the standard modules the
models and settings are built from) what any command of this stack costs. ``-X
importtime`` then names the slowest imports.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness import (
    Contender,
    Result,
    command_line,
    fmt_ratio,
    fmt_s,
    heading,
    interleave,
    machine,
    median,
    record,
    workload_args,
)

TARGET_TIMES = 5.0  # the bound on `vigil task add` ÷ `python -c pass`
# What the design puts on every command's path before any Vigil code: the CLI
# parser and the SQLite driver (no event loop: task commands are blocking).
FLOOR = "import click, sqlite3"
# ... and the standard modules Vigil's models and settings are built from: what a
# command costs before its first line of Vigil runs.
STACK = "import click, sqlite3, dataclasses, enum, json, re, tomllib, zoneinfo"


@dataclass(frozen=True)
class Sizes:
    rounds: int
    spawns: int  # processes per contender per round
    profiles: int  # `-X importtime` runs whose medians are reported


FULL = Sizes(rounds=15, spawns=4, profiles=9)
QUICK = Sizes(rounds=2, spawns=1, profiles=1)


def clean_env() -> dict[str, str]:
    """This environment without ``VIGIL_*`` (a run's variables would change the actor)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}


def spawner(name: str, argv: Sequence[str], durability: str, env: dict[str, str]) -> Contender:
    """``argv`` started and waited for, once per operation; fails loudly on a
    non-zero exit so that a broken command is never timed as a fast one."""

    def run(n: int) -> list[float]:
        latencies = []
        for i in range(n):
            args = [a.replace("{i}", str(i)) for a in argv]
            start = time.perf_counter()
            proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
            latencies.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
        return latencies

    return Contender(name, durability, run)


def vigil_command() -> list[str]:
    """The installed ``vigil`` script beside this interpreter, else ``python -m vigil``."""
    script = Path(sys.executable).with_name("vigil")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vigil"]


def time_table(results: Sequence[Result], vigil: Result) -> str:
    """Times per process and Vigil's time ÷ each other's, paired by round."""
    lines = [
        "| command | durability | median | p99 | Vigil ÷ other (time) |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        if r is vigil:
            ratio = "—"
        else:
            value = median([v / o for v, o in zip(vigil.round_means_s, r.round_means_s, strict=True)])
            target = r.name.startswith("python -c pass")
            ratio = fmt_ratio(value, f"≤ {TARGET_TIMES:g}×", value <= TARGET_TIMES) if target else fmt_ratio(value)
        lines.append(f"| {r.name} | {r.durability} | {fmt_s(r.median_s)} | {fmt_s(r.p99_s)} | {ratio} |")
    return "\n".join(lines)


def stack_floor(stack: Result, bare: Result) -> str:
    """How far the ratio target is from the stack alone: its imports ÷ ``python -c pass``."""
    value = median([s / b for s, b in zip(stack.round_means_s, bare.round_means_s, strict=True)])
    budget = TARGET_TIMES - value
    return (
        f"The stack alone (`{STACK}`) is {value:.2f}× `python -c pass`, "
        f"which leaves {budget:.2f}× of the {TARGET_TIMES:g}× target for Vigil's own code and the durable insert."
    )


def import_profile(argv: Sequence[str], env: dict[str, str], runs: int, top: int = 12) -> str:
    """The slowest imports of ``argv`` by median self time over ``runs`` runs of
    ``python -X importtime``, with their median cumulative time, as a table."""
    self_us: dict[str, list[int]] = defaultdict(list)
    cumulative_us: dict[str, list[int]] = defaultdict(list)
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, text=True, check=False
        )
        for line in proc.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, total, name = line.removeprefix("import time:").split("|")
            self_us[name.strip()].append(int(own))
            cumulative_us[name.strip()].append(int(total))
    ranked = sorted(self_us, key=lambda m: median(self_us[m]), reverse=True)[:top]
    lines = ["| module | self (median) | with its imports (median) |", "|---|---|---|"]
    lines += [
        f"| `{m}` | {median(self_us[m]) / 1000:.1f} ms | {median(cumulative_us[m]) / 1000:.1f} ms |" for m in ranked
    ]
    all_ms = median([sum(v[i] for v in self_us.values() if len(v) > i) for i in range(runs)]) / 1000
    return f"All imports together: {all_ms:.0f} ms (median of {runs} runs).\n\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = workload_args(__doc__.splitlines()[0], argv)
    sizes = QUICK if args.quick else FULL
    where = machine()
    print(f"machine: {where}")
    env = clean_env()
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp:
        from vigil.home import init_home

        home = Path(tmp) / "home"
        init_home(home)
        add = [*vigil_command(), "--home", str(home), "task", "add", "bench task {i}"]
        contenders = [
            spawner("vigil task add", add, "synchronous=FULL, WAL (the home's default)", env),
            spawner("python -c pass", [sys.executable, "-c", "pass"], "— (no write)", env),
            spawner(f'python -c "{FLOOR}"', [sys.executable, "-c", FLOOR], "— (no write)", env),
            spawner(f'python -c "{STACK}"', [sys.executable, "-c", STACK], "— (no write)", env),
            spawner("vigil --help", [*vigil_command(), "--help"], "— (no write)", env),
        ]
        heading("vigil task add, a new process each time")
        results = interleave(contenders, rounds=sizes.rounds, ops=sizes.spawns)
        timing = time_table(results, results[0]) + "\n\n" + stack_floor(results[3], results[1])
        print(timing, flush=True)
        heading("slowest imports of `vigil task add` (python -X importtime)")
        profile = import_profile(["-m", "vigil", "--home", str(home), "task", "add", "profiled"], env, sizes.profiles)
        print(profile)
    if args.record and not args.quick:
        body = f"Command: `{command_line()}`. Machine: {where}.\n\n{timing}\n\n{profile}"
        done = record("cli_startup", body)
        print("recorded in docs/performance.md" if done else "docs/performance.md has no cli_startup markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
