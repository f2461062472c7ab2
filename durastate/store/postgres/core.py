"""The PostgreSQL store's logic, written once for the sync and the async store.

Every store operation is a *generator* that yields statement requests and receives each one's answer
(or has its error thrown into it): :class:`Query` (one statement as a transaction of its own: its
first row, its rows or nothing — every read and small write), :class:`Execute` (one statement in the
current transaction), :class:`Begin` / :class:`End` (open / commit or roll back a transaction) and
:class:`Pipeline` (a whole transaction sent as one batch). ``PostgresStore`` drives
these generators with a blocking psycopg connection, ``AsyncPostgresStore`` with a pooled async one and
``await``; that is the only difference between them, so their semantics cannot drift apart. Nothing
here does I/O or imports a driver; the SQL text is :class:`~durastate.store.postgres.schema.PgSql`.

The drivers' contract: one operation runs on one connection, inside one lock hold (sync) or one pool
checkout (async). A request that fails is rolled back (quietly: the connection may be gone) before
its error is thrown into the operation, so an operation that handles it can go on using the connection;
an error it does not handle leaves the driver, which types a lost connection as
:class:`~durastate.errors.StoreUnavailable`. A driver that stops early (its connection could not be had,
or it was interrupted) closes the operation, so a commit still restores the version it bumped.

Design choices beyond the PostgreSQL seed, and why:

* **Everything lives in one schema** (``schema=``, default ``public``; ``?schema=NAME`` in a DSN), every
  name qualified. Tests and tenants get their own schema without touching ``search_path`` of a
  connection the caller owns.
* **Summary columns are broken out** of the JSON blob (``status``, ``outcome``, ``active_path``,
  ``parent_id``) and indexed by ``(status, id)`` and ``(definition_id, id)``. Listing never parses
  ``data`` and a page by status is an index range scan: its cost grows with the page, not the table.
  Paging is keyset (``id > last``), not OFFSET, for the same reason and for a stable order under writes.
  ``due_timers`` has an index on ``fire_at`` so a sweep reads only what is due.
* **Connections made by** ``from_dsn`` **run in autocommit** (the sync store's and the async store's
  pool's alike). A read is then one round trip (the ``COMMIT`` that closes every :class:`Query` is a
  no-op on an idle connection: psycopg sends nothing), and the fast-path commit — one
  ``SELECT durastate_commit_cas(…)`` — is a single statement, hence its own transaction: one round trip
  in all (a raw ``UPDATE`` then ``COMMIT`` takes two; a worker's read-then-commit, two). On an injected
  connection that is not in autocommit the same operations are correct; they just pay the ``COMMIT``
  round trip. Reads end their transaction either way, so the next read sees other workers' commits.
* **The fast path also carries the trace step** (``durastate_commit_cas`` takes it and the ring size), so
  a traced state-only step stays one round trip. Emits, spawns and timers take the multi-statement path.
* **The multi-statement path is one pipeline** when the connection supports it (psycopg 3):
  ``BEGIN``, the CAS, every side effect and ``COMMIT`` go out together — one round trip whatever the
  number of emits. Its CAS is the fast path's function again, called with ``p_raise``. To send the
  ``COMMIT`` without waiting for the CAS result, the CAS statement raises
  (SQLSTATE ``HR409``, from the tiny ``durastate_conflict()`` function) when it matches no row: the
  server then skips the rest, the transaction writes nothing, and the operation turns the error into
  :class:`StoreConflict`. (The fast path's function, by contrast, returns false and never raises,
  as the seed specifies: it is one statement, there is nothing after it to skip.)
* **The insert-or-conflict rule** is applied as "a first save (``version == 0``) inserts with
  ``ON CONFLICT DO NOTHING``; any other save updates ``WHERE version = old``; zero rows is a conflict".
  That is the seed's rule (a stored version is never 0) without its race: two concurrent first saves of
  one id cannot both insert, and the loser gets :class:`StoreConflict` rather than a unique violation.
* **A commit can check its event** (``check_event=True``, the ``EventCheckingStore`` protocol that a
  worker's ``keep_committed`` relies on): the commit function checks the mark (in the row's ``rids``,
  else ``processed_events``) before it writes anything — returning false on the fast path, raising HR409
  in the pipeline — so the check costs no round trip. Only a commit that wrote nothing reads back why
  (the winning version, and whether the event was marked: :class:`EventAlreadyProcessed` rather than a
  plain conflict) — the rare path.
* **The context has its own column** (:func:`~durastate.store.sql.context_apart`): a commit told it did not
  change (``context_unchanged``, :class:`~durastate.store.base.ContextKeepingStore`) neither serialises nor
  sends it, and the function's ``UPDATE`` does not name the column, so its TOASTed value stays as it is.
  The store sends it anyway unless it read or wrote that version of the row with its context in the column
  (``PgCore._apart``): a row stored before the column holds it in ``data``, and the function refuses to
  write ``data`` without it over such a row (a conflict: the caller reloads).
* **The trace ring is trimmed every** :data:`~durastate.store.sql.TRIM_EVERY` **steps**, inside the
  statement that appends the step (inside ``durastate_commit_cas``, or :attr:`PgSql.write_trace`'s
  ``DELETE`` in the pipeline), so trimming never costs a statement the client sends, nor a round trip,
  and it deletes one batch per 16 steps rather than a row per step; reads return the newest
  ``trace_max`` steps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from durastate.engine.model import Event, Execution
from durastate.errors import EventAlreadyProcessed
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Condition,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    StoreConflict,
    TimerOp,
    check_conditions,
    normalize_status,
    trim_bound,
)
from durastate.store.postgres.schema import CONFLICT_SQLSTATE, PgSql
from durastate.store.retention import (
    PurgeResult,
    check_purge,
    ended_index_value,
    is_purgeable,
    stamp_ended,
    tombstone,
)
from durastate.store.sql import (
    POSTGRES,
    RECENT_EVENTS,
    applied,
    context_text,
    cursor_after,
    due_timers_floor,
    json_text,
    load_execution,
    missing_columns,
    next_cursor,
    summary_from_row,
    trace_ring,
    without_context,
)

__all__ = ["PG_RECENT_EVENTS", "Begin", "End", "Execute", "Ops", "PgCore", "Pipeline", "Query", "Request",
           "Statement"]

PG_RECENT_EVENTS = RECENT_EVENTS
"""The PostgreSQL store's default ``recent_events``: the recent dedupe ids live in the execution row, as
on SQLite, and spill to ``processed_events`` in one multi-row insert every 16 events. Measured on this
store (``bench.stores``, same run): 94 → 99 % of a raw UPDATE+commit loop on one connection, 66 → 76 % on
eight, against a ``processed_events`` row per event (``recent_events=0``), because a commit runs one
statement fewer and inserts no index entry. It costs WAL instead (``pg_walinspect``: PostgreSQL logs an
updated row without the prefix and suffix it shares with the old one, and ids that change at the row's
end take the JSON's unchanged tail out of that suffix, about +136 B an event on chart 1).
``recent_events=0`` keeps the smaller WAL for a deployment that ships it."""

KNOWN_APART = 4096
"""How many executions a PostgreSQL store remembers as stored with their context apart (``PgCore._apart``)."""

T = TypeVar("T")


# -- requests an operation yields -------------------------------------------------------------------------
# Plain slotted dataclasses, not frozen ones (which cost about a microsecond more to build, on every
# operation); nothing mutates a request once yielded.
@dataclass(slots=True)
class Query:
    """One statement as a transaction of its own: run it, fetch as :class:`Execute` does, then commit
    (free on an autocommit connection; elsewhere it ends the read, so the next sees newer commits)."""

    sql: str
    params: Sequence[Any]
    fetch: Literal["one", "all"] | None = None


@dataclass(slots=True)
class Execute:
    """One statement in the connection's current transaction. The answer: its first row (``fetch="one"``;
    ``None`` if it returned none), all its rows (``"all"``) or ``None``. ``params=None`` sends the text
    as it is (a DDL string may then hold several statements)."""

    sql: str
    params: Sequence[Any] | None = None
    fetch: Literal["one", "all"] | None = None


@dataclass(slots=True)
class Begin:
    """Open a transaction explicitly: ``BEGIN`` on an autocommit connection (one outside autocommit
    opens one at its next statement by itself)."""


@dataclass(slots=True)
class End:
    """End the transaction: ``COMMIT``, or ``ROLLBACK``. Nothing is sent when none is open (an
    autocommit connection after a single statement), so the fast commit's is free there."""

    commit: bool = True


