"""The transport seam: how ``(target_id, Event)`` pairs travel from whoever emits them to the worker.

Two shapes exist because two kinds of consumers exist. A :class:`Transport` only *sends* (the relay, the
sweeper and clients need nothing else; on AWS the consumer side is Lambda's SQS trigger). A
:class:`QueueTransport` is also *claimed from* by a worker loop we run ourselves (the local runtime,
``durastate serve``), so it carries the delivery discipline the runtime relies on: at most one unacknowledged
message per target in flight, in order per target — the same guarantee an SQS FIFO message group gives.
That discipline is what makes one execution's events apply serially without a lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from durastate.engine.model import Event

__all__ = ["Claimed", "QueueTransport", "Sink", "Transport"]


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
