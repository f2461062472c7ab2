"""``SqliteStore``: the durable embedded store — one file, no server, several processes may share it.

The SQL family's shape (see :mod:`durastate.store.sql`, shared with ``PostgresStore``): an
``executions`` table holding the execution as JSON (a large context apart, in ``contexts``) plus
broken-out ``definition_id``, ``version``,
``status``, ``parent_id``, ``active_path`` and ``outcome`` columns and the recent dedupe ids (``rids``), and
the ``outbox``, ``processed_events`` (older dedupe marks, written in batches), ``timers``, ``spawns`` and
``trace`` tables.

How it stays correct:

- **One transaction per commit.** ``BEGIN IMMEDIATE`` takes SQLite's write lock up front, so the CAS
  check and every side effect (outbox, dedupe mark, timers, spawns, trace step) land together or not at
  all. Writers in other processes wait for the lock (``busy_timeout``) instead of failing.
- **CAS by version.** An update is ``UPDATE … WHERE id = ? AND version = ?``; zero rows means another
  writer moved the version (or the row vanished) and the commit raises :class:`StoreConflict` after a
  rollback, with the in-memory version bump undone. A first save (version 0) is an
  ``INSERT … ON CONFLICT DO NOTHING``: if the row already exists the insert loses the same way. This is the
  PostgreSQL seed's insert-or-conflict rule with one statement fewer on each path.
- **WAL journal.** Readers never block the writer and the writer never blocks readers; several processes
  on one host can share the file (not a network filesystem: WAL needs shared memory).
- **``synchronous``**: ``NORMAL`` (default) survives any process crash; a power loss or OS crash may roll
  back the last few commits (never corrupting the file, always a consistent prefix). ``FULL`` fsyncs every
  commit and survives power loss too, at the cost of one fsync per event.

Why it is fast: statements are prepared once and reused from the connection's statement cache through a
single cursor; the execution is serialised once per commit and parsed once per load; ``load_for_event`` is
one statement. A commit is one ``UPDATE`` of one row, which writes one page:

- a context over 2 KB lives in the ``contexts`` table, written only when it changed: a commit told it did
  not (``context_unchanged``, :class:`~durastate.store.base.ContextKeepingStore`) neither serialises nor
  writes it (:func:`~durastate.store.sql.context_apart`; SQLite would rewrite a column of the row the
  ``UPDATE`` does not name, overflow pages included);

- the dedupe mark goes into the row's ``rids`` and the trace step into its tail (``tsteps``), both moved to
  their tables in batches of 16 (:func:`~durastate.store.sql.next_recent`,
  :func:`~durastate.store.sql.tail_start`);
- the commit does not read the row under the write lock when this store read or committed it last at the
  version being replaced (:class:`_RowState`): the ``UPDATE … WHERE id = ? AND version = ? AND tnext IS ?``
  proves the row is still that one (a trace step appended by another writer moves ``tnext`` but not the
  version), and when it matches nothing the row is read and the commit built again. What a rolled-back
  transaction wrote is forgotten (``SqliteDatabase.generation``);
- ``executions`` is a rowid table in files made since schema version 4: a ``WITHOUT ROWID`` table keeps only
  ~1 KB of a row in its page, and a row with its tail would go to overflow pages on every commit (files made
  before keep that table, and a ``trace`` row per step).

Threads: a store object owns ONE connection and is meant for one thread at a time. It is still safe to
share (every method takes an internal lock, and the connection is opened with
``check_same_thread=False``), but calls then simply take turns. For parallelism open one store per
process; ``AsyncSqliteStore`` runs this store on a dedicated thread.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durastate.db.sqlite import DEFAULT_BUSY_TIMEOUT, SqliteDatabase, Synchronous
from durastate.engine.model import Event, Execution
from durastate.errors import EventAlreadyProcessed, StoreConflict, StoreUnavailable
from durastate.store import sql as _sql
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Condition,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
    check_conditions,
    normalize_status,
    trim_bound,
)
from durastate.store.retention import (
    DEFAULT_PURGE_LIMIT,
    DEFAULT_TOMBSTONE_TTL,
    PURGEABLE,
    PurgeResult,
    check_purge,
    ended_index_value,
    is_purgeable,
    stamp_ended,
    tombstone,
)

__all__ = ["SqliteStore"]

_SQL = _sql.statements(_sql.SQLITE)
_MARK = "EXISTS (SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?)"


@dataclass(frozen=True, slots=True)
class _Reads:
    """The reads of an execution row, for a file with a ``contexts`` table or (opened read-only, made before
    schema version 6) without one, whose contexts are all in ``data``. Each answers one row whether or not the
    execution exists (params: id, event, id): its state and the event's mark (and its data and context apart)."""

    load: str
    version_for_event: str
    load_for_event: str

    @classmethod
    def of(cls, contexts: bool) -> _Reads:
        state = _sql.row_state("e", contexts)
        context = "(SELECT context FROM contexts c WHERE c.id = e.id)" if contexts else "NULL"
        return cls(_SQL.load if contexts else "SELECT data, NULL FROM executions WHERE id = ?",
                   f"SELECT {state}, {_MARK} FROM (SELECT 1) LEFT JOIN executions e ON e.id = ?",
                   f"SELECT e.data, {state}, {_MARK}, {context} FROM (SELECT 1) LEFT JOIN executions e ON e.id = ?")