@dataclass(slots=True)
class Statement:
    """One statement of a :class:`Pipeline` and its parameter rows (several: one ``executemany``)."""

    sql: str
    rows: Sequence[Sequence[Any]]


@dataclass(slots=True)
class Pipeline:
    """A whole transaction in one round trip: ``BEGIN``, the statements and ``COMMIT`` sent together in
    a psycopg pipeline (on an autocommit connection; outside autocommit the ``COMMIT`` follows, one
    more round trip; without pipeline support, a statement at a time). A failing statement makes the
    server skip the rest, the transaction writes nothing, and the error is thrown in. Answers ``None``."""

    statements: tuple[Statement, ...]


Request = Query | Execute | Begin | End | Pipeline
Ops = Generator[Request, Any, T]

BEGIN = Begin()
COMMIT = End(commit=True)
ROLLBACK = End(commit=False)


# -- pure helpers -----------------------------------------------------------------------------------------
def is_conflict(exc: BaseException) -> bool:
    """A lost CAS (or a checked event already marked) of the pipelined path: ``durastate_commit_cas`` called
    with ``p_raise`` raises through ``durastate_conflict()``."""
    return getattr(exc, "sqlstate", None) == CONFLICT_SQLSTATE


def lost_commit(
    exe_id: str, old: int, event_id: str | None, check_event: bool, state: Sequence[Any] | None
) -> StoreConflict:
    """The error of a commit that wrote nothing, from ``conflict_state``'s row (``None``: not readable).

    With ``check_event`` a marked event is the likelier cause (a redelivery committed blind), and the
    caller must learn it is a duplicate rather than a race: :class:`EventAlreadyProcessed`.
    """
    found = None if state is None or state[0] is None else int(state[0])
    if check_event and event_id is not None and state is not None and applied(event_id, state[1], state[2]):
        return EventAlreadyProcessed(exe_id, event_id, found)
    return StoreConflict(exe_id, expected=old, found=found)


