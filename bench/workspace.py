"""A repository task's workspace on a large repository: Vigil's clone of its own
(``vigil.clones.make_clone``: ``git clone --shared --no-checkout``, then the
checkout) against ``git worktree add`` on the same repository, in the same run.

The repository is generated with ``git fast-import``: ``FILES`` small files in
nested folders, then ``COMMITS`` commits each changing a few of them. Each
operation makes one workspace (timed) and measures what it added to the disk
(the workspace's folder, and for a worktree its admin folder in the repository's
``.git``, by allocated blocks; hard links counted once); then it is removed,
untimed. The targets: the clone at most 1.5× the time and 1.2× the disk of a
worktree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.harness import (
    Contender,
    Result,
    command_line,
    fmt_s,
    heading,
    interleave,
    machine,
    median,
    record,
    workload_args,
)
from vigil.clones import discard, make_clone

TARGET_TIME = 1.5  # clone ÷ worktree, at most
TARGET_DISK = 1.2


@dataclass(frozen=True)
class Sizes:
    files: int
    commits: int
    rounds: int


FULL = Sizes(files=50_000, commits=5_000, rounds=5)
QUICK = Sizes(files=300, commits=30, rounds=1)


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    proc = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args[:2])}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode().strip()


def _stream(sizes: Sizes) -> Iterator[bytes]:
    """A fast-import stream: every file in the first commit, then commits that each
    change a few of them."""

    def blob(text: str) -> bytes:
        data = text.encode()
        return b"data %d\n%s\n" % (len(data), data)

    def path(n: int) -> str:
        return f"src/m{n % 97:02d}/p{n % 13}/file{n}.py"

    when = 1_700_000_000
    first = [b"commit refs/heads/main\n", b"committer Bench <bench@localhost> %d +0000\n" % when, blob("initial")]
    for n in range(sizes.files):
        first.append(b"M 100644 inline %s\n" % path(n).encode())
        first.append(blob(f"# file {n}\nVALUE = {n}\n"))
    yield b"".join(first) + b"\n"
    for c in range(1, sizes.commits):
        lines = [b"commit refs/heads/main\n", b"committer Bench <bench@localhost> %d +0000\n" % (when + c)]
        lines.append(blob(f"change {c}"))
        for k in range(3):
            n = (c * 7919 + k * 104729) % sizes.files
            lines.append(b"M 100644 inline %s\n" % path(n).encode())
            lines.append(blob(f"# file {n}, changed by commit {c}\nVALUE = {n + c}\n"))
        yield b"".join(lines) + b"\n"


def make_repository(folder: Path, sizes: Sizes) -> Path:
    """The generated repository, checked out on ``main``, with a user."""
    repo = folder / "large"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch", "main")
    git(repo, "config", "user.name", "Bench")
    git(repo, "config", "user.email", "bench@localhost")
    git(repo, "fast-import", "--quiet", stdin=b"".join(_stream(sizes)))
    git(repo, "checkout", "--quiet", "--force", "main")
    return repo


def disk_bytes(*paths: Path) -> int:
    """Bytes allocated under ``paths`` (st_blocks), each inode counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for top in paths:
        if not top.exists():
            continue
        for root, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                info = os.lstat(os.path.join(root, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
    return total


def contenders(repo: Path, scratch: Path, disks: dict[str, list[int]]) -> list[Contender]:
    counter = iter(range(1, 1_000_000))

    def worktree(n: int) -> list[float]:
        latencies = []
        for _ in range(n):
            i = next(counter)
            path = scratch / f"wt{i}"
            start = time.perf_counter()
            git(repo, "worktree", "add", "--quiet", "-b", f"bench/{i}", str(path), "main")
            latencies.append(time.perf_counter() - start)
            disks["git worktree add"].append(disk_bytes(path, repo / ".git" / "worktrees" / path.name))
            git(repo, "worktree", "remove", "--force", str(path))
            git(repo, "branch", "-D", f"bench/{i}")
        return latencies

    def clone(n: int) -> list[float]:
        latencies = []
        for _ in range(n):
            i = next(counter)
            path = scratch / f"clone{i}"
            start = time.perf_counter()
            make_clone(repo, path, task_id=i, subject="bench", base="main")
            latencies.append(time.perf_counter() - start)
            disks["Vigil's clone"].append(disk_bytes(path))
            discard(path)
        return latencies

    return [Contender("git worktree add", "-", worktree), Contender("Vigil's clone", "-", clone)]


def report(results: list[Result], disks: dict[str, list[int]], sizes: Sizes) -> str:
    worktree, clone = results
    time_ratio = median([c / w for c, w in zip(clone.round_means_s, worktree.round_means_s, strict=True)])
    disk_w, disk_c = median([float(d) for d in disks[worktree.name]]), median([float(d) for d in disks[clone.name]])
    disk_ratio = disk_c / disk_w
    lines = [
        f"Command: `{command_line()}`. Machine: {machine()}.",
        "",
        f"Repository: {sizes.files:,} files, {sizes.commits:,} commits (generated with `git fast-import`).",
        "",
        "| workspace | median time | p99 time | disk it adds (median) | clone ÷ worktree |",
        "|---|---|---|---|---|",
        f"| git worktree add | {fmt_s(worktree.median_s)} | {fmt_s(worktree.p99_s)} | {disk_w / 2**20:,.1f} MiB | — |",
        f"| Vigil's clone | {fmt_s(clone.median_s)} | {fmt_s(clone.p99_s)} | {disk_c / 2**20:,.1f} MiB | "
        f"time {time_ratio:.2f}× (target ≤ {TARGET_TIME}×: {'met' if time_ratio <= TARGET_TIME else 'MISSED'}), "
        f"disk {disk_ratio:.2f}× (target ≤ {TARGET_DISK}×: {'met' if disk_ratio <= TARGET_DISK else 'MISSED'}) |",
    ]
    return "\n".join(lines)


def main() -> None:
    args = workload_args(__doc__.splitlines()[0])
    sizes = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="vigil-bench-workspace-") as folder:
        base = Path(folder)
        start = time.perf_counter()
        repo = make_repository(base, sizes)
        print(f"generated {sizes.files:,} files, {sizes.commits:,} commits in {time.perf_counter() - start:.1f} s")
        scratch = base / "work"
        scratch.mkdir()
        disks: dict[str, list[int]] = {"git worktree add": [], "Vigil's clone": []}
        heading("A repository task's workspace")
        results = interleave(contenders(repo, scratch, disks), rounds=sizes.rounds, ops=1)
        text = report(results, disks, sizes)
        shutil.rmtree(scratch, ignore_errors=True)
    print(text)
    if args.record and not record("workspace", text):
        raise SystemExit("docs/performance.md has no <!-- bench:workspace --> markers")


if __name__ == "__main__":
    main()
