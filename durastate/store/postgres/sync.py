"""``PostgresStore``: the distributed-SQL store — many worker hosts, one PostgreSQL server.

Same shape as the SQLite store (version CAS, transactional outbox, dedupe ledger, durable timers, spawn
outbox, trace ring), over a networked server that several hosts share. The connection is *injected*
(anything with ``cursor()`` / ``commit()`` / ``rollback()``), so psycopg stays an optional extra:
only :meth:`PostgresStore.from_dsn` imports it.

The store's logic — the commit's fast path and pipelined path, the HR409 conflict trick, the event
check, the reads — lives in :mod:`durastate.store.postgres.core` and is shared verbatim with
``AsyncPostgresStore``; this module only *drives* it with blocking calls on one connection (``_run``;
the protocol methods that call it are :class:`~durastate.store.driven.SyncEventChecking`'s). Read the
core's docstring for every choice made beyond the seed design (and why). What is this store's own:

* **A lock serialises the store's own use of its connection** (:class:`~durastate.db.postgres.PgLink`),
  so a runtime that shares one store between threads cannot interleave two transactions on it. One
  operation — a commit and, if it lost, the read of why — holds it throughout.
* **A dropped connection** is :class:`~durastate.errors.StoreUnavailable`; on a store made by
  :meth:`PostgresStore.from_dsn` the next operation reconnects.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, TypeVar

from durastate.db.postgres import (
    DEFAULT_SCHEMA,
    PgLink,
    connect_with_retry,
    is_autocommit,
    split_schema,
)
from durastate.store.base import DEFAULT_TRACE_MAX
from durastate.store.driven import SyncEventChecking
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
from durastate.store.postgres.schema import PgSql

__all__ = ["PgSql", "PostgresStore", "connect_with_retry", "split_schema"]

T = TypeVar("T")


class PostgresStore(PgLink, PgCore, SyncEventChecking):
    """The PostgreSQL :class:`~durastate.store.ExecutionStore` over one (injected) connection."""

    def __init__(
        self,
        conn: Any,
        *,
        schema: str = DEFAULT_SCHEMA,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        create_schema: bool = True,
        recent_events: int = PG_RECENT_EVENTS,
        history: bool = False,
    ) -> None:
        PgLink.__init__(self, conn)
        PgCore.__init__(self, schema, trace_max, recent_events, history)
        if create_schema:
            self.ensure_schema()

    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        connect_attempts: int = 15,
        connect_interval: float = 1.0,
        recent_events: int = PG_RECENT_EVENTS,
        history: bool = False,
    ) -> PostgresStore:
        """Connect (retrying: 15 attempts 1 s apart by default) in autocommit, create the schema.

        ``schema`` may also come from the DSN (``postgresql://…/db?schema=durastate``). If the connection
        drops later, the next operation reconnects (with the same retries).
        """
        dsn, schema = split_schema(dsn, schema)

        def connect() -> Any:
            return connect_with_retry(
                dsn, attempts=connect_attempts, interval=connect_interval, autocommit=True
            )

        store = cls(connect(), schema=schema, trace_max=trace_max, create_schema=False,
                    recent_events=recent_events, history=history)
        store._connect = connect
        store.ensure_schema()
        return store

    # -- the driver: the only place this store differs from the async one -------------------------------
    def _run(self, ops: Ops[T]) -> T:
        try:
            request = next(ops)
        except StopIteration as stop:  # nothing to ask the server (an empty status list)
            result: T = stop.value
            return result
        try:
            with self._cursor() as cur:
                while True:
                    response: Any = None
                    error: Exception | None = None
                    try:
                        response = self._do(cur, request)
                    except Exception as exc:
                        self._rollback()
                        error = exc
                    try:
                        request = ops.send(response) if error is None else ops.throw(error)
                    except StopIteration as stop:
                        result = stop.value
                        return result
        finally:
            ops.close()  # stopped early (no connection, interrupted): a commit undoes its version bump

    def _do(self, cur: Any, request: Request) -> Any:
        conn = self._conn
        if isinstance(request, (Query, Execute)):
            cur.execute(request.sql, request.params)
            rows = None
            if request.fetch == "one":
                rows = cur.fetchone()
            elif request.fetch == "all":
                rows = cur.fetchall()
            if isinstance(request, Query):
                conn.commit()  # ends its transaction: a no-op on an autocommit connection
            return rows
        if isinstance(request, End):
            if request.commit:
                conn.commit()
            else:
                conn.rollback()
        elif isinstance(request, Pipeline):
            explicit = is_autocommit(conn)
            with conn.pipeline() if hasattr(conn, "pipeline") else nullcontext():
                if explicit:
                    cur.execute("BEGIN")
                for st in request.statements:
                    if len(st.rows) == 1:
                        cur.execute(st.sql, st.rows[0])
                    else:
                        cur.executemany(st.sql, st.rows)
                if explicit:
                    cur.execute("COMMIT")
            if not explicit:
                conn.commit()
        elif isinstance(request, Begin) and is_autocommit(conn):
            cur.execute("BEGIN")
        return None

    # -- schema ----------------------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        """Create the tables, indexes and ``durastate_commit_cas`` if absent — safe from many processes
        (one transaction under an advisory lock; see :meth:`PgCore.ensure_schema_ops`)."""
        self._run(self.ensure_schema_ops())
