"""How ``start`` and ``send`` hand an event over.

With a durable inbox (SQLite, PostgreSQL) the event is queued and the command returns: ``durastate serve``,
running now or started later, in this process or another, applies it — nothing is lost if no server is
up. Without one (``memory://``, or a store whose queue is managed elsewhere) the event is applied here,
by an in-process worker + relay + sweeper run until idle, and the command shows the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from durastate.cli.clock import command_clock
from durastate.cli.session import Session
from durastate.engine.ids import producer_problem
from durastate.engine.model import START, Event, Execution
from durastate.errors import DurastateError, ReservedId, StoreUnavailable


@dataclass
class Delivery:
    queued: bool
    outcome: str = "queued"
    execution: Execution | None = None


def deliver(sess: Session, target_id: str, event: Event, *, witnessed: bool = False) -> Delivery:
    """Queue or apply ``event``; what only durastate may send is refused first (:class:`ReservedId`),
    unless ``witnessed``: an event durastate built itself, whose witness the worker checks (a task's
    heartbeat names its unguessable task id)."""
    problem = None if witnessed else producer_problem(target_id, event.name, event.id)
    if problem is not None:
        raise ReservedId(problem)
    inbox = sess.inbox
    if inbox is not None:
        inbox.send([(target_id, event)])
        return Delivery(queued=True)
    return apply_in_process(sess, target_id, event, witnessed=witnessed)


def apply_in_process(sess: Session, target_id: str, event: Event, *, witnessed: bool = False) -> Delivery:
    """Apply ``event`` with a local runtime in this process, until there is nothing left to do now."""
    from durastate.runtime import LocalRuntime

    runtime = LocalRuntime(sess.store, sess.registry, clock=command_clock())
    if witnessed:
        runtime.transport.send([(target_id, event)])
    else:
        runtime.send(target_id, event)
    runtime.run_until_idle()
    if getattr(runtime.transport, "pending", lambda: 0)():  # the in-memory queue LocalRuntime made
        # A transient failure released it for a later retry, but this in-process queue ends with the
        # command: say so, rather than report "not applied" and lose it.
        raise StoreUnavailable(f"event {event.id} ({event.name}) for {target_id} could not be applied now "
                               "(the store failed and its retry would outlive this command); nothing was "
                               "changed: send it again (the same --id applies it once)")
    for letter in runtime.dead_letters:
        if letter.event.id == event.id:
            raise DurastateError(letter.reason)
    applied = sess.store.is_processed(target_id, event.id)
    return Delivery(queued=False, outcome="applied" if applied else "not applied",
                    execution=sess.store.load(target_id))


QUEUED_UNKNOWN = ""
"""``queued_start``'s answer when something waits for the id but the queue cannot show what."""


def queued_start(sess: Session, execution_id: str) -> str | None:
    """The definition id of a ``durastate.start`` for ``execution_id`` still waiting in the inbox, if any.

    Lets ``durastate start X && durastate send X e`` work before any server has run: the send is queued behind
    the start in X's queue, in order. Returns :data:`QUEUED_UNKNOWN` when the queued start names no
    definition, and ``None`` when no start waits.
    """
    inbox = sess.inbox
    if inbox is None:
        return None
    peek = getattr(inbox, "messages", None)  # every queue transport durastate ships has it; SQS does not
    if not callable(peek):
        return None
    for target, event in peek(execution_id):
        if target == execution_id and event.name == START:
            definition_id = event.data.get("definition_id")
            return definition_id if isinstance(definition_id, str) else QUEUED_UNKNOWN
    return None
