"""Transports carry ``(target_id, Event)`` to the worker that owns the target; sinks take notifications.

Durable transports (``SqliteTransport``, ``PostgresTransport``, ``SqsTransport``) live in their own
modules and import their client libraries lazily; the in-memory one is here for tests and embedding.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from durastate.transport.base import Claimed, QueueTransport, Sink, Transport
from durastate.transport.memory import InMemorySink, InMemoryTransport
from durastate.transport.wire import Envelope, dump_envelope, parse_envelope

if TYPE_CHECKING:
    from durastate.transport.postgres import PostgresTransport
    from durastate.transport.sqlite import SqliteTransport
    from durastate.transport.sqs import SqsTransport

__all__ = [
    "Claimed",
    "Envelope",
    "InMemorySink",
    "InMemoryTransport",
    "PostgresTransport",
    "QueueTransport",
    "Sink",
    "SqliteTransport",
    "SqsTransport",
    "Transport",
    "dump_envelope",
    "parse_envelope",
]

_LAZY = {
    "SqliteTransport": "durastate.transport.sqlite",
    "PostgresTransport": "durastate.transport.postgres",
    "SqsTransport": "durastate.transport.sqs",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
