"""A statement's rewrite for PostgreSQL (``transaction.dialect``, through
``Sql.postgres``); what statements do is the contract suite's business, on both
backends."""

from __future__ import annotations

from vigil.store.transaction import Sql, dialect


def test_parameters_become_psycopg_style_and_casts_and_literals_stay() -> None:
    sql = "SELECT :a, x::bigint, 'b:c', '50%' FROM t WHERE y = :b_c AND z = (:a)"

    assert dialect(sql) == "SELECT %(a)s, x::bigint, 'b:c', '50%%' FROM t WHERE y = %(b_c)s AND z = (%(a)s)"


def test_a_statement_has_each_backends_text_and_none_where_it_has_nothing_to_run() -> None:
    both = Sql("SELECT :a")
    side_by_side = Sql(sqlite="SELECT 1", postgres="SELECT :a::int")
    sqlite_only = Sql(sqlite="SELECT 1", postgres=None)

    assert (both.sqlite, both.postgres) == ("SELECT :a", "SELECT %(a)s")
    assert (side_by_side.sqlite, side_by_side.postgres) == ("SELECT 1", "SELECT %(a)s::int")
    assert sqlite_only.postgres is None
