"""The distributed-SQL store, ``PostgresStore``, and its async twin over a connection pool.

psycopg is imported only where a connection is made (``from_dsn``), so importing this package does not
need it; an injected connection works with any DB-API-like driver that psycopg's shape fits.
"""

from durastate.store.postgres.aio import AsyncPostgresStore
from durastate.store.postgres.sync import PostgresStore

__all__ = ["AsyncPostgresStore", "PostgresStore"]