_READS = _Reads.of(True)
_UPSERT_CONTEXT = ("INSERT INTO contexts (id, context) VALUES (?, ?) "
                   "ON CONFLICT (id) DO UPDATE SET context = excluded.context")
_DELETE_CONTEXT = "DELETE FROM contexts WHERE id = ?"
_MARKED = "SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?"
_NEXT_TRACE_IDX = "SELECT COALESCE(MAX(idx), -1) + 1 FROM trace WHERE execution_id = ?"
_INSERT_TRACE = "INSERT INTO trace (execution_id, idx, entry) VALUES (?, ?, ?)"
_APPEND_TAIL = "UPDATE executions SET tsteps = tsteps || char(10) || ?, tnext = ? WHERE id = ?"
_SET_TAIL = "UPDATE executions SET tsteps = ?, tnext = ? WHERE id = ?"
# The table's steps and the row's tail (idx NULL, so first) in one statement: one snapshot.
_READ_TRACE = ("SELECT idx, entry FROM (SELECT idx, entry FROM trace WHERE execution_id = ? ORDER BY idx DESC LIMIT ?) "
               "UNION ALL SELECT NULL, tsteps FROM executions WHERE id = ? AND tsteps IS NOT NULL ORDER BY 1")
"""The newest N steps of the ``trace`` table (``LIMIT -1``: all of them) and the row's tail (sorted first),
in one statement, so a commit moving the tail to the table between two reads cannot hide steps."""
_KNOWN_MAX = 4096
"""Rows whose state a store remembers (:class:`_RowState`), the most recently used."""


def _update_sql(full: bool, how: str, unmarked: bool = False) -> str:
    """A commit's ``UPDATE``: every listing column (``full``) or all but the indexed ones; the trace tail
    kept, appended to or set; guarded by the version and ``tnext`` it builds on (``IS``: either may be NULL)
    and, ``unmarked``, by the event having no mark in ``processed_events`` (two more params: id, event) —
    a blind commit's dedupe check folded into its write, one statement fewer per event."""
    sets = ["data = ?", "version = ?"] + (["status = ?"] if full else []) + ["active_path = ?", "outcome = ?"]
    sets += (["ended_at = ?", "expires_at = ?"] if full else []) + ["rids = ?"]
    if how == "append":
        sets += ["tsteps = tsteps || char(10) || ?", "tnext = ?"]
    elif how == "set":
        sets += ["tsteps = ?", "tnext = ?"]
    guard = f" AND NOT {_MARK}" if unmarked else ""
    return f"UPDATE executions SET {', '.join(sets)} WHERE id = ? AND version = ? AND tnext IS ?{guard}"


_UPDATES = {(full, how, unmarked): _update_sql(full, how, unmarked)
            for full in (False, True) for how in ("keep", "append", "set") for unmarked in (False, True)}


