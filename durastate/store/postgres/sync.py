"""``PostgresStore``: the distributed-SQL store — many worker hosts, one PostgreSQL server.

Same shape as the SQLite store (version CAS, transactional outbox, dedupe ledger, durable timers, spawn
outbox, trace ring), over a networked server that several hosts share. The connection is *injected*
(anything with ``cursor()`` / ``commit()`` / ``rollback()``), so psycopg stays an optional extra:
only :meth:`PostgresStore.from_dsn` imports it.

Design choices beyond the PostgreSQL seed, and why:

* **Everything lives in one schema** (``schema=``, default ``public``; ``?schema=NAME`` in a DSN), every
  name qualified. Tests and tenants get their own schema without touching ``search_path`` of a
  connection the caller owns.
* **Summary columns are broken out** of the JSON blob (``status``, ``outcome``, ``active_path``,
  ``parent_id``) and indexed by ``(status, id)`` and ``(definition_id, id)``. Listing never parses
  ``data`` and a page by status is an index range scan: its cost grows with the page, not the table.
  Paging is keyset (``id > last``), not OFFSET, for the same reason and for a stable order under writes.
  ``due_timers`` has an index on ``fire_at`` so a sweep reads only what is due.
* **Connections made by** ``from_dsn`` **run in autocommit.** A read is then one round trip (the
  ``commit()`` that ends every read is a no-op on an idle connection), and the fast-path commit — one
  ``SELECT durastate_commit_cas(…)`` — is a single statement, hence its own transaction: one round trip in
  all (a raw ``UPDATE`` then ``COMMIT`` takes two; a worker's read-then-commit, two). On an injected
  connection that is not in autocommit the same code is correct; it just pays the ``COMMIT`` round trip.
* **The fast path also carries the trace step** (``durastate_commit_cas`` takes it and the ring size), so a
  traced state-only step stays one round trip. Emits, spawns and timers take the multi-statement path.
* **The multi-statement path is one pipeline** when the connection supports it (psycopg 3):
  ``BEGIN``, the CAS, every side effect and ``COMMIT`` go out together — one round trip whatever the
  number of emits. To send the ``COMMIT`` without waiting for the CAS result, the CAS statement raises
  (SQLSTATE ``HR409``, from the tiny ``durastate_conflict()`` function) when it matches no row: the server
  then skips the rest, the transaction writes nothing, and the store turns the error into
  :class:`StoreConflict`. (The fast path's function, by contrast, returns false and never raises,
  as the seed specifies: it is one statement, there is nothing after it to skip.)
* **The insert-or-conflict rule** is applied as "a first save (``version == 0``) inserts with
  ``ON CONFLICT DO NOTHING``; any other save updates ``WHERE version = old``; zero rows is a conflict".
  That is the seed's rule (a stored version is never 0) without its race: two concurrent first saves of
  one id cannot both insert, and the loser gets :class:`StoreConflict` rather than a unique violation.
* **A lock serialises the store's own use of its connection**, so a runtime that shares one store
  between threads cannot interleave two transactions on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from durastate.db.postgres import (
    DEFAULT_SCHEMA,
    PgLink,
    connect_with_retry,
    is_autocommit,
    quote_ident,
    split_schema,
)
from durastate.engine.model import Event, Execution
from durastate.errors import EventAlreadyProcessed
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    StoreConflict,
    TimerOp,
    normalize_status,
)
from durastate.store.sql import (
    POSTGRES,
    TABLES,
    TRIM_EVERY,
    Statements,
    create_statements,
    cursor_after,
    execution_row,
    json_text,
    list_query,
    next_cursor,
    statements,
    summary_from_row,
    trace_ring,
)

if TYPE_CHECKING:
    pass

__all__ = ["PgSql", "PostgresStore"]

CONFLICT_SQLSTATE = "HR409"
"""The SQLSTATE ``durastate_conflict()`` raises when the multi-statement path's CAS matches no row."""


