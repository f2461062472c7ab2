"""SqliteStore's trace tail and remembered rows: the newest trace steps live in the execution row and move
to the ``trace`` table in batches; a commit builds on the row as this store last saw it, and never on a row
another writer (or a rolled-back group) has changed since."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from durastate.engine.model import Execution
from durastate.errors import StoreConflict
from durastate.store import sql as family
from durastate.store.sqlite.sync import SqliteStore


def _table_rows(store: SqliteStore, eid: str) -> int:
    return int(store.db.cur.execute("SELECT count(*) FROM trace WHERE execution_id = ?", (eid,)).fetchone()[0])


def _tail(store: SqliteStore, eid: str) -> str | None:
    row = store.db.cur.execute("SELECT tsteps FROM executions WHERE id = ?", (eid,)).fetchone()
    return None if row is None else row[0]


def test_steps_stay_in_the_row_until_the_tail_is_full_then_move_in_one_batch(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "t.db", trace_max=None) as store:
        exe = Execution(id="e", definition_id="d")
        for n in range(family.TAIL_STEPS):
            store.commit(exe, [], trace={"n": n})
        assert _table_rows(store, "e") == 0  # every step so far is in the row
        assert [i for i, _ in family.tail_rows(_tail(store, "e"))] == list(range(family.TAIL_STEPS))
        store.commit(exe, [], trace={"n": family.TAIL_STEPS})
        assert _table_rows(store, "e") == family.TAIL_STEPS  # the full tail moved; the new step starts it again
        assert family.tail_rows(_tail(store, "e")) == [(family.TAIL_STEPS, f'{{"n":{family.TAIL_STEPS}}}')]
        steps = store.read_trace("e")
        assert [(s["index"], s["n"]) for s in steps] == [(n, n) for n in range(family.TAIL_STEPS + 1)]


def test_large_steps_keep_the_row_within_a_page(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "t.db", trace_max=4) as store:
        exe = Execution(id="e", definition_id="d")
        for n in range(12):
            store.commit(exe, [], trace={"n": n, "pad": "x" * 900})
            tail = _tail(store, "e")
            assert tail is not None and len(tail) <= family.TAIL_CHARS
        assert [s["n"] for s in store.read_trace("e")] == [8, 9, 10, 11]
        assert _table_rows(store, "e") <= 4 + family.TAIL_STEPS  # the table is trimmed when a tail moves


def test_a_step_appended_by_another_writer_is_not_overwritten(tmp_path: Path) -> None:
    """``append_trace`` moves the row's ``tnext`` but not its version: a store that remembers the row from
    its last commit must see that its ``UPDATE`` matched nothing, read the row and build the commit again."""
    path = tmp_path / "t.db"
    with SqliteStore(path) as a, SqliteStore(path) as b:
        exe = Execution(id="e", definition_id="d")
        a.commit(exe, [], trace={"n": 0})
        a.commit(exe, [], trace={"n": 1})
        b.append_trace("e", {"n": "from b"})
        for n in range(2, 2 + 2 * family.TAIL_STEPS):  # past two moves of the tail to the table
            a.commit(exe, [], trace={"n": n})
        assert [(s["index"], s["n"]) for s in b.read_trace("e")] == [
            (0, 0), (1, 1), (2, "from b"), *((n + 1, n) for n in range(2, 2 + 2 * family.TAIL_STEPS))]
        loaded = b.load("e")
        assert loaded is not None and loaded.version == exe.version
        b.commit(loaded, [], processed_event_id="from-b")
        with pytest.raises(StoreConflict):  # a's copy is one version behind: its remembered row is no help
            a.commit(exe, [], trace={"n": 3})


def test_a_rolled_back_group_makes_the_store_read_the_row_again(tmp_path: Path) -> None:
    """A commit in a group that rolls back is forgotten: had the store built its next commit on it, the
    dedupe id another writer stored at that version would be lost."""
    path = tmp_path / "t.db"
    with SqliteStore(path) as a, SqliteStore(path) as b:
        a.commit(Execution(id="e", definition_id="d"), [], processed_event_id="start")
        mine = a.load("e")
        assert mine is not None
        with pytest.raises(RuntimeError), a.db.write():
            a.commit(mine, [], processed_event_id="a-lost", trace={"n": 1})  # version 2, rolled back below
            raise RuntimeError("the round fails")
        theirs = b.load("e")
        assert theirs is not None and theirs.version == 1
        b.commit(theirs, [], processed_event_id="b-kept", trace={"n": 2})  # version 2 again, b's
        again = a.load("e")
        assert again is not None and again.version == 2
        a.commit(again, [], processed_event_id="a-next", trace={"n": 3})
        assert b.is_processed("e", "b-kept") and b.is_processed("e", "a-next") and not b.is_processed("e", "a-lost")
        assert [s["n"] for s in b.read_trace("e")] == [2, 3]


def test_a_file_whose_executions_table_has_no_rowid_keeps_a_trace_row_per_step(tmp_path: Path) -> None:
    """Files made before the tail have ``executions`` ``WITHOUT ROWID``, where a row keeps ~1 KB in its page:
    their steps keep going to the ``trace`` table, one row each, and read back the same."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for stmt in family.create_statements(family.SQLITE):
        if stmt.startswith("CREATE TABLE IF NOT EXISTS executions "):
            stmt += " WITHOUT ROWID"
        conn.execute(stmt)
    conn.commit()
    conn.close()
    with SqliteStore(path, trace_max=3) as store:
        exe = Execution(id="e", definition_id="d")
        for n in range(5):
            store.commit(exe, [], processed_event_id=f"ev{n}", trace={"n": n})
        store.append_trace("e", {"n": 5})
        assert _tail(store, "e") is None
        assert _table_rows(store, "e") == 6  # one row per step (trimmed every TRIM_EVERY steps)
        assert [(s["index"], s["n"]) for s in store.read_trace("e")] == [(3, 3), (4, 4), (5, 5)]
        assert store.is_processed("e", "ev4")


def test_a_new_file_keeps_executions_as_a_rowid_table(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "n.db") as store:
        (ddl,) = store.db.cur.execute("SELECT sql FROM sqlite_schema WHERE name = 'executions'").fetchone()
        assert "WITHOUT ROWID" not in ddl.upper()
        (trace_ddl,) = store.db.cur.execute("SELECT sql FROM sqlite_schema WHERE name = 'trace'").fetchone()
        assert "WITHOUT ROWID" in trace_ddl.upper()


def test_a_file_from_before_the_tail_reads_its_trace_when_opened_read_only(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteStore(path) as store:
        store.append_trace("e", {"n": 0})  # no row: a trace row
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE executions DROP COLUMN tsteps")  # as a file from before the tail has it
    conn.commit()
    conn.close()
    with SqliteStore(path, read_only=True) as old:
        assert old.read_trace("e") == [{"n": 0, "index": 0}]
