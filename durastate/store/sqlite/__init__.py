"""The durable embedded store, ``SqliteStore``, and its async twin (the store on a dedicated thread)."""

from durastate.store.sqlite.aio import AsyncSqliteStore
from durastate.store.sqlite.sync import SqliteStore

__all__ = ["AsyncSqliteStore", "SqliteStore"]
