"""Log files Vigil writes: created 0600 and with secrets masked.

Task text, errors and agent output may be private, and the umask would make a new
log world-readable; the daemon's ``logs/vigil.log`` and the TUI's ``logs/tui.log``
both go through ``private_log_handler``.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vigil.redaction import RedactingFilter, Redactor

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class PrivateLogFile(logging.handlers.RotatingFileHandler):
    """A rotating log whose files are created 0600."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        # a log left by an older version keeps its old mode otherwise
        os.fchmod(fd, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def private_log_handler(path: Path, *, max_bytes: int, backups: int, pass_env: Iterable[str] = ()) -> PrivateLogFile:
    """A 0600 rotating file handler (folder 0700) that masks secrets from the
    environment (``vigil.redaction``). Raises ``OSError`` if it cannot be opened."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handler = PrivateLogFile(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(RedactingFilter(Redactor.from_env(os.environ, pass_env)))
    return handler
