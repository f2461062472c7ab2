"""A SQLite file made before retention: opening it adds the columns and indexes, and nothing is lost.

Its ended executions carry no end time, so a purge leaves them alone until they are touched again (an
ignored late event is enough); from then on they are purged like any other.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from durastate.engine.model import Execution
from durastate.store import sql as family
from durastate.store.retention import PURGEABLE
from durastate.store.sqlite.sync import SqliteStore


def version_1_file(path: Path) -> None:
    """The executions table as schema version 1 had it (no ended_at / expires_at, no retention indexes),
    holding one finished execution written then."""
    tables = []
    for t in family.TABLES:
        if t.name == "executions":
            gone = ("ended_at", "expires_at", "rids")
            t = replace(t, columns=tuple(c for c in t.columns if c.name not in gone),
                        indexes=tuple(i for i in t.indexes if i.where is None))
        tables.append(t)
    exe = Execution(id="old", definition_id="order", status="finished", outcome="ok", updated_at=100.0, version=3)
    conn = sqlite3.connect(path)
    for stmt in family.create_statements(family.SQLITE, tables):
        conn.execute(stmt)
    conn.execute("INSERT INTO executions (id, definition_id, version, status, parent_id, active_path, outcome, "
                 "data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ("old", "order", 3, "finished", None, None, "ok",
                                                           exe.model_dump_json()))
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_opening_a_version_1_file_adds_retention(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    version_1_file(path)

    with SqliteStore(path) as store:
        columns = {row[1] for row in store.db.cur.execute("PRAGMA table_info(executions)")}
        assert {"ended_at", "expires_at"} <= columns
        assert store.db.cur.execute("PRAGMA user_version").fetchone()[0] == family.SCHEMA_VERSION
        old = store.load("old")
        assert old is not None and old.status == "finished" and old.version == 3

        assert store.purge(1_000.0, now=2_000.0).purged == 0  # no end time recorded yet
        store.commit(old, [], processed_event_id="late")  # touched again: an ignored late event
        assert old.ended_at == 100.0
        assert store.purge(1_000.0, now=2_000.0).ids == ("old",)

    with SqliteStore(path) as again:  # opening it once more changes nothing
        tomb = again.load("old")
        assert tomb is not None and tomb.status == "purged" and again.is_processed("old", "late")


def test_a_purge_batch_walks_the_ended_index(tmp_path: Path) -> None:
    """Read what it purges: the batch's SELECT is a search of the partial ``executions_ended`` index."""
    with SqliteStore(tmp_path / "plan.db") as store:
        select, params = family.purge_query(family.SQLITE, 1_000.0, PURGEABLE, None, 500)
        plan = " ".join(str(row[3]) for row in store.db.cur.execute("EXPLAIN QUERY PLAN " + select, params))
        assert "USING INDEX executions_ended (ended_at<?)" in plan and "SCAN executions" not in plan
        expired = " ".join(str(r[3]) for r in store.db.cur.execute("EXPLAIN QUERY PLAN " + store_sql().expired,
                                                                   (1.0, 10)))
        assert "executions_expires" in expired


def store_sql() -> family.Statements:
    return family.statements(family.SQLITE)
