"""``SqliteStore``: the durable embedded store — one file, no server, several processes may share it.

The SQL family's shape (see :mod:`durastate.store.sql`, shared with ``PostgresStore``): an
``executions`` table holding the execution as JSON plus broken-out ``definition_id``, ``version``,
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
single cursor; the execution is serialised exactly once per commit (``model_dump_json``) and parsed once per
load; ``load_for_event`` is one statement; the trace ring's index is computed inside the INSERT.

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
from pathlib import Path
from typing import Any

from durastate.db.sqlite import DEFAULT_BUSY_TIMEOUT, SqliteDatabase, Synchronous
from durastate.engine.model import Event, Execution
from durastate.errors import EventAlreadyProcessed, StoreConflict, StoreUnavailable
from durastate.store import sql as _sql
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
    normalize_status,
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


class SqliteStore:
    """The SQLite :class:`~durastate.store.ExecutionStore` (see the module docstring)."""

    commit_checks_event = True
    """``commit(..., check_event=True)`` refuses an event already marked (see ``EventCheckingStore``): the
    commit reads the row's version and ``rids`` under the write lock anyway, so the check costs a look at
    ``rids`` and, for an id not there, one indexed read of ``processed_events``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        trace_max: int | None = DEFAULT_TRACE_MAX,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: Synchronous = "NORMAL",
        *,
        read_only: bool = False,
        recent_events: int = _sql.RECENT_EVENTS,
    ) -> None:
        """``read_only``: open an existing file for reading only (``load``, listings, the trace); every
        write raises :class:`StoreUnavailable`. Nothing is created, not even the schema."""
        self.trace_max: int | None = trace_max
        self.recent_events = recent_events
        """Applied event ids kept in the execution row before they spill to ``processed_events``
        (:func:`~durastate.store.sql.next_recent`; 0: every mark written there in its commit)."""
        if recent_events < 0:
            raise ValueError(f"recent_events must be 0 or more, got {recent_events}")
        if read_only and not Path(path).is_file():
            raise StoreUnavailable(f"no SQLite database at {str(path)!r}; check the path (reading does not "
                                   "create one)")
        self.db = SqliteDatabase(path, busy_timeout, synchronous, read_only=read_only)
        self.path = self.db.path
        if read_only:
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
        return _sql.missing_columns(present)

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- executions -----------------------------------------------------------------------------------
    def load(self, execution_id: str) -> Execution | None:
        with self.db.lock:
            row = self.db.cur.execute(_SQL.load, (execution_id,)).fetchone()
        return Execution.model_validate_json(row[0]) if row is not None else None

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        with self.db.lock:
            data, rids, marked = self.db.cur.execute(
                _SQL.load_for_event, (execution_id, execution_id, execution_id, event_id)
            ).fetchone()
        exe = Execution.model_validate_json(data) if data is not None else None
        return exe, _sql.applied(event_id, rids, marked)

    def version_for_event(self, execution_id: str, event_id: str) -> tuple[int | None, bool]:
        """The stored version (``None``: no such execution) and whether ``event_id`` was applied: what a
        worker compares its kept copy with before stepping it (one indexed read; the row is not parsed)."""
        with self.db.lock:
            version, rids, marked = self.db.cur.execute(
                _SQL.version_for_event, (execution_id, execution_id, execution_id, event_id)
            ).fetchone()
        return version, _sql.applied(event_id, rids, marked)

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
    ) -> None:
        old = exe.version
        exe.version = new = old + 1
        try:
            if exe.status != "running" or exe.ended_at is not None:
                stamp_ended(exe)
            data = exe.model_dump_json()
            # A transaction of its own, or a savepoint of the group it runs in (see SqliteDatabase.write).
            with self.db.write() as cur:
                self._commit_statements(cur, exe, old, new, data, emits, processed_event_id, timers, spawns,
                                        trace, check_event)
        except BaseException:
            exe.version = old
            raise

    def _commit_statements(
        self,
        cur: sqlite3.Cursor,
        exe: Execution,
        old: int,
        new: int,
        data: str,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Iterable[TimerOp],
        spawns: Iterable[Spawn],
        trace: dict[str, Any] | None,
        check_event: bool,
    ) -> None:
        """Every statement of one commit, inside a transaction (or savepoint) the caller opened.

        The dedupe mark goes into the row's ``rids`` (:func:`~durastate.store.sql.next_recent`), read with the
        version under the write lock; ``processed_events`` is written only when ``rids`` spills."""
        event_id = processed_event_id
        if old == 0:
            if check_event and event_id is not None and self._marked(cur, exe.id, event_id):
                raise EventAlreadyProcessed(exe.id, event_id, None)
            rids, spilled = _sql.next_recent(None, event_id, self.recent_events)
            cur.execute(_SQL.insert_execution, _sql.execution_row(exe, data, rids))
            if cur.rowcount != 1:
                raise self._conflict(cur, exe.id, old)
        else:
            row = cur.execute(_SQL.commit_read, (exe.id,)).fetchone()
            if row is None or row[0] != old:
                raise StoreConflict(exe.id, expected=old, found=row[0] if row else None)
            if check_event and event_id is not None and (
                    _sql.applied(event_id, row[4], False) or self._marked(cur, exe.id, event_id)):
                raise EventAlreadyProcessed(exe.id, event_id, old)  # a redelivery, met by a blind commit
            rids, spilled = _sql.next_recent(row[4], event_id, self.recent_events)
            ended = ended_index_value(exe)
            # The status column is indexed: name it (and its retention columns) only when they changed.
            if row[1] == exe.status and row[2] == ended and row[3] == exe.expires_at:
                cur.execute(_SQL.update_keep_status, (data, new, exe.active_path, exe.outcome, rids, exe.id, old))
            else:
                cur.execute(_SQL.update_execution, (data, new, exe.status, exe.active_path, exe.outcome, ended,
                                                    exe.expires_at, rids, exe.id, old))
        if spilled:
            cur.executemany(_SQL.insert_processed, [(exe.id, e) for e in spilled])
        if emits:
            cur.executemany(
                _SQL.insert_outbox, [(target, event.model_dump_json()) for target, event in emits]
            )
        for op in timers:
            if op.action == "schedule":
                cur.execute(_SQL.upsert_timer, (exe.id, op.path, op.fire_at))
            else:
                cur.execute(_SQL.cancel_timer, (exe.id, op.path))
        for child_id, root_path, context in spawns:
            cur.execute(_SQL.insert_spawn, (exe.id, child_id, root_path, _sql.json_text(context)))
        if trace is not None:
            self._write_trace(cur, exe.id, trace)

    @staticmethod
    def _marked(cur: sqlite3.Cursor, execution_id: str, event_id: str) -> bool:
        return bool(cur.execute(_SQL.version_for_event, (execution_id, execution_id, execution_id, event_id))
                    .fetchone()[2])

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
    ) -> ExecutionPage:
        query = _sql.list_query(
            _sql.SQLITE, definition_id, normalize_status(status), roots_only, _sql.cursor_after(cursor), limit,
            parent_id, updated_after, updated_before,
        )
        if query is None:
            return ExecutionPage([], None)
        with self.db.lock:
            rows = self.db.cur.execute(query[0], query[1]).fetchall()
        items = [_sql.summary_from_row(r) for r in rows[:limit]]
        return ExecutionPage(items, _sql.next_cursor(items, len(rows), limit))

    # -- trace ring -----------------------------------------------------------------------------------
    def _write_trace(self, cur: sqlite3.Cursor, execution_id: str, entry: dict[str, Any]) -> None:
        entry_json = _sql.json_text(entry)
        (idx,) = cur.execute(_SQL.trace_insert, (execution_id, entry_json, execution_id)).fetchone()
        trace_max = self.trace_max
        if trace_max and idx >= trace_max and idx % _sql.TRIM_EVERY == 0:
            cur.execute(_SQL.trace_trim, (execution_id, idx - trace_max))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        with self.db.write() as cur:
            self._write_trace(cur, execution_id, entry)

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        with self.db.lock:
            rows = self.db.cur.execute(_SQL.read_trace, (execution_id,)).fetchall()
        return _sql.trace_ring(rows, self.trace_max)

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
                    cur.execute(_SQL.delete_trace, (eid,))
                    purged.append(eid)
            gone = [r[0] for r in cur.execute(_SQL.expired, (now, limit + 1)).fetchall()]
            for eid in gone[:limit]:
                cur.execute(_SQL.delete_expired, (eid, now))
                cur.execute(_SQL.delete_marks, (eid,))
                cur.execute(_SQL.delete_trace, (eid,))
        return PurgeResult(len(purged), min(len(gone), limit), len(rows) > limit or len(gone) > limit,
                           tuple(purged))

    def close(self) -> None:
        """Close the connection (idempotent). Committed data is in the file; WAL is checkpointed by SQLite."""
        self.db.close()