# -- the SQL of one schema ------------------------------------------------------------------------------
_TABLE_NAMES = tuple(t.name for t in TABLES)
_TABLE_REF = re.compile(r"\b(FROM|INTO|UPDATE|JOIN)\s+(" + "|".join(_TABLE_NAMES) + r")\b")

_FUNCTION_BODY = """
DECLARE
  v_idx bigint;
BEGIN
  IF p_check AND p_event <> '' AND EXISTS (
       SELECT 1 FROM {s}.processed_events WHERE execution_id = p_id AND event_id = p_event) THEN
    RETURN false;  -- check_event: the event was applied before; write nothing
  END IF;
  IF p_old = 0 THEN
    INSERT INTO {s}.executions (id, definition_id, version, status, parent_id, active_path, outcome, data)
    VALUES (p_id, p_definition_id, 1, p_status, p_parent_id, p_active_path, p_outcome, p_data)
    ON CONFLICT (id) DO NOTHING;
  ELSE
    UPDATE {s}.executions
       SET data = p_data, version = p_old + 1, status = p_status, active_path = p_active_path,
           outcome = p_outcome
     WHERE id = p_id AND version = p_old;
  END IF;
  IF NOT FOUND THEN
    RETURN false;  -- a lost CAS: nothing written, the transaction stays clean (no RAISE)
  END IF;
  IF p_event <> '' THEN
    INSERT INTO {s}.processed_events (execution_id, event_id) VALUES (p_id, p_event)
    ON CONFLICT DO NOTHING;
  END IF;
  IF p_trace IS NOT NULL THEN
    INSERT INTO {s}.trace (execution_id, idx, entry)
    SELECT p_id, COALESCE(MAX(t.idx), -1) + 1, p_trace FROM {s}.trace t WHERE t.execution_id = p_id
    RETURNING idx INTO v_idx;
    IF p_trace_max > 0 AND v_idx >= p_trace_max AND v_idx % {trim_every} = 0 THEN  -- see _sql.TRIM_EVERY
      DELETE FROM {s}.trace WHERE execution_id = p_id AND idx <= v_idx - p_trace_max;
    END IF;
  END IF;
  RETURN true;
END
"""


