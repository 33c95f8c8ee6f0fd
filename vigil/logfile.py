"""Log files Vigil writes: created 0600, with secrets masked and control characters
shown as escapes.

Task text, errors and agent output may be private, and the umask would make a new
log world-readable; the daemon's ``logs/vigil.log`` and the TUI's ``logs/tui.log``
both go through ``private_log_handler``. That text may also hold terminal control
sequences, which someone reading the log with ``tail`` or ``less -R`` would have
obeyed, and newlines that forge whole log lines: ``PrintableFilter`` (on every
handler) writes them as escapes.

A log that cannot be written (a full disk) must not take the daemon's output with
it: instead of logging's traceback per record, one line on stderr at most every
``COMPLAIN_EVERY_S``.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vigil.printable import LOG_LINE_SHOWN_CHARS, capped, printable
from vigil.redaction import RedactingFilter, Redactor

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


COMPLAIN_EVERY_S = 60.0


class PrintableFilter(logging.Filter):
    """A handler filter that writes control and bidirectional characters of each
    record's final message (arguments merged in) as escapes, newlines included: one
    record stays one line. A traceback keeps its lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = printable(message, keep_newlines=False)
        if shown is not message:
            record.msg, record.args = shown, None
        return True


class CappedFilter(logging.Filter):
    """A handler filter that cuts each record's final message to ``limit``
    characters with a marker (``vigil.printable.capped``): on a terminal, one
    record holding a 100,000-character subject took minutes to print. For the
    console only; the log file keeps the record whole."""

    def __init__(self, limit: int = LOG_LINE_SHOWN_CHARS) -> None:
        super().__init__()
        self.limit = limit

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > self.limit:
            record.msg, record.args = capped(message, self.limit), None
        return True


class PrivateLogFile(logging.handlers.RotatingFileHandler):
    """A rotating log whose files are created 0600, and which says on stderr, once a
    minute at most, that it cannot write (logging would print a traceback per
    record)."""

    _complained_at: float | None = None

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        now = time.monotonic()
        if self._complained_at is not None and now - self._complained_at < COMPLAIN_EVERY_S:
            return
        self._complained_at = now
        reason = getattr(error, "strerror", None) or error
        with contextlib.suppress(Exception):
            sys.stderr.write(
                f"vigil: cannot write the log {self.baseFilename}: {reason} "
                f"(records are lost until it can; said at most every {COMPLAIN_EVERY_S:.0f}s)\n"
            )

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
    handler.addFilter(PrintableFilter())  # after the secrets are masked: they match the text as written
    return handler
