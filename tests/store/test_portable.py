"""The portable statements' rewrite for PostgreSQL (``postgres_db.dialect``); what
they do is the contract suite's business, on both backends."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from vigil.store.postgres.db import dialect


def test_parameters_become_psycopg_style_and_casts_and_literals_stay() -> None:
    sql = "SELECT :a, x::bigint, 'b:c', '50%' FROM t WHERE y = :b_c AND z = (:a)"

    assert dialect(sql) == "SELECT %(a)s, x::bigint, 'b:c', '50%%' FROM t WHERE y = %(b_c)s AND z = (%(a)s)"
