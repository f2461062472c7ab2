"""``AsyncSqliteStore``: the async twin of ``SqliteStore`` — the same file format, the same semantics.

Why a thread and not a native async driver: :mod:`sqlite3` is synchronous, and SQLite admits one writer
at a time anyway, so there is nothing to gain from concurrent statements on one file. The store therefore
runs the sync core (:class:`~durastate.store.sqlite.sync.SqliteStore`) on ONE dedicated worker thread:
every call is handed to it and awaited, so the event loop never blocks on disk I/O or on another
process's write lock, and the connection is only ever used from that thread (calls queue up in order).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from durastate.db.sqlite import DEFAULT_BUSY_TIMEOUT, Synchronous
from durastate.engine.model import Execution
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Condition,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from durastate.store.retention import DEFAULT_PURGE_LIMIT, DEFAULT_TOMBSTONE_TTL, PURGEABLE, PurgeResult
from durastate.store.sql import RECENT_EVENTS
from durastate.store.sqlite.sync import SqliteStore

__all__ = ["AsyncSqliteStore"]

P = ParamSpec("P")
R = TypeVar("R")


class AsyncSqliteStore:
    """The SQLite :class:`~durastate.store.AsyncExecutionStore`; ``await store.close()`` when done."""

    commit_checks_event = True
    """``commit(..., check_event=True)`` refuses an event already marked (see ``SqliteStore``)."""
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
        recent_events: int = RECENT_EVENTS,
        history: bool = False,
    ) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="durastate-sqlite")
        try:
            # Opened on the worker thread too, so every use of the connection happens there.
            opening = self._executor.submit(SqliteStore, path, trace_max, busy_timeout, synchronous,
                                            recent_events=recent_events, history=history)
            self.sync = opening.result()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        self.path = self.sync.path
        self._closed = False

    @property
    def trace_max(self) -> int | None:
        return self.sync.trace_max

    @trace_max.setter
    def trace_max(self, value: int | None) -> None:
        self.sync.trace_max = value

    @property
    def history(self) -> bool:
        return self.sync.history

    @history.setter
    def history(self, value: bool) -> None:
        self.sync.history = value

    async def _run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def __aenter__(self) -> AsyncSqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def load(self, execution_id: str) -> Execution | None:
        return await self._run(self.sync.load, execution_id)

    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        return await self._run(self.sync.load_for_event, execution_id, event_id)

    async def version_for_event(self, execution_id: str, event_id: str) -> tuple[int | None, bool]:
        return await self._run(self.sync.version_for_event, execution_id, event_id)

    async def save(self, exe: Execution) -> None:
        await self._run(self.sync.commit, exe, ())

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
        context_unchanged: bool = False,
    ) -> None:
        """See :meth:`SqliteStore.commit`; ``check_event`` as in ``EventCheckingStore``, ``context_unchanged``
        as in ``ContextKeepingStore``."""
        # Materialise the iterables here: a generator must not be consumed on another thread while the
        # caller's code keeps running.
        await self._run(
            self.sync.commit,
            exe,
            list(emits),
            processed_event_id,
            list(timers),
            list(spawns),
            trace,
            check_event=check_event,
            context_unchanged=context_unchanged,
        )

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        return await self._run(self.sync.is_processed, execution_id, event_id)

    async def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        return await self._run(self.sync.pending_outbox, limit)

    async def ack_outbox(self, seq: int) -> None:
        await self._run(self.sync.ack_outbox, seq)

    async def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        return await self._run(self.sync.pending_spawns, limit)

    async def ack_spawn(self, seq: int) -> None:
        await self._run(self.sync.ack_spawn, seq)

    async def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        return await self._run(self.sync.due_timers, now, since)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        await self._run(self.sync.delete_timer, execution_id, path, fire_at)

    async def list_executions(
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
        return await self._run(self.sync.list_executions, definition_id, status, roots_only, limit, cursor,
                               parent_id=parent_id, updated_after=updated_after, updated_before=updated_before,
                               where=where)

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return await self._run(self.sync.read_trace, execution_id)

    async def read_history(self, execution_id: str) -> list[dict[str, Any]]:
        return await self._run(self.sync.read_history, execution_id)

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        await self._run(self.sync.append_trace, execution_id, entry)

    async def purge(
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
        return await self._run(self.sync.purge, ended_before, list(statuses), definition_id, limit, now,
                               tombstone_ttl, dry_run=dry_run)

    async def close(self) -> None:
        """Close the connection on its thread, then stop the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._run(self.sync.close)
        self._executor.shutdown(wait=True)