@dataclass(slots=True)
class _RowState:
    """What a commit needs to know of an execution row besides ``data`` (:data:`~durastate.store.sql.ROW_STATE`),
    as of ``version``: remembered from the last read or commit of the row on this connection, so that the next
    commit of it needs no read (its ``UPDATE`` checks the version and ``tnext``)."""

    version: int
    status: str
    ended: float | None
    expires: float | None
    rids: str | None
    tnext: int | None
    tfirst: int | None
    tchars: int
    apart: bool
    """Its context is in the ``contexts`` table (:func:`~durastate.store.sql.context_apart`), not in ``data``."""
    checked: str | None
    """An event id known not applied at ``version`` (read with it): its commit skips the mark probe."""
    gen: int
    """``SqliteDatabase.generation`` when it was learned: a rollback since makes it unusable."""

    @classmethod
    def of(cls, row: Sequence[Any], gen: int, checked: str | None) -> _RowState:
        return cls(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] or 0, bool(row[8]), checked, gen)

    def full_for(self, entry: str) -> bool:
        """The tail must move to the table before ``entry`` joins it."""
        return self.tfirst is not None and (
            self.tnext - self.tfirst >= _sql.TAIL_STEPS  # type: ignore[operator]
            or self.tchars + 1 + len(entry) > _sql.TAIL_CHARS)



@dataclass(slots=True)
class _Body:
    """What a commit writes of the execution: ``data`` and the context, serialised once each, and only when
    written (:func:`~durastate.store.sql.context_apart`)."""

    exe: Execution
    unchanged: bool
    """The caller vouches that the context is the one stored at the version replaced (``context_unchanged``)."""
    rest: str | None = None
    context: str | None = None

    def row(self, apart: bool) -> tuple[str, str | None, bool]:
        """(``data``, the context to write to ``contexts`` or ``None``, whether to delete its ``contexts``
        row) for a row whose context is ``apart`` now. An unchanged context apart is left where it is; any
        other is written, apart when it is large (which moves a row stored before this layout too)."""
        if apart and self.unchanged:
            if self.rest is None:
                self.rest = _sql.without_context(self.exe)
            return self.rest, None, False
        if self.rest is None and self.context is None:
            # One serialisation where the whole execution is small (the common case): its context is then
            # small too, and stays in ``data``.
            whole = self.exe.model_dump_json()
            if len(whole) <= _sql.CONTEXT_INLINE_MAX:
                return whole, None, apart
        if self.rest is None:
            self.rest = _sql.without_context(self.exe)
        if self.context is None:
            self.context = _sql.context_text(self.exe)
        if _sql.context_apart(_sql.SQLITE, self.context):
            return self.rest, self.context, False
        return _sql.whole_json(self.rest, self.context), None, apart


