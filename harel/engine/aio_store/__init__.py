"""Async twins of the stores: the same semantics, awaited. Optional backends import lazily."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harel.engine.aio_store.dict import AsyncDictStore
from harel.engine.store._base import AsyncExecutionStore

if TYPE_CHECKING:
    from harel.engine.aio_store.dynamodb import AsyncDynamoDBStore
    from harel.engine.aio_store.postgres import AsyncPostgresStore
    from harel.engine.aio_store.sqlite import AsyncSqliteStore

__all__ = [
    "AsyncDictStore",
    "AsyncDynamoDBStore",
    "AsyncExecutionStore",
    "AsyncPostgresStore",
    "AsyncSqliteStore",
]

_LAZY = {
    "AsyncSqliteStore": "harel.engine.aio_store.sqlite",
    "AsyncPostgresStore": "harel.engine.aio_store.postgres",
    "AsyncDynamoDBStore": "harel.engine.aio_store.dynamodb",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
