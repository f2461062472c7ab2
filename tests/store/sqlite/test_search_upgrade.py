"""A SQLite file made before search fields (schema version 4, no ``search`` table): opening it creates the
index, and an execution stored before is found by its search values from its next commit on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durastate.engine.model import Execution
from durastate.engine.search import Condition
from durastate.store import sql as family
from durastate.store.sqlite.sync import SqliteStore

WHERE = [Condition("customer", "=", "c-17")]


def test_opening_a_version_4_file_adds_the_search_index(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteStore(path) as store:
        store.save(Execution(id="old", definition_id="order", active_path="a", search={"customer": "c-17"}))
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE search")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()

    with SqliteStore(path) as store:
        assert store.db.cur.execute("PRAGMA user_version").fetchone()[0] == family.SCHEMA_VERSION
        assert store.list_executions(where=WHERE).items == []  # indexed by its next commit, not before
        old = store.load("old")
        assert old is not None and old.search == {"customer": "c-17"}
        store.commit(old, [])
        assert [s.id for s in store.list_executions(where=WHERE).items] == ["old"]
