"""``SqliteTransport``: the embedded runtime's durable inbox, in the same SQLite file as the store.

An event sent while no runtime is running is a row in the ``inbox`` table; a runtime that starts later
claims it. A send returns only after its transaction committed, so nothing a user sent is lost when a
process dies (with ``synchronous="FULL"`` not even on power loss). Delivery follows the
:class:`~harel.transport.QueueTransport` discipline, the same as an SQS FIFO message group:

- **one in flight per target, in order per target** — only the oldest message of a target (its *head*)
  can be claimed, and only while no live lease holds it; the next one becomes claimable after an ``ack``;
- **leases** — a claim holds its message until ``now + lease_seconds`` (by the injected ``clock``). A
  consumer that dies without ``ack``/``release`` does not block its target: once the lease expires the
  message is claimable again, with ``attempts`` counting every claim;
- **tokens** — every claim gets a fresh token; ``ack``/``release`` with a token whose lease expired and was
  claimed again is a no-op (the new holder decides; the worker dedupes by event id anyway);
- **dedupe on send** — a message whose ``(target_id, event.id)`` is already waiting is not queued twice
  (as SQS FIFO's deduplication id does); once acked, the worker's dedupe marks take over.

Open it on the store (``SqliteTransport(store)``) to share the store's connection — one file, one
connection, no lock contention inside the process — or on a path to get a connection of its own (for
example ``harel send`` while ``harel serve`` runs in another process).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Sequence

from harel.engine.model import Event
from harel.engine.store.sqlite import DEFAULT_BUSY_TIMEOUT, SqliteDatabase, SqliteStore, Synchronous
from harel.transport.base import Claimed

__all__ = ["SqliteTransport"]

_DDL = (
    "CREATE TABLE IF NOT EXISTS inbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, target_id TEXT NOT NULL, "
    "event_id TEXT NOT NULL, event TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, token TEXT, "
    "lease_until REAL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS inbox_target_event ON inbox (target_id, event_id)",
    "CREATE INDEX IF NOT EXISTS inbox_target_seq ON inbox (target_id, seq)",
)
_SEND = ("INSERT INTO inbox (target_id, event_id, event) VALUES (?, ?, ?) "
         "ON CONFLICT (target_id, event_id) DO NOTHING")
# The head of every target (its oldest message) that no live lease holds, oldest first.
_CLAIMABLE = (
    "SELECT seq, target_id, event, attempts FROM inbox "
    "WHERE seq IN (SELECT MIN(seq) FROM inbox GROUP BY target_id) "
    "AND (lease_until IS NULL OR lease_until <= ?) ORDER BY seq LIMIT ?"
)
_LEASE = "UPDATE inbox SET attempts = attempts + 1, token = ?, lease_until = ? WHERE seq = ?"
_ACK = "DELETE FROM inbox WHERE seq = ? AND token = ?"
_RELEASE = "UPDATE inbox SET token = NULL, lease_until = NULL WHERE seq = ? AND token = ?"


class SqliteTransport:
    """A durable, multi-process :class:`~harel.transport.QueueTransport` in a SQLite file."""

    def __init__(self, target: str | os.PathLike[str] | SqliteStore, clock: Callable[[], float] = time.time,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT, synchronous: Synchronous = "NORMAL") -> None:
        self._clock = clock
        if isinstance(target, SqliteStore):
            self._db, self._owned = target.db, False
        else:
            self._db, self._owned = SqliteDatabase(target, busy_timeout, synchronous), True
        try:
            self._db.ensure_schema(_DDL)
        except BaseException:
            self.close()
            raise
        self.path = self._db.path

    def __enter__(self) -> SqliteTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Transport ------------------------------------------------------------------------------------
    def send(self, messages: Sequence[tuple[str, Event]]) -> None:
        """Queue every message in one transaction: all are stored, or none (and this raises)."""
        if not messages:
            return
        rows = [(target_id, event.id, event.model_dump_json()) for target_id, event in messages]
        with self._db.write() as cur:
            cur.executemany(_SEND, rows)

    # -- QueueTransport -------------------------------------------------------------------------------
    def claim(self, max_messages: int, lease_seconds: float = 30.0) -> list[Claimed]:
        if max_messages < 1:
            return []
        now = self._clock()
        out: list[Claimed] = []
        with self._db.write() as cur:
            rows = cur.execute(_CLAIMABLE, (now, max_messages)).fetchall()
            if not rows:
                return out
            leases = []
            for seq, target_id, event, attempts in rows:
                token = f"{seq}:{uuid.uuid4().hex}"
                leases.append((token, now + lease_seconds, seq))
                out.append(Claimed(token, target_id, Event.model_validate_json(event), attempts + 1))
            cur.executemany(_LEASE, leases)
        return out

    def ack(self, c: Claimed) -> None:
        """The message was handled: delete it (a no-op if this claim's lease was lost to another)."""
        with self._db.write() as cur:
            cur.execute(_ACK, (_seq_of(c.token), c.token))

    def release(self, c: Claimed) -> None:
        """Give the message back for an immediate retry (a no-op if this claim's lease was lost)."""
        with self._db.write() as cur:
            cur.execute(_RELEASE, (_seq_of(c.token), c.token))

    # -- introspection --------------------------------------------------------------------------------
    def pending(self, target_id: str | None = None) -> int:
        """How many messages wait (claimed or not), for one target or all."""
        with self._db.lock:
            if target_id is None:
                row = self._db.cur.execute("SELECT COUNT(*) FROM inbox").fetchone()
            else:
                row = self._db.cur.execute("SELECT COUNT(*) FROM inbox WHERE target_id = ?",
                                           (target_id,)).fetchone()
        return int(row[0])

    def messages(self, target_id: str | None = None) -> list[tuple[str, Event]]:
        """Every unacked message (of one target, or all), per target in delivery order.

        ``harel send`` uses it to check an event against the definition of an execution whose start is
        still waiting in the inbox.
        """
        sql = "SELECT target_id, event FROM inbox"
        args: tuple[str, ...] = ()
        if target_id is not None:
            sql, args = sql + " WHERE target_id = ?", (target_id,)
        with self._db.lock:
            rows = self._db.cur.execute(sql + " ORDER BY target_id, seq", args).fetchall()
        return [(t, Event.model_validate_json(e)) for t, e in rows]

    def close(self) -> None:
        """Close the connection if this transport opened it (a store's connection stays the store's)."""
        if self._owned:
            self._db.close()


def _seq_of(token: str) -> int:
    head, _, _ = token.partition(":")
    try:
        return int(head)
    except ValueError:
        raise ValueError(f"not a claim token of this transport: {token!r}") from None