def trace_params(execution_id: str, entry: dict[str, Any], trace_max: int) -> tuple[Any, ...]:
    """Parameters of :attr:`PgSql.write_trace` (``trace_max``: the trim bound, 0 to keep every step)."""
    n = trace_max
    return (execution_id, json_text(entry), execution_id, execution_id, n, n)


def outbox_entry(row: Sequence[Any]) -> OutboxEntry:
    return OutboxEntry(int(row[0]), row[1], Event.model_validate_json(row[2]))


def spawn_entry(row: Sequence[Any]) -> SpawnEntry:
    return SpawnEntry(int(row[0]), row[1], row[2], row[3], json.loads(row[4]))


# -- the operations ---------------------------------------------------------------------------------------
class PgCore:
    """Every operation of the PostgreSQL store over one schema, as a generator of :data:`Request`.

    The stores subclass it and add a driver (``_run``) and their connection handling.
    """

    commit_checks_event = True
    """``commit(..., check_event=True)`` refuses an event already marked (``EventCheckingStore``): the
    commit function checks the row's ``rids`` and the ``processed_events`` mark before it writes."""
    commit_keeps_context = True
    """``commit(..., context_unchanged=True)`` neither serialises nor writes a context kept apart
    (``ContextKeepingStore``; :func:`~durastate.store.sql.context_apart`)."""

    def __init__(self, schema: str, trace_max: int | None = DEFAULT_TRACE_MAX,
                 recent_events: int = PG_RECENT_EVENTS, history: bool = False) -> None:
        if recent_events < 0:
            raise ValueError(f"recent_events must be 0 or more, got {recent_events}")
        self.schema = schema
        self._sql = PgSql(schema)
        self.trace_max: int | None = trace_max
        self.history = history
        """Keep every trace step (``read_history``; see :mod:`durastate.store.base`)."""
        self.recent_events = recent_events
        """Applied event ids kept in the execution row before they spill to ``processed_events``
        (:func:`~durastate.store.sql.next_recent`; 0: every mark written there in its commit)."""
        self._apart: dict[str, int] = {}
        """Execution id -> a version whose row this store read or wrote with its context in its column, the
        most recent last (at most :data:`KNOWN_APART`): a commit replacing that version may leave the context
        out (``context_unchanged``). A row stored before the column holds it in ``data``: its next commit
        sends it, whatever the caller says, and from then on it is apart."""

    def _note_apart(self, execution_id: str, version: int) -> None:
        apart = self._apart
        apart.pop(execution_id, None)
        apart[execution_id] = version
        if len(apart) > KNOWN_APART:
            del apart[next(iter(apart))]

    def _loaded(self, data: str, context: str | None) -> Execution:
        exe = load_execution(data, context)
        if context is not None:
            self._note_apart(exe.id, exe.version)
        return exe

    def ensure_schema_ops(self) -> Ops[None]:
        """Create the tables, indexes and functions if absent — safe from many processes at once.

        Everything runs in one transaction under a transaction-scoped advisory lock, so workers that
        start together do not collide on ``CREATE SCHEMA`` / ``CREATE OR REPLACE FUNCTION``; a function
        is only replaced when its body differs (a rewrite invalidates other sessions' cached plans).
        """
        sql = self._sql
        yield BEGIN
        yield Execute(sql.lock, (sql.lock_key,))
        present: dict[str, set[str]] = {}
        for table, column in (yield Execute(sql.existing_columns, (self.schema,), "all")):
            present.setdefault(table, set()).add(column)
        # Columns added since: only when missing (an ALTER locks).
        for stmt in sql.ddl(missing_columns(POSTGRES, present)):
            yield Execute(stmt)
        installed = dict((yield Execute(sql.function_source, (self.schema,), "all")))
        for name, (body, ddl) in sql.functions.items():
            if installed.get(name) != body:
                yield Execute(ddl)
        yield COMMIT

    # -- commit -------------------------------------------------------------------------------------------
    def commit_ops(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
        check_event: bool = False,
        context_unchanged: bool = False,
    ) -> Ops[None]:
        """Bump ``exe.version`` and commit it with its side effects; on any failure the bump is undone.

        A state-only commit (no emits, timers or spawns) takes the fast path, anything else the
        pipelined one; a commit that wrote nothing raises :func:`lost_commit`'s error. The context goes to
        its own column (:func:`~durastate.store.sql.context_apart`), serialised and sent only when it may
        have changed (``context_unchanged``: the caller vouches it is the one stored at the version replaced).
        """
        timers, spawns = list(timers), list(spawns)
        old = exe.version
        exe.version = old + 1
        try:
            if exe.status != "running" or exe.ended_at is not None:
                stamp_ended(exe)
            keep = context_unchanged and old != 0 and self._apart.get(exe.id) == old
            data = without_context(exe), None if keep else context_text(exe)
            if not emits and not timers and not spawns and not exe.search:
                ok = yield from self._commit_fast(exe, old, data, processed_event_id, trace, check_event)
            else:
                ok = yield from self._commit_multi(
                    exe, old, data, emits, processed_event_id, timers, spawns, trace, check_event
                )
            state = None if ok else (yield from self._conflict_state(exe.id, processed_event_id))
        except BaseException:
            exe.version = old
            raise
        if not ok:
            exe.version = old
            raise lost_commit(exe.id, old, processed_event_id, check_event, state)
        self._note_apart(exe.id, exe.version)  # every commit leaves the context in its column

    def _commit_fast(
        self,
        exe: Execution,
        old: int,
        data: tuple[str, str | None],
        processed_event_id: str | None,
        trace: dict[str, Any] | None,
        check_event: bool,
    ) -> Ops[bool]:
        """One ``SELECT durastate_commit_cas(…)``: CAS + dedupe (+ check) + trace step, one round trip."""
        row = yield Execute(self._sql.fast_commit,
                            self._cas_params(exe, old, data, processed_event_id, trace, check_event, False), "one")
        ok = bool(row and row[0])
        yield COMMIT if ok else ROLLBACK  # false: the function did not raise, a clean, cheap rollback
        return ok

    def _cas_params(self, exe: Execution, old: int, data: tuple[str, str | None], processed_event_id: str | None,
                    trace: dict[str, Any] | None, check_event: bool, raise_: bool) -> tuple[Any, ...]:
        """``durastate_commit_cas``'s parameters; ``data``: the execution's JSON without its context, and the
        context's (``None``: unchanged, kept as stored); ``raise_``: a lost CAS raises HR409 instead of
        returning false (in a pipeline, so the server skips the rest of the transaction)."""
        return (
            exe.id,
            exe.definition_id,
            data[0],
            old,
            processed_event_id or "",
            exe.status,
            exe.outcome,
            exe.active_path,
            exe.parent_id,
            json_text(trace) if trace is not None else None,
            trim_bound(self.trace_max, self.history),
            check_event,
            self.recent_events,
            raise_,
            ended_index_value(exe),  # retention's columns, computed here: the server never parses ``data``
            exe.expires_at,
            data[1],
        )

    def _commit_multi(
        self,
        exe: Execution,
        old: int,
        data: tuple[str, str | None],
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
        check_event: bool,
    ) -> Ops[bool]:
        """The CAS, every side effect and the search index (:meth:`PgSql.search_writes`) in one
        :class:`Pipeline`; ``False`` if the CAS (or the checked
        mark) raised HR409, any other error goes on up (already rolled back by the driver).

        The CAS, the dedupe mark (``rids``, its spill), the check and the trace step are the fast path's
        function, called with ``p_raise`` so that a lost CAS or a checked event aborts the transaction.
        Side effects keep commit order; it matters only within timers (a cancel and a re-arm of one path
        in one step).
        """
        sql, st = self._sql, self._sql.stmt
        cas = self._cas_params(exe, old, data, processed_event_id, trace, check_event, True)
        batch = [Statement(sql.fast_commit, (cas,))]
        if emits:
            batch.append(Statement(st.insert_outbox, [(t, e.model_dump_json()) for t, e in emits]))
        if spawns:
            rows = [(exe.id, cid, root, json_text(ctx)) for cid, root, ctx in spawns]
            batch.append(Statement(st.insert_spawn, rows))
        for op in timers:
            if op.action == "schedule":
                batch.append(Statement(st.upsert_timer, ((exe.id, op.path, op.fire_at),)))
            else:
                batch.append(Statement(st.cancel_timer, ((exe.id, op.path),)))
        batch += [Statement(query, rows) for query, rows in sql.search_writes(exe)]
        try:
            yield Pipeline(tuple(batch))
        except Exception as exc:
            if not is_conflict(exc):
                raise
            return False
        return True

    def _conflict_state(self, execution_id: str, event_id: str | None) -> Ops[Sequence[Any] | None]:
        """The version that won and whether the event is marked (only on the rare lost-commit path);
        ``None`` if that cannot be read — the commit lost either way."""
        try:
            row = yield Query(self._sql.conflict_state, (execution_id, execution_id, execution_id, event_id or ""),
                              "one")
        except Exception:
            return None
        return tuple(row) if row else None

    # -- reads and small writes: one Query each ---------------------------------------------------------------
    def load_ops(self, execution_id: str) -> Ops[Execution | None]:
        row = yield Query(self._sql.stmt.load, (execution_id,), "one")
        return self._loaded(row[0], row[1]) if row is not None else None

    def load_for_event_ops(self, execution_id: str, event_id: str) -> Ops[tuple[Execution | None, bool]]:
        """The execution and whether ``event_id`` was already applied to it: one query, one round trip."""
        row = yield Query(self._sql.stmt.load_for_event,
                          (execution_id, execution_id, execution_id, event_id, execution_id), "one")
        exe = self._loaded(row[0], row[3]) if row[0] is not None else None
        return exe, applied(event_id, row[1], row[2])

    def version_for_event_ops(self, execution_id: str, event_id: str) -> Ops[tuple[int | None, bool]]:
        """The stored version and whether ``event_id`` was applied (a kept copy's check: no data read)."""
        row = yield Query(self._sql.stmt.version_for_event, (execution_id, execution_id, execution_id, event_id),
                          "one")
        return (None if row[0] is None else int(row[0])), applied(event_id, row[1], row[2])

    def is_processed_ops(self, execution_id: str, event_id: str) -> Ops[bool]:
        _, done = yield from self.version_for_event_ops(execution_id, event_id)
        return done

    def pending_outbox_ops(self, limit: int | None) -> Ops[list[OutboxEntry]]:
        rows = yield Query(self._sql.stmt.pending_outbox, (POSTGRES.limit(limit),), "all")
        return [outbox_entry(r) for r in rows]

    def pending_spawns_ops(self, limit: int | None) -> Ops[list[SpawnEntry]]:
        rows = yield Query(self._sql.stmt.pending_spawns, (POSTGRES.limit(limit),), "all")
        return [spawn_entry(r) for r in rows]

    def ack_outbox_ops(self, seq: int) -> Ops[None]:
        yield Query(self._sql.stmt.ack_outbox, (seq,))

    def ack_spawn_ops(self, seq: int) -> Ops[None]:
        yield Query(self._sql.stmt.ack_spawn, (seq,))

    def due_timers_ops(self, now: float, since: float | None = None) -> Ops[list[tuple[str, str, float]]]:
        rows = yield Query(self._sql.stmt.due_timers, (due_timers_floor(since), now), "all")
        return [(r[0], r[1], float(r[2])) for r in rows]

    def delete_timer_ops(self, execution_id: str, path: str, fire_at: float) -> Ops[None]:
        """Delete only if ``fire_at`` still matches: a timer re-armed since the sweep read it survives."""
        yield Query(self._sql.stmt.delete_timer, (execution_id, path, fire_at))

    def list_ops(
        self,
        definition_id: str | None,
        status: str | Sequence[str] | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
        parent_id: str | None = None,
        updated_after: float | None = None,
        updated_before: float | None = None,
        where: Sequence[Condition] = (),
    ) -> Ops[ExecutionPage]:
        """A keyset page (summary columns only); an empty status list matches nothing without a query."""
        query = self._sql.list_executions(
            definition_id, normalize_status(status), roots_only, cursor_after(cursor), limit, parent_id,
            updated_after, updated_before, check_conditions(where),
        )
        rows = (yield Query(query[0], query[1], "all")) if query else []
        items = [summary_from_row(r) for r in rows[:limit]]
        return ExecutionPage(items, next_cursor(items, rows, limit))

    def read_trace_ops(self, execution_id: str) -> Ops[list[dict[str, Any]]]:
        if self.history and self.trace_max:  # the table holds the whole history: read only the ring's part
            rows = yield Query(self._sql.stmt.read_trace_newest, (execution_id, self.trace_max), "all")
        else:
            rows = yield Query(self._sql.stmt.read_trace, (execution_id,), "all")
        return trace_ring(rows, self.trace_max)

    def read_history_ops(self, execution_id: str) -> Ops[list[dict[str, Any]]]:
        rows = yield Query(self._sql.stmt.read_trace, (execution_id,), "all")
        return trace_ring(rows, None)

    def append_trace_ops(self, execution_id: str, entry: dict[str, Any]) -> Ops[None]:
        yield Query(self._sql.write_trace, trace_params(execution_id, entry,
                                                        trim_bound(self.trace_max, self.history)))

    # -- retention ----------------------------------------------------------------------------------------
    def purge_ops(
        self,
        ended_before: float,
        statuses: Sequence[str],
        definition_id: str | None,
        limit: int,
        now: float | None,
        tombstone_ttl: float,
        dry_run: bool,
    ) -> Ops[PurgeResult]:
        """One bounded batch (see :mod:`durastate.store.retention`) in three statements whatever its size:
        the SELECT on the partial ``executions_ended`` index, every conversion (a CAS per row on the
        version read: under READ COMMITTED a commit that lands first makes its row match nothing, and
        the purge skips it) with the trace deletion, and the expired tombstones' deletion."""
        wanted = check_purge(statuses, limit, tombstone_ttl)
        now = time.time() if now is None else now
        sql, st = self._sql, self._sql.stmt
        select, params = sql.purge_select(ended_before, wanted, definition_id, limit)
        if dry_run:
            rows = yield Query(select, params, "all")
            gone = yield Query(st.expired, (now, limit), "all")
            picked = [r[0] for r in rows[:limit]]
            return PurgeResult(len(picked), len(gone), len(rows) > limit, tuple(picked))
        rows = yield Query(select, params, "all")
        ids: list[str] = []
        olds: list[int] = []
        datas: list[str] = []
        expiries: list[float] = []
        for eid, version, data in rows[:limit]:
            exe = Execution.model_validate_json(data)
            if not is_purgeable(exe, ended_before, wanted, definition_id):
                continue
            tomb = tombstone(exe, now + tombstone_ttl, now)
            ids.append(eid)
            olds.append(int(version))
            datas.append(tomb.model_dump_json())
            expiries.append(now + tombstone_ttl)
        won: set[str] = set()
        if ids:
            won = {r[0] for r in (yield Query(sql.purge_tombstones, (ids, olds, datas, expiries), "all"))}
        gone = yield Query(sql.purge_expired, (now, limit, now), "all")
        purged = tuple(i for i in ids if i in won)
        return PurgeResult(len(purged), len(gone), len(rows) > limit or len(gone) == limit, purged)
