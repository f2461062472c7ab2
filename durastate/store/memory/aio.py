"""``AsyncDictStore``: the async twin of ``DictStore``.

Same structures, same logic (inherited from :class:`DictCore`). No lock is needed: no method awaits
internally, so each body runs without interleaving on one event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from durastate.engine.model import Execution
from durastate.store.base import Emit, ExecutionPage, OutboxEntry, Spawn, SpawnEntry, TimerOp
from durastate.store.memory.sync import DictCore
from durastate.store.retention import DEFAULT_PURGE_LIMIT, DEFAULT_TOMBSTONE_TTL, PURGEABLE, PurgeResult


class AsyncDictStore(DictCore):
    """The in-memory :class:`~durastate.store.AsyncExecutionStore`."""

    async def load(self, execution_id: str) -> Execution | None:
        return self._by_id.get(execution_id)

    async def save(self, exe: Execution) -> None:
        self._commit(exe, [], None, (), (), None)

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        self._commit(exe, emits, processed_event_id, timers, spawns, trace)

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        return (execution_id, event_id) in self._processed

    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        return self._by_id.get(execution_id), (execution_id, event_id) in self._processed

    async def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        return list(islice(self._outbox.values(), limit))

    async def ack_outbox(self, seq: int) -> None:
        self._ack_outbox(seq)

    async def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        return list(islice(self._spawns.values(), limit))

    async def ack_spawn(self, seq: int) -> None:
        self._ack_spawn(seq)

    async def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        return self._due_timers(now, since)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        self._delete_timer(execution_id, path, fire_at)

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
    ) -> ExecutionPage:
        return self._list(definition_id, status, roots_only, limit, cursor, parent_id, updated_after,
                          updated_before)

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return self._read_trace(execution_id)

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        self._record_trace(execution_id, entry)

    async def read_history(self, execution_id: str) -> list[dict[str, Any]]:
        return self._read_history(execution_id)

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
        return self._purge(ended_before, statuses, definition_id, limit, now, tombstone_ttl, dry_run)

    async def close(self) -> None:
        """Nothing to release."""
