"""The files of a change that a person must look at first (docs/coding.md).

A change to what configures a tool or runs code is listed first, with a marker, in
``vigil task diff``, ``vigil task show`` and the dashboard's Diff view:
``.gitattributes`` and ``.gitmodules`` (filters, diff and merge drivers,
submodules), anything named ``.git`` or a nested repository (a gitlink, or a folder
shaped like a git folder), the agent CLIs' own settings (``.claude/``, ``.codex/``),
the editor's (``.vscode/``), CI workflows (``.github/workflows/``), a file that
becomes executable and a symbolic link pointing out of the tree.

The entries come from ``git diff --raw`` made in a view of Vigil's own
(``vigil.objectview``); a symbolic link's target is read from its blob.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from vigil import git

TOOL_FOLDERS = {
    ".claude": "Claude Code's settings (hooks, permissions)",
    ".codex": "Codex's settings (sandbox, commands)",
    ".vscode": "editor settings (tasks that run commands)",
}
GIT_FILES = {
    ".gitattributes": "git attributes (filters, diff and merge drivers)",
    ".gitmodules": "submodules",
    ".git": "a git folder or file",
}
GITLINK, SYMLINK, EXECUTABLE = "160000", "120000", "100755"


@dataclass(frozen=True, slots=True)
class Flag:
    """One file to look at first, and why."""

    path: str
    why: str


@dataclass(frozen=True, slots=True)
class _Entry:
    old_mode: str
    new_mode: str
    new_blob: str
    status: str
    path: str


def flagged(at: git.Checkout, since: str, until: str) -> tuple[Flag, ...]:
    """The files ``since..until`` adds or changes that a person must look at first,
    in path order (a file deleted is not flagged)."""
    entries = _raw(at, since, until)
    folders = _repo_shaped([e.path for e in entries if e.status != "D"])
    flags: list[Flag] = []
    for entry in entries:
        if entry.status == "D":
            continue
        why = _why(at, entry, folders)
        if why is not None:
            flags.append(Flag(entry.path, why))
    return tuple(sorted(flags, key=lambda flag: flag.path))


def _why(at: git.Checkout, entry: _Entry, folders: set[str]) -> str | None:
    parts = entry.path.split("/")
    for part in parts:
        if part in GIT_FILES:
            return GIT_FILES[part]
    if parts[0] in TOOL_FOLDERS:
        return TOOL_FOLDERS[parts[0]]
    if entry.path.startswith(".github/workflows/"):
        return "a CI workflow (runs on push)"
    if any(entry.path.startswith(f"{folder}/") for folder in folders):
        return "part of a git repository inside the tree"
    if entry.new_mode == GITLINK:
        return "a nested repository (gitlink)"
    if entry.new_mode == EXECUTABLE and entry.old_mode != EXECUTABLE:
        return "made executable"
    if entry.new_mode == SYMLINK:
        target = git.run(at, "cat-file", "blob", entry.new_blob).stdout
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), target))
        if target.startswith("/") or inside == ".." or inside.startswith("../"):
            return f"a symbolic link out of the tree (to {target})"
    return None


def _repo_shaped(paths: Sequence[str]) -> set[str]:
    """Folders holding a ``HEAD``, a ``config`` and ``objects/`` or ``refs/``: a git
    folder committed under another name (a bare repository)."""
    present = set(paths)
    folders = set()
    for path in paths:
        folder = posixpath.dirname(path)
        if posixpath.basename(path) != "HEAD" or f"{folder}/config".lstrip("/") not in present:
            continue
        prefix = f"{folder}/" if folder else ""
        if any(p.startswith((f"{prefix}objects/", f"{prefix}refs/")) for p in present):
            folders.add(folder)
    return folders


def _raw(at: git.Checkout, since: str, until: str) -> list[_Entry]:
    fields = git.run(at, "diff", "--raw", "-z", "--no-abbrev", "-M", "--ignore-submodules=dirty", since, until, "--")
    parts = fields.stdout.split("\0")
    entries = []
    index = 0
    while index < len(parts) and parts[index].startswith(":"):
        old_mode, new_mode, _, new_blob, status = parts[index][1:].split(" ")
        path = parts[index + 1]
        index += 2
        if status[0] in "RC":  # renamed or copied: the new path follows
            path = parts[index]
            index += 1
        entries.append(_Entry(old_mode, new_mode, new_blob, status[0], path))
    return entries