class SqliteStore:
    """The SQLite :class:`~durastate.store.ExecutionStore` (see the module docstring)."""

    commit_checks_event = True
    """``commit(..., check_event=True)`` refuses an event already marked (see ``EventCheckingStore``): the
    commit reads the row's version and ``rids`` under the write lock anyway, so the check costs a look at
    ``rids`` and, for an id not there, one indexed read of ``processed_events``."""
    commit_keeps_context = True
    """``commit(..., context_unchanged=True)`` neither serialises nor writes a context kept apart
    (``ContextKeepingStore``; :func:`~durastate.store.sql.context_apart`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        trace_max: int | None = DEFAULT_TRACE_MAX,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: Synchronous = "NORMAL",
        *,
        read_only: bool = False,
        recent_events: int = _sql.RECENT_EVENTS,
        history: bool = False,
    ) -> None:
        """``read_only``: open an existing file for reading only (``load``, listings, the trace); every
        write raises :class:`StoreUnavailable`. Nothing is created, not even the schema. ``history``: keep
        every trace step (``read_history``; see :mod:`durastate.store.base`)."""
        self.trace_max: int | None = trace_max
        self.history = history
        self.recent_events = recent_events
        """Applied event ids kept in the execution row before they spill to ``processed_events``
        (:func:`~durastate.store.sql.next_recent`; 0: every mark written there in its commit)."""
        if recent_events < 0:
            raise ValueError(f"recent_events must be 0 or more, got {recent_events}")
        if read_only and not Path(path).is_file():
            raise StoreUnavailable(f"no SQLite database at {str(path)!r}; check the path (reading does not "
                                   "create one)")
        self.db = SqliteDatabase(path, busy_timeout, synchronous, read_only=read_only)
        self._known: dict[str, _RowState] = {}
        self._tail = False
        """Rows as this store last read or committed them (:class:`_RowState`), the most recent last."""
        self.path = self.db.path
        self._tail_column = True
        """The file has ``executions.tsteps`` (one a newer durastate opened for writing never lacks it)."""
        self._reads = _READS
        if read_only:
            # A file no newer durastate has opened has no tail column: its steps are all in ``trace``.
            self._tail_column = ("executions", "tsteps") not in self._missing_columns()
            # ... and no contexts table: its contexts are all in ``data``.
            with self.db.lock:
                if not self.db.cur.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'contexts'"
                                           ).fetchone():
                    self._reads = _Reads.of(False)
            return
        try:
            self.db.ensure_schema(_sql.create_statements(_sql.SQLITE, _sql.TABLES, self._missing_columns()))
            with self.db.lock:
                version = self.db.cur.execute("PRAGMA user_version").fetchone()[0]
                if version < _sql.SCHEMA_VERSION:
                    self.db.cur.execute(f"PRAGMA user_version = {_sql.SCHEMA_VERSION}")
                elif version > _sql.SCHEMA_VERSION:
                    raise StoreUnavailable(
                        f"SQLite database {str(path)!r} has schema version {version}, newer than this durastate "
                        f"({_sql.SCHEMA_VERSION}); upgrade durastate"
                    )
            (ddl,) = self.db.cur.execute(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'executions'").fetchone()
            self._tail = "WITHOUT ROWID" not in ddl.upper()
            """Trace steps go into the row's tail (:func:`~durastate.store.sql.tail_start`). Not in a file whose
            ``executions`` table was made ``WITHOUT ROWID`` (before schema version 4): a row there keeps only
            ~1 KB in its page, and a tail would push it into overflow pages, so each step gets a ``trace`` row."""
        except BaseException:
            self.db.close()
            raise

    def _missing_columns(self) -> list[tuple[str, str]]:
        """The columns a database made before them lacks (:data:`~durastate.store.sql.ADDED_COLUMNS`):
        the schema's DDL adds them before the indexes that name them."""
        present: dict[str, set[str]] = {}
        with self.db.lock:
            for table in {t for t, _ in _sql.ADDED_COLUMNS}:
                cols = {row[1] for row in self.db.cur.execute(f"PRAGMA table_info({table})").fetchall()}
                if cols:
                    present[table] = cols
        return _sql.missing_columns(_sql.SQLITE, present)

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- executions -----------------------------------------------------------------------------------
    def load(self, execution_id: str) -> Execution | None:
        with self.db.lock:
            row = self.db.cur.execute(self._reads.load, (execution_id,)).fetchone()
        return _sql.load_execution(row[0], row[1]) if row is not None else None

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        with self.db.lock:
            row = self.db.cur.execute(self._reads.load_for_event, (execution_id, event_id, execution_id)).fetchone()
            seen = self._note(execution_id, event_id, row, 1)
        exe = _sql.load_execution(row[0], row[11]) if row[0] is not None else None
        return exe, seen

    def version_for_event(self, execution_id: str, event_id: str) -> tuple[int | None, bool]:
        """The stored version (``None``: no such execution) and whether ``event_id`` was applied: what a
        worker compares its kept copy with before stepping it (one indexed read; the row is not parsed)."""
        with self.db.lock:
            row = self.db.cur.execute(self._reads.version_for_event, (execution_id, event_id, execution_id)).fetchone()
            seen = self._note(execution_id, event_id, row, 0)
        return row[0], seen

    def _note(self, execution_id: str, event_id: str, row: Sequence[Any], at: int) -> bool:
        """Whether ``event_id`` was applied, from a read's row (the row state at ``row[at:]``, then the
        mark); the state is remembered, with the event known *not* applied at that version."""
        seen = _sql.applied(event_id, row[at + 4], row[at + 9])
        if row[at] is not None:
            self._remember(execution_id, _RowState.of(row[at:at + 9], self.db.generation,
                                                       None if seen else event_id))
        return seen

    def _remember(self, execution_id: str, state: _RowState) -> None:
        known = self._known
        known.pop(execution_id, None)
        known[execution_id] = state
        if len(known) > _KNOWN_MAX:
            del known[next(iter(known))]

    def save(self, exe: Execution) -> None:
        self.commit(exe, ())

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
        context_unchanged: bool = False,
    ) -> None:
        """See ``ExecutionStore.commit``; ``check_event`` as in ``EventCheckingStore``; ``context_unchanged``
        as in ``ContextKeepingStore``: a context kept apart is then neither serialised nor written."""
        old = exe.version
        exe.version = new = old + 1
        try:
            if exe.status != "running" or exe.ended_at is not None:
                stamp_ended(exe)
            body = _Body(exe, context_unchanged)
            # A transaction of its own, or a savepoint of the group it runs in (see SqliteDatabase.write).
            with self.db.write() as cur:
                state = self._commit_statements(cur, exe, old, new, body, emits, processed_event_id, timers,
                                                spawns, trace, check_event)
                self._remember(exe.id, state)
        except BaseException:
            exe.version = old
            self._known.pop(exe.id, None)
            raise

    def _commit_statements(
        self,
        cur: sqlite3.Cursor,
        exe: Execution,
        old: int,
        new: int,
        body: _Body,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Iterable[TimerOp],
        spawns: Iterable[Spawn],
        trace: dict[str, Any] | None,
        check_event: bool,
    ) -> _RowState:
        """Every statement of one commit, inside a transaction (or savepoint) the caller opened; returns
        the row's state as written.

        The dedupe mark goes into the row's ``rids`` (:func:`~durastate.store.sql.next_recent`) and the trace
        step into its tail (:func:`~durastate.store.sql.tail_start`); ``processed_events`` and ``trace`` are
        written only when those spill."""
        event_id = processed_event_id
        step = None if trace is None else _sql.json_text(trace)
        entry = step if self._tail else None  # the step for the row's tail
        moved: list[tuple[int, str]] = []
        if old == 0:
            if check_event and event_id is not None and self._marked(cur, exe.id, event_id):
                raise EventAlreadyProcessed(exe.id, event_id, None)
            rids, spilled = _sql.next_recent(None, event_id, self.recent_events)
            tnext = tfirst = tsteps = None
            if entry is not None:
                tfirst = cur.execute(_NEXT_TRACE_IDX, (exe.id,)).fetchone()[0]
                tsteps, tnext = _sql.tail_start(tfirst, entry), tfirst + 1
            data, context, _ = body.row(False)
            cur.execute(_SQL.insert_execution, _sql.execution_row(exe, data, rids, tnext, tsteps))
            if cur.rowcount != 1:
                raise self._conflict(cur, exe.id, old)
            # A contexts row left by an execution deleted outside durastate must not be read with this one.
            cur.execute(_UPSERT_CONTEXT if context is not None else _DELETE_CONTEXT,
                        (exe.id, context) if context is not None else (exe.id,))
            state = _RowState(new, exe.status, ended_index_value(exe), exe.expires_at, rids, tnext, tfirst,
                              len(tsteps) if tsteps else 0, context is not None, None, self.db.generation)
        else:
            state, spilled, moved = self._update(cur, exe, old, new, body, event_id, entry, check_event)
        if spilled:
            cur.executemany(_SQL.insert_processed, [(exe.id, e) for e in spilled])
        if moved:
            self._move_tail(cur, exe.id, moved, state.tnext)
        elif step is not None and entry is None:
            self._insert_step(cur, exe.id, step)
        if emits:
            cur.executemany(
                _SQL.insert_outbox, [(target, event.model_dump_json()) for target, event in emits]
            )
        for op in timers:
            if op.action == "schedule":
                cur.execute(_SQL.upsert_timer, (exe.id, op.path, op.fire_at))
            else:
                cur.execute(_SQL.cancel_timer, (exe.id, op.path))
        for child_id, root_path, seed in spawns:
            cur.execute(_SQL.insert_spawn, (exe.id, child_id, root_path, _sql.json_text(seed)))
        for sql, rows in _sql.search_writes(_sql.SQLITE, _SQL.upsert_search, exe):
            cur.executemany(sql, rows)
        return state

    def _update(self, cur: sqlite3.Cursor, exe: Execution, old: int, new: int, body: _Body, event_id: str | None,
                entry: str | None, check_event: bool) -> tuple[_RowState, list[str], list[tuple[int, str]]]:
        """The commit's ``UPDATE`` of an existing row: (its state as written, the dedupe ids to spill, the
        trace steps to move to the table).

        What the row holds (version, indexed columns, ``rids``, trace tail) comes from the last read or
        commit of it on this connection when that was at version ``old`` (no statement), else from one read
        under the write lock. The ``UPDATE`` names the version and ``tnext`` it builds on, so a remembered
        state that is no longer the row's (another process appended a trace step, which moves ``tnext`` and
        not the version) matches nothing: the row is then read, and the commit built again."""
        state = self._known.get(exe.id)
        if state is not None and (state.version != old or state.gen != self.db.generation):
            state = None
        while True:
            tail: str | None = None
            if state is None or (entry is not None and state.full_for(entry)):
                row = cur.execute(_SQL.commit_read, (exe.id,)).fetchone()
                if row is None or row[0] != old:
                    raise StoreConflict(exe.id, expected=old, found=row[0] if row else None)
                state, tail, read = _RowState.of(row, self.db.generation, None), row[9], True
            else:
                read = False
            unmarked = False  # the UPDATE itself checks the event's mark (a blind commit of a remembered row)
            if check_event and event_id is not None and state.checked != event_id:
                if _sql.applied(event_id, state.rids, False):
                    raise EventAlreadyProcessed(exe.id, event_id, old)  # a redelivery, met by a blind commit
                if read:
                    if self._marked(cur, exe.id, event_id):
                        raise EventAlreadyProcessed(exe.id, event_id, old)
                else:
                    unmarked = True
            rids, spilled = _sql.next_recent(state.rids, event_id, self.recent_events)
            ended = ended_index_value(exe)
            # The status column is indexed: name it (and its retention columns) only when they changed.
            full = not (state.status == exe.status and state.ended == ended and state.expires == exe.expires_at)
            data, context, dropped = body.row(state.apart)
            params: list[Any] = [data, new]
            if full:
                params.append(exe.status)
            params += [exe.active_path, exe.outcome]
            if full:
                params += [ended, exe.expires_at]
            params.append(rids)
            tnext, tfirst, tchars = state.tnext, state.tfirst, state.tchars
            moved: list[tuple[int, str]] = []
            if entry is None:
                how = "keep"
            else:
                idx = tnext if tnext is not None else cur.execute(_NEXT_TRACE_IDX, (exe.id,)).fetchone()[0]
                if tfirst is not None and not state.full_for(entry):
                    how, tchars = "append", tchars + 1 + len(entry)
                    params.append(entry)
                else:  # no tail yet, or a full one (read above): it moves to the table, the step starts anew
                    how, moved = "set", _sql.tail_rows(tail)
                    value = _sql.tail_start(idx, entry)
                    tfirst, tchars = idx, len(value)
                    params.append(value)
                tnext = idx + 1
                params.append(tnext)
            params += [exe.id, old, state.tnext]
            if unmarked:
                params += [exe.id, event_id]
            cur.execute(_UPDATES[full, how, unmarked], params)
            if cur.rowcount == 1:
                if context is not None:
                    cur.execute(_UPSERT_CONTEXT, (exe.id, context))
                elif dropped:
                    cur.execute(_DELETE_CONTEXT, (exe.id,))
                return (_RowState(new, exe.status, ended, exe.expires_at, rids, tnext, tfirst, tchars,
                                  context is not None or (state.apart and not dropped), None, self.db.generation),
                        spilled, moved)
            if read:
                raise self._conflict(cur, exe.id, old)
            state = None  # what was remembered is not the row any more, or the event is marked: read it

    def _move_tail(self, cur: sqlite3.Cursor, execution_id: str, steps: list[tuple[int, str]],
                   tnext: int | None) -> None:
        """Move a full trace tail to the ``trace`` table (one multi-row insert) and trim the ring there."""
        if steps:
            cur.executemany(_INSERT_TRACE, [(execution_id, idx, entry) for idx, entry in steps])
        trace_max = trim_bound(self.trace_max, self.history)
        if trace_max and tnext is not None:
            cur.execute(_SQL.trace_trim, (execution_id, tnext - 1 - trace_max))

    @staticmethod
    def _marked(cur: sqlite3.Cursor, execution_id: str, event_id: str) -> bool:
        return bool(cur.execute(_MARKED, (execution_id, event_id)).fetchone())

    @staticmethod
    def _conflict(cur: sqlite3.Cursor, execution_id: str, old: int) -> StoreConflict:
        row = cur.execute(_SQL.select_version, (execution_id,)).fetchone()
        return StoreConflict(execution_id, expected=old, found=row[0] if row else None)

    # -- dedupe ---------------------------------------------------------------------------------------
    def is_processed(self, execution_id: str, event_id: str) -> bool:
        return self.version_for_event(execution_id, event_id)[1]

    # -- outbox and spawns ----------------------------------------------------------------------------
    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        with self.db.lock:
            rows = self.db.cur.execute(_SQL.pending_outbox, (_sql.SQLITE.limit(limit),)).fetchall()
        return [OutboxEntry(seq, target, Event.model_validate_json(event)) for seq, target, event in rows]

    def ack_outbox(self, seq: int) -> None:
        with self.db.write() as cur:
            cur.execute(_SQL.ack_outbox, (seq,))

    def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        with self.db.lock:
            rows = self.db.cur.execute(_SQL.pending_spawns, (_sql.SQLITE.limit(limit),)).fetchall()
        return [
            SpawnEntry(seq, parent, child, root, json.loads(ctx)) for seq, parent, child, root, ctx in rows
        ]

    def ack_spawn(self, seq: int) -> None:
        with self.db.write() as cur:
            cur.execute(_SQL.ack_spawn, (seq,))

    # -- timers ---------------------------------------------------------------------------------------
    def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        with self.db.lock:
            return [
                (eid, path, fire_at)
                for eid, path, fire_at in self.db.cur.execute(
                    _SQL.due_timers, (_sql.due_timers_floor(since), now)
                ).fetchall()
            ]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        with self.db.write() as cur:
            cur.execute(_SQL.delete_timer, (execution_id, path, fire_at))

    # -- listing --------------------------------------------------------------------------------------
    def list_executions(
        self,
        definition_id: str | None = None,
        status: str | Sequence[str] | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
        *,
        parent_id: str | None = None,
        updated_after: float | None = None,
        updated_before: float | None = None,
        where: Sequence[Condition] = (),
    ) -> ExecutionPage:
        query = _sql.list_query(
            _sql.SQLITE, definition_id, normalize_status(status), roots_only, _sql.cursor_after(cursor), limit,
            parent_id, updated_after, updated_before, check_conditions(where),
        )
        if query is None:
            return ExecutionPage([], None)
        with self.db.lock:
            rows = self.db.cur.execute(query[0], query[1]).fetchall()
        items = [_sql.summary_from_row(r) for r in rows[:limit]]
        return ExecutionPage(items, _sql.next_cursor(items, rows, limit))

    # -- trace ring -----------------------------------------------------------------------------------
    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """A step outside a commit: into the execution row's tail (its version unchanged), or, for an id
        with no row, straight into the ``trace`` table."""
        entry_json = _sql.json_text(entry)
        with self.db.write() as cur:
            self._known.pop(execution_id, None)
            row = cur.execute(_SQL.commit_read, (execution_id,)).fetchone() if self._tail else None
            if row is None:
                self._insert_step(cur, execution_id, entry_json)
                return
            state = _RowState.of(row, self.db.generation, None)
            idx = state.tnext if state.tnext is not None else cur.execute(_NEXT_TRACE_IDX,
                                                                          (execution_id,)).fetchone()[0]
            if state.tfirst is not None and not state.full_for(entry_json):
                cur.execute(_APPEND_TAIL, (entry_json, idx + 1, execution_id))
                return
            cur.execute(_SET_TAIL, (_sql.tail_start(idx, entry_json), idx + 1, execution_id))
            self._move_tail(cur, execution_id, _sql.tail_rows(row[9]), idx + 1)

    def _insert_step(self, cur: sqlite3.Cursor, execution_id: str, entry_json: str) -> None:
        """One step as a ``trace`` row of its own (an execution with no row, or a file without tails);
        the ring trimmed every :data:`~durastate.store.sql.TRIM_EVERY` steps."""
        (idx,) = cur.execute(_SQL.trace_insert, (execution_id, entry_json, execution_id)).fetchone()
        trace_max = trim_bound(self.trace_max, self.history)
        if trace_max and idx >= trace_max and idx % _sql.TRIM_EVERY == 0:
            cur.execute(_SQL.trace_trim, (execution_id, idx - trace_max))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        # A kept history's table holds every step: read only the newest trace_max of it (and the tail).
        newest = self.trace_max if self.history else None
        return _sql.trace_ring(self._trace_rows(execution_id, newest), self.trace_max)

    def read_history(self, execution_id: str) -> list[dict[str, Any]]:
        return _sql.trace_ring(self._trace_rows(execution_id), None)

    def _trace_rows(self, execution_id: str, newest: int | None = None) -> list[tuple[int, str]]:
        """The stored ``(idx, entry)`` steps of an execution, oldest first: the table's (its newest
        ``newest`` only, when given), then the row's tail."""
        with self.db.lock:
            if not self._tail_column:
                return list(self.db.cur.execute(_SQL.read_trace_newest, (execution_id, newest or -1)).fetchall())
            rows = self.db.cur.execute(_READ_TRACE, (execution_id, newest or -1, execution_id)).fetchall()
        if rows and rows[0][0] is None:  # the row's tail (sorted first), then the table's steps
            rows = [*rows[1:], *_sql.tail_rows(rows[0][1])]
        return list(rows)

    # -- retention ------------------------------------------------------------------------------------
    def purge(
        self,
        ended_before: float,
        statuses: Sequence[str] = PURGEABLE,
        definition_id: str | None = None,
        limit: int = DEFAULT_PURGE_LIMIT,
        now: float | None = None,
        tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL,
        *,
        dry_run: bool = False,
    ) -> PurgeResult:
        """One bounded batch in one write transaction (see :mod:`durastate.store.retention`): the SELECT
        runs on the partial ``executions_ended`` index and each conversion is a CAS on the version read."""
        wanted = check_purge(statuses, limit, tombstone_ttl)
        now = time.time() if now is None else now
        select, params = _sql.purge_query(_sql.SQLITE, ended_before, wanted, definition_id, limit)
        if dry_run:
            with self.db.lock:
                rows = self.db.cur.execute(select, params).fetchall()
                gone = self.db.cur.execute(_SQL.expired, (now, limit)).fetchall()
            picked = [r[0] for r in rows[:limit]]
            return PurgeResult(len(picked), len(gone), len(rows) > limit, tuple(picked))
        purged: list[str] = []
        with self.db.write() as cur:
            rows = cur.execute(select, params).fetchall()
            for eid, version, data in rows[:limit]:
                exe = Execution.model_validate_json(data)
                if not is_purgeable(exe, ended_before, wanted, definition_id):
                    continue
                tomb = tombstone(exe, now + tombstone_ttl, now)
                cur.execute(_SQL.tombstone, (tomb.model_dump_json(), tomb.version, tomb.expires_at, eid, version))
                if cur.rowcount == 1:
                    cur.execute(_DELETE_CONTEXT, (eid,))  # the tombstone's data is whole
                    cur.execute(_SQL.delete_trace, (eid,))
                    cur.execute(_SQL.delete_search, (eid,))
                    purged.append(eid)
            gone = [r[0] for r in cur.execute(_SQL.expired, (now, limit + 1)).fetchall()]
            for eid in gone[:limit]:
                cur.execute(_SQL.delete_expired, (eid, now))
                cur.execute(_DELETE_CONTEXT, (eid,))  # (a tombstone has none: its purge deleted it)
                cur.execute(_SQL.delete_marks, (eid,))
                cur.execute(_SQL.delete_trace, (eid,))
                cur.execute(_SQL.delete_search, (eid,))
        return PurgeResult(len(purged), min(len(gone), limit), len(rows) > limit or len(gone) > limit,
                           tuple(purged))

    def close(self) -> None:
        """Close the connection (idempotent). Committed data is in the file; WAL is checkpointed by SQLite."""
        self.db.close()