class PgSql:
    """Every statement of the store, qualified with one schema. Shared by the sync and async stores.

    The tables and the statements are the SQL family's (``_sql``: the same schema description and the
    same statement text as the SQLite store), rendered for PostgreSQL and qualified with the schema;
    what only PostgreSQL has (the server-side CAS function, the one-statement trace step, the advisory
    lock) is added here.
    """

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.s = s = quote_ident(schema)
        base = statements(POSTGRES)
        self.stmt = Statements(**{f.name: self.qualify(getattr(base, f.name)) for f in fields(Statements)})
        self.lock_key = f"durastate:{schema}"
        commit_cas = _FUNCTION_BODY.format(s=s, trim_every=TRIM_EVERY)
        conflict = (
            "\nBEGIN\n  RAISE EXCEPTION 'durastate: version conflict' "
            f"USING ERRCODE = '{CONFLICT_SQLSTATE}';\nEND\n"
        )
        # name -> (body, DDL). Bodies are compared with the installed ones to skip a needless
        # CREATE OR REPLACE (it rewrites pg_proc and invalidates other sessions' cached plans).
        self.functions: dict[str, tuple[str, str]] = {
            "durastate_commit_cas": (
                commit_cas,
                # The first statement drops the signature before p_check (one function, no overloads).
                f"DROP FUNCTION IF EXISTS {s}.durastate_commit_cas(text, text, text, bigint, text, text, text, "
                "text, text, text, bigint); "
                f"CREATE OR REPLACE FUNCTION {s}.durastate_commit_cas(p_id text, p_definition_id text, "
                "p_data text, p_old bigint, p_event text, p_status text, p_outcome text, "
                "p_active_path text, p_parent_id text, p_trace text, p_trace_max bigint, p_check boolean) "
                "RETURNS boolean LANGUAGE plpgsql AS $durastate$" + commit_cas + "$durastate$",
            ),
            "durastate_conflict": (
                conflict,
                f"CREATE OR REPLACE FUNCTION {s}.durastate_conflict() RETURNS boolean LANGUAGE plpgsql "
                "VOLATILE AS $durastate$" + conflict + "$durastate$",
            ),
        }
        self.function_source = (
            "SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname IN ('durastate_commit_cas', 'durastate_conflict')"
        )
        self.fast_commit = (
            f"SELECT {s}.durastate_commit_cas(%s::text, %s::text, %s::text, %s::bigint, %s::text, %s::text, "
            "%s::text, %s::text, %s::text, %s::text, %s::bigint, %s::boolean)"
        )
        # The multi-statement path's CAS: the family's insert / guarded update, made to abort the
        # transaction when it matches no row, so that BEGIN, the CAS, the side effects and COMMIT can
        # go out as one pipeline — a lost CAS turns the COMMIT into a rollback of all of it.
        guard = (
            " RETURNING 1) SELECT CASE WHEN EXISTS (SELECT 1 FROM cas) THEN true "
            f"ELSE {s}.durastate_conflict() END"
        )
        self.insert_execution = "WITH cas AS (" + self.stmt.insert_execution + guard
        self.update_execution = "WITH cas AS (" + self.stmt.update_execution + guard
        # check_event's dedupe mark: the same guard, so an event marked before aborts the transaction.
        self.insert_processed_checked = "WITH cas AS (" + self.stmt.insert_processed + guard
        # After a failed commit (the rare path): the winning version and whether the event was marked.
        self.conflict_state = (
            f"SELECT (SELECT version FROM {s}.executions WHERE id = %s), "
            f"EXISTS (SELECT 1 FROM {s}.processed_events WHERE execution_id = %s AND event_id = %s)"
        )
        # Trace step in ONE statement (pipeline-friendly: nothing waits for the new index client-side):
        # the INSERT computes idx; the DELETE, on the statement's snapshot, trims at or below
        # new_idx - trace_max. Params: id, entry, id, id, trace_max, trace_max.
        self.write_trace = (
            f"WITH ins AS (INSERT INTO {s}.trace (execution_id, idx, entry) "
            f"SELECT %s, COALESCE(MAX(t.idx), -1) + 1, %s FROM {s}.trace t WHERE t.execution_id = %s "
            "RETURNING idx) "
            f"DELETE FROM {s}.trace WHERE execution_id = %s AND %s::bigint > 0 "
            f"AND (SELECT idx FROM ins) %% {TRIM_EVERY} = 0 AND idx <= (SELECT idx FROM ins) - %s::bigint"
        )

    def qualify(self, sql: str) -> str:
        """Prefix every table reference of a family statement with this schema."""
        return _TABLE_REF.sub(lambda m: f"{m.group(1)} {self.s}.{m.group(2)}", sql)

    def ddl(self) -> list[str]:
        tables = [replace(t, name=f"{self.s}.{t.name}") for t in TABLES]
        return [f"CREATE SCHEMA IF NOT EXISTS {self.s}", *create_statements(POSTGRES, tables)]

    def list_executions(
        self,
        definition_id: str | None,
        statuses: frozenset[str] | None,
        roots_only: bool,
        after: str | None,
        limit: int,
    ) -> tuple[str, list[Any]] | None:
        """The family's keyset listing (summary columns only, never ``data``), qualified."""
        query = list_query(POSTGRES, definition_id, statuses, roots_only, after, limit)
        return None if query is None else (self.qualify(query[0]), query[1])


# -- pure helpers shared with the async store -----------------------------------------------------------
def fast_params(
    exe: Execution,
    old: int,
    data: str,
    processed_event_id: str | None,
    trace: dict[str, Any] | None,
    trace_max: int | None,
    check_event: bool = False,
) -> tuple[Any, ...]:
    return (
        exe.id,
        exe.definition_id,
        data,
        old,
        processed_event_id or "",
        exe.status,
        exe.outcome,
        exe.active_path,
        exe.parent_id,
        json_text(trace) if trace is not None else None,
        trace_max or 0,
        check_event,
    )


