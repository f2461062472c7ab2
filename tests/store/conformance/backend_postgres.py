"""PostgresStore and AsyncPostgresStore in the conformance suite, against the real server.

Each store gets its own schema (named by the request's unique id) that is dropped afterwards. The server
is ``DURASTATE_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``); when it cannot be
reached the backends skip with the reason.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from durastate.store.base import AsyncExecutionStore, ExecutionStore

from .backends import BackendRequest, register

DSN = os.environ.get("DURASTATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _admin() -> Any:
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'durastate[postgres]')")
    try:
        return psycopg.connect(DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not reachable at {DSN}: {exc}")


def _drop(schema: str) -> None:
    with _admin() as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@register("postgres", durable=True)
@contextlib.contextmanager
def _postgres(req: BackendRequest) -> Iterator[ExecutionStore]:
    from durastate.store.postgres.sync import PostgresStore

    _admin().close()
    store = PostgresStore.from_dsn(DSN, schema=req.unique, trace_max=req.trace_max, connect_attempts=1)
    try:
        yield store
    finally:
        store.close()
        _drop(req.unique)


@register("async-postgres", durable=True, is_async=True)
@contextlib.asynccontextmanager
async def _async_postgres(req: BackendRequest) -> AsyncIterator[AsyncExecutionStore]:
    from durastate.store.postgres.aio import AsyncPostgresStore

    _admin().close()
    store = await AsyncPostgresStore.from_dsn(
        DSN, schema=req.unique, trace_max=req.trace_max, pool_size=2, connect_attempts=1
    )
    try:
        yield store
    finally:
        await store.close()
        _drop(req.unique)
