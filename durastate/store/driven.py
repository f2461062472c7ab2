"""The store protocol, written once for the stores that *drive* a core of request generators.

The DynamoDB and the PostgreSQL stores keep what each operation does in a core (``DynamoCore``,
``PgCore``) of generators — ``load_ops``, ``commit_ops``, … — that yield requests and receive their
answers. A store is then a *driver*: one ``_run(ops)`` that answers the requests with blocking calls
(sync) or awaited ones (async), its constructors, and its client's or pool's lifetime. What is left,
each protocol method, is the same line in all four stores: ``self._run(self.<name>_ops(…))``.
:class:`SyncDriven` and :class:`AsyncDriven` write those lines once, with the protocol's signatures
and defaults; :class:`SyncEventChecking` and :class:`AsyncEventChecking` add ``commit``'s
``check_event`` (:class:`~durastate.store.base.EventCheckingStore`) and ``context_unchanged``
(:class:`~durastate.store.base.ContextKeepingStore`) for a core that can check and keep.

Why plain mixin methods that call ``self._run`` directly, rather than methods generated from a table of
names or a ``__getattr__``: ``commit`` and ``load_for_event`` run once per event, and a method written
out costs exactly what each store's own one-liner did — no lookup per call. The mixins have no state;
a method's ``self`` is typed by the protocol it needs (:class:`SyncCore`, :class:`AsyncCore`, …), so
mypy checks that every store built on them has its ``_run`` and every ``<name>_ops`` with the right types.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from durastate.engine.model import Emit, Execution, Spawn, TimerOp
from durastate.store.base import Condition, ExecutionPage, OutboxEntry, SpawnEntry
from durastate.store.retention import DEFAULT_PURGE_LIMIT, DEFAULT_TOMBSTONE_TTL, PURGEABLE, PurgeResult

__all__ = [
    "AsyncCore",
    "AsyncDriven",
    "AsyncEventChecking",
    "Core",
    "SyncCore",
    "SyncDriven",
    "SyncEventChecking",
]

T = TypeVar("T")

Ops = Generator[Any, Any, T]
"""An operation of a core: it yields requests (each core has its own kind) and returns a ``T``."""


class Core(Protocol):
    """The operations a core provides, one per protocol method (``list_executions`` is ``list_ops``)."""

    def load_ops(self, execution_id: str) -> Ops[Execution | None]: ...

    def load_for_event_ops(self, execution_id: str, event_id: str) -> Ops[tuple[Execution | None, bool]]: ...

    def is_processed_ops(self, execution_id: str, event_id: str) -> Ops[bool]: ...

    def commit_ops(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Iterable[TimerOp],
        spawns: Iterable[Spawn],
        trace: dict[str, Any] | None,
    ) -> Ops[None]: ...

    def pending_outbox_ops(self, limit: int | None) -> Ops[list[OutboxEntry]]: ...

    def ack_outbox_ops(self, seq: int) -> Ops[None]: ...

    def pending_spawns_ops(self, limit: int | None) -> Ops[list[SpawnEntry]]: ...

    def ack_spawn_ops(self, seq: int) -> Ops[None]: ...

    def due_timers_ops(self, now: float, since: float | None = None) -> Ops[list[tuple[str, str, float]]]: ...

    def delete_timer_ops(self, execution_id: str, path: str, fire_at: float) -> Ops[None]: ...

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
    ) -> Ops[ExecutionPage]: ...

    def read_trace_ops(self, execution_id: str) -> Ops[list[dict[str, Any]]]: ...

    def read_history_ops(self, execution_id: str) -> Ops[list[dict[str, Any]]]: ...

    def append_trace_ops(self, execution_id: str, entry: dict[str, Any]) -> Ops[None]: ...

    def purge_ops(
        self,
        ended_before: float,
        statuses: Sequence[str],
        definition_id: str | None,
        limit: int,
        now: float | None,
        tombstone_ttl: float,
        dry_run: bool,
    ) -> Ops[PurgeResult]: ...


class CheckingCore(Core, Protocol):
    """A core whose commit can refuse an event already applied (``check_event=True``) and leave the context
    as stored (``context_unchanged=True``: a ``ContextKeepingStore``)."""

    def commit_ops(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Iterable[TimerOp],
        spawns: Iterable[Spawn],
        trace: dict[str, Any] | None,
        check_event: bool = False,
        context_unchanged: bool = False,
    ) -> Ops[None]: ...

    def version_for_event_ops(self, execution_id: str, event_id: str) -> Ops[tuple[int | None, bool]]: ...


class SyncCore(Core, Protocol):
    """A core with a blocking driver: ``_run`` answers an operation's requests and returns its result."""

    def _run(self, ops: Ops[T]) -> T: ...


