"""``SqliteTransport``: the embedded runtime's durable inbox, in the same SQLite file as the store.

An event sent while no runtime is running is a row in the ``inbox`` table; a runtime that starts later
claims it. A send returns only after its transaction committed, so nothing a user sent is lost when a
process dies (with ``synchronous="FULL"`` not even on power loss). Delivery follows the
:class:`~durastate.transport.QueueTransport` discipline, the same as an SQS FIFO message group:

- **one in flight per target, in order per target** — each target has one *head*: its oldest message,
  flagged ``head``. Only heads can be claimed, and only while no live lease holds them; an ``ack`` deletes
  the head and flags the target's next message in the same transaction;
- **fair: least recently served first** — each head carries a ``turn``: a new target's head gets the
  next turn when it is sent, and a target's next message gets the next turn when the ack before it
  promotes it. A claim takes heads in ``turn`` order, so a target that was just served goes to the back
  of the line: an execution with a backlog of thousands gets one event per pass over the targets, and
  an execution with one event waits at most one pass, never behind another's backlog;
- **a claim costs what it returns** — it reads a partial index of the heads (``WHERE head = 1``) in
  ``turn`` order: the heads in flight it skips plus the ones it leases, not the backlog queued behind
  them, so ``durastate serve`` claims as fast with 100 000 events queued as with ten. A send flags its
  message head iff the target has nothing queued; an ack finds the next one through the
  ``(target_id, seq)`` index, and the next turn is the largest one of the heads' index plus one.
  SQLite has one writer at a time (``BEGIN IMMEDIATE``), so that check and
  the insert, or the delete and the promotion, cannot interleave with another process's send or ack:
  no message is stranded without a head and no target gets two. (An inbox written by an older durastate,
  without the flag, is given it when first opened: see :meth:`SqliteTransport._ensure_schema`.)
- **leases** — a claim holds its message until ``now + lease_seconds`` (by the injected ``clock``). A
  consumer that dies without ``ack``/``release`` does not block its target: once the lease expires the
  message is claimable again, with ``attempts`` counting every claim. ``release(c, delay)`` uses the
  same column for a retry later: the head is not claimable before ``now + delay``;
- **tokens** — every claim gets a fresh token; ``ack``/``release`` with a token whose lease expired and was
  claimed again is a no-op (the new holder decides; the worker dedupes by event id anyway);
- **dedupe on send** — a message whose ``(target_id, event.id)`` is already waiting is not queued twice
  (as SQS FIFO's deduplication id does); once acked, the worker's dedupe marks take over.

**Dead letters** — what the runtime cannot apply for good is kept in the ``dead_letters`` table of the same
file (:class:`SqliteDeadLetters`, the transport's ``dead_letter_box``), with its reason, error, time and
attempts; a replay moves letters back into the inbox and out of the table in one transaction, so a crash
leaves each either replayed or still a dead letter, never both or neither.

Open it on the store (``SqliteTransport(store)``) to share the store's connection — one file, one
connection, no lock contention inside the process — or on a path to get a connection of its own (for
example ``durastate send`` while ``durastate serve`` runs in another process).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from durastate.db.sqlite import DEFAULT_BUSY_TIMEOUT, HasSqliteDatabase, SqliteDatabase, Synchronous
from durastate.engine.model import Event
from durastate.transport.base import (
    Claimed,
    DeadLetter,
    DeadLetterPage,
    UnknownDeadLetter,
    check_replayable,
    seq_cursor,
    stored_event,
)

__all__ = ["SqliteDeadLetters", "SqliteTransport"]

_DDL = (
    # ``head`` is last so that a fresh table and one migrated by ``ALTER TABLE … ADD COLUMN`` are alike.
    "CREATE TABLE IF NOT EXISTS inbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, target_id TEXT NOT NULL, "
    "event_id TEXT NOT NULL, event TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, token TEXT, "
    "lease_until REAL, head INTEGER NOT NULL DEFAULT 0, turn INTEGER NOT NULL DEFAULT 0)",
    # Dead letters: one row per letter id (derived from target and event id), in the order first kept.
    "CREATE TABLE IF NOT EXISTS dead_letters (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, "
    "target_id TEXT NOT NULL, event TEXT, body TEXT, reason TEXT NOT NULL, error TEXT NOT NULL, "
    "at REAL NOT NULL, attempts INTEGER NOT NULL)",
)
# Run after the ``head`` and ``turn`` columns are known to exist (an older file gets them first). The heads
# are indexed by turn (the claim order); the index of heads by ``seq`` of older versions is dropped.
_INDEXES = (
    "CREATE UNIQUE INDEX IF NOT EXISTS inbox_target_event ON inbox (target_id, event_id)",
    "CREATE INDEX IF NOT EXISTS inbox_target_seq ON inbox (target_id, seq)",
    "CREATE INDEX IF NOT EXISTS inbox_turns ON inbox (turn) WHERE head = 1",
    "DROP INDEX IF EXISTS inbox_heads",
)
# A file written before the head flag: add it, then flag each target's oldest message.
_MIGRATE = (
    "ALTER TABLE inbox ADD COLUMN head INTEGER NOT NULL DEFAULT 0",
    "UPDATE inbox SET head = 1 WHERE seq IN (SELECT MIN(seq) FROM inbox GROUP BY target_id)",
)
# A file written before turns: every head gets turn 0 (served first, oldest first by seq, as before).
_MIGRATE_TURN = "ALTER TABLE inbox ADD COLUMN turn INTEGER NOT NULL DEFAULT 0"
# The turn after every head's: the back of the line (the max of the partial index: one probe).
_NEXT_TURN = "(SELECT COALESCE(MAX(turn), 0) + 1 FROM inbox WHERE head = 1)"
# A message is its target's head iff its target has nothing queued yet (an earlier row of the same batch
# counts: it is in the same transaction); a head takes the next turn. A duplicate is not queued, so its
# flag does not matter. (``WHERE true``: SQLite's upsert after a SELECT needs a WHERE to parse.)
_SEND = ("INSERT INTO inbox (target_id, event_id, event, head, turn) "
         f"SELECT ?, ?, ?, h, CASE WHEN h THEN {_NEXT_TURN} ELSE 0 END "
         "FROM (SELECT NOT EXISTS (SELECT 1 FROM inbox WHERE target_id = ?) AS h) WHERE true "
         "ON CONFLICT (target_id, event_id) DO NOTHING")
# Heads that no live lease holds, least recently served first, read from the partial index of heads: the
# heads in flight plus what is returned, however many messages wait behind them.
_CLAIMABLE = (
    "SELECT seq, target_id, event, attempts FROM inbox INDEXED BY inbox_turns "
    "WHERE head = 1 AND (lease_until IS NULL OR lease_until <= ?) ORDER BY turn LIMIT ?"
)
_LEASE = "UPDATE inbox SET attempts = attempts + 1, token = ?, lease_until = ? WHERE seq = ?"
_HELD = "SELECT target_id FROM inbox WHERE seq = ? AND token = ?"
_ACK = "DELETE FROM inbox WHERE seq = ?"
# The target's next message (by the (target_id, seq) index) becomes its head, at the back of the line.
_PROMOTE = (f"UPDATE inbox SET head = 1, turn = {_NEXT_TURN} "
            "WHERE seq = (SELECT MIN(seq) FROM inbox WHERE target_id = ?)")
# A release with a delay keeps the row a head whose "lease" (no token: nobody holds it) ends at the retry
# time, so the claim above skips it until then, and the target's later messages wait behind it.
_RELEASE = "UPDATE inbox SET token = NULL, lease_until = ? WHERE seq = ? AND token = ?"
_DL_COLUMNS = "seq, id, target_id, event, body, reason, error, at, attempts"
# Kept again (the same event failed again): the newest reason, time and attempts; its place is kept.
_DL_ADD = ("INSERT INTO dead_letters (id, target_id, event, body, reason, error, at, attempts) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET event = excluded.event, "
           "body = excluded.body, reason = excluded.reason, error = excluded.error, at = excluded.at, "
           "attempts = excluded.attempts")


class SqliteTransport:
    """A durable, multi-process :class:`~durastate.transport.QueueTransport` in a SQLite file."""

    def __init__(self, target: str | os.PathLike[str] | HasSqliteDatabase, clock: Callable[[], float] = time.time,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT, synchronous: Synchronous = "NORMAL") -> None:
        self._clock = clock
        if not isinstance(target, (str, os.PathLike)):
            self._db, self._owned = target.db, False
        else:
            self._db, self._owned = SqliteDatabase(target, busy_timeout, synchronous), True
        try:
            self._ensure_schema()
        except BaseException:
            self.close()
            raise
        self.path = self._db.path
        self.dead_letter_box = SqliteDeadLetters(self)
        """The dead letters of this inbox: the ``dead_letters`` table of the same file."""

    def _ensure_schema(self) -> None:
        """Create the inbox, or give an older file's inbox the head flag: one write transaction.

        The column is looked for inside ``BEGIN IMMEDIATE`` (SQLite's write lock): of two processes
        opening an old file at once, the second waits, then finds the column and migrates nothing.
        """
        with self._db.write() as cur:
            for stmt in _DDL:
                cur.execute(stmt)
            columns = {row[1] for row in cur.execute("PRAGMA table_info(inbox)").fetchall()}
            if "head" not in columns:
                for stmt in _MIGRATE:
                    cur.execute(stmt)
            if "turn" not in columns:
                cur.execute(_MIGRATE_TURN)
            for stmt in _INDEXES:
                cur.execute(stmt)

    def __enter__(self) -> SqliteTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- grouping -------------------------------------------------------------------------------------
    def group_with(self, store: object) -> contextlib.AbstractContextManager[object]:
        """One transaction for a round of claims, the store's commits and the acks, if ``store`` shares
        this transport's connection (the transport was opened on it); otherwise no grouping.

        Inside it every claim, commit and ack is a savepoint, so each keeps its own all-or-nothing, and
        the round becomes durable with one ``COMMIT`` — one fsync for a round of events on
        ``synchronous=FULL`` instead of two per event (a commit, then an ack). Exactly-once is unchanged:
        a crash before that ``COMMIT`` loses the commits *and* the acks of the round, so its messages
        come back and are applied once. Only a shared connection can be grouped: a store writing
        through another connection would wait for this one's write lock.
        """
        if getattr(store, "db", None) is self._db:
            grouped: contextlib.AbstractContextManager[object] = self._db.write()
            return grouped
        return contextlib.nullcontext()

    # -- Transport ------------------------------------------------------------------------------------
    def send(self, messages: Sequence[tuple[str, Event]]) -> None:
        """Queue every message in one transaction: all are stored, or none (and this raises)."""
        if not messages:
            return
        rows = [(t, event.id, event.model_dump_json(), t) for t, event in messages]
        # SQLite has one writer at a time: inside this BEGIN IMMEDIATE no other send or ack can run, so
        # "the target has nothing queued" cannot change between the check and the insert.
        with self._db.write() as cur:
            cur.executemany(_SEND, rows)

    # -- QueueTransport -------------------------------------------------------------------------------
    def claim(self, max_messages: int, lease_seconds: float = 30.0) -> list[Claimed]:
        if max_messages < 1:
            return []
        now = self._clock()
        out: list[Claimed] = []
        with self._db.write(savepoint=False) as cur:
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
        """The message was handled: delete it and make its target's next message the head, in one
        transaction (a no-op if this claim's lease was lost to another)."""
        self.ack_many([c])

    def ack_many(self, claims: Sequence[Claimed]) -> None:
        """:meth:`ack` of each, in one transaction (a runtime round acks its batch at once); the targets
        served go to the back of the line in this order."""
        if not claims:
            return
        with self._db.write(savepoint=False) as cur:
            for c in claims:
                seq = _seq_of(c.token)
                row = cur.execute(_HELD, (seq, c.token)).fetchone()
                if row is None:
                    continue
                cur.execute(_ACK, (seq,))
                cur.execute(_PROMOTE, (row[0],))

    def release(self, c: Claimed, delay: float = 0.0) -> None:
        """Give the message back for a retry, at once or after ``delay`` seconds (by ``clock``); it stays
        its target's head meanwhile. A no-op if this claim's lease was lost."""
        not_before = self._clock() + delay if delay > 0 else None
        with self._db.write() as cur:
            cur.execute(_RELEASE, (not_before, _seq_of(c.token), c.token))

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

        ``durastate send`` uses it to check an event against the definition of an execution whose start is
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


class SqliteDeadLetters:
    """A durable :class:`~durastate.transport.DeadLetterBox`: the ``dead_letters`` table next to the inbox.

    Every operation is one transaction (inside a ``serve`` round, a savepoint of the round's: a letter is
    kept together with the ack of its message, or neither is). A replay moves the letters into the inbox
    — in the order they were kept, so a target's start goes before its later events — and deletes them in
    the same transaction.
    """

    def __init__(self, transport: SqliteTransport) -> None:
        self._db = transport._db

    def add(self, letter: DeadLetter) -> None:
        event = letter.event.model_dump_json()
        with self._db.write() as cur:
            cur.execute(_DL_ADD, (letter.id, letter.target_id, event, letter.body, letter.reason, letter.error,
                                  letter.at, letter.attempts))

    def list(self, limit: int = 100, cursor: str | None = None) -> DeadLetterPage:
        after = seq_cursor(cursor)
        with self._db.lock:
            rows = self._db.cur.execute(f"SELECT {_DL_COLUMNS} FROM dead_letters WHERE seq > ? ORDER BY seq "
                                        "LIMIT ?", (after, max(1, limit) + 1)).fetchall()
        page = rows[:max(1, limit)]
        more = len(rows) > len(page)
        return DeadLetterPage([_letter(r) for r in page], str(page[-1][0]) if more else None)

    def get(self, letter_id: str) -> DeadLetter | None:
        with self._db.lock:
            row = self._db.cur.execute(f"SELECT {_DL_COLUMNS} FROM dead_letters WHERE id = ?",
                                       (letter_id,)).fetchone()
        return _letter(row) if row else None

    def drop(self, letter_id: str) -> DeadLetter:
        with self._db.write() as cur:
            row = cur.execute(f"SELECT {_DL_COLUMNS} FROM dead_letters WHERE id = ?", (letter_id,)).fetchone()
            if row is None:
                raise UnknownDeadLetter(letter_id)
            cur.execute("DELETE FROM dead_letters WHERE id = ?", (letter_id,))
        return _letter(row)

    def replay(self, ids: Sequence[str] | None = None) -> builtins.list[DeadLetter]:
        with self._db.write() as cur:
            if ids is None:
                rows = cur.execute(f"SELECT {_DL_COLUMNS} FROM dead_letters ORDER BY seq").fetchall()
            else:
                wanted = list(dict.fromkeys(ids))
                rows = []
                for start in range(0, len(wanted), 500):
                    part = wanted[start:start + 500]
                    rows += cur.execute(f"SELECT {_DL_COLUMNS} FROM dead_letters WHERE id IN "
                                        f"({', '.join('?' * len(part))})", part).fetchall()
                rows.sort(key=lambda r: r[0])
            chosen = check_replayable({r[1]: _letter(r) for r in rows}, ids)  # raises: nothing changed
            cur.executemany(_SEND, [(d.target_id, d.event.id, d.event.model_dump_json(), d.target_id)
                                    for d in chosen])
            cur.executemany("DELETE FROM dead_letters WHERE id = ?", [(d.id,) for d in chosen])
        return chosen

    def __len__(self) -> int:
        with self._db.lock:
            return int(self._db.cur.execute("SELECT COUNT(*) FROM dead_letters").fetchone()[0])


def _letter(row: Sequence[Any]) -> DeadLetter:
    _, letter_id, target_id, event, body, reason, error, at, attempts = row
    return DeadLetter(target_id, stored_event(event, body), reason, error, int(attempts), float(at), letter_id,
                      body)


def _seq_of(token: str) -> int:
    head, _, _ = token.partition(":")
    try:
        return int(head)
    except ValueError:
        raise ValueError(f"not a claim token of this transport: {token!r}") from None
