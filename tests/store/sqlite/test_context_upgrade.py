"""A SQLite file made before the context had a table of its own (schema version 5): its rows hold the whole
execution in ``data``; they read as they are, read-only too, and move a large context to ``contexts`` with
their next commit — also one that says the context is unchanged (``context_unchanged``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from durastate.engine.model import Execution
from durastate.store import sql as family
from durastate.store.sqlite.sync import SqliteStore

LARGE = {f"k{i:04d}": {"note": "x" * 40, "n": i, "nul": "a\x00b"} for i in range(300)}
SMALL = {"count": 3}


def version_5_file(path: Path) -> None:
    """The tables as schema version 5 made them (no ``contexts`` table), holding two executions written
    then: one with a large context, one with a small one, each whole in ``data``."""
    conn = sqlite3.connect(path)
    for stmt in family.create_statements(family.SQLITE, [t for t in family.TABLES if t.name != "contexts"]):
        conn.execute(stmt)
    for eid, context in (("large", LARGE), ("small", SMALL)):
        exe = Execution(id=eid, definition_id="order", active_path="a", context=context, version=2)
        conn.execute(family.statements(family.SQLITE).insert_execution,
                     family.execution_row(exe, exe.model_dump_json()))
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()


def row(store: SqliteStore, eid: str) -> tuple[Any, ...]:
    return tuple(store.db.cur.execute(
        "SELECT e.data, c.context FROM executions e LEFT JOIN contexts c ON c.id = e.id WHERE e.id = ?",
        (eid,)).fetchone())


def test_a_version_5_file_reads_read_only_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    version_5_file(path)
    with SqliteStore(path, read_only=True) as store:
        large = store.load("large")
        assert large is not None and large.context == LARGE and large.version == 2
        small, seen = store.load_for_event("small", "e1")
        assert small is not None and small.context == SMALL and not seen
        assert store.version_for_event("large", "e1") == (2, False)
        tables = {r[0] for r in store.db.cur.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        assert "contexts" not in tables  # nothing created


def test_opening_a_version_5_file_keeps_its_contexts_and_their_next_commit_moves_a_large_one(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    version_5_file(path)
    with SqliteStore(path) as store:
        assert store.db.cur.execute("PRAGMA user_version").fetchone()[0] == family.SCHEMA_VERSION == 6
        for eid, context in (("large", LARGE), ("small", SMALL)):
            exe, seen = store.load_for_event(eid, "e1")
            assert exe is not None and exe.context == context and not seen
            exe.active_path = "b"
            store.commit(exe, [], processed_event_id="e1", context_unchanged=True)  # stored whole: still written
        data, apart = row(store, "large")
        assert '"context"' not in data and apart is not None and family.load_execution(data, apart).context == LARGE
        data, apart = row(store, "small")
        assert apart is None and family.load_execution(data, None).context == SMALL
    with SqliteStore(path) as again:  # a fresh connection: nothing remembered
        for eid, context in (("large", LARGE), ("small", SMALL)):
            exe = again.load(eid)
            assert exe is not None and exe.context == context and exe.active_path == "b" and exe.version == 3
            again.commit(exe, [], processed_event_id="e2", context_unchanged=True)
            assert (reloaded := again.load(eid)) is not None and reloaded.context == context
