"""The store seam: :class:`ExecutionStore` (and :class:`AsyncExecutionStore`) and their backends.

Each backend is a subpackage with its sync store and its async twin side by side: ``memory``,
``sqlite``, ``postgres`` and ``dynamodb``. Backends whose client library is an optional extra
(PostgreSQL, DynamoDB) are imported lazily, on first attribute access, so ``import durastate.store``
never needs psycopg, boto3 or aiobotocore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from durastate._lazy import lazy_attributes
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    AsyncExecutionStore,
    ContextKeepingStore,
    EventCheckingStore,
    ExecutionPage,
    ExecutionStore,
    ExecutionSummary,
    OutboxEntry,
    SpawnEntry,
    StoreConflict,
    TimerOp,
)
from durastate.store.memory import AsyncDictStore, DictStore
from durastate.store.urls import open_store

if TYPE_CHECKING:
    from durastate.store.dynamodb import AsyncDynamoDBStore, DynamoDBStore
    from durastate.store.postgres import AsyncPostgresStore, PostgresStore
    from durastate.store.sqlite import AsyncSqliteStore, SqliteStore

__all__ = [
    "DEFAULT_TRACE_MAX",
    "AsyncDictStore",
    "AsyncDynamoDBStore",
    "AsyncExecutionStore",
    "AsyncPostgresStore",
    "AsyncSqliteStore",
    "ContextKeepingStore",
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
    "SqliteStore": "durastate.store.sqlite",
    "AsyncSqliteStore": "durastate.store.sqlite",
    "PostgresStore": "durastate.store.postgres",
    "AsyncPostgresStore": "durastate.store.postgres",
    "DynamoDBStore": "durastate.store.dynamodb",
    "AsyncDynamoDBStore": "durastate.store.dynamodb",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
