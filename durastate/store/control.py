"""Control operations a user runs against a store: terminate, redrive, and the control events.

They live with the store seam, not in the runtime, because anything holding a store does them: the
CLI, ``LocalRuntime``, the producer-side ``DurastateClient`` and a Lambda all share this one loop.

``cancel``, ``suspend``, ``resume`` and ``reset`` travel as events through the execution's own queue, so they keep
their order with its other events (on SQS FIFO: the same message group). ``terminate`` and ``redrive``
are commits straight to the store, each one compare-and-swap: ``terminate`` must work even when the
execution's queue is blocked by a message that keeps failing (that message then meets a terminated
execution and is consumed), and ``redrive`` restores a failed execution and queues its failed event
again through the outbox, which the relay delivers like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from durastate.engine import control
from durastate.engine.definition import Definition
from durastate.engine.ids import CANCEL, RESET, RESUME, SUSPEND, derived_id, reset_event_id
from durastate.engine.model import Event, Execution, new_id
from durastate.engine.registry import DefinitionRegistry
from durastate.engine.reset import ResetRefused, ResetRequest, check_reset
from durastate.engine.run_timeout import check_start_timeout
from durastate.engine.versions import definition_version
from durastate.errors import (
    ControlRefused,
    StoreConflict,
    UnknownDefinition,
    UnknownDefinitionVersion,
    UnknownExecution,
)
from durastate.store.base import ExecutionStore
from durastate.store.definitions import load_version

__all__ = [
    "ControlRefused",
    "Redriven",
    "cancel_event",
    "check_reset_of",
    "redrive",
    "redrive_many",
    "reset_event",
    "resume_event",
    "running_definition",
    "start_data",
    "suspend_event",
    "terminate",
]


@dataclass(frozen=True)
class Redriven:
    """One execution a redrive restored: the event it applies again, under a new id."""

    execution_id: str
    event: Event


def start_data(definition_id: str, context: dict[str, Any] | None = None,
               timeout: float | str | None = None) -> dict[str, Any]:
    """The data of the ``durastate.start`` event that creates an execution of ``definition_id`` (``timeout``:
    its own run timeout, checked here, instead of the definition's): one shape for the client, the console
    and the local runtime."""
    data: dict[str, Any] = {"definition_id": definition_id, "context": dict(context or {})}
    if timeout is not None:
        data["timeout"] = check_start_timeout(timeout)
    return data


def _control(name: str, execution_id: str, reason: str | None, event_id: str | None) -> Event:
    data: dict[str, Any] = {} if reason is None else {"reason": reason}
    return Event(id=event_id or derived_id(execution_id, name.rsplit(".", 1)[1], time.time_ns()),
                 name=name, data=data)


def cancel_event(execution_id: str, reason: str | None = None, event_id: str | None = None) -> Event:
    """The ``durastate.cancel`` event (exit actions run, children are cancelled, the parent is told)."""
    return _control(CANCEL, execution_id, reason, event_id)


def suspend_event(execution_id: str, reason: str | None = None, event_id: str | None = None) -> Event:
    """The ``durastate.suspend`` event: later events are held until a resume."""
    return _control(SUSPEND, execution_id, reason, event_id)


def resume_event(execution_id: str, event_id: str | None = None) -> Event:
    """The ``durastate.resume`` event: the held events apply, in order."""
    return _control(RESUME, execution_id, None, event_id)


def reset_event(execution_id: str, to: list[str], *, actions: str = "none",
                context_patch: dict[str, Any] | None = None, send: tuple[str, dict[str, Any]] | None = None,
                reason: str | None = None, by: str | None = None, request: str | None = None) -> Event:
    """The ``durastate.reset`` event moving ``execution_id`` to the configuration ``to``
    (:mod:`durastate.engine.reset`). Its id is derived from its data, which holds ``request`` (a new
    nonce unless given: pass the same one to retry a reset safely). Raises :class:`ControlRefused` for
    input that can never apply (no states named, unknown ``actions``)."""
    try:
        req = ResetRequest(to, actions=actions, context_patch=context_patch, send=send, reason=reason, by=by,
                           request=request or new_id())
    except ResetRefused as err:
        raise ControlRefused(str(err)) from None
    data = req.data()
    return Event(id=reset_event_id(execution_id, data), name=RESET, data=data)


def check_reset_of(store: ExecutionStore, registry: DefinitionRegistry, execution_id: str,
                   to: list[str]) -> tuple[Execution, list[str]]:
    """Check, before sending it, that a reset of ``execution_id`` to ``to`` can apply to the execution as it
    is stored now (its status, and the configuration in the version it runs on); returns it and the
    resolved state paths. Raises :class:`UnknownExecution` or :class:`ControlRefused`; changes nothing."""
    exe = store.load(execution_id)
    if exe is None:
        raise UnknownExecution(execution_id)
    try:
        defn = registry.for_execution(exe)
    except UnknownDefinition:
        if exe.definition_version is None:
            raise
        found = load_version(store, exe.definition_id, exe.definition_version)
        if found is None:
            raise UnknownDefinitionVersion(exe.definition_id, exe.definition_version, exe.id) from None
        defn = found
    try:
        return exe, check_reset(defn, exe, to)
    except ResetRefused as err:
        raise ControlRefused(str(err)) from None


def _commit_control(store: ExecutionStore, execution_id: str,
                    change: Callable[[Execution], tuple[control.Effects, list[tuple[str | None, Event]]]],
                    attempts: int = 8) -> Execution:
    """Load, change, commit with a compare-and-swap; reload and change again when another writer won."""
    for _ in range(attempts):
        exe = store.load(execution_id)
        if exe is None:
            raise UnknownExecution(execution_id)
        try:
            effects, extra = change(exe)
        except control.ControlError as err:
            raise ControlRefused(str(err)) from None
        try:
            store.commit(exe, [*effects.emits, *extra], timers=effects.timers,
                         trace={"event": effects.trace.get("control"), "from": exe.active_path,
                                "to": exe.active_path, "status": exe.status, "at": exe.updated_at,
                                **effects.trace})
        except StoreConflict:
            continue
        return exe
    raise StoreConflict(execution_id, None, None)


def terminate(store: ExecutionStore, execution_id: str, reason: str | None = None,
              clock: Callable[[], float] = time.time, definitions: Any = None) -> Execution:
    """End ``execution_id`` at once, running no action; its running children are terminated too, and its
    running tasks are asked to stop (a Python task's flag, an HTTP task's ``cancel_url``: the cancel request
    in the outbox, which the relay passes on) when the definition version it runs on is known — archived
    in the store, or ``definitions``' copy (anything with ``get(definition_id)``) of that version."""

    def change(exe: Execution) -> tuple[control.Effects, list[tuple[str | None, Event]]]:
        defn = running_definition(store, definitions, exe) if any(
            ref.kind == "task" and ref.status == "running" for ref in exe.children.values()) else None
        return control.terminate(exe, reason, clock(), defn.tables if defn is not None else None), []

    return _commit_control(store, execution_id, change)


def running_definition(store: ExecutionStore, definitions: Any, exe: Execution) -> Definition | None:
    """The definition version ``exe`` runs on: archived in the store, else ``definitions``' copy when it is
    that version (or the execution records none); ``None`` when neither has it."""
    if exe.definition_version is not None:
        archived = load_version(store, exe.definition_id, exe.definition_version)
        if archived is not None:
            return archived
    if definitions is None:
        return None
    try:
        defn: Definition | None = definitions.get(exe.definition_id)
    except (UnknownDefinition, UnknownDefinitionVersion):
        return None
    if defn is None or (exe.definition_version is not None and definition_version(defn) != exe.definition_version):
        return None
    return defn


def redrive(store: ExecutionStore, execution_id: str, clock: Callable[[], float] = time.time) -> Redriven:
    """Restore a failed execution to the state before its failed step and queue that step's event again
    (through the outbox: the relay delivers it, and the worker applies it as usual)."""
    again: list[Event] = []

    def change(exe: Execution) -> tuple[control.Effects, list[tuple[str | None, Event]]]:
        effects, event = control.redrive(exe, clock())
        again[:] = [event]
        return effects, [(exe.id, event)]

    exe = _commit_control(store, execution_id, change)
    return Redriven(exe.id, again[0])


def redrive_many(store: ExecutionStore, definition_id: str | None = None, limit: int = 100,
                 clock: Callable[[], float] = time.time) -> Iterator[Redriven | ControlRefused]:
    """Redrive up to ``limit`` failed executions (of ``definition_id``); yields each result or refusal."""
    done = 0
    cursor: str | None = None
    while done < limit:
        page = store.list_executions(definition_id=definition_id, status="failed",
                                     limit=min(100, limit - done), cursor=cursor)
        for summary in page.items:
            try:
                yield redrive(store, summary.id, clock)
            except ControlRefused as err:
                yield err
            done += 1
        if page.next_cursor is None or not page.items:
            return
        cursor = page.next_cursor
