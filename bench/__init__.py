"""Benchmarks: Vigil side by side with its peers and with plain ``sqlite3``.

``python -m bench`` (``make bench``) runs every workload module listed in
``bench.__main__.WORKLOADS``; each is also runnable alone as
``python -m bench.<name>``. A workload module accepts ``--quick`` (small sizes for
a smoke run; figures not meant to be read) and ``--record`` (write its result
tables into docs/performance.md between its ``<!-- bench:<name> -->`` markers).
Shared helpers are in ``bench.harness``. Benchmarks are not part of the test run.
"""
