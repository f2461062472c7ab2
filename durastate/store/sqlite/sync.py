"""``SqliteStore``: the durable embedded store — one file, no server, several processes may share it.

The SQL family's shape (see :mod:`durastate.store.sql`, shared with ``PostgresStore``): an
``executions`` table holding the execution as JSON plus broken-out ``definition_id``, ``version``,
``status``, ``parent_id``, ``active_path`` and ``outcome`` columns, and the ``outbox``,
``processed_events``, ``timers``, ``spawns`` and ``trace`` tables.

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

__all__ = ["SqliteStore"]

_SQL = _sql.statements(_sql.SQLITE)


class SqliteStore:
    """The SQLite :class:`~durastate.store.ExecutionStore` (see the module docstring)."""

    commit_checks_event = True
    """``commit(..., check_event=True)`` refuses an event already marked (see ``EventCheckingStore``):
    the dedupe mark's ``INSERT … ON CONFLICT DO NOTHING`` says whether it inserted, inside the commit's
    transaction."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        trace_max: int | None = DEFAULT_TRACE_MAX,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: Synchronous = "NORMAL",
        *,
        read_only: bool = False,
    ) -> None:
        """``read_only``: open an existing file for reading only (``load``, listings, the trace); every
        write raises :class:`StoreUnavailable`. Nothing is created, not even the schema."""
        self.trace_max: int | None = trace_max
        if read_only and not Path(path).is_file():
            raise StoreUnavailable(f"no SQLite database at {str(path)!r}; check the path (reading does not "
                                   "create one)")
        self.db = SqliteDatabase(path, busy_timeout, synchronous, read_only=read_only)
        self.path = self.db.path
        if read_only:
            return
        try:
            self.db.ensure_schema(_sql.create_statements(_sql.SQLITE))
            with self.db.lock:
                version = self.db.cur.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    self.db.cur.execute(f"PRAGMA user_version = {_sql.SCHEMA_VERSION}")
                elif version > _sql.SCHEMA_VERSION:
                    raise StoreUnavailable(
                        f"SQLite database {str(path)!r} has schema version {version}, newer than this durastate "
                        f"({_sql.SCHEMA_VERSION}); upgrade durastate"
                    )
        except BaseException:
            self.db.close()
            raise

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
            data, done = self.db.cur.execute(
                _SQL.load_for_event, (execution_id, execution_id, event_id)
            ).fetchone()
        return (Execution.model_validate_json(data) if data is not None else None), bool(done)

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
        """Every statement of one commit, inside a transaction (or savepoint) the caller opened."""
        if old == 0:
            cur.execute(_SQL.insert_execution, _sql.execution_row(exe, data))
            if cur.rowcount != 1:
                raise self._conflict(cur, exe.id, old)
        else:
            # The status column is indexed: touch it only when it changed (see _sql).
            row = cur.execute(
                _SQL.update_keep_status, (data, new, exe.active_path, exe.outcome, exe.id, old)
            ).fetchone()
            if row is None:
                raise self._conflict(cur, exe.id, old)
            if row[0] != exe.status:
                cur.execute(_SQL.update_status, (exe.status, exe.id))
        if emits:
            cur.executemany(
                _SQL.insert_outbox, [(target, event.model_dump_json()) for target, event in emits]
            )
        if processed_event_id is not None:
            cur.execute(_SQL.insert_processed, (exe.id, processed_event_id))
            if check_event and cur.rowcount != 1:  # already marked: a redelivery
                raise EventAlreadyProcessed(exe.id, processed_event_id, old)
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
    def _conflict(cur: sqlite3.Cursor, execution_id: str, old: int) -> StoreConflict:
        row = cur.execute(_SQL.select_version, (execution_id,)).fetchone()
        return StoreConflict(execution_id, expected=old, found=row[0] if row else None)

    # -- dedupe ---------------------------------------------------------------------------------------
    def is_processed(self, execution_id: str, event_id: str) -> bool:
        with self.db.lock:
            return self.db.cur.execute(_SQL.is_processed, (execution_id, event_id)).fetchone() is not None

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
    def due_timers(self, now: float) -> list[tuple[str, str, float]]:
        with self.db.lock:
            return [
                (eid, path, fire_at)
                for eid, path, fire_at in self.db.cur.execute(_SQL.due_timers, (now,)).fetchall()
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
    ) -> ExecutionPage:
        query = _sql.list_query(
            _sql.SQLITE, definition_id, normalize_status(status), roots_only, _sql.cursor_after(cursor), limit
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

    def close(self) -> None:
        """Close the connection (idempotent). Committed data is in the file; WAL is checkpointed by SQLite."""
        self.db.close()
