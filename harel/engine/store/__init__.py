"""The store seam: :class:`ExecutionStore` and its backends.

Backends whose client library is an optional extra (PostgreSQL, DynamoDB) are imported lazily, on first
attribute access, so ``import harel`` never needs psycopg or boto3.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harel.engine.store._base import (
    DEFAULT_TRACE_MAX,
    EventCheckingStore,
    ExecutionPage,
    ExecutionStore,
    ExecutionSummary,
    OutboxEntry,
    SpawnEntry,
    StoreConflict,
    TimerOp,
)
from harel.engine.store._open import open_store
from harel.engine.store.dict import DictStore

if TYPE_CHECKING:
    from harel.engine.store.dynamodb import DynamoDBStore
    from harel.engine.store.postgres import PostgresStore
    from harel.engine.store.sqlite import SqliteStore

__all__ = [
    "DEFAULT_TRACE_MAX",
    "DictStore",
    "DynamoDBStore",
    "EventCheckingStore",
    "ExecutionPage",
    "ExecutionStore",
    "ExecutionSummary",
    "OutboxEntry",
    "PostgresStore",
    "SpawnEntry",
    "SqliteStore",
    "StoreConflict",
    "TimerOp",
    "open_store",
]

_LAZY = {
    "SqliteStore": "harel.engine.store.sqlite",
    "PostgresStore": "harel.engine.store.postgres",
    "DynamoDBStore": "harel.engine.store.dynamodb",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
