"""A scratch repository of Vigil's own that borrows objects read-only.

Vigil never runs git in a repository an agent has had: its configuration, hooks,
attributes, ``HEAD`` and ``commondir`` are the agent's to write. What Vigil needs
from such a repository (its commits, a tree of its files) it reads as data through
a *view*: an empty bare repository Vigil makes in a temporary folder, whose
``objects/info/alternates`` lists the object folders to read (the operator's, the
agent's clone's), and whose configuration is git's defaults and nothing else
(``git.Checkout.isolated``: no system or user configuration, no hooks, no
attributes file). Objects are data: git parses them, runs nothing they say.

The same view, borrowing only the operator's objects, is where the diff a person
reviews is made: a bare repository has no ``.gitattributes`` of its own and no
``info/attributes``, so nothing the repository's attributes say (``-diff``,
textconv drivers) changes what is shown.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vigil import git


@contextmanager
def object_view(*borrowed: Path, work_tree: Path | None = None) -> Iterator[git.Checkout]:
    """A view borrowing the object folders ``borrowed`` (read-only: new objects
    are written in the view's own), with ``work_tree`` as its work tree when given
    (its files read as data: ``git add`` with an index of the view's own). The
    folder is removed on exit. Git runs in ``work_tree`` when given, else in the
    view's folder. Raises ``GitError`` when git cannot make it."""
    folder = Path(tempfile.mkdtemp(prefix="vigil-view-"))
    try:
        git.run(git.Checkout(folder, isolated=True), "init", "--quiet", "--bare", "--template=", str(folder))
        info = folder / "objects" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "alternates").write_text("".join(f"{path}\n" for path in borrowed), encoding="utf-8")
        yield git.Checkout(work_tree or folder, git_dir=folder, work_tree=work_tree, isolated=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
