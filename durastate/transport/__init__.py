"""Transports carry ``(target_id, Event)`` to the worker that owns the target; sinks take notifications.

Durable transports (``SqliteTransport``, ``PostgresTransport``, ``SqsTransport``) live in their own
modules and import their client libraries lazily; the in-memory one is here for tests and embedding.
Each queue keeps what can never be applied in a :class:`DeadLetterBox` (``transport.dead_letter_box``;
on AWS :class:`~durastate.transport.sqs.SqsDeadLetters` reads the dead-letter queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from durastate._lazy import lazy_attributes
from durastate.transport.base import (
    Claimed,
    DeadLetter,
    DeadLetterBox,
    DeadLetterPage,
    QueueTransport,
    ReplayRefused,
    Sink,
    Transport,
    UnknownDeadLetter,
)
from durastate.transport.memory import InMemoryDeadLetters, InMemorySink, InMemoryTransport
from durastate.transport.wire import Envelope, dump_envelope, parse_envelope

if TYPE_CHECKING:
    from durastate.transport.postgres import PostgresDeadLetters, PostgresTransport
    from durastate.transport.sqlite import SqliteDeadLetters, SqliteTransport
    from durastate.transport.sqs import SqsDeadLetters, SqsTransport

__all__ = [
    "Claimed",
    "DeadLetter",
    "DeadLetterBox",
    "DeadLetterPage",
    "Envelope",
    "InMemoryDeadLetters",
    "InMemorySink",
    "InMemoryTransport",
    "PostgresDeadLetters",
    "PostgresTransport",
    "QueueTransport",
    "ReplayRefused",
    "Sink",
    "SqliteDeadLetters",
    "SqliteTransport",
    "SqsDeadLetters",
    "SqsTransport",
    "Transport",
    "UnknownDeadLetter",
    "dump_envelope",
    "parse_envelope",
]

_LAZY = {
    "SqliteTransport": "durastate.transport.sqlite",
    "SqliteDeadLetters": "durastate.transport.sqlite",
    "PostgresTransport": "durastate.transport.postgres",
    "PostgresDeadLetters": "durastate.transport.postgres",
    "SqsTransport": "durastate.transport.sqs",
    "SqsDeadLetters": "durastate.transport.sqs",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
