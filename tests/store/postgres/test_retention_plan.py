"""Retention on PostgreSQL: an old schema gets the columns on open, and a purge batch reads its index.

The plan check is behaviour a user relies on at scale: a purge batch must walk the partial
``executions_ended`` index (reading the executions it purges), never scan the table; ``bench/growth.py``
measures the rows it reads at 100,000.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg import ClientCursor

from durastate.engine.model import Execution
from durastate.store.postgres.sync import PostgresStore
from durastate.store.retention import PURGEABLE


def test_a_schema_from_before_retention_gets_the_columns(admin: Any, schema: str, dsn: str) -> None:
    admin.execute(f'CREATE SCHEMA "{schema}"')
    admin.execute(f'CREATE TABLE "{schema}".executions (id TEXT NOT NULL, definition_id TEXT NOT NULL, '
                  "version BIGINT NOT NULL, status TEXT NOT NULL, parent_id TEXT, active_path TEXT, "
                  "outcome TEXT, data TEXT NOT NULL, PRIMARY KEY (id))")
    old = Execution(id="old", definition_id="order", status="finished", updated_at=100.0, version=2)
    admin.execute(f'INSERT INTO "{schema}".executions VALUES (%s, %s, 2, %s, NULL, NULL, NULL, %s)',
                  ("old", "order", "finished", old.model_dump_json()))

    store = PostgresStore.from_dsn(dsn)
    try:
        loaded = store.load("old")
        assert loaded is not None and loaded.version == 2
        assert store.purge(1_000.0, now=2_000.0).purged == 0  # no end time recorded before the upgrade
        store.commit(loaded, [], processed_event_id="late")  # touched again
        assert store.purge(1_000.0, now=2_000.0).ids == ("old",)
    finally:
        store.close()


def test_a_purge_batch_walks_the_ended_index(admin: Any, dsn: str) -> None:
    store = PostgresStore.from_dsn(dsn)
    try:
        for i in range(2_000):  # few ended among many running: a table scan would be the planner's
            status = "finished" if i % 20 == 0 else "running"  # temptation if no index served the query
            store.save(Execution(id=f"e{i:05d}", definition_id="order", status=status, updated_at=float(i)))
        admin.execute(f'ANALYZE "{store.schema}".executions')
        select, params = store._sql.purge_select(1_000.0, PURGEABLE, None, 10)
        with ClientCursor(admin) as cur:
            cur.execute("EXPLAIN (FORMAT JSON) " + select, params)
            plan = json.dumps(cur.fetchone()[0])
        assert "executions_ended" in plan and "Seq Scan" not in plan
    finally:
        store.close()
