"""``AsyncPostgresStore``: the PostgreSQL store for asyncio, over a ``psycopg_pool.AsyncConnectionPool``.

The same tables, statements, function and commit paths as :class:`~durastate.store.PostgresStore`
(they come from one place, :class:`~durastate.store.postgres.sync.PgSql`); the difference is concurrency.
Each operation checks one connection out of the pool for exactly one transaction, so many coroutines
have real requests in flight against the server at once — size the pool (``pool_size``) to the
concurrency you want. The sync store, by contrast, serialises everything through its one connection.

The pool is opened explicitly: :meth:`AsyncPostgresStore.from_dsn` builds it closed, waits until the
server answers (15 attempts 1 s apart by default) and then opens it; a pool you pass to
:meth:`from_pool` is yours to open and close. Pool connections run in autocommit, which makes a read
and a fast-path commit one round trip each (see the sync store's docstring).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager, nullcontext
from typing import Any

from durastate.db.postgres import DEFAULT_SCHEMA, conn_lost, is_autocommit, split_schema, unreachable_message
from durastate.engine.model import Execution
from durastate.errors import StoreUnavailable
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from durastate.store.postgres.sync import (
    PgSql,
    cas_statement,
    fast_params,
    is_conflict,
    is_fast,
    lost_commit,
    make_page,
    outbox_entry,
    page_query,
    side_effects,
    spawn_entry,
    trace_params,
)
from durastate.store.sql import POSTGRES, trace_ring

__all__ = ["AsyncPostgresStore"]


class AsyncPostgresStore:
    """The PostgreSQL :class:`~durastate.store.AsyncExecutionStore` over a connection pool."""

    commit_checks_event = True
    """``commit(..., check_event=True)`` refuses an event already marked (see ``PostgresStore``)."""

    def __init__(
        self,
        pool: Any,
        *,
        schema: str = DEFAULT_SCHEMA,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        owns_pool: bool = False,
    ) -> None:
        """Wrap an (open) ``AsyncConnectionPool``; no I/O. Call :meth:`ensure_schema` before use, or
        build the store with :meth:`from_pool` / :meth:`from_dsn`, which do."""
        self._pool = pool
        self.schema = schema
        self._sql = PgSql(schema)
        self.trace_max: int | None = trace_max
        self._owns_pool = owns_pool

    @classmethod
    async def from_pool(
        cls, pool: Any, *, schema: str = DEFAULT_SCHEMA, trace_max: int | None = DEFAULT_TRACE_MAX
    ) -> AsyncPostgresStore:
        """A store over a pool the caller opened (and will close); creates the schema if needed."""
        store = cls(pool, schema=schema, trace_max=trace_max)
        await store.ensure_schema()
        return store

    @classmethod
    async def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        pool_size: int = 10,
        min_size: int = 1,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        connect_attempts: int = 15,
        connect_interval: float = 1.0,
        pool_timeout: float = 30.0,
    ) -> AsyncPostgresStore:
        """Wait for the server (retrying), open a pool of ``min_size``..``pool_size`` autocommit
        connections, create the schema. ``close()`` closes the pool."""
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        dsn, schema = split_schema(dsn, schema)
        last: Exception | None = None
        for attempt in range(max(1, connect_attempts)):
            if attempt:
                await asyncio.sleep(connect_interval)
            try:
                probe = await psycopg.AsyncConnection.connect(dsn)
            except psycopg.OperationalError as exc:
                last = exc
                continue
            await probe.close()
            break
        else:
            msg = unreachable_message(dsn, connect_attempts, connect_interval, last)
            raise StoreUnavailable(msg) from last
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=min(min_size, pool_size),
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=pool_timeout,
            name=f"durastate-{schema}",
        )
        await pool.open(wait=True, timeout=pool_timeout)
        store = cls(pool, schema=schema, trace_max=trace_max, owns_pool=True)
        try:
            await store.ensure_schema()
        except BaseException:
            await pool.close()
            raise
        return store

    # -- plumbing -------------------------------------------------------------------------------------
    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """One pooled connection for one transaction; a pool that cannot serve one, or a connection
        that breaks mid-operation (the pool replaces it), is :class:`StoreUnavailable`."""
        from psycopg import OperationalError
        from psycopg_pool import PoolTimeout

        try:
            async with self._pool.connection() as conn:
                try:
                    yield conn
                except OperationalError as exc:
                    if conn_lost(conn):
                        raise StoreUnavailable(
                            f"lost a pooled PostgreSQL connection ({exc}); the pool replaces it: retry"
                        ) from exc
                    raise
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"no PostgreSQL connection available from the pool ({exc}); the server may be "
                "unreachable or the pool too small for the concurrency (raise pool_size)"
            ) from exc

    async def ensure_schema(self) -> None:
        """Tables, indexes and ``durastate_commit_cas``, idempotently, under a transaction advisory lock."""
        sql = self._sql
        async with self._connection() as conn, conn.cursor() as cur:
            if is_autocommit(conn):
                await cur.execute("BEGIN")
            await cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (sql.lock_key,))
            for stmt in sql.ddl():
                await cur.execute(stmt)
            await cur.execute(sql.function_source, (self.schema,))
            installed = dict(await cur.fetchall())
            for name, (body, ddl) in sql.functions.items():
                if installed.get(name) != body:
                    await cur.execute(ddl)
            await conn.commit()

    async def _fetch(self, stmt: str, params: Sequence[Any] = (), *, one: bool = False) -> Any:
        async with self._connection() as conn, conn.cursor() as cur:
            await cur.execute(stmt, params)
            result = await (cur.fetchone() if one else cur.fetchall())
            await conn.commit()  # ends the read transaction (a no-op on an autocommit connection)
            return result

    async def _write(self, stmt: str, params: Sequence[Any]) -> None:
        async with self._connection() as conn, conn.cursor() as cur:
            await cur.execute(stmt, params)
            await conn.commit()

    # -- commit ---------------------------------------------------------------------------------------
    async def save(self, exe: Execution) -> None:
        await self.commit(exe, [])

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
        *,
        check_event: bool = False,
    ) -> None:
        timers, spawns = list(timers), list(spawns)
        old = exe.version
        exe.version = old + 1
        state: Sequence[Any] | None = None
        try:
            data = exe.model_dump_json()
            async with self._connection() as conn:
                if is_fast(emits, timers, spawns):
                    ok = await self._commit_fast(conn, exe, old, data, processed_event_id, trace, check_event)
                else:
                    ok = await self._commit_multi(
                        conn, exe, old, data, emits, processed_event_id, timers, spawns, trace, check_event
                    )
                if not ok:
                    state = await self._conflict_state(conn, exe.id, processed_event_id)
        except BaseException:
            exe.version = old
            raise
        if not ok:
            exe.version = old
            raise lost_commit(exe.id, old, processed_event_id, check_event, state)

    async def _commit_fast(
        self,
        conn: Any,
        exe: Execution,
        old: int,
        data: str,
        processed_event_id: str | None,
        trace: dict[str, Any] | None,
        check_event: bool,
    ) -> bool:
        """One ``SELECT durastate_commit_cas(…)``; the function returns false on a lost CAS, never raises."""
        async with conn.cursor() as cur:
            await cur.execute(
                self._sql.fast_commit,
                fast_params(exe, old, data, processed_event_id, trace, self.trace_max, check_event),
            )
            row = await cur.fetchone()
        ok = bool(row and row[0])
        await (conn.commit() if ok else conn.rollback())
        return ok

    async def _commit_multi(
        self,
        conn: Any,
        exe: Execution,
        old: int,
        data: str,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
        check_event: bool,
    ) -> bool:
        """CAS + side effects + COMMIT in one pipeline (see the sync store); False on a lost CAS."""
        cas_sql, cas_params = cas_statement(self._sql, exe, old, data)
        effects = side_effects(
            self._sql, exe.id, emits, processed_event_id, timers, spawns, trace, self.trace_max, check_event
        )
        explicit = is_autocommit(conn)
        try:
            pipeline = conn.pipeline() if hasattr(conn, "pipeline") else nullcontext()
            async with conn.cursor() as cur, pipeline:
                if explicit:
                    await cur.execute("BEGIN")
                await cur.execute(cas_sql, cas_params)
                for stmt, rows in effects:
                    if len(rows) == 1:
                        await cur.execute(stmt, rows[0])
                    else:
                        await cur.executemany(stmt, rows)
                if explicit:
                    await cur.execute("COMMIT")
        except Exception as exc:
            await conn.rollback()
            if is_conflict(exc):
                return False
            raise
        if not explicit:
            await conn.commit()
        return True

    async def _conflict_state(
        self, conn: Any, execution_id: str, event_id: str | None
    ) -> Sequence[Any] | None:
        """The version that won and whether the event is marked (the rare lost-commit path)."""
        async with conn.cursor() as cur:
            await cur.execute(self._sql.conflict_state, (execution_id, execution_id, event_id or ""))
            row = await cur.fetchone()
        await conn.commit()
        return tuple(row) if row else None

    # -- reads ----------------------------------------------------------------------------------------
    async def load(self, execution_id: str) -> Execution | None:
        row = await self._fetch(self._sql.stmt.load, (execution_id,), one=True)
        return Execution.model_validate_json(row[0]) if row is not None else None

    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """The execution and whether ``event_id`` was already applied to it — one query, one round trip."""
        row = await self._fetch(
            self._sql.stmt.load_for_event, (execution_id, execution_id, event_id), one=True
        )
        exe = Execution.model_validate_json(row[0]) if row[0] is not None else None
        return exe, bool(row[1])

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        return await self._fetch(self._sql.stmt.is_processed, (execution_id, event_id), one=True) is not None

    async def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        rows = await self._fetch(self._sql.stmt.pending_outbox, (POSTGRES.limit(limit),))
        return [outbox_entry(r) for r in rows]

    async def ack_outbox(self, seq: int) -> None:
        await self._write(self._sql.stmt.ack_outbox, (seq,))

    async def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        rows = await self._fetch(self._sql.stmt.pending_spawns, (POSTGRES.limit(limit),))
        return [spawn_entry(r) for r in rows]

    async def ack_spawn(self, seq: int) -> None:
        await self._write(self._sql.stmt.ack_spawn, (seq,))

    async def due_timers(self, now: float) -> list[tuple[str, str, float]]:
        return [(r[0], r[1], float(r[2])) for r in await self._fetch(self._sql.stmt.due_timers, (now,))]

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        await self._write(self._sql.stmt.delete_timer, (execution_id, path, fire_at))

    async def list_executions(
        self,
        definition_id: str | None = None,
        status: str | Sequence[str] | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        query = page_query(self._sql, definition_id, status, roots_only, limit, cursor)
        return make_page(await self._fetch(*query) if query else [], limit)

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return trace_ring(await self._fetch(self._sql.stmt.read_trace, (execution_id,)), self.trace_max)

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        await self._write(self._sql.write_trace, trace_params(execution_id, entry, self.trace_max))

    async def close(self) -> None:
        """Close the pool if this store opened it (``from_dsn``); a pool you passed in stays yours."""
        if self._owns_pool:
            await self._pool.close()
