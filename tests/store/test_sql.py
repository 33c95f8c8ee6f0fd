"""A statement's rewrite for PostgreSQL (``transaction.dialect``, through
``Sql.postgres``); what statements do is the contract suite's business, on both
backends."""

from __future__ import annotations

import re
from importlib import import_module

from vigil.models import CostGroup
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


def test_every_named_statement_has_a_text_and_postgres_keeps_no_colon_parameter() -> None:
    """Each statement of ``vigil.store.sql`` runs somewhere, and its PostgreSQL text
    names every parameter psycopg's way (a ``:name`` left over would be sent as SQL)."""
    found: dict[str, Sql] = {}
    for concern in ("tasks", "runs", "state", "costs", "retention", "window"):
        module = import_module(f"vigil.store.sql.{concern}")
        for name, value in vars(module).items():
            if isinstance(value, Sql):
                found[f"{concern}.{name}"] = value
    costs = import_module("vigil.store.sql.costs")
    found |= {f"costs.COST_ROLLUP[{g}]": costs.COST_ROLLUP[g] for g in CostGroup}

    assert len(found) > 80
    for name, sql in found.items():
        assert sql.sqlite is not None or sql.postgres is not None, name
        if sql.postgres is not None:
            assert not re.search(r"(?<![:\w]):[a-z_]\w*", sql.postgres.replace("::", "")), name
