"""Who a dispatcher is: its host name and its worker id ``<host>:<pid>:<random>``.

The worker id is written on every claim (``claimed_by``) and on its run. Crash
recovery reads it back to tell a run of this machine (whose pid it can check) from
a run of another machine (which it can only judge by the task's lease).

``VIGIL_HOST`` names this machine instead of its host name: set it where machines
that share one store have the same host name (cloned containers, pods), or two
machines would take each other's pids for their own.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

HOST_ENV = "VIGIL_HOST"


def this_host() -> str:
    """This machine's name in worker ids: ``VIGIL_HOST`` if set, else the host name."""
    return os.environ.get(HOST_ENV, "").strip() or socket.gethostname()


def new_worker_id() -> str:
    """``<host>:<pid>:<random>``: unique per dispatcher process start."""
    return f"{this_host()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class Worker:
    """A parsed worker id. ``pid`` None: the id does not follow the format."""

    host: str
    pid: int | None

    @property
    def local(self) -> bool:
        """Whether the worker ran on this machine (so its pid means something here)."""
        return self.pid is not None and self.host == this_host()


def parse_worker_id(worker_id: str) -> Worker:
    """Split ``<host>:<pid>:<random>``. A host name may itself hold colons (an IPv6
    address), so the pid is the second field from the right."""
    host, sep, _random = worker_id.rpartition(":")
    host, sep2, pid_text = host.rpartition(":")
    if not (sep and sep2) or not pid_text.isdigit():
        return Worker(host=worker_id, pid=None)
    return Worker(host=host, pid=int(pid_text))
