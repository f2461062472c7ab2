"""A test-only bridge that presents an async store through the synchronous store protocol.

The conformance checks themselves (``durastate.testing``) await an async store directly; this adapter is
for the tests written against the sync protocol that also cover the async backends (``open_backend``:
the runtime's ``every_store``, the property tests, the ``store`` fixture). An async store is driven
through :class:`SyncAdapter`: every method call is run to completion on one dedicated
``asyncio.Runner`` that belongs to that store alone, so the store's connections, pools and clients are
created, used and closed on the same event loop (asyncpg/psycopg pools and aiobotocore clients are bound
to the loop that opened them). Nothing here is shipped: production code awaits the async stores directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from durastate.engine.model import Execution
from durastate.store.base import (
    AsyncExecutionStore,
    Condition,
    Emit,
    ExecutionPage,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from durastate.store.retention import DEFAULT_PURGE_LIMIT, DEFAULT_TOMBSTONE_TTL, PURGEABLE, PurgeResult


class SyncAdapter:
    """Sync facade over one async store; each call runs on ``runner`` (the store's own loop)."""

    def __init__(self, runner: asyncio.Runner, store: AsyncExecutionStore) -> None:
        self._runner = runner
        self.inner = store

    @property
    def trace_max(self) -> int | None:
        return self.inner.trace_max

    @trace_max.setter
    def trace_max(self, value: int | None) -> None:
        self.inner.trace_max = value

    @property
    def history(self) -> bool:
        return self.inner.history

    @history.setter
    def history(self, value: bool) -> None:
        self.inner.history = value

    def load(self, execution_id: str) -> Execution | None:
        return self._runner.run(self.inner.load(execution_id))

    def save(self, exe: Execution) -> None:
        self._runner.run(self.inner.save(exe))

    @property
    def commit_checks_event(self) -> bool:
        return bool(getattr(self.inner, "commit_checks_event", False))

    @property
    def commit_keeps_context(self) -> bool:
        return bool(getattr(self.inner, "commit_keeps_context", False))

    def commit(self, exe: Execution, emits: Sequence[Emit], processed_event_id: str | None = None,
               timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
               trace: dict[str, Any] | None = None, **options: Any) -> None:
        self._runner.run(self.inner.commit(exe, emits, processed_event_id, timers, spawns, trace, **options))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        return self._runner.run(self.inner.is_processed(execution_id, event_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        return self._runner.run(self.inner.load_for_event(execution_id, event_id))

    def version_for_event(self, execution_id: str, event_id: str) -> tuple[int | None, bool]:
        result: tuple[int | None, bool] = self._runner.run(
            self.inner.version_for_event(execution_id, event_id))  # type: ignore[attr-defined]
        return result

    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        return self._runner.run(self.inner.pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        self._runner.run(self.inner.ack_outbox(seq))

    def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        return self._runner.run(self.inner.pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        self._runner.run(self.inner.ack_spawn(seq))

    def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        return self._runner.run(self.inner.due_timers(now, since))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        self._runner.run(self.inner.delete_timer(execution_id, path, fire_at))

    def list_executions(self, definition_id: str | None = None, status: str | Sequence[str] | None = None,
                        roots_only: bool = False, limit: int = 100,
                        cursor: str | None = None, *, parent_id: str | None = None,
                        updated_after: float | None = None, updated_before: float | None = None,
                        where: Sequence[Condition] = ()) -> ExecutionPage:
        return self._runner.run(self.inner.list_executions(
            definition_id, status, roots_only, limit, cursor, parent_id=parent_id, updated_after=updated_after,
            updated_before=updated_before, where=where))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return self._runner.run(self.inner.read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        self._runner.run(self.inner.append_trace(execution_id, entry))

    def read_history(self, execution_id: str) -> list[dict[str, Any]]:
        return self._runner.run(self.inner.read_history(execution_id))

    def purge(self, ended_before: float, statuses: Sequence[str] = PURGEABLE, definition_id: str | None = None,
              limit: int = DEFAULT_PURGE_LIMIT, now: float | None = None,
              tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL, *, dry_run: bool = False) -> PurgeResult:
        return self._runner.run(self.inner.purge(ended_before, statuses, definition_id, limit, now, tombstone_ttl,
                                                 dry_run=dry_run))

    def close(self) -> None:
        self._runner.run(self.inner.close())
