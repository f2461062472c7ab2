"""The prefix rule on a real shared database: two runs of the kit at the same time, in one PostgreSQL schema,
each with its own prefix, both pass — neither sees (nor purges, nor acks) the other's data."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from durastate.testing import Capabilities, Report, check_store
from tests.store.conformance.backend_postgres import DSN


@pytest.fixture
def schema() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not reachable at {DSN}: {exc}")
    name = f"kit{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        admin.close()


def test_two_concurrent_runs_share_one_schema(schema: str) -> None:
    from durastate.store.postgres.sync import PostgresStore

    def run(_: int) -> Report:
        return check_store(lambda: PostgresStore.from_dsn(DSN, schema=schema, connect_attempts=1),
                           capabilities=Capabilities(shared=True))

    PostgresStore.from_dsn(DSN, schema=schema, connect_attempts=1).close()  # the schema, made once
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(run, range(2))
    assert first.prefix != second.prefix
    assert first.ok and second.ok
    assert len(first.of("passed")) == len(second.of("passed")) == len(first.outcomes) - 4  # the exclusive four
