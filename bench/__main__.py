"""``python -m bench``: run every workload module in turn (``make bench``).

Each module runs in its own process (``python -m bench.<name>``), so one
workload's memory, threads or crash never colours the next one's figures. A
module that does not exist yet is skipped with a message; one that fails is
reported and the run goes on, ending with a non-zero exit status.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time

from bench.harness import machine

# In run order: the store and CLI first (short), the long soaks last.
WORKLOADS = (
    "store_ops",
    "cli_startup",
    "sensors_cycle",
    "dispatch_cycle",
    "contention",
    "drain_lanes",
    "tui_million",
    "tui_served",
    "resumed_session",
    "workspace",
    "daemon_idle",
)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, figures not meant to be read")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help=f"run only this workload (repeatable): {', '.join(WORKLOADS)}"
    )
    parser.add_argument("--record", action="store_true", help="write each result into docs/performance.md")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only or ()) - set(WORKLOADS))
    if unknown:
        names, known = ", ".join(unknown), ", ".join(WORKLOADS)
        parser.exit(2, f"python -m bench: error: unknown workload {names}; choose from {known}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    names = [name for name in WORKLOADS if not args.only or name in args.only]
    print(f"machine: {machine()}", flush=True)
    failed: list[str] = []
    for name in names:
        if importlib.util.find_spec(f"bench.{name}") is None:
            print(f"\n--- bench.{name}: skipped (module not there yet)", flush=True)
            continue
        command = [sys.executable, "-m", f"bench.{name}"]
        command += ["--quick"] if args.quick else []
        command += ["--record"] if args.record else []
        print(f"\n--- bench.{name}: {' '.join(['python', *command[1:]])}", flush=True)
        start = time.monotonic()
        code = subprocess.run(command, check=False).returncode
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        print(f"--- bench.{name}: {status} in {time.monotonic() - start:.0f} s", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
