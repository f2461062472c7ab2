"""Transports carry ``(target_id, Event)`` to the worker that owns the target; sinks take notifications.

Durable transports (``SqliteTransport``, ``PostgresTransport``, ``SqsTransport``) live in their own
modules and import their client libraries lazily; the in-memory one is here for tests and embedding.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harel.transport.base import Claimed, QueueTransport, Sink, Transport
from harel.transport.memory import InMemorySink, InMemoryTransport
from harel.transport.wire import Envelope, dump_envelope, parse_envelope

if TYPE_CHECKING:
    from harel.transport.postgres import PostgresTransport
    from harel.transport.sqlite import SqliteTransport
    from harel.transport.sqs import SqsTransport

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
    "SqliteTransport": "harel.transport.sqlite",
    "PostgresTransport": "harel.transport.postgres",
    "SqsTransport": "harel.transport.sqs",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
