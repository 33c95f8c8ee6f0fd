"""Every error Vigil raises on purpose.

The tree::

    VigilError                     root; the CLI prints str(err) on one line
    ├── InputError                 bad input from a person or a caller (exit 2)
    │   ├── ConfigError            vigil.toml is missing, not TOML, or a key has a wrong type
    │   ├── HomeError              the home folder does not exist or is not a home
    │   ├── TaskNotFound           no task with that id
    │   ├── InvalidTransition      the task's status does not allow the operation
    │   ├── DuplicateOpenTask      another open task already holds the source key
    │   ├── SkillError             a skill is unknown, misnamed or its SKILL.md is malformed
    │   └── RepositoryError        a task's repository, base or branch cannot be used
    └── OperationError             the operation was valid but failed (exit 1)
        ├── StoreError             the database cannot be used
        │   ├── NotADatabase       the file is not an SQLite database (exit 2)
        │   ├── SchemaTooNew       the database was written by a newer Vigil (exit 2)
        │   ├── StoreBusy          still locked after the busy timeout and retries
        │   └── DatabaseReplaced   the file was replaced or removed while this process had it open
        ├── FloodLimited           a flood limit ([limits]) refused a new task
        ├── Refused                a write on behalf of a run that is not open, or not its task's
        ├── GitError               git failed on a repository that is usable
        ├── GitHubError            GitHub cannot be reached, refused, or there is no token
        └── LockHeld               another process holds the dispatcher lock

Driver errors (``sqlite3.*``) are translated into these once, in ``vigil.store``.
"""

from __future__ import annotations


class VigilError(Exception):
    """Root of Vigil's errors. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class InputError(VigilError):
    """The request is wrong; nothing was changed."""

    exit_code = 2


class ConfigError(InputError):
    """The configuration cannot be used; the message names the file and key."""


class HomeError(InputError):
    """The home folder cannot be found or used."""


class TaskNotFound(InputError):
    """No task has the given id."""

    def __init__(self, task_id: int) -> None:
        super().__init__(f"task #{task_id} not found")
        self.task_id = task_id


class InvalidTransition(InputError):
    """The task is in a status that does not allow the operation.

    ``status`` is the status the task had when the operation was refused.
    """

    def __init__(self, task_id: int, status: str, action: str) -> None:
        super().__init__(f"task #{task_id} is {status}, cannot {action}")
        self.task_id = task_id
        self.status = status
        self.action = action


class DuplicateOpenTask(InputError):
    """Another open task already holds this source key."""


class SkillError(InputError):
    """A skill cannot be used: unknown, an invalid name, or a malformed SKILL.md."""


class RepositoryError(InputError):
    """A task's repository is missing or not a git repository, its base does not
    exist, or its worktree cannot be made there: the task's (or its settings')
    fault, found before any agent starts."""


class OperationError(VigilError):
    """A valid operation failed."""

    exit_code = 1


class StoreError(OperationError):
    """The database could not be opened, read or written."""


class NotADatabase(StoreError):
    """The file exists but is not an SQLite database (a wrong file: bad input)."""

    exit_code = 2


class SchemaTooNew(StoreError):
    """The database's schema version is newer than this Vigil understands (bad input)."""

    exit_code = 2


class StoreBusy(StoreError):
    """The database stayed locked past the busy timeout and every retry."""


class DatabaseReplaced(StoreError):
    """The database file this process opened was replaced (a restore) or removed
    while it was open: going on would write to a file nobody reads, beside the new
    one's write-ahead log. The process must stop and start again on the new file."""


class StoreMoved(DatabaseReplaced):
    """The SQLite file was moved into PostgreSQL by ``vigil store migrate``: nothing
    may read or write it any more (it is kept as a backup of that moment); the home's
    processes must use the database it moved to."""


class FloodLimited(OperationError):
    """A flood limit refused to add a task; the message names the limit. The refusal
    is counted (loop state ``rejected_inserts``); nothing was added."""


class Refused(OperationError):
    """A write made on behalf of a run (the agent's close, note, ask, follow-up) that
    the run may not make: it has ended, it is another task's, or (a close) it closed
    its task already. Nothing changed. The message starts with ``refused:`` (``REFUSED``),
    which the executors look for to count a denial."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{REFUSED} {why}")


REFUSED = "refused:"


class GitHubError(OperationError):
    """GitHub could not be used: no token, refused, unreachable, or an unexpected answer."""


class GitError(OperationError):
    """A git command failed on a usable repository (a merge that cannot proceed, a
    checkout with local changes in the way); the message says which and why."""


class LockHeld(OperationError):
    """Another live process holds the dispatcher lock."""
