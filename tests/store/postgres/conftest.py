"""Fixtures for the PostgreSQL tests: the real server, a fresh schema per test (dropped afterwards).

The server is ``DURASTATE_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``, trust
auth); if it cannot be reached every test here skips with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

DSN = os.environ.get("DURASTATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def connect(**kwargs: Any) -> Any:
    return psycopg.connect(DSN, **{"autocommit": True, "connect_timeout": 3, **kwargs})


@pytest.fixture(scope="session")
def pg_available() -> None:
    try:
        connect().close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not reachable at {DSN}: {exc}")


@pytest.fixture
def admin(pg_available: None) -> Iterator[Any]:
    """An autocommit connection for inspecting the server from the side."""
    with connect() as conn:
        yield conn


@pytest.fixture
def schema(admin: Any) -> Iterator[str]:
    """A schema name unique to this test; whatever the test created in it is dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def dsn(schema: str) -> str:
    """The server DSN with this test's schema as durastate's ``?schema=`` option."""
    sep = "&" if "?" in DSN else "?"
    return f"{DSN}{sep}schema={schema}"


class RoundTrips:
    """Counts client/server round trips on a psycopg connection from libpq's protocol trace.

    Every exchange ends with the server's ``ReadyForQuery``: one per ``Sync`` of the extended protocol
    (a pipeline's whole batch is one) and one per simple ``Query`` — so counting them counts round trips.
    """

    def __init__(self, conn: Any, path: str) -> None:
        self.conn, self.path = conn, path

    def __enter__(self) -> RoundTrips:
        self._file = open(self.path, "w")
        self.conn.pgconn.trace(self._file.fileno())
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.pgconn.untrace()
        self._file.close()
        with open(self.path) as f:
            lines = f.read().splitlines()
        self.count = sum(1 for ln in lines if "\tReadyForQuery" in ln)
        self.statements = [ln for ln in lines if "\tQuery\t" in ln or "\tBind\t" in ln]
