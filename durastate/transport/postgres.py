"""``PostgresTransport``: a durable queue in PostgreSQL that many worker processes claim from at once.

The all-Postgres deployment: the store and the transport in one server, workers on as many hosts as you
like (``durastate serve --store postgresql://…`` on each). Messages are rows of the ``inbox`` table in the
store's schema, and delivery follows the :class:`~durastate.transport.QueueTransport` discipline — the same
as an SQS FIFO message group and as the SQLite transport:

- **one in flight per target, in order per target.** Each target has one *head*: its oldest message,
  flagged ``head``. Only heads can be claimed, and only while no live lease holds them; acking a head
  deletes it and promotes the target's next message. Claims take rows with ``FOR UPDATE SKIP LOCKED``,
  so concurrent workers never wait on each other and never claim the same row.
- **fair: least recently served first.** Each head carries a ``turn`` from a sequence: a new target's
  head takes one when it is sent, a target's next message takes one when the ack before it promotes it.
  Claims take heads in ``turn`` order, so a target just served goes to the back of the line: an
  execution with a deep backlog gets one event per pass over the targets, and one with a single event
  waits at most one pass, never behind another's backlog.
- **a claim costs what it returns.** It reads a partial index of heads only (by turn) — the heads in
  flight plus the ones it leases — not a target's backlog behind them.
- **leases.** A claim holds its message until ``now + lease_seconds`` (by ``clock``, default the host's
  ``time.time``: keep hosts NTP-synced). A worker that dies without ``ack``/``release`` does not block its
  target: after the lease the head is claimable again, ``attempts`` counting every claim. A release with
  a delay sets the same time without a holder: the head waits until then, and its target with it.
- **tokens.** Each claim gets a fresh token; ``ack``/``release`` with the token of a lease that expired
  and was claimed again is a no-op (the worker dedupes by event id anyway).
- **dedupe on send.** A message whose ``(target_id, event.id)`` is already waiting is not queued twice.
- **sends and acks of one target serialise** on a transaction-scoped advisory lock (several targets are
  locked in sorted order, so two batches cannot deadlock), taken in a statement before the write: a
  send then sees whether its target already has a head, and an ack sees every message sent before it
  promotes the next one — no message is ever stranded without a head, and no target gets two.

**Dead letters** are rows of the ``dead_letters`` table of the same schema (:class:`PostgresDeadLetters`,
the transport's ``dead_letter_box``); a replay deletes the letters and queues their events in one
transaction, under the same per-target locks as a send.

A claim is one statement (one round trip on the autocommit connection ``from_dsn`` opens); a send and
an ack are each one pipelined transaction (``BEGIN``, lock, write, ``COMMIT``): one round trip too, and so
are :meth:`PostgresTransport.ack_many`, which acks a runtime round's batch together, and
:meth:`PostgresTransport.ack_and_claim`, which acks a batch and claims the next one in one transaction.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import nullcontext, suppress
from typing import Any

from durastate.db.postgres import (
    DEFAULT_SCHEMA,
    PgLink,
    connect_with_retry,
    is_autocommit,
    quote_ident,
    split_schema,
)
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

__all__ = ["PostgresDeadLetters", "PostgresTransport"]

_DL_COLUMNS = "seq, id, target_id, event, body, reason, error, at, attempts"


class PostgresTransport(PgLink):
    """A durable, multi-host :class:`~durastate.transport.QueueTransport` in a PostgreSQL schema."""

    def __init__(
        self,
        conn: Any,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Callable[[], float] = time.time,
        create_schema: bool = True,
    ) -> None:
        super().__init__(conn)
        self.schema = schema
        self._clock = clock
        s = quote_ident(schema)
        self._ddl = (
            f"CREATE SCHEMA IF NOT EXISTS {s}",
            f"CREATE TABLE IF NOT EXISTS {s}.inbox (seq BIGSERIAL PRIMARY KEY, target_id TEXT NOT NULL, "
            "event_id TEXT NOT NULL, event TEXT NOT NULL, head BOOLEAN NOT NULL, "
            "attempts INTEGER NOT NULL DEFAULT 0, token TEXT, lease_until DOUBLE PRECISION)",
            # turns (the claim order) came later: an older inbox gets the column, its heads turn 0 (first)
            f"ALTER TABLE {s}.inbox ADD COLUMN IF NOT EXISTS turn BIGINT NOT NULL DEFAULT 0",
            f"CREATE SEQUENCE IF NOT EXISTS {s}.inbox_turn",
            f"CREATE UNIQUE INDEX IF NOT EXISTS inbox_target_event ON {s}.inbox (target_id, event_id)",
            f"CREATE INDEX IF NOT EXISTS inbox_target_seq ON {s}.inbox (target_id, seq)",
            f"CREATE INDEX IF NOT EXISTS inbox_turns ON {s}.inbox (turn) WHERE head",
            f"DROP INDEX IF EXISTS {s}.inbox_heads",
            f"CREATE TABLE IF NOT EXISTS {s}.dead_letters (seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
            "target_id TEXT NOT NULL, event TEXT, body TEXT, reason TEXT NOT NULL, error TEXT NOT NULL, "
            "at DOUBLE PRECISION NOT NULL, attempts INTEGER NOT NULL)",
        )
        self._lock_key = f"durastate:{schema}:inbox"
        # Sends and acks of one target serialise on this lock, taken in a statement of its own (so the
        # next statement's snapshot sees whatever the previous holder committed).
        self._target_lock = "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))"
        # A message is its target's head iff its target has nothing queued yet; it takes a turn either way
        # (a message queued behind a head gets a new one when it is promoted).
        turn = f"nextval('{s}.inbox_turn')"
        self._send = (
            f"INSERT INTO {s}.inbox (target_id, event_id, event, head, turn) "
            f"SELECT %s, %s, %s, NOT EXISTS (SELECT 1 FROM {s}.inbox WHERE target_id = %s), {turn} "
            "ON CONFLICT (target_id, event_id) DO NOTHING"
        )
        # Heads that no live lease holds, least recently served first, locked and leased in one statement.
        # The partial index holds only heads: a claim reads the heads in flight plus what it returns,
        # however deep each target's backlog is.
        self._claim = (
            f"WITH picked AS (SELECT seq FROM {s}.inbox "
            "WHERE head AND (lease_until IS NULL OR lease_until <= %s) "
            "ORDER BY turn LIMIT %s FOR UPDATE SKIP LOCKED) "
            f"UPDATE {s}.inbox q SET attempts = q.attempts + 1, token = q.seq::text || ':' || %s, "
            "lease_until = %s FROM picked WHERE q.seq = picked.seq "
            "RETURNING q.seq, q.target_id, q.event, q.attempts, q.token, q.turn"
        )
        # Delete the head (only with this claim's token) and promote the target's next message, at the back
        # of the line.
        self._ack = (
            f"WITH done AS (DELETE FROM {s}.inbox WHERE seq = %s AND token = %s RETURNING target_id) "
            f"UPDATE {s}.inbox SET head = true, turn = {turn} WHERE seq = (SELECT min(i.seq) FROM {s}.inbox i "
            "JOIN done ON i.target_id = done.target_id WHERE i.seq > %s)"
        )
        # A delayed release leaves the head "leased" to nobody until the retry time (NULL: claimable now).
        self._release = f"UPDATE {s}.inbox SET token = NULL, lease_until = %s WHERE seq = %s AND token = %s"
        self._pending = f"SELECT count(*) FROM {s}.inbox"
        self._messages = f"SELECT target_id, event FROM {s}.inbox"
        self.dead_letter_box = PostgresDeadLetters(self)
        """The dead letters of this queue: the ``dead_letters`` table of the same schema."""
        if create_schema:
            self.ensure_schema()

    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        clock: Callable[[], float] = time.time,
        connect_attempts: int = 15,
        connect_interval: float = 1.0,
    ) -> PostgresTransport:
        """Connect (retrying, then :class:`~durastate.errors.StoreUnavailable`) in autocommit; create the
        table. ``schema`` may come from the DSN's ``?schema=`` like the store's; use the same one."""
        dsn, schema = split_schema(dsn, schema)

        def connect() -> Any:
            return connect_with_retry(
                dsn, attempts=connect_attempts, interval=connect_interval, autocommit=True
            )

        transport = cls(connect(), schema=schema, clock=clock, create_schema=False)
        transport._connect = connect
        transport.ensure_schema()
        return transport

    def ensure_schema(self) -> None:
        """Create the inbox idempotently, under an advisory lock (safe from many processes at once)."""
        with self._cursor() as cur:
            if is_autocommit(self._conn):
                cur.execute("BEGIN")
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._lock_key,))
            for stmt in self._ddl:
                cur.execute(stmt)
            self._conn.commit()

    def __enter__(self) -> PostgresTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Transport ------------------------------------------------------------------------------------
    def send(self, messages: Sequence[tuple[str, Event]]) -> None:
        """Queue every message in one transaction — one round trip — and return once it committed."""
        if not messages:
            return
        rows = [(t, e.id, e.model_dump_json(), t) for t, e in messages]
        locks = [(self._lock_key, t) for t in sorted({t for t, _ in messages})]  # sorted: no deadlock
        self._transaction([(self._target_lock, locks), (self._send, rows)])

    def _transaction(self, batches: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """Run the statements in one transaction, as one pipeline (BEGIN … COMMIT) where possible."""
        with self._cursor() as cur:
            conn = self._conn
            explicit = is_autocommit(conn)
            with conn.pipeline() if hasattr(conn, "pipeline") else nullcontext():
                if explicit:
                    cur.execute("BEGIN")
                for stmt, rows in batches:
                    if len(rows) == 1:
                        cur.execute(stmt, rows[0])
                    else:
                        cur.executemany(stmt, rows)
                if explicit:
                    cur.execute("COMMIT")
            if not explicit:
                conn.commit()

    # -- QueueTransport -------------------------------------------------------------------------------
    def claim(self, max_messages: int, lease_seconds: float = 30.0) -> list[Claimed]:
        """Lease up to ``max_messages`` heads of distinct targets, least recently served first."""
        if max_messages < 1:
            return []
        now = self._clock()
        with self._cursor() as cur:
            cur.execute(self._claim, (now, max_messages, uuid.uuid4().hex, now + lease_seconds))
            rows = cur.fetchall()
            self._conn.commit()
        rows.sort(key=lambda r: (r[5], r[0]))
        return [Claimed(r[4], r[1], Event.model_validate_json(r[2]), int(r[3])) for r in rows]

    def ack(self, c: Claimed) -> None:
        """Done: delete the message and make the target's next one its head (one round trip).

        A no-op if this claim's lease expired and the message was claimed again (a stale token)."""
        self.ack_many([c])

    def ack_many(self, claims: Sequence[Claimed]) -> None:
        """:meth:`ack` of each, in one transaction and one round trip (a runtime round acks its batch at
        once): the targets' locks in sorted order, as a send takes them, then every delete-and-promote."""
        if not claims:
            return
        locks = [(self._lock_key, t) for t in sorted({c.target_id for c in claims})]
        acks = [(_seq(c), c.token, _seq(c)) for c in claims]
        self._transaction([(self._target_lock, locks), (self._ack, acks)])

    def ack_and_claim(self, claims: Sequence[Claimed], max_messages: int,
                      lease_seconds: float = 30.0) -> list[Claimed]:
        """:meth:`ack_many` of ``claims``, then :meth:`claim` — in one transaction, one round trip.

        What a runtime round does between two batches: the acks promote their targets' next messages, and
        the claim in the same transaction can already take them (least recently served first, so behind
        every other waiting target). One commit, so one WAL flush, instead of two.
        """
        if not claims:
            return self.claim(max_messages, lease_seconds)
        if max_messages < 1:
            self.ack_many(claims)
            return []
        now = self._clock()
        locks = [(self._lock_key, t) for t in sorted({c.target_id for c in claims})]
        acks = [(_seq(c), c.token, _seq(c)) for c in claims]
        with self._cursor() as cur:
            conn = self._conn
            explicit = is_autocommit(conn)
            claiming = conn.cursor()  # its rows are read once the pipeline has synced
            try:
                with conn.pipeline() if hasattr(conn, "pipeline") else nullcontext():
                    if explicit:
                        cur.execute("BEGIN")
                    cur.executemany(self._target_lock, locks)
                    cur.executemany(self._ack, acks)
                    claiming.execute(self._claim, (now, max_messages, uuid.uuid4().hex, now + lease_seconds))
                    if explicit:
                        cur.execute("COMMIT")
                rows = claiming.fetchall()
            finally:
                claiming.close()
            if not explicit:
                conn.commit()
        rows.sort(key=lambda r: (r[5], r[0]))
        return [Claimed(r[4], r[1], Event.model_validate_json(r[2]), int(r[3])) for r in rows]

    def release(self, c: Claimed, delay: float = 0.0) -> None:
        """Not done: make the message claimable again now, or after ``delay`` seconds (by ``clock``) —
        still its target's head meanwhile. Attempts keep counting."""
        not_before = self._clock() + delay if delay > 0 else None
        with self._cursor() as cur:
            cur.execute(self._release, (not_before, _seq(c), c.token))
            self._conn.commit()

    # -- inspection -----------------------------------------------------------------------------------
    def pending(self, target_id: str | None = None) -> int:
        """Messages not yet acked, claimed or not (of one target, if given)."""
        with self._cursor() as cur:
            if target_id is None:
                cur.execute(self._pending)
            else:
                cur.execute(self._pending + " WHERE target_id = %s", (target_id,))
            row = cur.fetchone()
            self._conn.commit()
        return int(row[0]) if row else 0

    def messages(self, target_id: str | None = None) -> list[tuple[str, Event]]:
        """Every unacked message (of one target, or all), per target in delivery order."""
        with self._cursor() as cur:
            if target_id is None:
                cur.execute(self._messages + " ORDER BY target_id, seq")
            else:
                cur.execute(self._messages + " WHERE target_id = %s ORDER BY seq", (target_id,))
            rows = cur.fetchall()
            self._conn.commit()
        return [(t, Event.model_validate_json(e)) for t, e in rows]


