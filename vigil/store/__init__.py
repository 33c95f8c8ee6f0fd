"""The task store: the one place Vigil's state lives.

``Store`` (``vigil.store.base``) is what every backend is: each behaviour, async,
with its guarantees on its blocking twin in ``tasks``, ``dispatching`` or ``state``.
``vigil.store.sqlite`` is the embedded default, ``vigil.store.postgres`` the one for
several machines; ``open_store`` opens the one the settings name, ``task_desk`` the
blocking task behaviours for a one-shot command. Every behaviour is a single atomic
unit of work unless its docstring says otherwise: it happens entirely or not at
all, and every state change writes its ``task_events`` row in the same transaction.
How the pieces fit: docs/architecture.md.
"""

from vigil.models import CostGroup
from vigil.store.base import Store
from vigil.store.opening import open_store, task_desk

__all__ = ["CostGroup", "Store", "open_store", "task_desk"]
