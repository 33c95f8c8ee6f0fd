"""``vigil service install``: a systemd user unit that keeps ``vigil run`` going.

The unit restarts Vigil whatever ended it (``Restart=always``). Stopping it sends
SIGTERM to the main process only (``KillMode=mixed``), which is Vigil's graceful
stop: the running task gets its grace period and Vigil ends the agent's process
group itself; systemd waits ``shutdown_grace`` plus a margin before it kills what is
left.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from vigil.config import STORE_URL_ENV, Settings
from vigil.errors import InputError, OperationError

UNIT_NAME = "vigil.service"
STOP_MARGIN_S = 30  # beyond shutdown_grace: recording the run, ending the group, closing


def _quote(arg: str) -> str:
    """One ExecStart argument, quoted when systemd would split or expand it."""
    if arg and not any(c in arg for c in " \t\n\"\\$%;'"):
        return arg
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$").replace("%", "%%")
    return f'"{escaped}"'


def _plain(value: str, what: str) -> str:
    """A value for ``Description=`` or ``WorkingDirectory=``: taken as written, but
    systemd expands ``%`` specifiers in both (a home named ``100%data`` would be read
    as ``100`` plus the unit's data folder), so ``%`` is doubled. A control character
    (a newline would end the line and start a setting of its own) is refused."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InputError(f"{what} {value!r} holds a control character; a systemd unit cannot name it")
    return value.replace("%", "%%")


def unit_text(settings: Settings, python: str | None = None) -> str:
    """The unit file for this home; ``python`` defaults to this interpreter. Raises
    ``InputError`` for a home path a unit cannot hold."""
    argv = [python or sys.executable, "-m", "vigil", "--home", str(settings.home), "run"]
    home = _plain(str(settings.home), "the home")
    stop_s = settings.dispatch.shutdown_grace_ms // 1000 + STOP_MARGIN_S
    return f"""\
[Unit]
Description=Vigil: keeps an autonomous agent working ({home})
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
WorkingDirectory={home}
ExecStart={" ".join(_quote(a) for a in argv)}
Restart=always
RestartSec=5
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec={stop_s}
Environment=PYTHONUNBUFFERED=1

[Install]
WantedBy=default.target
"""


def unit_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/systemd/user/vigil.service`` (default ``~/.config``)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


ENABLE_HINT = """\
enable and start it:
  systemctl --user daemon-reload && systemctl --user enable --now vigil
keep it running after you log out:
  loginctl enable-linger "$USER"
follow its log:
  journalctl --user -u vigil -f"""


def store_url_hint(env: Mapping[str, str] | None = None) -> str | None:
    """What to do when the store URL comes from ``VIGIL_STORE_URL``: a user service
    does not inherit the shell's environment, and the unit (world-readable) must not
    carry a password. None when the variable is not set."""
    env = os.environ if env is None else env
    if not env.get(STORE_URL_ENV):
        return None
    return f"""\
the store URL comes from {STORE_URL_ENV}, which the service does not inherit; give it
to the service in a private drop-in (not in the unit, which others may read):
  systemctl --user edit vigil      # add: [Service] Environment={STORE_URL_ENV}=postgresql://…
  chmod 600 ~/.config/systemd/user/vigil.service.d/override.conf"""


def install_unit(settings: Settings, path: Path | None = None) -> tuple[Path, bool]:
    """Write the unit; returns its path and whether the file changed. Raises
    ``OperationError`` when it cannot be written."""
    path = path or unit_path()
    text = unit_text(settings)
    try:
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return path, False
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as err:
        raise OperationError(f"cannot write {path}: {err.strerror}") from None
    return path, True
