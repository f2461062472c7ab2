"""The transport seam: how ``(target_id, Event)`` pairs travel from whoever emits them to the worker.

Two shapes exist because two kinds of consumers exist. A :class:`Transport` only *sends* (the relay, the
sweeper and clients need nothing else; on AWS the consumer side is Lambda's SQS trigger). A
:class:`QueueTransport` is also *claimed from* by a worker loop we run ourselves (the local runtime,
``durastate serve``), so it carries the delivery discipline the runtime relies on: at most one unacknowledged
message per target in flight, in order per target — the same guarantee an SQS FIFO message group gives.
That discipline is what makes one execution's events apply serially without a lock.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from durastate.engine.model import Event
from durastate.errors import DurastateError, InvalidCursor

__all__ = [
    "Claimed",
    "DeadLetter",
    "DeadLetterBox",
    "DeadLetterPage",
    "QueueTransport",
    "ReplayRefused",
    "Sink",
    "Transport",
    "UnknownDeadLetter",
    "check_replayable",
    "dead_letter_id",
    "seq_cursor",
    "stored_event",
    "unreadable_event",
]


@dataclass(frozen=True, slots=True)
class Claimed:
    """One claimed message: hand it back with ``ack`` (done) or ``release`` (retry, now or after a delay).

    ``token`` identifies this particular claim; a claim whose lease expired and was re-claimed by someone
    else has a stale token, and acking it is a harmless no-op (the worker dedupes by event id anyway).
    ``attempts`` counts claims of this message including this one, so a consumer can stop retrying.
    """

    token: str
    target_id: str
    event: Event
    attempts: int = 1


@runtime_checkable
class Transport(Protocol):
    """Sends targeted events. Retries internally; raises if it cannot deliver every message."""

    def send(self, messages: Sequence[tuple[str, Event]]) -> None: ...


@runtime_checkable
class QueueTransport(Transport, Protocol):
    """A transport a worker loop claims from: one in-flight message per target, in order per target.

    ``release(c, delay)`` gives a message back for a retry no sooner than ``delay`` seconds from now (by
    the transport's clock; SQS rounds up to whole seconds). It stays its target's next message meanwhile:
    nothing queued behind it for the same target is handed out first, so a ``durastate.start`` that keeps
    failing for a while holds back the later events of its execution instead of letting them find it
    missing.
    """

    def claim(self, max_messages: int, lease_seconds: float = 30.0) -> list[Claimed]: ...

    def ack(self, c: Claimed) -> None: ...

    def release(self, c: Claimed, delay: float = 0.0) -> None: ...


@runtime_checkable
class Sink(Protocol):
    """Receives untargeted emits (notifications for the outside world; on AWS an EventBridge bus)."""

    def publish(self, events: Sequence[Event]) -> None: ...


# -- dead letters ---------------------------------------------------------------------------------------
def dead_letter_id(target_id: str, event_id: str) -> str:
    """The id of the dead letter of ``event_id`` for ``target_id``: 16 hex digits, the same every time.

    Derived, not drawn: the same event dead-lettered again (a replay that failed the same way, a crash
    between keeping a letter and acking its message) is the same letter, kept once.
    """
    return hashlib.sha256(f"{target_id}\n{event_id}".encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message the runtime cannot apply for good, kept with why, so a user can see, replay or drop it.

    ``body`` is set only for a message whose body is not the wire format at all (on SQS): it holds the
    text as it arrived, ``event`` is then only a stand-in (:func:`unreadable_event`: the message id, no
    name), and the letter can be shown and dropped, never replayed. ``id`` defaults to
    :func:`dead_letter_id` of the target and the event id.
    """

    target_id: str
    event: Event
    reason: str
    error: str
    """The exception class name, e.g. ``UnknownExecution`` (``RedrivePolicy``: moved by SQS itself)."""
    attempts: int = 1
    """Deliveries of the message before it was given up on."""
    at: float = 0.0
    """When it was dead-lettered (epoch seconds)."""
    id: str = ""
    body: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", dead_letter_id(self.target_id, self.event.id))

    @property
    def replayable(self) -> bool:
        """Whether it carries an event to send again (a body that is not the wire format does not)."""
        return self.body is None and bool(self.target_id)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``durastate dead-letters list --json``)."""
        return {"id": self.id, "target_id": self.target_id,
                "event": self.event.model_dump(mode="json") if self.body is None else None,
                "reason": self.reason, "error": self.error, "at": self.at, "attempts": self.attempts,
                **({"body": self.body} if self.body is not None else {})}


def unreadable_event(message_id: str) -> Event:
    """The stand-in event of a dead letter whose body is not the wire format: its message id, no name."""
    return Event.model_construct(id=message_id, name="", data={})


def stored_event(event_json: str, body: str | None) -> Event:
    """A dead letter's event read back from a table (``body`` set: the stand-in it was kept with)."""
    if body is None:
        return Event.model_validate_json(event_json)
    return unreadable_event(str(json.loads(event_json).get("id") or ""))


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    """One page of dead letters, oldest first; pass ``next_cursor`` back for the next (``None``: the last)."""

    items: builtins.list[DeadLetter]
    next_cursor: str | None = None


