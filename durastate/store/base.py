"""The store seam: the protocol every backend implements and the small value types it speaks.

A store persists executions and, in the *same atomic commit*, the side effects of one step: emitted
events (the transactional outbox), the dedupe mark of the event that was applied, timer arms and
cancels, child-spawn intents and an optional trace step. A commit that loses the version
compare-and-swap writes none of it and raises :class:`StoreConflict`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from durastate.engine.model import Emit, Event, Execution, Spawn, TimerOp
from durastate.errors import InvalidCursor, StoreConflict

__all__ = [
    "DEFAULT_TRACE_MAX",
    "AsyncExecutionStore",
    "Emit",
    "EventCheckingStore",
    "ExecutionPage",
    "ExecutionStore",
    "ExecutionSummary",
    "OutboxEntry",
    "Spawn",
    "SpawnEntry",
    "StoreConflict",
    "TimerOp",
    "decode_cursor",
    "encode_cursor",
    "normalize_status",
    "summary_matches",
]

DEFAULT_TRACE_MAX = 200
"""Trace ring size per execution: the last 200 steps are kept. 0 or None keeps every step."""



@dataclass(frozen=True, slots=True)
class OutboxEntry:
    seq: int
    target_id: str | None
    event: Event


@dataclass(frozen=True, slots=True)
class SpawnEntry:
    seq: int
    parent_id: str
    child_id: str
    root_path: str
    context: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ExecutionSummary:
    id: str
    definition_id: str
    version: int
    status: str
    outcome: str | None
    active_path: str | None
    parent_id: str | None

    @classmethod
    def of(cls, exe: Execution) -> ExecutionSummary:
        return cls(
            exe.id, exe.definition_id, exe.version, exe.status, exe.outcome, exe.active_path, exe.parent_id
        )


@dataclass(frozen=True, slots=True)
class ExecutionPage:
    items: list[ExecutionSummary] = field(default_factory=list)
    next_cursor: str | None = None


def normalize_status(status: str | Sequence[str] | None) -> frozenset[str] | None:
    """``status`` filters by one status or a list of them; ``None`` means any."""
    if status is None:
        return None
    if isinstance(status, str):
        return frozenset((status,))
    return frozenset(status)


def summary_matches(
    s: ExecutionSummary, definition_id: str | None, statuses: frozenset[str] | None, roots_only: bool
) -> bool:
    """The listing filter every store applies (server-side where the backend can)."""
    if definition_id is not None and s.definition_id != definition_id:
        return False
    if statuses is not None and s.status not in statuses:
        return False
    return not (roots_only and s.parent_id is not None)


def encode_cursor(value: Any) -> str:
    """An opaque, URL-safe cursor for any JSON value (a key, an offset)."""
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidCursor(cursor) from exc


@runtime_checkable
class ExecutionStore(Protocol):
    """The synchronous store protocol. See the module docstring for the commit contract."""

    trace_max: int | None

    def load(self, execution_id: str) -> Execution | None: ...

    def save(self, exe: Execution) -> None: ...

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None: ...

    def is_processed(self, execution_id: str, event_id: str) -> bool: ...

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]: ...

    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]: ...

    def ack_outbox(self, seq: int) -> None: ...

    def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]: ...

    def ack_spawn(self, seq: int) -> None: ...

    def due_timers(self, now: float) -> list[tuple[str, str, float]]: ...

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None: ...

    def list_executions(
        self,
        definition_id: str | None = None,
        status: str | Sequence[str] | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage: ...

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class EventCheckingStore(ExecutionStore, Protocol):
    """A store whose commit can do the dedupe check itself: ``commit(..., check_event=True)``.

    With ``check_event=True`` a ``processed_event_id`` already marked for the execution makes the commit
    write nothing and raise :class:`~durastate.errors.EventAlreadyProcessed` (a :class:`StoreConflict`),
    atomically with the version compare-and-swap. That lets a worker commit an event on top of the
    execution it committed last, without reading it back first: the CAS rejects a stale copy, this
    check rejects a redelivered event, and either way the worker reloads. Without ``check_event`` marking
    an event twice stays harmless (the seed's contract). The SQL stores implement it for free (the mark's
    insert reports whether it inserted); stores that cannot do it cheaply just do not declare
    ``commit_checks_event``.
    """

    commit_checks_event: bool

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
    ) -> None: ...


@runtime_checkable
class AsyncExecutionStore(Protocol):
    """The async twin of :class:`ExecutionStore`: the same methods, awaited."""

    trace_max: int | None

    async def load(self, execution_id: str) -> Execution | None: ...

    async def save(self, exe: Execution) -> None: ...

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None: ...

    async def is_processed(self, execution_id: str, event_id: str) -> bool: ...

    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]: ...

    async def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]: ...

    async def ack_outbox(self, seq: int) -> None: ...

    async def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]: ...

    async def ack_spawn(self, seq: int) -> None: ...

    async def due_timers(self, now: float) -> list[tuple[str, str, float]]: ...

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None: ...

    async def list_executions(
        self,
        definition_id: str | None = None,
        status: str | Sequence[str] | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage: ...

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None: ...

    async def close(self) -> None: ...
