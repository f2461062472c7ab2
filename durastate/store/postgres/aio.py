"""``AsyncPostgresStore``: the PostgreSQL store for asyncio, over a ``psycopg_pool.AsyncConnectionPool``.

The same tables, statements, function and commit paths as :class:`~durastate.store.PostgresStore`:
the logic is :mod:`durastate.store.postgres.core`, shared verbatim with the sync store, and this module
only drives it with ``await`` (``_run``; the protocol methods that call it are
:class:`~durastate.store.driven.AsyncEventChecking`'s). Read the core's docstring for the design. The
difference is concurrency. Each operation checks one connection out of the pool for its whole run (one
transaction; a lost commit's read of why goes on the same connection), so many coroutines have real
requests in flight against the server at once — size the pool (``pool_size``) to the concurrency you
want. The sync store, by contrast, serialises everything through its one connection.

The pool is opened explicitly: :meth:`AsyncPostgresStore.from_dsn` builds it closed, waits until the
server answers (15 attempts 1 s apart by default) and then opens it; a pool you pass to
:meth:`from_pool` is yours to open and close. Pool connections run in autocommit, which makes a read
and a fast-path commit one round trip each.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext, suppress
from typing import Any, TypeVar

from durastate.db.postgres import (
    DEFAULT_SCHEMA,
    conn_lost,
    is_autocommit,
    nul_safe,
    split_schema,
    unreachable_message,
)
from durastate.errors import StoreUnavailable
from durastate.store.base import DEFAULT_TRACE_MAX
from durastate.store.driven import AsyncEventChecking
from durastate.store.postgres.core import (
    PG_RECENT_EVENTS,
    Begin,
    End,
    Execute,
    Ops,
    PgCore,
    Pipeline,
    Query,
    Request,
)

__all__ = ["AsyncPostgresStore"]

T = TypeVar("T")


class AsyncPostgresStore(PgCore, AsyncEventChecking):
    """The PostgreSQL :class:`~durastate.store.AsyncExecutionStore` over a connection pool."""

    def __init__(
        self,
        pool: Any,
        *,
        schema: str = DEFAULT_SCHEMA,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        owns_pool: bool = False,
        recent_events: int = PG_RECENT_EVENTS,
        history: bool = False,
    ) -> None:
        """Wrap an (open) ``AsyncConnectionPool``; no I/O. Call :meth:`ensure_schema` before use, or
        build the store with :meth:`from_pool` / :meth:`from_dsn`, which do."""
        super().__init__(schema, trace_max, recent_events, history)
        self._pool = pool
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
        history: bool = False,
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
            configure=_configure,
        )
        await pool.open(wait=True, timeout=pool_timeout)
        store = cls(pool, schema=schema, trace_max=trace_max, owns_pool=True, history=history)
        try:
            await store.ensure_schema()
        except BaseException:
            await pool.close()
            raise
        return store

    # -- plumbing -------------------------------------------------------------------------------------
    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """One pooled connection for one operation; a pool that cannot serve one, or a connection
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

    # -- the driver: the only place this store differs from the sync one -------------------------------
    async def _run(self, ops: Ops[T]) -> T:
        try:
            request = next(ops)
        except StopIteration as stop:  # nothing to ask the server (an empty status list)
            result: T = stop.value
            return result
        try:
            async with self._connection() as conn, conn.cursor() as cur:
                while True:
                    response: Any = None
                    error: Exception | None = None
                    try:
                        response = await self._do(conn, cur, request)
                    except Exception as exc:
                        with suppress(Exception):  # the connection may be gone; the pool then drops it
                            await conn.rollback()
                        error = exc
                    try:
                        request = ops.send(response) if error is None else ops.throw(error)
                    except StopIteration as stop:
                        result = stop.value
                        return result
        finally:
            ops.close()  # stopped early (no connection, cancelled): a commit undoes its version bump

    @staticmethod
    async def _do(conn: Any, cur: Any, request: Request) -> Any:
        if isinstance(request, (Query, Execute)):
            await cur.execute(request.sql, request.params)
            rows = None
            if request.fetch == "one":
                rows = await cur.fetchone()
            elif request.fetch == "all":
                rows = await cur.fetchall()
            if isinstance(request, Query):
                await conn.commit()  # ends its transaction: a no-op on an autocommit connection
            return rows
        if isinstance(request, End):
            await (conn.commit() if request.commit else conn.rollback())
        elif isinstance(request, Pipeline):
            explicit = is_autocommit(conn)
            async with conn.pipeline() if hasattr(conn, "pipeline") else nullcontext():
                if explicit:
                    await cur.execute("BEGIN")
                for st in request.statements:
                    if len(st.rows) == 1:
                        await cur.execute(st.sql, st.rows[0])
                    else:
                        await cur.executemany(st.sql, st.rows)
                if explicit:
                    await cur.execute("COMMIT")
            if not explicit:
                await conn.commit()
        elif isinstance(request, Begin) and is_autocommit(conn):
            await cur.execute("BEGIN")
        return None

    # -- schema ----------------------------------------------------------------------------------------
    async def ensure_schema(self) -> None:
        """Tables, indexes and ``durastate_commit_cas``, idempotently, under a transaction advisory lock."""
        await self._run(self.ensure_schema_ops())

    async def close(self) -> None:
        """Close the pool if this store opened it (``from_dsn``); a pool you passed in stays yours."""
        if self._owns_pool:
            await self._pool.close()


async def _configure(conn: Any) -> None:
    """Each pooled connection sends a NUL in a text parameter as the lookup of an id no store holds
    (:func:`durastate.db.postgres.nul_safe`), not as ``psycopg.DataError``."""
    nul_safe(conn)
