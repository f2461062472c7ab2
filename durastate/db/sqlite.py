"""The SQLite connection a store shares with its durable inbox: WAL, busy timeout, ``synchronous``.

:class:`SqliteDatabase` is plumbing, not a store: ``SqliteStore`` and ``SqliteTransport`` each hold one,
and when the transport is opened *from* a store they hold the same one, so a serve round can put the
claims, the commits and the acks in one transaction (savepoints inside). Keeping it here means the
transport never imports the store.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal, Protocol

from durastate.errors import GroupAborted, StoreUnavailable

__all__ = ["DEFAULT_BUSY_TIMEOUT", "HasSqliteDatabase", "SqliteDatabase", "Synchronous"]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
DEFAULT_BUSY_TIMEOUT = 30.0
"""Seconds a writer waits for another process's write lock before giving up (``StoreUnavailable``)."""

class SqliteDatabase:
    """One SQLite connection configured for durastate (WAL, busy timeout, synchronous) plus its lock.

    Shared by :class:`SqliteStore` and ``SqliteTransport`` so that the store and the embedded runtime's
    durable inbox can live in one file — and, when they are opened from one store, on one connection
    (no lock contention between them inside a process).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: Synchronous = "NORMAL",
        *,
        read_only: bool = False,
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be NORMAL or FULL (or OFF/EXTRA), got {synchronous!r}")
        self.path = Path(path)
        self.read_only = read_only
        """Opened with ``mode=ro``: reads work on a file this process may not write (a read-only copy, a
        file owned by another user); a write raises :class:`StoreUnavailable` saying so."""
        if str(path) != ":memory:" and not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        target = f"{self.path.resolve().as_uri()}?mode=ro" if read_only else str(path)
        try:
            # isolation_level=None: we issue BEGIN IMMEDIATE/COMMIT ourselves (the module's implicit
            # transactions would start a deferred one and upgrade it later, which can deadlock two writers).
            self.conn = sqlite3.connect(
                target,
                uri=read_only,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=256,
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open SQLite database {str(path)!r}: {exc}; check the path and its permissions"
            ) from exc
        self.lock = threading.RLock()
        self.depth = 0
        """Open write transactions on this connection: 0 none, 1 a transaction, more: savepoints in it."""
        self.generation = 0
        """Bumped whenever a write transaction ends without its ``COMMIT`` (rolled back, or failed): what a
        store remembers of rows it wrote before then may not be what the file holds."""
        self.cur = self.conn.cursor()
        self._closed = False
        try:
            self._configure(busy_timeout, synchronous)
        except BaseException as exc:
            self.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailable(
                    f"cannot use {str(path)!r} as a SQLite database ({exc}); is it a durastate database file "
                    "on a local filesystem, and is another process holding it locked?"
                ) from exc
            raise

    def _configure(self, busy_timeout: float, synchronous: Synchronous) -> None:
        c = self.cur
        c.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if self.read_only:
            return  # the file's journal mode is the writer's business; reading needs no pragma
        mode = c.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal" and str(self.path) != ":memory:":
            raise StoreUnavailable(
                f"SQLite database {str(self.path)!r} cannot use WAL (journal_mode is {mode}); "
                "put it on a local filesystem"
            )
        c.execute(f"PRAGMA synchronous = {synchronous}")
        c.execute("PRAGMA temp_store = MEMORY")

    @contextlib.contextmanager
    def write(self, *, savepoint: bool = True) -> Iterator[sqlite3.Cursor]:
        """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``), rolled back on any exception.

        Nested in another ``write()`` of this connection (a *group*: ``durastate serve`` applies a round of
        events and acks their messages in one transaction), it is a savepoint instead: its own writes
        still land together or not at all, and they become durable with the group's ``COMMIT``.
        ``savepoint=False`` skips the savepoint for a write whose failure the caller never catches
        inside the group (the inbox's claims and acks): the error then ends the group, which rolls back
        whole, so a half-done write can never be committed — and two statements a write are saved.
        """
        with self.lock:
            cur = self.cur
            if self.depth:
                if not savepoint:
                    yield cur
                    return
                with self.savepoint():
                    yield cur
                return
            if self.read_only:
                raise StoreUnavailable(f"SQLite database {str(self.path)!r} is open read-only (this process "
                                       "may not write it); run the command as a user who can write the file")
            try:
                cur.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise self.locked_error(exc) from exc
            self.depth = 1
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException as exc:
                self.generation += 1
                if self.conn.in_transaction:
                    self.conn.rollback()
                if isinstance(exc, sqlite3.OperationalError):
                    raise self.failed_error(exc) from exc
                raise
            finally:
                self.depth = 0

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        """A savepoint inside the open transaction: rolled back to (only it) on any exception.

        If SQLite already rolled the whole transaction back (it does on some I/O errors, a full disk),
        there is no savepoint left to return to: :class:`GroupAborted` then tells the group to give up.
        """
        cur = self.cur
        name = f"durastate_{self.depth}"
        cur.execute(f"SAVEPOINT {name}")
        self.depth += 1
        try:
            yield
            cur.execute(f"RELEASE {name}")
        except BaseException as exc:
            if not self.conn.in_transaction:
                raise GroupAborted(str(self.failed_error(exc))) from exc
            cur.execute(f"ROLLBACK TO {name}")
            cur.execute(f"RELEASE {name}")
            if isinstance(exc, sqlite3.OperationalError):
                raise self.failed_error(exc) from exc
            raise
        finally:
            self.depth -= 1

    def locked_error(self, exc: sqlite3.OperationalError) -> StoreUnavailable:
        return StoreUnavailable(
            f"SQLite database {str(self.path)!r} stayed locked by another writer "
            f"({exc}); "
            "raise busy_timeout or look for a stuck process holding it"
        )

    def failed_error(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(
            f"SQLite database {str(self.path)!r} failed a write ({exc}); nothing of it "
            "was kept — check free disk space and the file's permissions, then retry"
        )

    def ensure_schema(self, ddl: Sequence[str]) -> None:
        with self.write() as cur:
            for stmt in ddl:
                cur.execute(stmt)

    def close(self) -> None:
        with self.lock:
            if not self._closed:
                self._closed = True
                self.cur.close()
                self.conn.close()


class HasSqliteDatabase(Protocol):
    """Anything that owns a :class:`SqliteDatabase` (a ``SqliteStore``): a transport may share its connection."""

    db: SqliteDatabase
