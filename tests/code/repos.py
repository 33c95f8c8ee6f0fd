"""Real git repositories for the tests, made in ``tmp_path`` with the ``git`` CLI."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from vigil.clones import make_clone, settle
from vigil.codework import Worktree


@dataclass(frozen=True)
class Repo:
    """A repository with a working tree at ``path`` and a user of its own."""

    path: Path

    @classmethod
    def make(cls, path: Path, files: dict[str, str] | None = None, *, branch: str = "main") -> Repo:
        """A new repository whose first commit on ``branch`` holds ``files``."""
        path.mkdir(parents=True)
        repo = cls(path)
        repo.git("init", "--quiet", "--initial-branch", branch)
        repo.git("config", "user.name", "Test Person")
        repo.git("config", "user.email", "person@example.com")
        repo.commit(files or {"README.md": "hello\n"}, "first commit")
        return repo

    def git(self, *args: str, cwd: Path | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        proc = subprocess.run(
            ["git", *args], cwd=cwd or self.path, env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
        return proc.stdout.strip()

    def write(self, files: dict[str, str], *, at: Path | None = None) -> None:
        for name, text in files.items():
            target = (at or self.path) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def commit(self, files: dict[str, str], message: str, *, at: Path | None = None) -> str:
        """Write ``files`` (in the repository, or in the worktree ``at``) and commit them."""
        self.write(files, at=at)
        self.git("add", "--all", cwd=at)
        self.git("commit", "--quiet", "-m", message, cwd=at)
        return self.git("rev-parse", "HEAD", cwd=at)

    def tip(self, branch: str) -> str:
        return self.git("rev-parse", f"refs/heads/{branch}")

    def show(self, ref: str, path: str) -> str:
        return self.git("show", f"{ref}:{path}")

    def log(self, ref: str) -> list[str]:
        return self.git("log", "--format=%s", ref).splitlines()


def worked_clone(
    repo: Repo, path: Path, files: dict[str, str], *, task_id: int = 1, subject: str = "fix", message: str = "fix"
) -> Worktree:
    """A task's clone of ``repo`` at ``path`` on which its 'agent' committed
    ``files``, its work taken out as the task's artifact (as after a run)."""
    made = make_clone(repo.path, path, task_id=task_id, subject=subject, base=None)
    repo.commit(files, message, at=path)
    return replace(made, artifact=settle(made, made.start, "left").artifact)
