"""The ``multiprocessing`` context of the multi-process tests: a fork server.

Each test process is still a separate OS process that opens its own store, as a
separate host would. Spawning one runs a new interpreter that imports pytest, the
test module and the store again (0.3 to 0.7 s of CPU per process here, for tests
that start twenty at a time); the fork server imports the worker modules once and
forks each process from that clean, single-threaded interpreter, which holds no
connection or event loop that a child could inherit.

The preload list is process-wide, so it is set here once, for every test module.
"""

from __future__ import annotations

import multiprocessing

PROCESSES = multiprocessing.get_context("forkserver")
PROCESSES.set_forkserver_preload(
    [
        "tests.store.workers",
        "tests.store.postgres_workers",
        "tests.guard.workers",
        "vigil.store.sqlite",
        "vigil.store.postgres",
    ]
)
