"""The store seam: the protocol every backend implements and the small value types it speaks.

A store persists executions and, in the *same atomic commit*, the side effects of one step: emitted
events (the transactional outbox), the dedupe mark of the event that was applied, timer arms and
cancels, child-spawn intents and an optional trace step. A commit that loses the version
compare-and-swap writes none of it and raises :class:`StoreConflict`.

Whole histories (``history=True``): the store keeps every trace step of an execution instead of trimming
the ring. The archive is the trace's own table (SQLite, PostgreSQL) or items (DynamoDB, with the trace's
TTL): a step is written once, in the commit of the state it produced, so it is atomic with the state and
costs no second write; keeping history only stops the ring's trim. ``read_trace`` still answers the newest
``trace_max`` steps, ``read_history`` every step, oldest first; purging an execution deletes both (they are
the same rows). A store opened without it trims as before, and a step trimmed is gone: a history is
complete from when the store first kept history for that execution.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from durastate.engine.ids import SYSTEM_PREFIX
from durastate.engine.model import Emit, Event, Execution, Spawn, TimerOp
from durastate.engine.search import Condition, check_conditions
from durastate.errors import InvalidCursor, StoreConflict
from durastate.store.retention import DEFAULT_PURGE_LIMIT, DEFAULT_TOMBSTONE_TTL, PURGEABLE, PurgeResult

__all__ = [
    "DEFAULT_TRACE_MAX",
    "AsyncExecutionStore",
    "Condition",
    "ContextKeepingStore",
    "Emit",
    "EventCheckingStore",
    "ExecutionPage",
    "ExecutionStore",
    "ExecutionSummary",
    "OutboxEntry",
    "PurgeResult",
    "Spawn",
    "SpawnEntry",
    "StoreConflict",
    "TimerOp",
    "check_conditions",
    "decode_cursor",
    "encode_cursor",
    "hides_system",
    "keeps_history",
    "normalize_status",
    "summary_matches",
    "trim_bound",
]

DEFAULT_TRACE_MAX = 200
"""Trace ring size per execution: the last 200 steps are kept. 0 or None keeps every step."""



def trim_bound(trace_max: int | None, history: bool) -> int:
    """The ring size a store trims its trace to: 0 (never trim) while it keeps whole histories."""
    return 0 if history else trace_max or 0


def keeps_history(store: object) -> bool:
    """Whether ``store`` holds every step of an execution: it keeps histories, or its ring is unbounded."""
    return bool(getattr(store, "history", False)) or not getattr(store, "trace_max", None)



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
    """One row of a listing: what a table of executions shows, without the context.

    ``created_at``: when the execution was created (its start applied); ``updated_at``: its last commit
    that went through a step (epoch seconds, the runtime's clock). Both are ``None`` for an execution
    saved without ever being stepped, and on DynamoDB for items written before durastate broke them out.
    """

    id: str
    definition_id: str
    version: int
    status: str
    outcome: str | None
    active_path: str | None
    parent_id: str | None
    created_at: float | None = None
    updated_at: float | None = None

    @classmethod
    def of(cls, exe: Execution) -> ExecutionSummary:
        return cls(
            exe.id, exe.definition_id, exe.version, exe.status, exe.outcome, exe.active_path, exe.parent_id,
            exe.created_at, exe.updated_at,
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


def hides_system(definition_id: str | None) -> bool:
    """Whether a listing leaves out system records (definition id starting with ``~``): always, unless
    it asks for one kind of them by its definition id (``~definition``, ``~schedule``)."""
    return definition_id is None or not definition_id.startswith(SYSTEM_PREFIX)


def summary_matches(
    s: ExecutionSummary,
    definition_id: str | None,
    statuses: frozenset[str] | None,
    roots_only: bool,
    *,
    parent_id: str | None = None,
    updated_after: float | None = None,
    updated_before: float | None = None,
) -> bool:
    """The listing filter every store applies (server-side where the backend can).

    ``updated_after`` / ``updated_before``: ``updated_after <= updated_at < updated_before``; an
    execution without ``updated_at`` matches no time filter.
    """
    if definition_id is not None and s.definition_id != definition_id:
        return False
    if hides_system(definition_id) and s.definition_id.startswith(SYSTEM_PREFIX):
        return False
    if statuses is not None and s.status not in statuses:
        return False
    if parent_id is not None and s.parent_id != parent_id:
        return False
    if updated_after is not None or updated_before is not None:
        at = s.updated_at
        if at is None or (updated_after is not None and at < updated_after):
            return False
        if updated_before is not None and at >= updated_before:
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
    history: bool

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

    def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        """Armed timers with ``fire_at`` at or below ``now`` — and at or above ``since`` when given (a
        sweep that knows what it already handed on reads only the window after it), oldest first."""
        ...

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None: ...

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
        """A keyset page of summaries, filtered (every filter given must hold; see :func:`summary_matches`).

        ``where``: conditions on the executions' search values (:mod:`durastate.engine.search`), every one
        of which must hold, answered from the index the commits write; a bad one raises
        :class:`~durastate.errors.InvalidSearch` (check them with :func:`check_conditions`).
        System records (definition id ``~…``) are left out unless ``definition_id`` names their kind."""
        ...

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    def read_history(self, execution_id: str) -> list[dict[str, Any]]:
        """Every stored step, oldest first (with ``history``: all of them; see the module docstring)."""
        ...

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None: ...

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
        """Turn up to ``limit`` executions that ended before ``ended_before`` (status in ``statuses``) into
        tombstones, and delete expired tombstones; see :mod:`durastate.store.retention`. ``dry_run``:
        change nothing, report what would go."""
        ...

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

    ``version_for_event`` is the cheap read that goes with it: the stored version and whether an event was
    applied, without reading the execution's data — what a worker compares its kept copy with *before*
    stepping it, so that a copy another worker moved on is reloaded before any action runs.
    """

    commit_checks_event: bool

    def version_for_event(self, execution_id: str, event_id: str) -> tuple[int | None, bool]:
        """(the stored version, ``None`` if there is no such execution; whether ``event_id`` was applied)."""
        ...

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
class ContextKeepingStore(EventCheckingStore, Protocol):
    """A store whose commit can leave the context as it is stored: ``commit(..., context_unchanged=True)``.

    The caller vouches that ``exe.context`` is the context stored at the version the commit replaces: no
    value of it was replaced, added, removed or changed in place since it was loaded or last committed. The
    store may then neither serialise nor write it (the SQL stores keep a large context apart from the rest
    of the execution: :func:`~durastate.store.sql.context_apart`), so a step that does not touch a 100 KB
    context costs what it changed. The version compare-and-swap makes the vouching sound: the stored
    context is the one of the version replaced, or the commit writes nothing. A caller that cannot tell
    passes ``False`` (the default), and the context is written as before.

    The worker vouches only for an execution whose definition runs no Python callable: its step replaces
    context values and never changes one in place (``assign`` and a reset's patch copy what they write
    into), so the context's values being the very objects they were is proof enough.
    """

    commit_keeps_context: bool

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
    ) -> None: ...


@runtime_checkable
class AsyncExecutionStore(Protocol):
    """The async twin of :class:`ExecutionStore`: the same methods, awaited."""

    trace_max: int | None
    history: bool

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

    async def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]: ...

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None: ...

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
        """A keyset page of summaries, filtered (every filter given must hold; see :func:`summary_matches`).

        ``where``: conditions on the executions' search values (:mod:`durastate.engine.search`), every one
        of which must hold, answered from the index the commits write; a bad one raises
        :class:`~durastate.errors.InvalidSearch` (check them with :func:`check_conditions`).
        System records (definition id ``~…``) are left out unless ``definition_id`` names their kind."""
        ...

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    async def read_history(self, execution_id: str) -> list[dict[str, Any]]: ...

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None: ...

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
    ) -> PurgeResult: ...

    async def close(self) -> None: ...
