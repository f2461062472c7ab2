"""Which store and which event queue a store URL means for the command line.

``open_store`` (the library's) retries a server for a long time, which suits a worker that starts
before its database. A person at a prompt is better served by failing fast, so the networked stores
are built here with small retry counts; everything else goes through ``open_store`` unchanged.

The durable inbox is where ``start`` and ``send`` put events so that a ``serve`` — now or later, in
this process or another — applies them:

    sqlite:///f.db   SqliteTransport in the same file (the embedded runtime's inbox)
    postgresql://…   PostgresTransport (a queue table claimed with SKIP LOCKED)
    anything else    no inbox: the command applies the event itself, in process
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from durastate.errors import DurastateError

if TYPE_CHECKING:
    from durastate.store import ExecutionStore
    from durastate.transport import QueueTransport


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///`` URL (relative to the working directory unless it starts with /)."""
    return url[len("sqlite:///"):] if url.startswith("sqlite:///") else ""


class NoStore(DurastateError):
    """A command that reads was pointed at a SQLite file that does not exist (a typo, most often)."""


def open_cli_store(url: str, retries: int, *, create: bool = True) -> ExecutionStore:
    """Open the store of ``url``; networked backends get ``retries`` connection attempts.

    ``create=False`` (every command but ``start`` and ``serve``): a SQLite file that does not exist is an
    error, not a new empty store — ``durastate list --store sqlite:///typo.db`` must say so, not answer
    "no executions". A file this process may not write is opened read-only.
    """
    from durastate.store.urls import split_history

    url, history = split_history(url)
    store = _open_cli_store(url, retries, create=create)
    store.history = history
    return store


def _open_cli_store(url: str, retries: int, *, create: bool) -> ExecutionStore:
    from durastate.store import open_store

    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        path = sqlite_path(url)
        if path and path != ":memory:":
            file = Path(path).expanduser()
            if not create and not file.is_file():
                raise NoStore(f"no store at {path!r}: check --store / DURASTATE_STORE (only `durastate start` "
                              "and `durastate serve` create a SQLite store)")
            if file.is_file() and not os.access(file, os.W_OK):
                from durastate.store.sqlite.sync import SqliteStore

                return SqliteStore(file, read_only=True)
            # Creating the file is what a user expects of an embedded database; creating its folder too.
            file.parent.mkdir(parents=True, exist_ok=True)
        return open_store(url)
    if scheme in ("postgresql", "postgres"):
        from durastate.store.postgres.sync import PostgresStore

        return PostgresStore.from_dsn(with_connect_timeout(url), connect_attempts=retries,
                                      connect_interval=0.5)
    if scheme == "dynamodb":
        from durastate.store.dynamodb.sync import DynamoDBStore
        from durastate.store.urls import dynamodb_url

        return DynamoDBStore.create(**dynamodb_url(url), connect_attempts=retries, connect_delay=0.5,
                                    max_attempts=2, connect_timeout=3.0, read_timeout=10.0)
    return open_store(url)


def with_connect_timeout(url: str, seconds: int = 5) -> str:
    """Add libpq's ``connect_timeout`` unless given: an unroutable host must not hang a prompt."""
    if "connect_timeout=" in url:
        return url
    return url + ("&" if "?" in url else "?") + f"connect_timeout={seconds}"


def open_inbox(scheme: str, url: str, store: ExecutionStore, retries: int) -> QueueTransport | None:
    """The durable queue that belongs to this store, or ``None`` when events are applied in process."""
    if scheme == "sqlite":
        from durastate.store.sqlite.sync import SqliteStore
        from durastate.transport.sqlite import SqliteTransport

        # On the store itself: one connection for both, so a commit and a claim never contend in-process.
        return SqliteTransport(store if isinstance(store, SqliteStore) else sqlite_path(url))
    if scheme == "postgresql":
        from durastate.store.urls import split_history
        from durastate.transport.postgres import PostgresTransport

        # ``?history=1`` configures the store, not the connection: libpq refuses a parameter it does not know.
        return PostgresTransport.from_dsn(with_connect_timeout(split_history(url)[0]), connect_attempts=retries,
                                          connect_interval=0.5)
    return None
