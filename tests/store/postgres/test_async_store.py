"""AsyncPostgresStore beyond the conformance suite: the pool, one query per read, real concurrency."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from durastate.engine.model import Event, Execution
from durastate.errors import StoreConflict, StoreUnavailable
from durastate.store.postgres.aio import AsyncPostgresStore

from .conftest import DSN, RoundTrips, psycopg

psycopg_pool = pytest.importorskip("psycopg_pool")


async def test_load_for_event_and_the_fast_commit_are_one_round_trip_each(
    schema: str, tmp_path: Path
) -> None:
    pool = psycopg_pool.AsyncConnectionPool(
        DSN, min_size=1, max_size=1, kwargs={"autocommit": True}, open=False
    )
    await pool.open(wait=True)
    try:
        store = await AsyncPostgresStore.from_pool(pool, schema=schema)
        exe = Execution(definition_id="d")
        await store.commit(exe, [], processed_event_id="e0")
        conn = await pool.getconn()  # the pool's only connection: every operation runs on it
        await pool.putconn(conn)
        with RoundTrips(conn, str(tmp_path / "a")) as reads:
            loaded, seen = await store.load_for_event(exe.id, "e0")
        assert reads.count == 1 and loaded == exe and seen
        with RoundTrips(conn, str(tmp_path / "b")) as writes:
            await store.commit(exe, [], processed_event_id="e1", trace={"s": 1})
        assert writes.count == 1
        await store.close()  # the pool was passed in: it stays open, the caller's to close
        assert not pool.closed
    finally:
        await pool.close()


async def test_many_coroutines_commit_concurrently_and_equal_serial_application(dsn: str) -> None:
    store = await AsyncPostgresStore.from_dsn(dsn, pool_size=4, connect_attempts=1)
    try:
        ids = [f"c{i}" for i in range(3)]
        for eid in ids:
            await store.save(Execution(id=eid, definition_id="d", context={"n": 0}))
        conflicts = 0

        async def bump(eid: str, k: int) -> None:
            nonlocal conflicts
            while True:
                exe, seen = await store.load_for_event(eid, f"e{k}")
                assert exe is not None and not seen
                exe.context["n"] += 1
                try:
                    await store.commit(exe, [], processed_event_id=f"e{k}")
                    return
                except StoreConflict:
                    conflicts += 1

        await asyncio.gather(*(bump(eid, k) for eid in ids for k in range(12)))
        for eid in ids:
            final = await store.load(eid)
            assert final is not None and final.context["n"] == 12 and final.version == 13
    finally:
        await store.close()


async def test_from_dsn_gives_up_with_a_typed_error() -> None:
    with pytest.raises(StoreUnavailable, match=r"after 2 attempt\(s\)"):
        await AsyncPostgresStore.from_dsn(
            "postgresql://u@127.0.0.1:1/db", connect_attempts=2, connect_interval=0
        )


async def test_a_commit_that_fails_midway_restores_the_version_and_writes_nothing(
    dsn: str, schema: str, admin: Any
) -> None:
    store = await AsyncPostgresStore.from_dsn(dsn, pool_size=1, connect_attempts=1)
    try:
        exe = Execution(definition_id="d")
        await store.save(exe)
        # A server-side failure after the CAS succeeded, inside the pipelined batch.
        admin.execute(f"ALTER TABLE \"{schema}\".outbox ADD CONSTRAINT no_bad CHECK (target_id <> 'bad')")
        with pytest.raises(psycopg.errors.CheckViolation):
            await store.commit(
                exe, [("ok", Event(name="x")), ("bad", Event(name="y"))], processed_event_id="e"
            )
        assert exe.version == 1
        stored = await store.load(exe.id)
        assert stored is not None and stored.version == 1
        assert not await store.is_processed(exe.id, "e") and await store.pending_outbox() == []
        await store.commit(exe, [("ok", Event(name="x"))], processed_event_id="e")  # still usable
        assert exe.version == 2
    finally:
        await store.close()


async def test_a_dropped_pooled_connection_is_typed_then_replaced(dsn: str, admin: Any) -> None:
    store = await AsyncPostgresStore.from_dsn(dsn, pool_size=1, connect_attempts=1)
    try:
        exe = Execution(definition_id="d")
        await store.save(exe)
        # The pool's one connection is the backend whose last query named this test's schema.
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND query LIKE %s",
            (f"%{store.schema}%",),
        )
        with pytest.raises(StoreUnavailable, match="pooled"):
            await store.load(exe.id)
        assert await store.load(exe.id) == exe
    finally:
        await store.close()
