"""A ``where`` listing on SQLite is read from the search index, not from a scan of the executions: the plan
of the store's own listing statement, for an equality, an equality with a range, and ranges alone (what
bench/results/search.md measures at 100,000 executions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from durastate.engine.model import Execution
from durastate.engine.search import check_conditions
from durastate.store import sql
from durastate.store.sqlite.sync import SqliteStore


@pytest.mark.parametrize("where, index", [
    ([("customer", "=", "c-17")], "search_text"),
    ([("customer", "=", "c-17"), ("total", ">", 100)], "search_text"),
    ([("total", ">=", 10)], "search_number"),
    ([("total", ">=", 10), ("total", "<", 20)], "search_number"),
])
def test_a_where_listing_reads_the_search_index(tmp_path: Path, where: list[tuple[str, str, object]],
                                                index: str) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        for n in range(50):
            exe = Execution(id=f"e{n:03d}", definition_id="cart", active_path="open",
                            search={"customer": f"c-{n % 20}", "total": n * 5})
            store.commit(exe, [])
        conditions = check_conditions(where)
        assert store.list_executions(where=conditions).items  # it answers
        query = sql.list_query(sql.SQLITE, None, None, False, None, 100, where=conditions)
        assert query is not None
        plan = [row[3] for row in store.db.cur.execute("EXPLAIN QUERY PLAN " + query[0], query[1]).fetchall()]
    assert any(f"SEARCH s USING COVERING INDEX {index}" in step for step in plan), plan
    assert not any(step.startswith("SCAN") for step in plan), plan  # no table read whole
