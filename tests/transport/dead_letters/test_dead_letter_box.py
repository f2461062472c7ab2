"""One contract for every dead-letter box: in memory, SQLite, PostgreSQL (the real server) and SQS (moto).

What a user relies on, whichever backend keeps the letters: a letter is kept with its reason, error, time
and attempts under an id derived from its target and event; keeping it again is idempotent; a listing
pages through every letter oldest first; ``drop`` forgets one; ``replay`` puts the events back on the
transport's queue — with their ids, in order per target — and out of the box, or, for an unknown id or a
letter without an event, changes nothing at all.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from durastate.engine.model import Event
from durastate.errors import InvalidCursor
from durastate.transport.base import (
    DeadLetter,
    DeadLetterBox,
    ReplayRefused,
    UnknownDeadLetter,
    dead_letter_id,
    unreadable_event,
)
from durastate.transport.wire import parse_envelope

PG_DSN = os.environ.get("DURASTATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class Backend:
    box: DeadLetterBox
    queued: Callable[[], list[tuple[str, str]]]
    """(target, event id) of every message on the transport's queue, per target in order."""
    add_unreadable: Callable[[str], None]
    """Put a letter whose body is not the wire format into the box, as that backend gets one."""


def _local(transport: Any) -> Backend:
    def unreadable(body: str) -> None:
        transport.dead_letter_box.add(DeadLetter("", unreadable_event("m-1"), "malformed message: not JSON",
                                                 "MalformedEvent", 1, 999.0, body=body))

    return Backend(transport.dead_letter_box, lambda: [(t, e.id) for t, e in transport.messages()], unreadable)


@pytest.fixture(params=["memory", "sqlite", "postgres", "sqs"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind = request.param
    if kind == "memory":
        from durastate.transport.memory import InMemoryTransport

        yield _local(InMemoryTransport())
    elif kind == "sqlite":
        from durastate.transport.sqlite import SqliteTransport

        with SqliteTransport(tmp_path / "box.db") as t:
            yield _local(t)
    elif kind == "postgres":
        yield from _postgres()
    else:
        yield from _sqs()


def _postgres() -> Iterator[Backend]:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not reachable at {PG_DSN}: {exc}")
    from durastate.transport.postgres import PostgresTransport

    schema = f"t_{uuid.uuid4().hex[:12]}"
    t = PostgresTransport.from_dsn(f"{PG_DSN}?schema={schema}", connect_attempts=1)
    try:
        yield _local(t)
    finally:
        t.close()
        with psycopg.connect(PG_DSN, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _sqs() -> Iterator[Backend]:
    pytest.importorskip("moto")
    import boto3
    from moto import mock_aws

    from durastate.transport.sqs import SqsDeadLetters

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1", aws_access_key_id="testing",
                           aws_secret_access_key="testing")
        dlq = sqs.create_queue(QueueName="box-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        queue = sqs.create_queue(QueueName="box.fifo", Attributes={
            "FifoQueue": "true", "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "5"}),
        })["QueueUrl"]
        seen: list[tuple[str, str]] = []

        def queued() -> list[tuple[str, str]]:
            while True:  # consume: a FIFO group hands out its next message once the one before is deleted
                got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
                if not got:
                    return list(seen)
                for m in got:
                    env = parse_envelope(m["Body"])
                    seen.append((env.target_id, env.event.id))
                    sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])

        def unreadable(body: str) -> None:  # what the worker does with a body it cannot parse
            from durastate.transport.sqs import dead_letter

            dead_letter(sqs, dlq, body, reason="malformed message: not JSON", error="MalformedEvent",
                        group_id="m", dedup_id="m-1", at=999.0, extra={"durastate.source_message_id": "m-1"})

        # No queue_url: the box finds the queue whose redrive policy names the DLQ.
        yield Backend(SqsDeadLetters(sqs, dlq), queued, unreadable)


def letter(target: str, eid: str, at: float, name: str = "go", reason: str = "no execution", attempts: int = 1,
           error: str = "UnknownExecution") -> DeadLetter:
    return DeadLetter(target, Event(id=eid, name=name, data={"n": eid}), reason, error, attempts, at)


def every(box: DeadLetterBox, limit: int = 100) -> list[DeadLetter]:
    out: list[DeadLetter] = []
    cursor: str | None = None
    while True:
        page = box.list(limit, cursor)
        out += page.items
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def test_a_letter_is_kept_with_what_a_user_needs_under_a_derived_id(backend: Backend) -> None:
    kept = letter("o-1", "e1", 1000.5, name="submit", reason="no execution 'o-1'", attempts=3)
    backend.box.add(kept)
    got = backend.box.get(kept.id)
    assert got is not None
    assert kept.id == dead_letter_id("o-1", "e1") == got.id
    assert (got.target_id, got.event, got.reason, got.error, got.attempts, got.at) == (
        "o-1", Event(id="e1", name="submit", data={"n": "e1"}), "no execution 'o-1'", "UnknownExecution", 3, 1000.5)
    assert got.replayable
    assert backend.box.get("0000000000000000") is None


def test_keeping_the_same_event_again_is_one_letter_with_the_newest_reason(backend: Backend) -> None:
    backend.box.add(letter("o-1", "e1", 1000.0, reason="first"))
    backend.box.add(letter("o-2", "e2", 1001.0))
    backend.box.add(letter("o-1", "e1", 1002.0, reason="again", attempts=2))
    letters = every(backend.box)
    assert sorted(d.event.id for d in letters) == ["e1", "e2"]  # one letter (SQS: two messages, shown once)
    got = backend.box.get(dead_letter_id("o-1", "e1"))
    assert got is not None and got.event.id == "e1"
    backend.box.replay()
    assert sorted(backend.queued()) == [("o-1", "e1"), ("o-2", "e2")]  # and a replay sends it once
    assert every(backend.box) == []