def cas_statement(sql: PgSql, exe: Execution, old: int, data: str) -> tuple[str, tuple[Any, ...]]:
    """The CAS write of the multi-statement path: one statement that aborts the transaction if it lost.

    The insert-or-conflict rule: a first save (``old == 0``) inserts with ``ON CONFLICT DO NOTHING`` —
    a stored version is never 0, so this is the seed's "no row and old == 0 → insert", without the race
    in which two first saves both insert; any other save updates ``WHERE version = old``.
    """
    if old == 0:
        return sql.insert_execution, execution_row(exe, data)
    return sql.update_execution, (data, exe.version, exe.status, exe.active_path, exe.outcome, exe.id, old)


def side_effects(
    sql: PgSql,
    exe_id: str,
    emits: Sequence[Emit],
    processed_event_id: str | None,
    timers: Sequence[TimerOp],
    spawns: Sequence[Spawn],
    trace: dict[str, Any] | None,
    trace_max: int | None,
    check_event: bool = False,
) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """Every side-effect statement of a commit, in commit order, as ``(sql, rows)`` for executemany.

    Order matters only within timers (a cancel and a re-arm of one path in one step), which keep theirs.
    """
    st = sql.stmt
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    if emits:
        out.append((st.insert_outbox, [(t, e.model_dump_json()) for t, e in emits]))
    if processed_event_id is not None:
        mark = sql.insert_processed_checked if check_event else st.insert_processed
        out.append((mark, [(exe_id, processed_event_id)]))
    if spawns:
        out.append((st.insert_spawn, [(exe_id, cid, root, json_text(ctx)) for cid, root, ctx in spawns]))
    for op in timers:
        if op.action == "schedule":
            out.append((st.upsert_timer, [(exe_id, op.path, op.fire_at)]))
        else:
            out.append((st.cancel_timer, [(exe_id, op.path)]))
    if trace is not None:
        out.append((sql.write_trace, [trace_params(exe_id, trace, trace_max)]))
    return out


def trace_params(execution_id: str, entry: dict[str, Any], trace_max: int | None) -> tuple[Any, ...]:
    n = trace_max or 0
    return (execution_id, json_text(entry), execution_id, execution_id, n, n)


def lost_commit(
    exe_id: str, old: int, event_id: str | None, check_event: bool, state: Sequence[Any] | None
) -> StoreConflict:
    """The error of a commit that wrote nothing, from ``conflict_state``'s row (``None``: not readable).

    With ``check_event`` a marked event is the likelier cause (a redelivery committed blind), and the
    caller must learn it is a duplicate rather than a race: :class:`EventAlreadyProcessed`.
    """
    found = None if state is None or state[0] is None else int(state[0])
    if check_event and event_id is not None and state is not None and state[1]:
        return EventAlreadyProcessed(exe_id, event_id, found)
    return StoreConflict(exe_id, expected=old, found=found)


def is_fast(emits: Sequence[Emit], timers: Sequence[TimerOp], spawns: Sequence[Spawn]) -> bool:
    return not emits and not timers and not spawns


def outbox_entry(row: Sequence[Any]) -> OutboxEntry:
    return OutboxEntry(int(row[0]), row[1], Event.model_validate_json(row[2]))


def spawn_entry(row: Sequence[Any]) -> SpawnEntry:
    return SpawnEntry(int(row[0]), row[1], row[2], row[3], json.loads(row[4]))


def page_query(
    sql: PgSql,
    definition_id: str | None,
    status: str | Sequence[str] | None,
    roots_only: bool,
    limit: int,
    cursor: str | None,
) -> tuple[str, list[Any]] | None:
    return sql.list_executions(
        definition_id, normalize_status(status), roots_only, cursor_after(cursor), limit
    )


