"""Retention at scale on every store: 10,000 finished executions among running ones, purged in batches.

Only the finished executions that ended before the cutoff go — all of them, and nothing else — and the
purged ones still recognise their start. The full size runs on the in-memory, SQLite and PostgreSQL
stores; DynamoDB (moto: every request is an emulated HTTP call) holds 400 finished among 40 running, and
the async PostgreSQL twin (the same operations as the sync store, driven through a pool) 1,000 among 100,
to keep the suite's time reasonable.
(What a purge batch *reads* at 100,000 rows is measured in ``bench/growth.py``: the ``purge batch`` row.)
"""

from __future__ import annotations

from typing import Any

from durastate.engine.model import Execution
from durastate.store.base import ExecutionStore
from durastate.store.retention import stamp_ended
from durastate.store.sql import execution_row

from .backends import Backend

CUTOFF = 1_000_000.0
NOW = 2_000_000.0


def sizes(backend: Backend) -> tuple[int, int]:
    """(finished, running) for ``backend``."""
    if "dynamodb" in backend.name:
        return 400, 40
    if backend.name == "async-postgres":
        return 1_000, 100
    return 10_000, 1_000


def fill(store: ExecutionStore, executions: list[Execution]) -> None:
    """Save ``executions`` through the store's own commit path — except on the sync PostgreSQL store, where
    they go as one pipelined batch of the store's own insert statement and row mapping (11,000 single
    commits take a minute on a busy test machine; the rows are the same)."""
    if type(store).__name__ == "PostgresStore":  # (psycopg is an extra: no import here)
        for exe in executions:
            stamp_ended(exe)
            exe.version = 1
        rows = [execution_row(exe, exe.model_dump_json()) for exe in executions]
        pg: Any = store
        with pg._conn.cursor() as cur:
            cur.executemany(pg._sql.stmt.insert_execution, rows)
        return
    for exe in executions:
        store.save(exe)


def count(store: ExecutionStore, status: str) -> int:
    n, cursor = 0, None
    while True:
        page = store.list_executions(status=status, limit=1000, cursor=cursor)
        n += len(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return n


def test_only_the_old_finished_executions_go(store: ExecutionStore, backend: Backend) -> None:
    finished, running = sizes(backend)
    old = set()
    bulk: list[Execution] = []
    for i in range(finished):
        eid = f"f{i:05d}"
        ended = CUTOFF - 1 - i if i % 2 == 0 else CUTOFF + 1 + i  # half before the cutoff, half after
        if ended < CUTOFF:
            old.add(eid)
        exe = Execution(id=eid, definition_id="order", status="finished", outcome="ok", updated_at=ended)
        if i < 20:
            store.commit(exe, [], processed_event_id=f"{eid}:start")
        else:
            bulk.append(exe)
        if i % (finished // running) == 0:
            bulk.append(Execution(id=f"r{i:05d}", definition_id="order", active_path="busy", updated_at=1.0))
    fill(store, bulk)

    purged: list[str] = []
    batches = 0
    while True:
        result = store.purge(CUTOFF, limit=500, now=NOW)
        purged += result.ids
        batches += 1
        if not result.more:
            break

    assert len(purged) == len(set(purged)) and set(purged) == old
    assert batches >= len(old) // 500  # bounded: never more than a batch at a time
    assert count(store, "purged") == len(old)
    assert count(store, "finished") == finished - len(old)
    assert count(store, "running") == running
    for i in range(0, 20, 2):  # purged, with their start marks kept
        tomb, seen = store.load_for_event(f"f{i:05d}", f"f{i:05d}:start")
        assert tomb is not None and tomb.status == "purged" and seen
    assert store.purge(CUTOFF, limit=500, now=NOW).purged == 0