def test_listing_pages_through_every_letter_oldest_first(backend: Backend) -> None:
    for i in range(5):
        backend.box.add(letter(f"t{i % 2}", f"e{i}", 1000.0 + i))
    pages = []
    cursor: str | None = None
    while True:
        page = backend.box.list(2, cursor)
        pages.append([d.event.id for d in page.items])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == [["e0", "e1"], ["e2", "e3"], ["e4"]]
    assert backend.box.list(10).next_cursor is None
    with pytest.raises(InvalidCursor):
        backend.box.list(2, "not-a-cursor")


def test_drop_forgets_one_letter_and_an_unknown_id_is_an_error(backend: Backend) -> None:
    a, b = letter("o-1", "e1", 1000.0), letter("o-2", "e2", 1001.0)
    backend.box.add(a)
    backend.box.add(b)
    dropped = backend.box.drop(a.id)
    assert dropped.id == a.id and dropped.event.id == "e1"
    assert [d.id for d in every(backend.box)] == [b.id]
    with pytest.raises(UnknownDeadLetter, match=a.id):
        backend.box.drop(a.id)
    assert backend.queued() == []  # dropping sends nothing


def test_replay_puts_the_events_back_in_order_per_target_with_their_ids(backend: Backend) -> None:
    for i, (target, eid) in enumerate([("o-1", "start"), ("o-2", "x1"), ("o-1", "add"), ("o-1", "submit")]):
        backend.box.add(letter(target, eid, 1000.0 + i))
    replayed = backend.box.replay()
    assert sorted(d.event.id for d in replayed) == ["add", "start", "submit", "x1"]
    queued = backend.queued()
    assert [e for t, e in queued if t == "o-1"] == ["start", "add", "submit"]
    assert [e for t, e in queued if t == "o-2"] == ["x1"]
    assert every(backend.box) == []
    assert backend.box.replay() == []  # a second replay finds nothing and sends nothing
    assert backend.queued() == queued


def test_replay_of_chosen_ids_moves_only_them(backend: Backend) -> None:
    a, b, c = (letter("o-1", "e1", 1000.0), letter("o-2", "e2", 1001.0), letter("o-3", "e3", 1002.0))
    for d in (a, b, c):
        backend.box.add(d)
    assert [d.id for d in backend.box.replay([c.id, a.id])] == [a.id, c.id]
    assert sorted(backend.queued()) == [("o-1", "e1"), ("o-3", "e3")]
    assert [d.id for d in every(backend.box)] == [b.id]


def test_a_replay_naming_an_unknown_or_unreplayable_letter_changes_nothing(backend: Backend) -> None:
    a = letter("o-1", "e1", 1000.0)
    backend.box.add(a)
    backend.add_unreadable("{not json")
    before = {d.id for d in every(backend.box)}
    unreadable = next(d for d in every(backend.box) if d.id != a.id)
    assert not unreadable.replayable and unreadable.body == "{not json"
    with pytest.raises(UnknownDeadLetter):
        backend.box.replay([a.id, "ffffffffffffffff"])
    with pytest.raises(ReplayRefused, match="no event"):
        backend.box.replay([a.id, unreadable.id])
    assert {d.id for d in every(backend.box)} == before
    assert backend.queued() == []
    # Replaying everything leaves what has no event, which can still be shown and dropped.
    assert [d.id for d in backend.box.replay()] == [a.id]
    assert [d.id for d in every(backend.box)] == [unreadable.id]
    assert backend.box.drop(unreadable.id).body == "{not json"
    assert every(backend.box) == []


def test_a_sqlite_inbox_of_an_older_durastate_gets_its_dead_letters_table_on_open(tmp_path: Path) -> None:
    import sqlite3

    from durastate.transport.sqlite import SqliteTransport

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the inbox as durastate wrote it before dead letters were kept
        conn.execute("CREATE TABLE inbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, target_id TEXT NOT NULL, "
                     "event_id TEXT NOT NULL, event TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
                     "token TEXT, lease_until REAL, head INTEGER NOT NULL DEFAULT 0)")
        conn.execute("INSERT INTO inbox (target_id, event_id, event, head) VALUES ('o-1', 'e0', ?, 1)",
                     (Event(id="e0", name="go").model_dump_json(),))
    conn.close()
    with SqliteTransport(path) as t:
        t.dead_letter_box.add(letter("o-1", "e1", 1000.0))
        assert [d.event.id for d in t.dead_letter_box.list().items] == ["e1"]
        t.dead_letter_box.replay()
        assert [e.id for _, e in t.messages()] == ["e0", "e1"]  # behind what was already waiting


def test_an_id_with_nul_is_an_unknown_letter_on_every_box(backend: Backend) -> None:
    """PostgreSQL's TEXT cannot hold NUL: ``get``/``drop``/``replay`` by such an id raised
    ``psycopg.DataError``; they answer as for any id that names no letter, as the other boxes do."""
    a = letter("o-1", "e1", 1000.0)
    backend.box.add(a)
    bad = a.id + "\x00"
    assert backend.box.get(bad) is None
    with pytest.raises(UnknownDeadLetter):
        backend.box.drop(bad)
    with pytest.raises(UnknownDeadLetter):
        backend.box.replay([bad])
    assert [d.id for d in every(backend.box)] == [a.id] and backend.queued() == []