def make_page(rows: Sequence[Sequence[Any]], limit: int) -> ExecutionPage:
    items = [summary_from_row(r) for r in rows[:limit]]
    return ExecutionPage(items, next_cursor(items, len(rows), limit))


def is_conflict(exc: BaseException) -> bool:
    """A lost CAS of the multi-statement path (raised by ``durastate_conflict()``)."""
    return getattr(exc, "sqlstate", None) == CONFLICT_SQLSTATE


# -- the store ------------------------------------------------------------------------------------------
class PostgresStore(PgLink):
    """The PostgreSQL :class:`~durastate.store.ExecutionStore` over one (injected) connection."""

    commit_checks_event = True
    """``commit(..., check_event=True)`` refuses an event already marked (``EventCheckingStore``): the
    fast path's function checks the mark before its CAS, the pipelined path guards the mark's insert."""

    def __init__(
        self,
        conn: Any,
        *,
        schema: str = DEFAULT_SCHEMA,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        create_schema: bool = True,
    ) -> None:
        super().__init__(conn)
        self.schema = schema
        self._sql = PgSql(schema)
        self.trace_max: int | None = trace_max
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

        store = cls(connect(), schema=schema, trace_max=trace_max, create_schema=False)
        store._connect = connect
        store.ensure_schema()
        return store

    def ensure_schema(self) -> None:
        """Create the tables, indexes and ``durastate_commit_cas`` if absent — safe from many processes.

        Everything runs in one transaction under a transaction-scoped advisory lock, so workers that
        start together do not collide on ``CREATE SCHEMA`` / ``CREATE OR REPLACE FUNCTION``; the
        function is only replaced when its body differs.
        """
        sql = self._sql
        with self._cursor() as cur:
            if is_autocommit(self._conn):
                cur.execute("BEGIN")
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (sql.lock_key,))
            for stmt in sql.ddl():
                cur.execute(stmt)
            cur.execute(sql.function_source, (self.schema,))
            installed = dict(cur.fetchall())
            for name, (body, ddl) in sql.functions.items():
                if installed.get(name) != body:
                    cur.execute(ddl)
            self._conn.commit()

    # -- commit ---------------------------------------------------------------------------------------
    def save(self, exe: Execution) -> None:
        self.commit(exe, [])

    def commit(
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
        try:
            data = exe.model_dump_json()
            if is_fast(emits, timers, spawns):
                ok = self._commit_fast(exe, old, data, processed_event_id, trace, check_event)
            else:
                ok = self._commit_multi(
                    exe, old, data, emits, processed_event_id, timers, spawns, trace, check_event
                )
        except BaseException:
            exe.version = old
            raise
        if not ok:
            exe.version = old
            raise lost_commit(
                exe.id, old, processed_event_id, check_event, self._conflict_state(exe.id, processed_event_id)
            )

    def _commit_fast(
        self,
        exe: Execution,
        old: int,
        data: str,
        processed_event_id: str | None,
        trace: dict[str, Any] | None,
        check_event: bool,
    ) -> bool:
        """One ``SELECT durastate_commit_cas(…)``: CAS + dedupe + trace step in one round trip."""
        with self._cursor() as cur:
            cur.execute(
                self._sql.fast_commit,
                fast_params(exe, old, data, processed_event_id, trace, self.trace_max, check_event),
            )
            row = cur.fetchone()
            ok = bool(row and row[0])
            if ok:
                self._conn.commit()
            else:
                self._conn.rollback()  # the function did not raise: a clean, cheap rollback
            return ok

    def _commit_multi(
        self,
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
        """The CAS and every side effect in one transaction: one pipeline, one round trip.

        ``BEGIN``, the CAS, each side effect and ``COMMIT`` are sent together (on an autocommit
        connection; otherwise the ``COMMIT`` follows). A lost CAS raises inside the transaction
        (SQLSTATE ``HR409`` from ``durastate_conflict()``), so the server skips the rest and nothing is
        written; it is reported as ``False``, any other error is re-raised after the rollback.
        """
        cas_sql, cas_params = cas_statement(self._sql, exe, old, data)
        effects = side_effects(
            self._sql, exe.id, emits, processed_event_id, timers, spawns, trace, self.trace_max, check_event
        )
        with self._cursor() as cur:
            conn = self._conn
            explicit = is_autocommit(conn)
            try:
                with conn.pipeline() if hasattr(conn, "pipeline") else nullcontext():
                    if explicit:
                        cur.execute("BEGIN")
                    cur.execute(cas_sql, cas_params)
                    for stmt, rows in effects:
                        if len(rows) == 1:
                            cur.execute(stmt, rows[0])
                        else:
                            cur.executemany(stmt, rows)
                    if explicit:
                        cur.execute("COMMIT")
            except Exception as exc:
                if not is_conflict(exc):
                    raise
                self._rollback()
                return False
            if not explicit:
                conn.commit()
            return True

    def _conflict_state(self, execution_id: str, event_id: str | None) -> Sequence[Any] | None:
        """The version that won and whether the event is marked (only on the rare lost-commit path)."""
        try:
            with self._cursor() as cur:
                cur.execute(self._sql.conflict_state, (execution_id, execution_id, event_id or ""))
                row = cur.fetchone()
                self._conn.commit()
        except Exception:
            return None
        return tuple(row) if row else None

    # -- reads (each ends its transaction so the next sees other workers' commits) --------------------
    def _fetch(self, stmt: str, params: Sequence[Any] = (), *, one: bool = False) -> Any:
        with self._cursor() as cur:
            cur.execute(stmt, params)
            result = cur.fetchone() if one else cur.fetchall()
            self._conn.commit()
            return result

    def _write(self, stmt: str, params: Sequence[Any]) -> None:
        with self._cursor() as cur:
            cur.execute(stmt, params)
            self._conn.commit()

    def load(self, execution_id: str) -> Execution | None:
        row = self._fetch(self._sql.stmt.load, (execution_id,), one=True)
        return Execution.model_validate_json(row[0]) if row is not None else None

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """The execution and whether ``event_id`` was already applied to it, in one query."""
        row = self._fetch(self._sql.stmt.load_for_event, (execution_id, execution_id, event_id), one=True)
        exe = Execution.model_validate_json(row[0]) if row[0] is not None else None
        return exe, bool(row[1])

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        return self._fetch(self._sql.stmt.is_processed, (execution_id, event_id), one=True) is not None

    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        return [outbox_entry(r) for r in self._fetch(self._sql.stmt.pending_outbox, (POSTGRES.limit(limit),))]

    def ack_outbox(self, seq: int) -> None:
        self._write(self._sql.stmt.ack_outbox, (seq,))

    def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        return [spawn_entry(r) for r in self._fetch(self._sql.stmt.pending_spawns, (POSTGRES.limit(limit),))]

    def ack_spawn(self, seq: int) -> None:
        self._write(self._sql.stmt.ack_spawn, (seq,))

    def due_timers(self, now: float) -> list[tuple[str, str, float]]:
        return [(r[0], r[1], float(r[2])) for r in self._fetch(self._sql.stmt.due_timers, (now,))]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Delete only if ``fire_at`` still matches: a timer re-armed since the sweep read it survives."""
        self._write(self._sql.stmt.delete_timer, (execution_id, path, fire_at))

    def list_executions(
        self,
        definition_id: str | None = None,
        status: str | Sequence[str] | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        query = page_query(self._sql, definition_id, status, roots_only, limit, cursor)
        return make_page(self._fetch(*query) if query else [], limit)

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return trace_ring(self._fetch(self._sql.stmt.read_trace, (execution_id,)), self.trace_max)

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        self._write(self._sql.write_trace, trace_params(execution_id, entry, self.trace_max))
