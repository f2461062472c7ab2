"""The SQL stores can keep the dedupe marks of recent events in the execution row (``rids``; SQLite's
default) and spill them to ``processed_events`` in batches: every applied event stays a duplicate,
whichever of the two holds it.

Behaviour runs on the four SQL backends (sync and async, SQLite and PostgreSQL); where the rows are
looked at (which table holds which id), on the sync ones, whose connection the test can query.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from durastate.engine.model import Execution
from durastate.errors import EventAlreadyProcessed
from durastate.store import sql as family
from durastate.store.base import ExecutionStore
from durastate.store.sqlite.sync import SqliteStore

from .backends import Backend
from .conftest import MakeStore

SQL_BACKENDS = {"sqlite", "async-sqlite", "postgres", "async-postgres"}
KEEP = family.RECENT_EVENTS


@pytest.fixture
def sql_store(backend: Backend, make_store: MakeStore) -> ExecutionStore:
    """A fresh SQL store keeping the recent ids in the row (PostgreSQL's default is a row per mark)."""
    if backend.name not in SQL_BACKENDS:
        pytest.skip("recent ids in the row are the SQL stores' layout")
    store = make_store()
    inner = getattr(store, "inner", store)  # an async store behind the suite's adapter
    inner = getattr(inner, "sync", inner)  # AsyncSqliteStore runs a SqliteStore
    inner.recent_events = KEEP
    return store


def rows(store: Any, execution_id: str) -> tuple[list[str], list[str]] | None:
    """(the row's recent ids, newest first; the ids in processed_events), or None for an async store."""
    if isinstance(store, SqliteStore):
        cur: Any = store.db.cur
        prefix, param = "", "?"
    elif hasattr(store, "_conn") and hasattr(store, "schema"):
        cur = store._conn.cursor()
        prefix, param = f'"{store.schema}".', "%s"
    else:
        return None
    rids = cur.execute(f"SELECT rids FROM {prefix}executions WHERE id = {param}", (execution_id,)).fetchone()[0]
    marked = [r[0] for r in cur.execute(
        f"SELECT event_id FROM {prefix}processed_events WHERE execution_id = {param} ORDER BY event_id",
        (execution_id,)).fetchall()]
    return family.recent_ids(rids), marked


def apply(store: ExecutionStore, n: int, start: int = 0) -> Execution:
    exe = store.load("x") or Execution(id="x", definition_id="d")
    for i in range(start, start + n):
        exe.context["n"] = i
        store.commit(exe, [], processed_event_id=f"e{i:03d}")
    return exe


def test_every_applied_event_stays_a_duplicate_in_the_row_or_spilled(sql_store: ExecutionStore) -> None:
    n = 2 * KEEP + KEEP // 2
    apply(sql_store, n)
    for i in range(n):
        assert sql_store.is_processed("x", f"e{i:03d}")
        assert sql_store.load_for_event("x", f"e{i:03d}")[1]
    assert not sql_store.is_processed("x", "never")
    exe, seen = sql_store.load_for_event("x", "never")
    assert exe is not None and exe.context["n"] == n - 1 and not seen
    assert sql_store.version_for_event("x", "e000") == (n, True)  # type: ignore[attr-defined]
    assert sql_store.version_for_event("x", "never") == (n, False)  # type: ignore[attr-defined]
    assert sql_store.version_for_event("nobody", "e000") == (None, False)  # type: ignore[attr-defined]
    seen_rows = rows(sql_store, "x")
    if seen_rows is not None:  # two full spills of KEEP ids each, in two multi-row inserts; the rest in the row
        recent, spilled = seen_rows
        assert spilled == [f"e{i:03d}" for i in range(2 * KEEP)]
        assert recent == [f"e{i:03d}" for i in reversed(range(2 * KEEP, n))]


def test_a_checked_commit_refuses_an_event_in_the_row_and_a_spilled_one(sql_store: ExecutionStore) -> None:
    apply(sql_store, KEEP + 3)
    for event_id in ("e001", f"e{KEEP + 2:03d}"):  # spilled; in the row
        exe = sql_store.load("x")
        assert exe is not None
        with pytest.raises(EventAlreadyProcessed):
            sql_store.commit(exe, [], processed_event_id=event_id, check_event=True)  # type: ignore[call-arg]
        assert exe.version == KEEP + 3  # nothing written, the version bump undone
    exe = sql_store.load("x")
    assert exe is not None and exe.version == KEEP + 3
    sql_store.commit(exe, [], processed_event_id="fresh", check_event=True)  # type: ignore[call-arg]
    assert sql_store.is_processed("x", "fresh") and exe.version == KEEP + 4


def test_a_commit_without_an_event_carries_the_recent_ids_over(sql_store: ExecutionStore) -> None:
    exe = apply(sql_store, 3)
    sql_store.save(exe)
    sql_store.commit(exe, [], timers=())  # a control write: no event
    assert all(sql_store.is_processed("x", f"e{i:03d}") for i in range(3))


def test_recent_events_zero_writes_every_mark_to_processed_events(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "seed.db", recent_events=0) as store:
        apply(store, 5)
        assert rows(store, "x") == ([], [f"e{i:03d}" for i in range(5)])
        assert store.is_processed("x", "e004")


def test_a_file_from_before_the_column_keeps_its_marks_and_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    with SqliteStore(path) as store:
        apply(store, 3)
    conn = sqlite3.connect(path)  # make it a schema-2 file: marks in processed_events, no rids column
    conn.execute("INSERT INTO processed_events SELECT 'x', 'old-' || event_id FROM processed_events")
    conn.execute("ALTER TABLE executions DROP COLUMN rids")
    conn.execute("INSERT INTO processed_events VALUES ('x', 'old-mark')")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    with SqliteStore(path) as store:
        assert store.db.cur.execute("PRAGMA user_version").fetchone()[0] == family.SCHEMA_VERSION
        assert store.is_processed("x", "old-mark")  # a mark from before stays valid
        assert not store.is_processed("x", "e000")  # (its rids went with the dropped column)
        exe = store.load("x")
        assert exe is not None
        with pytest.raises(EventAlreadyProcessed):
            store.commit(exe, [], processed_event_id="old-mark", check_event=True)
        apply(store, 2, start=10)
        assert rows(store, "x") == (["e011", "e010"], ["old-mark"])
