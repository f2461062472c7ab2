"""``DurastateClient``: start executions, send them events and read them back — from any application.

The client never applies events itself: it enqueues them (in the wire format) on a transport, and a worker
— the Lambda worker on AWS, ``durastate serve`` elsewhere — applies them. Reads go straight to the store.

    client = DurastateClient.for_aws(queue_url=..., table_prefix="durastate")
    exe_id = client.start("order", context={"total": 120}, execution_id="order-42")   # idempotent
    client.send(exe_id, "pay", {"amount": 120})
    client.get(exe_id).status, client.trace(exe_id)

Idempotent start: the start event's id is derived from the execution id (``"{execution_id}:start"``, the
same convention the engine uses for children), so starting ``order-42`` twice enqueues the same event
twice — SQS deduplicates it within five minutes, the worker's dedupe mark after that, and a start for an
execution that already exists is a no-op anyway. Without ``execution_id`` a fresh one is generated.
``send`` takes an optional ``event_id`` for the same reason: a caller that retries a send after a timeout
passes the same id, and the event is applied once.

Control: ``cancel``, ``suspend``, ``resume`` and ``reset`` are events, queued behind the execution's others;
``terminate``, ``redrive`` and ``migrate`` are compare-and-swap commits to the store (the client needs one). Dead
letters — the events the worker could never apply — are read, replayed and dropped through the
transport's box: ``dead_letters()``, ``replay_dead_letters()``, ``drop_dead_letter()`` (on AWS build the
client with ``dlq_url``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from durastate.engine.ids import (
    CANCEL,
    RESUME,
    SUSPEND,
    cancel_event_id,
    derived_id,
    producer_problem,
    start_event_id,
)
from durastate.engine.model import START, Event, Execution, new_id
from durastate.engine.search import Condition, SearchValue, check_conditions
from durastate.engine.tasks import heartbeat_message
from durastate.engine.values import check_event_id, check_execution_id
from durastate.errors import DurastateError, MalformedEvent, ReservedId
from durastate.store import control as store_control
from durastate.store import schedules as store_schedules
from durastate.store.base import ExecutionPage, ExecutionStore
from durastate.store.schedules import Backfill, ScheduleState
from durastate.transport.base import DeadLetter, DeadLetterBox, DeadLetterPage, Transport
from durastate.transport.tracecontext import current_traceparent, stamp
from durastate.transport.wire import new_event

if TYPE_CHECKING:
    from durastate.engine.definition import Definition
    from durastate.store.migration import Migration

__all__ = ["DurastateClient", "start_event", "start_event_id"]


def start_event(execution_id: str, definition_id: str, context: dict[str, Any] | None = None,
                timeout: float | str | None = None) -> Event:
    """The ``durastate.start`` event that creates ``execution_id`` from ``definition_id`` (``timeout``: its
    own run timeout, seconds or a duration such as ``"1h"``, instead of the definition's)."""
    if not definition_id:
        raise MalformedEvent("a start needs a definition id")
    return new_event(START, store_control.start_data(definition_id, context, timeout), start_event_id(execution_id))


def _check_producer(target_id: str, event: Event) -> None:
    """:class:`ReservedId` unless a producer may send ``event`` to ``target_id`` (the one rule:
    :func:`durastate.engine.ids.producer_problem`)."""
    problem = producer_problem(target_id, event.name, event.id)
    if problem is not None:
        raise ReservedId(problem)


class DurastateClient:
    """Enqueue starts and events on ``transport``; read executions from ``store`` (optional).

    ``definitions`` (optional, anything with ``get(definition_id)`` such as a ``DefinitionRegistry``)
    lets :meth:`start` reject an unknown definition before anything is enqueued.
    """

    def __init__(self, transport: Transport, store: ExecutionStore | None = None,
                 definitions: Any = None, *, dead_letter_box: DeadLetterBox | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.transport = transport
        self.store = store
        self.definitions = definitions
        self.dead_letter_box = dead_letter_box or getattr(transport, "dead_letter_box", None)
        """Where the worker keeps what it cannot apply: given, else the transport's (``None``: none)."""
        self.clock = clock

    @classmethod
    def for_aws(cls, queue_url: str, table_prefix: str | None = "durastate", *, region: str | None = None,
                endpoint_url: str | None = None, definitions: Any = None,
                dlq_url: str | None = None) -> DurastateClient:
        """A client over :class:`~durastate.transport.sqs.SqsTransport` and ``DynamoDBStore`` (boto3, lazily).

        ``table_prefix=None`` gives a send-only client. ``endpoint_url`` applies to both services; leave it
        ``None`` to let botocore read ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_SQS`` / ``…_DYNAMODB`` (or,
        when the queue URL is on this machine, to use its server for both). ``dlq_url`` (the stack's
        dead-letter queue) lets it list, replay and drop dead letters.

        The clients are built as the CLI builds its own (:func:`~durastate.transport.aws_clients.aws_client`):
        a local endpoint needs no credentials (stand-ins when none are configured); real AWS without any
        raises :class:`~durastate.transport.aws_clients.AwsSetupError` saying what to set.
        """
        from durastate.transport.aws_clients import aws_client
        from durastate.transport.sqs import SqsTransport

        sqs = aws_client("sqs", url=queue_url, region=region, endpoint_url=endpoint_url,
                         label=f"SQS queue {queue_url}")
        transport = SqsTransport(sqs, queue_url, dlq_url=dlq_url)
        store: ExecutionStore | None = None
        if table_prefix is not None:
            from durastate.store.dynamodb.sync import DynamoDBStore

            ddb = aws_client("dynamodb", url=queue_url, region=region, endpoint_url=endpoint_url,
                             label=f"the DynamoDB tables {table_prefix}_*")
            store = DynamoDBStore(ddb, prefix=table_prefix)
        return cls(transport, store, definitions)

    # -- writing -------------------------------------------------------------------------------------
    def start(self, definition_id: str, context: dict[str, Any] | None = None,
              execution_id: str | None = None, *, timeout: float | str | None = None) -> str:
        """Enqueue the start of an execution and return its id (``execution_id`` or a generated one).
        ``timeout``: its run timeout (seconds, or ``"1h"``), instead of the definition's ``timeout``."""
        if self.definitions is not None:
            self.definitions.get(definition_id)  # raises UnknownDefinition naming the known ones
        exe_id = check_execution_id(execution_id) if execution_id is not None else new_id()
        self._send([(exe_id, start_event(exe_id, definition_id, context, timeout))])
        return exe_id

    def send(self, execution_id: str, name: str, data: dict[str, Any] | None = None,
             event_id: str | None = None) -> str:
        """Enqueue event ``name`` for ``execution_id``; return its id (pass it again to retry safely)."""
        check_event_id(execution_id, "execution id")
        event = new_event(name, data, event_id)
        _check_producer(execution_id, event)
        if name.startswith("durastate.") and name != "durastate.cancel":
            raise MalformedEvent(f"{name!r} is a reserved event name; use start() to start an execution, "
                                 "cancel()/suspend()/resume() to control one")
        self._send([(execution_id, event)])
        return event.id

    def send_many(self, messages: Sequence[tuple[str, Event]]) -> None:
        """Enqueue several prepared ``(execution_id, event)`` pairs in as few calls as the transport can
        (refused whole, :class:`~durastate.errors.ReservedId`, if one is what only durastate may send)."""
        messages = list(messages)
        for target_id, event in messages:
            _check_producer(target_id, event)
        self._send(messages)

    def _send(self, messages: Sequence[tuple[str, Event]]) -> None:
        """Enqueue, each event carrying the caller's active OpenTelemetry span (if there is one): the span
        that applies it links to it (:mod:`durastate.runtime.telemetry`)."""
        self.transport.send(stamp(messages, current_traceparent()))

    # -- control -------------------------------------------------------------------------------------
    def cancel(self, execution_id: str, reason: str | None = None, *, event_id: str | None = None) -> str:
        """Ask an execution to cancel itself (exit actions run, children are cancelled, the parent is
        told); queued behind its other events. Returns the event id (by default one derived from the
        execution id: cancelling twice is one cancel)."""
        return self._control(execution_id, CANCEL, reason, event_id or cancel_event_id(execution_id))

    def suspend(self, execution_id: str, reason: str | None = None, *, event_id: str | None = None) -> str:
        """Queue ``durastate.suspend``: what reaches the execution afterwards is held until a resume."""
        return self._control(execution_id, SUSPEND, reason, event_id)

    def resume(self, execution_id: str, *, event_id: str | None = None) -> str:
        """Queue ``durastate.resume``: what the suspended execution held applies, in order."""
        return self._control(execution_id, RESUME, None, event_id)

    def _control(self, execution_id: str, name: str, reason: str | None, event_id: str | None) -> str:
        check_event_id(execution_id, "execution id")
        data: dict[str, Any] = {} if reason is None else {"reason": reason}
        event = new_event(name, data, event_id or derived_id(execution_id, name.rsplit(".", 1)[1], time.time_ns()))
        self._send([(execution_id, event)])
        return event.id

    def heartbeat(self, task_id: str, details: Any = None, *, execution_id: str | None = None) -> str:
        """Report that task ``task_id`` is alive, with ``details`` (JSON: progress, a checkpoint) the
        execution keeps as the task's last heartbeat. With a ``heartbeat_timeout`` the task must heartbeat
        at least that often, or it fails with ``TaskTimeout``. ``execution_id`` is needed only for a task
        id too long to hold it (the task receives both). Returns the heartbeat's event id; a heartbeat
        for a task that is no longer running is ignored (traced), not an error."""
        target, event = heartbeat_message(task_id, details, execution_id)
        self.transport.send([(target, event)])
        return event.id

    def reset(self, execution_id: str, to: Sequence[str], *, actions: str = "none",
              context_patch: dict[str, Any] | None = None, send: tuple[str, dict[str, Any]] | None = None,
              reason: str | None = None, by: str | None = None, request_id: str | None = None) -> str:
        """Queue a ``durastate.reset``: the execution moves to the configuration ``to`` (state paths), its
        timers and children following (``actions``: ``none``, or ``transition`` to run the exit and entry
        actions), its context patched first (JSON merge patch), then ``send`` (an event name and its data)
        applied, all in one commit traced with ``by`` and ``reason``. With a store and ``definitions`` the
        reset is checked first (:class:`~durastate.errors.ControlRefused`, nothing queued). Returns the event
        id; pass the same ``request_id`` to retry a reset safely (it is applied once)."""
        check_event_id(execution_id, "execution id")
        if self.store is not None and self.definitions is not None:
            store_control.check_reset_of(self.store, self.definitions, execution_id, list(to))
        event = store_control.reset_event(execution_id, list(to), actions=actions, context_patch=context_patch,
                                          send=send, reason=reason, by=by, request=request_id)
        self._send([(execution_id, event)])
        return event.id

    def terminate(self, execution_id: str, reason: str | None = None) -> Execution:
        """End the execution now, in the store: no action runs, timers are disarmed, children are
        terminated. Works while a failing message blocks its queue. Needs the store."""
        return store_control.terminate(self._store("terminate an execution"), execution_id, reason, self.clock,
                                       self.definitions)

    def redrive(self, execution_id: str) -> Event:
        """Restore a failed execution to the state before its failed step and queue that step's event
        again (through the outbox: the relay delivers it). Returns that event. Needs the store."""
        return store_control.redrive(self._store("redrive an execution"), execution_id, self.clock).event

    def migrate(self, definition_id: str, from_version: str, to: Definition | None = None,
                mapping: Mapping[str, str] | None = None, *, ids: Collection[str] | None = None,
                statuses: Collection[str] | None = None, dry_run: bool = False) -> Migration:
        """Move running and suspended executions of ``definition_id`` from ``from_version`` to ``to``'s version
        (default: the client's ``definitions``' copy) — only ``ids``, or only those in ``statuses``, when
        given — as ``durastate migrate`` does (:func:`~durastate.store.migration.migrate_executions`: one
        commit each, nothing moved if any would be stranded). Needs the store."""
        from durastate.store.migration import migrate_executions

        store = self._store("migrate executions")
        if to is None:
            if self.definitions is None:
                raise DurastateError("pass the target version's definition as to=, or build the client with "
                                     "definitions=")
            to = self.definitions.get(definition_id)
        assert to is not None
        return migrate_executions(store, definition_id, from_version, to, mapping, ids=ids, statuses=statuses,
                                  clock=self.clock, dry_run=dry_run)

    # -- schedules -------------------------------------------------------------------------------------
    def schedules(self, include_removed: bool = False) -> list[ScheduleState]:
        """The stored schedules by name (``durastate schedules list``; removed ones only if asked). Needs the
        store."""
        return store_schedules.list_schedules(self._store("read schedules"), include_removed)

    def schedule(self, name: str) -> ScheduleState:
        """The stored schedule ``name`` (:class:`~durastate.errors.UnknownSchedule` if there is none)."""
        return store_schedules.get_schedule(self._store("read schedules"), name)

    def pause_schedule(self, name: str) -> ScheduleState:
        """Start nothing more until :meth:`resume_schedule` (the ticks meanwhile are missed). Needs the store."""
        return store_schedules.pause_schedule(self._store("pause a schedule"), name, self.clock())

    def resume_schedule(self, name: str) -> ScheduleState:
        """Start executions again (``catch_up: once`` runs one for the ticks missed). Needs the store."""
        return store_schedules.resume_schedule(self._store("resume a schedule"), name, self.clock())

    def trigger_schedule(self, name: str) -> str:
        """Start one execution of the schedule now, besides its ticks; returns its id. Needs the store."""
        return store_schedules.trigger_schedule(self._store("trigger a schedule"), name, self.clock())

    def backfill_schedule(self, name: str, start: float | datetime, end: float | datetime) -> Backfill:
        """Start the ticks of ``name`` from ``start`` to ``end`` (both included; epoch seconds or aware
        datetimes, ``end`` at most now) that have no execution yet, each as the execution its tick would
        have started, so none starts twice (``durastate schedules backfill``). Needs the store."""
        return store_schedules.backfill_schedule(self._store("backfill a schedule"), name, _epoch(start),
                                                 _epoch(end), self.clock())

    def delete_schedule(self, name: str) -> ScheduleState:
        """Stop schedule ``name`` for good: its timer is cancelled in the same commit that marks it deleted
        (``durastate schedules delete``; remove it from the ``schedules:`` file too, or the next sync stores
        it again). Needs the store."""
        return store_schedules.delete_schedule(self._store("delete a schedule"), name, self.clock())

    # -- dead letters ----------------------------------------------------------------------------------
    def _box(self) -> DeadLetterBox:
        if self.dead_letter_box is None:
            raise DurastateError("this client has no dead-letter box: on AWS build it with "
                                 "DurastateClient.for_aws(..., dlq_url=...), else over the store's own queue "
                                 "(SqliteTransport, PostgresTransport)")
        return self.dead_letter_box

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> DeadLetterPage:
        """One page of dead letters (events the worker could never apply, with why), oldest first."""
        return self._box().list(limit, cursor)

    def dead_letter(self, letter_id: str) -> DeadLetter | None:
        """One dead letter by id, or ``None``."""
        return self._box().get(letter_id)

    def replay_dead_letters(self, ids: Sequence[str] | None = None) -> list[DeadLetter]:
        """Put dead letters back on the queue (all for ``None``), keeping their event ids: one already
        applied changes nothing. Returns those replayed."""
        return self._box().replay(ids)

    def drop_dead_letter(self, letter_id: str) -> DeadLetter:
        """Forget a dead letter for good; returns it."""
        return self._box().drop(letter_id)

    # -- reading -------------------------------------------------------------------------------------
    def _store(self, what: str = "read executions") -> ExecutionStore:
        if self.store is None:
            raise DurastateError(f"this client has no store: build it with a store (or a table prefix) to {what}")
        return self.store

    def get(self, execution_id: str) -> Execution | None:
        """The execution as last committed, or ``None`` if it does not exist (yet)."""
        return self._store().load(execution_id)

    def trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The execution's step trace, oldest first (the last ``trace_max`` steps)."""
        return self._store().read_trace(execution_id)

    def history(self, execution_id: str) -> list[dict[str, Any]]:
        """Every recorded step of the execution, oldest first: its whole history when the store keeps
        histories (``history=True``, ``?history=1``), else what its trace ring holds."""
        return self._store().read_history(execution_id)

    def list(self, definition_id: str | None = None, status: str | Sequence[str] | None = None,
             roots_only: bool = False, limit: int = 100, cursor: str | None = None, *,
             parent_id: str | None = None, updated_after: float | None = None,
             updated_before: float | None = None,
             where: Mapping[str, SearchValue] | Sequence[Condition | tuple[str, str, SearchValue]] = (),
             ) -> ExecutionPage:
        """One page of execution summaries; pass ``next_cursor`` back for the next page (filters:
        :meth:`~durastate.store.ExecutionStore.list_executions`).

        ``where``: search fields (the definition's ``search:``) the executions must match, every one —
        ``{"customer": "c-17"}`` for equalities, ``[("total", ">", 100)]`` for any operator of
        :data:`~durastate.engine.search.OPERATORS`; the value's Python type is the field's type."""
        conditions = check_conditions(
            [(k, "=", v) for k, v in where.items()] if isinstance(where, Mapping) else where)
        return self._store().list_executions(definition_id=definition_id, status=status,
                                             roots_only=roots_only, limit=limit, cursor=cursor, parent_id=parent_id,
                                             updated_after=updated_after, updated_before=updated_before,
                                             where=conditions)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def _epoch(when: float | datetime) -> float:
    """``when`` as epoch seconds; a naive datetime is refused (its time zone would be a guess)."""
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise DurastateError(f"{when.isoformat()} has no time zone: pass an aware datetime "
                                 "(e.g. datetime(..., tzinfo=UTC)) or epoch seconds")
        return when.timestamp()
    return float(when)