class UnknownDeadLetter(DurastateError):
    """No dead letter has this id (never was, or it was replayed or dropped meanwhile)."""

    def __init__(self, letter_id: str) -> None:
        self.letter_id = letter_id
        super().__init__(f"no dead letter {letter_id!r}: it was replayed or dropped, or never existed; "
                         "`durastate dead-letters list` shows the ids there are")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.letter_id,))


class ReplayRefused(DurastateError):
    """A replay that cannot succeed (no event to send, or it would only be dead-lettered again); nothing
    was replayed."""


@runtime_checkable
class DeadLetterBox(Protocol):
    """Where a transport keeps the messages that can never apply, and gives them back on request.

    ``add`` keeps a letter (again: the same id replaces the earlier one, so keeping is idempotent);
    ``list`` pages through them oldest first; ``get`` and ``drop`` take an id (``drop`` raises
    :class:`UnknownDeadLetter` for one it does not hold). ``replay(ids)`` puts the events back on the
    transport's queue — every letter for ``ids=None`` (those without an event are left alone), else the
    ones named, raising :class:`UnknownDeadLetter` / :class:`ReplayRefused` before anything moved when
    one is unknown or has no event. A replayed event keeps its id, so replaying one that was in fact
    applied changes nothing (the worker dedupes by event id); per target the order is kept. Returns the
    letters replayed.
    """

    def add(self, letter: DeadLetter) -> None: ...

    def list(self, limit: int = 100, cursor: str | None = None) -> DeadLetterPage: ...

    def get(self, letter_id: str) -> DeadLetter | None: ...

    def drop(self, letter_id: str) -> DeadLetter: ...

    def replay(self, ids: Sequence[str] | None = None) -> builtins.list[DeadLetter]: ...


def check_replayable(held: dict[str, DeadLetter], ids: Sequence[str] | None) -> builtins.list[DeadLetter]:
    """The letters a replay of ``ids`` moves, from ``held`` (id → letter, oldest first): every replayable
    one for ``None``; else the named ones, or :class:`UnknownDeadLetter` / :class:`ReplayRefused`."""
    if ids is None:
        return [d for d in held.values() if d.replayable]
    wanted = dict.fromkeys(ids)
    for letter_id in wanted:
        letter = held.get(letter_id)
        if letter is None:
            raise UnknownDeadLetter(letter_id)
        if not letter.replayable:
            raise ReplayRefused(f"dead letter {letter_id} has no event to replay (its body is not the wire "
                                "format); drop it, and send the event again in the wire format")
    return [d for d in held.values() if d.id in wanted]


def seq_cursor(cursor: str | None) -> int:
    """The position a listing cursor of the queue boxes stands for (their letters' sequence number)."""
    if cursor is None:
        return 0
    try:
        value = int(cursor)
    except ValueError:
        raise InvalidCursor(cursor) from None
    if value < 0:
        raise InvalidCursor(cursor)
    return value