class SyncCheckingCore(SyncCore, CheckingCore, Protocol):
    pass


class AsyncCore(Core, Protocol):
    """A core with an async driver: ``await _run(ops)`` answers an operation's requests."""

    async def _run(self, ops: Ops[T]) -> T: ...


class AsyncCheckingCore(AsyncCore, CheckingCore, Protocol):
    pass


class SyncDriven:
    """:class:`~durastate.store.ExecutionStore`'s methods, each one operation of the core driven by ``_run``."""

    def load(self: SyncCore, execution_id: str) -> Execution | None:
        return self._run(self.load_ops(execution_id))

    def load_for_event(self: SyncCore, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """The execution and whether ``event_id`` was already applied to it, in one operation."""
        return self._run(self.load_for_event_ops(execution_id, event_id))

    def is_processed(self: SyncCore, execution_id: str, event_id: str) -> bool:
        return self._run(self.is_processed_ops(execution_id, event_id))

    def save(self: SyncCore, exe: Execution) -> None:
        self._run(self.commit_ops(exe, (), None, (), (), None))

    def commit(
        self: SyncCore,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        self._run(self.commit_ops(exe, emits, processed_event_id, timers, spawns, trace))

    def pending_outbox(self: SyncCore, limit: int | None = None) -> list[OutboxEntry]:
        return self._run(self.pending_outbox_ops(limit))

    def ack_outbox(self: SyncCore, seq: int) -> None:
        self._run(self.ack_outbox_ops(seq))

    def pending_spawns(self: SyncCore, limit: int | None = None) -> list[SpawnEntry]:
        return self._run(self.pending_spawns_ops(limit))

    def ack_spawn(self: SyncCore, seq: int) -> None:
        self._run(self.ack_spawn_ops(seq))

    def due_timers(self: SyncCore, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        return self._run(self.due_timers_ops(now, since))

    def delete_timer(self: SyncCore, execution_id: str, path: str, fire_at: float) -> None:
        """Delete only if ``fire_at`` still matches: a timer re-armed since the sweep read it survives."""
        self._run(self.delete_timer_ops(execution_id, path, fire_at))

    def list_executions(
        self: SyncCore,
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
        return self._run(self.list_ops(definition_id, status, roots_only, limit, cursor, parent_id, updated_after,
                                       updated_before, where))

    def read_trace(self: SyncCore, execution_id: str) -> list[dict[str, Any]]:
        return self._run(self.read_trace_ops(execution_id))

    def read_history(self: SyncCore, execution_id: str) -> list[dict[str, Any]]:
        return self._run(self.read_history_ops(execution_id))

    def append_trace(self: SyncCore, execution_id: str, entry: dict[str, Any]) -> None:
        self._run(self.append_trace_ops(execution_id, entry))

    def purge(
        self: SyncCore,
        ended_before: float,
        statuses: Sequence[str] = PURGEABLE,
        definition_id: str | None = None,
        limit: int = DEFAULT_PURGE_LIMIT,
        now: float | None = None,
        tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL,
        *,
        dry_run: bool = False,
    ) -> PurgeResult:
        """One bounded purge batch (see :mod:`durastate.store.retention`)."""
        return self._run(self.purge_ops(ended_before, statuses, definition_id, limit, now, tombstone_ttl, dry_run))


class SyncEventChecking(SyncDriven):
    """:class:`SyncDriven` whose ``commit`` takes ``check_event`` (an ``EventCheckingStore``)."""

    def commit(
        self: SyncCheckingCore,
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
        self._run(self.commit_ops(exe, emits, processed_event_id, timers, spawns, trace, check_event,
                                  context_unchanged))

    def version_for_event(self: SyncCheckingCore, execution_id: str, event_id: str) -> tuple[int | None, bool]:
        """The stored version (``None``: none) and whether ``event_id`` was applied, without the data."""
        return self._run(self.version_for_event_ops(execution_id, event_id))


class AsyncDriven:
    """:class:`~durastate.store.AsyncExecutionStore`'s methods, each one operation awaited through ``_run``."""

    async def load(self: AsyncCore, execution_id: str) -> Execution | None:
        return await self._run(self.load_ops(execution_id))

    async def load_for_event(self: AsyncCore, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """The execution and whether ``event_id`` was already applied to it, in one operation."""
        return await self._run(self.load_for_event_ops(execution_id, event_id))

    async def is_processed(self: AsyncCore, execution_id: str, event_id: str) -> bool:
        return await self._run(self.is_processed_ops(execution_id, event_id))

    async def save(self: AsyncCore, exe: Execution) -> None:
        await self._run(self.commit_ops(exe, (), None, (), (), None))

    async def commit(
        self: AsyncCore,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        await self._run(self.commit_ops(exe, emits, processed_event_id, timers, spawns, trace))

    async def pending_outbox(self: AsyncCore, limit: int | None = None) -> list[OutboxEntry]:
        return await self._run(self.pending_outbox_ops(limit))

    async def ack_outbox(self: AsyncCore, seq: int) -> None:
        await self._run(self.ack_outbox_ops(seq))

    async def pending_spawns(self: AsyncCore, limit: int | None = None) -> list[SpawnEntry]:
        return await self._run(self.pending_spawns_ops(limit))

    async def ack_spawn(self: AsyncCore, seq: int) -> None:
        await self._run(self.ack_spawn_ops(seq))

    async def due_timers(self: AsyncCore, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        return await self._run(self.due_timers_ops(now, since))

    async def delete_timer(self: AsyncCore, execution_id: str, path: str, fire_at: float) -> None:
        """Delete only if ``fire_at`` still matches: a timer re-armed since the sweep read it survives."""
        await self._run(self.delete_timer_ops(execution_id, path, fire_at))

    async def list_executions(
        self: AsyncCore,
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
        return await self._run(self.list_ops(definition_id, status, roots_only, limit, cursor, parent_id,
                                             updated_after, updated_before, where))

    async def read_trace(self: AsyncCore, execution_id: str) -> list[dict[str, Any]]:
        return await self._run(self.read_trace_ops(execution_id))

    async def read_history(self: AsyncCore, execution_id: str) -> list[dict[str, Any]]:
        return await self._run(self.read_history_ops(execution_id))

    async def append_trace(self: AsyncCore, execution_id: str, entry: dict[str, Any]) -> None:
        await self._run(self.append_trace_ops(execution_id, entry))

    async def purge(
        self: AsyncCore,
        ended_before: float,
        statuses: Sequence[str] = PURGEABLE,
        definition_id: str | None = None,
        limit: int = DEFAULT_PURGE_LIMIT,
        now: float | None = None,
        tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL,
        *,
        dry_run: bool = False,
    ) -> PurgeResult:
        """One bounded purge batch (see :mod:`durastate.store.retention`)."""
        return await self._run(
            self.purge_ops(ended_before, statuses, definition_id, limit, now, tombstone_ttl, dry_run)
        )


class AsyncEventChecking(AsyncDriven):
    """:class:`AsyncDriven` whose ``commit`` takes ``check_event`` (an ``EventCheckingStore``'s, awaited)."""

    async def commit(
        self: AsyncCheckingCore,
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
        await self._run(self.commit_ops(exe, emits, processed_event_id, timers, spawns, trace, check_event,
                                        context_unchanged))

    async def version_for_event(
        self: AsyncCheckingCore, execution_id: str, event_id: str
    ) -> tuple[int | None, bool]:
        """The stored version (``None``: none) and whether ``event_id`` was applied, without the data."""
        return await self._run(self.version_for_event_ops(execution_id, event_id))