class PostgresDeadLetters:
    """A durable :class:`~durastate.transport.DeadLetterBox`: the ``dead_letters`` table beside the inbox.

    Keeping a letter again (same id) replaces its reason, time and attempts and keeps its place. A replay
    is one transaction: the target locks a send takes, the letters deleted (``RETURNING`` what they
    were), their events queued in the order they were kept — or, if one named is unknown or cannot be
    replayed, a rollback that leaves everything as it was.
    """

    def __init__(self, transport: PostgresTransport) -> None:
        self._t = transport
        s = quote_ident(transport.schema)
        self._table = f"{s}.dead_letters"
        self._add = (
            f"INSERT INTO {self._table} (id, target_id, event, body, reason, error, at, attempts) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET event = excluded.event, "
            "body = excluded.body, reason = excluded.reason, error = excluded.error, at = excluded.at, "
            "attempts = excluded.attempts"
        )

    def _query(self, sql: str, args: tuple[Any, ...]) -> builtins.list[tuple[Any, ...]]:
        t = self._t
        with t._cursor() as cur:
            cur.execute(sql, args)
            rows = list(cur.fetchall())
            t._conn.commit()
        return rows

    def add(self, letter: DeadLetter) -> None:
        event = letter.event.model_dump_json()
        self._t._transaction([(self._add, [(letter.id, letter.target_id, event, letter.body, letter.reason,
                                            letter.error, letter.at, letter.attempts)])])

    def list(self, limit: int = 100, cursor: str | None = None) -> DeadLetterPage:
        after, n = seq_cursor(cursor), max(1, limit)
        rows = self._query(f"SELECT {_DL_COLUMNS} FROM {self._table} WHERE seq > %s ORDER BY seq LIMIT %s",
                           (after, n + 1))
        page = rows[:n]
        return DeadLetterPage([_letter(r) for r in page], str(page[-1][0]) if len(rows) > n else None)

    def get(self, letter_id: str) -> DeadLetter | None:
        rows = self._query(f"SELECT {_DL_COLUMNS} FROM {self._table} WHERE id = %s", (letter_id,))
        return _letter(rows[0]) if rows else None

    def drop(self, letter_id: str) -> DeadLetter:
        rows = self._query(f"DELETE FROM {self._table} WHERE id = %s RETURNING {_DL_COLUMNS}", (letter_id,))
        if not rows:
            raise UnknownDeadLetter(letter_id)
        return _letter(rows[0])

    def replay(self, ids: Sequence[str] | None = None) -> builtins.list[DeadLetter]:
        t = self._t
        with t._cursor() as cur:
            conn = t._conn
            explicit = is_autocommit(conn)
            if explicit:
                cur.execute("BEGIN")
            try:
                if ids is None:
                    cur.execute(f"SELECT target_id FROM {self._table}")
                else:
                    cur.execute(f"SELECT target_id FROM {self._table} WHERE id = ANY(%s)", (list(ids),))
                targets = sorted({r[0] for r in cur.fetchall()})
                for target in targets:  # sorted, as a send takes them: no deadlock with one
                    cur.execute(t._target_lock, (t._lock_key, target))
                # Only letters of the locked targets: one kept meanwhile for another waits for the next replay.
                if ids is None:
                    cur.execute(f"DELETE FROM {self._table} WHERE body IS NULL AND target_id = ANY(%s) "
                                f"RETURNING {_DL_COLUMNS}", (targets,))
                else:
                    cur.execute(f"DELETE FROM {self._table} WHERE id = ANY(%s) AND target_id = ANY(%s) "
                                f"RETURNING {_DL_COLUMNS}", (list(ids), targets))
                rows = sorted(cur.fetchall(), key=lambda r: r[0])
                chosen = check_replayable({r[1]: _letter(r) for r in rows}, ids)  # raises: rolled back
                for d in chosen:
                    cur.execute(t._send, (d.target_id, d.event.id, d.event.model_dump_json(), d.target_id))
            except BaseException:
                if explicit:
                    with suppress(Exception):  # a lost connection took the transaction with it
                        cur.execute("ROLLBACK")
                raise
            if explicit:
                cur.execute("COMMIT")
            else:
                conn.commit()
        return chosen

    def __len__(self) -> int:
        return int(self._query(f"SELECT count(*) FROM {self._table}", ())[0][0])


def _letter(row: Sequence[Any]) -> DeadLetter:
    _, letter_id, target_id, event, body, reason, error, at, attempts = row
    return DeadLetter(target_id, stored_event(event, body), reason, error, int(attempts), float(at), letter_id,
                      body)


def _seq(c: Claimed) -> int:
    return int(c.token.split(":", 1)[0])
