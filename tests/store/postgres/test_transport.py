"""PostgresTransport: per-target order and exclusivity (also across connections), leases, tokens."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine.model import Event
from durastate.transport.base import QueueTransport
from durastate.transport.postgres import PostgresTransport

from .conftest import RoundTrips


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_transport(dsn: str, clock: Clock) -> Iterator[Any]:
    opened: list[PostgresTransport] = []

    def make() -> PostgresTransport:
        t = PostgresTransport.from_dsn(dsn, clock=clock, connect_attempts=1)
        opened.append(t)
        return t

    yield make
    for t in opened:
        t.close()


def ev(name: str) -> Event:
    return Event(id=name, name=name)


def test_it_is_a_queue_transport(open_transport: Any) -> None:
    assert isinstance(open_transport(), QueueTransport)


def test_one_message_per_target_in_flight_in_send_order(open_transport: Any) -> None:
    q = open_transport()
    q.send([("a", ev("a1")), ("b", ev("b1")), ("a", ev("a2")), ("a", ev("a3")), ("b", ev("b2"))])
    first = q.claim(10)
    assert [(c.target_id, c.event.id, c.attempts) for c in first] == [("a", "a1", 1), ("b", "b1", 1)]
    assert q.claim(10) == []  # both targets are busy
    q.ack(first[0])
    second = q.claim(10)
    assert [c.event.id for c in second] == ["a2"]
    q.ack(first[1])
    q.ack(second[0])
    assert [c.event.id for c in q.claim(10)] == ["b2", "a3"]  # b was served before a: b's turn comes first
    assert q.pending() == 2


def test_claim_is_one_round_trip(open_transport: Any, tmp_path: Path) -> None:
    q = open_transport()
    q.send([(f"t{i}", ev(f"e{i}")) for i in range(5)])
    with RoundTrips(q._conn, str(tmp_path / "trace")) as rt:
        assert len(q.claim(5)) == 5
    assert rt.count == 1


def test_a_lease_that_expires_makes_the_message_claimable_again(open_transport: Any, clock: Clock) -> None:
    q, other = open_transport(), open_transport()
    q.send([("a", ev("a1")), ("a", ev("a2"))])
    (held,) = q.claim(1, lease_seconds=30)
    clock.now += 29
    assert other.claim(5) == []
    clock.now += 2
    (again,) = other.claim(5, lease_seconds=30)
    assert (again.event.id, again.attempts) == ("a1", 2) and again.token != held.token
    q.ack(held)  # the first worker's lease is gone: its ack changes nothing
    q.release(held)
    assert other.claim(5) == [] and q.pending() == 2
    other.ack(again)
    assert [c.event.id for c in q.claim(5)] == ["a2"]


def test_release_makes_it_claimable_at_once_and_attempts_keep_counting(open_transport: Any) -> None:
    q = open_transport()
    q.send([("a", ev("a1"))])
    (c,) = q.claim(1)
    q.release(c)
    (c2,) = q.claim(1)
    assert (c2.event.id, c2.attempts) == ("a1", 2)


def test_a_message_already_waiting_is_not_queued_twice(open_transport: Any) -> None:
    q = open_transport()
    q.send([("a", ev("a1")), ("a", ev("a1")), ("b", ev("a1"))])
    q.send([("a", ev("a1"))])
    assert q.pending() == 2
    assert q.messages() == [("a", ev("a1")), ("b", ev("a1"))]


def test_workers_on_separate_connections_never_share_a_target_and_keep_its_order(open_transport: Any) -> None:
    targets, per_target, workers = 6, 20, 4
    sender = open_transport()
    sender.send([(f"t{t}", ev(f"t{t}-{i:03d}")) for i in range(per_target) for t in range(targets)])
    queues = [open_transport() for _ in range(workers)]
    in_flight: set[str] = set()
    seen: dict[str, list[str]] = defaultdict(list)
    violations: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(workers)

    def work(q: PostgresTransport) -> None:
        barrier.wait()
        idle = 0
        while idle < 50:
            claimed = q.claim(3)
            idle = 0 if claimed else idle + 1
            with lock:
                for c in claimed:
                    if c.target_id in in_flight:
                        violations.append(c.target_id)
                    in_flight.add(c.target_id)
                    seen[c.target_id].append(c.event.id)
            for c in claimed:
                with lock:
                    in_flight.discard(c.target_id)
                q.ack(c)
            with lock:
                if sum(len(v) for v in seen.values()) == targets * per_target:
                    return

    threads = [threading.Thread(target=work, args=(q,)) for q in queues]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert violations == []
    for t in range(targets):
        assert seen[f"t{t}"] == [f"t{t}-{i:03d}" for i in range(per_target)]
    assert sender.pending() == 0


def test_concurrent_senders_to_one_target_never_expose_two_heads(open_transport: Any) -> None:
    """Sends serialise per target, so a claim never finds a second claimable head behind a leased one."""
    senders = [open_transport() for _ in range(3)]
    claimer = open_transport()
    barrier = threading.Barrier(4)
    done = threading.Event()
    in_flight_max = 0

    def send(i: int, q: PostgresTransport) -> None:
        barrier.wait()
        for k in range(30):
            q.send([("hot", ev(f"s{i}-{k}")), (f"cold{i}", ev(f"c{i}-{k}"))])

    threads = [threading.Thread(target=send, args=(i, q)) for i, q in enumerate(senders)]
    for t in threads:
        t.start()
    barrier.wait()
    held: list[Any] = []
    while not done.is_set():
        held += [c for c in claimer.claim(10) if c.target_id == "hot"]
        in_flight_max = max(in_flight_max, len(held))
        if len(held) > 1:
            break
        if all(not t.is_alive() for t in threads):
            done.set()
    for t in threads:
        t.join()
    assert in_flight_max <= 1


def test_an_ack_racing_a_send_to_the_same_target_never_strands_a_message(open_transport: Any) -> None:
    """The acked head's successor is promoted even when it was sent while the ack ran."""
    acker, sender = open_transport(), open_transport()
    rounds = 40
    sender.send([("t", ev("m-start"))])
    barrier = threading.Barrier(2)

    def send_all() -> None:
        for k in range(rounds):
            barrier.wait()
            sender.send([("t", ev(f"m{k:03d}"))])

    thread = threading.Thread(target=send_all)
    thread.start()
    delivered: list[str] = []
    for _ in range(rounds):
        claimed = acker.claim(1)
        barrier.wait()
        for c in claimed:
            delivered.append(c.event.id)
            acker.ack(c)
    thread.join()
    while claimed := acker.claim(5):
        for c in claimed:
            delivered.append(c.event.id)
            acker.ack(c)
    assert acker.pending() == 0, "a message was stranded behind no head"
    assert delivered == ["m-start", *(f"m{k:03d}" for k in range(rounds))]


def test_send_and_ack_are_one_round_trip_each(open_transport: Any, tmp_path: Path) -> None:
    q = open_transport()
    with RoundTrips(q._conn, str(tmp_path / "send")) as sent:
        q.send([("a", ev("a1")), ("b", ev("b1")), ("a", ev("a2"))])
    (c, _) = q.claim(5)
    with RoundTrips(q._conn, str(tmp_path / "ack")) as acked:
        q.ack(c)
    assert (sent.count, acked.count) == (1, 1)
    assert [x.event.id for x in q.claim(5)] == ["a2"]


def test_a_claim_reads_the_heads_not_the_backlog_behind_them(
    open_transport: Any, schema: str, admin: Any
) -> None:
    q = open_transport()
    q.send([(f"t{i % 4}", ev(f"e{i:05d}")) for i in range(4000)])  # four deep backlogs
    admin.execute(f'ANALYZE "{schema}".inbox')
    assert len(q.claim(10)) == 4
    assert q.claim(10) == []  # every head is in flight; nothing behind them may be claimed
    plan = "\n".join(r[0] for r in admin.execute("EXPLAIN " + q._claim.replace("%s", "0"), ()).fetchall())
    assert "inbox_turns" in plan and "Seq Scan" not in plan, plan


def test_a_delayed_release_keeps_the_head_and_its_target_back_until_due(open_transport: Any,
                                                                        clock: Clock) -> None:
    q, other = open_transport(), open_transport()
    q.send([("a", ev("a1")), ("a", ev("a2")), ("b", ev("b1"))])
    ca, cb = q.claim(10)
    q.release(ca, delay=5.0)
    q.ack(cb)
    assert other.claim(10) == []  # a1 is not due (for any worker), and a2 never overtakes it
    clock.now += 4.999
    assert other.claim(10) == []
    clock.now += 0.001
    (again,) = other.claim(10)
    assert (again.event.id, again.attempts) == ("a1", 2)
    q.ack(ca)  # the released claim's token is dead
    assert q.pending() == 2
    other.release(again, delay=0)
    (third,) = q.claim(10)
    assert (third.event.id, third.attempts) == ("a1", 3)
    q.ack(third)
    assert [c.event.id for c in other.claim(10)] == ["a2"]


def test_ack_and_claim_acks_a_batch_and_claims_the_next_in_one_round_trip(open_transport: Any,
                                                                          tmp_path: Path) -> None:
    """What a runtime round does between two batches: one transaction, one round trip; the targets just
    served queue up behind the one that was waiting."""
    q = open_transport()
    q.send([("a", ev("a1")), ("a", ev("a2")), ("b", ev("b1")), ("b", ev("b2")), ("c", ev("c1"))])
    first = q.claim(2)
    assert [c.event.id for c in first] == ["a1", "b1"]
    with RoundTrips(q._conn, str(tmp_path / "both")) as rt:
        nxt = q.ack_and_claim(first, 10)
    assert rt.count == 1
    assert [c.event.id for c in nxt] == ["c1", "a2", "b2"]
    assert q.ack_and_claim(first, 10) == []  # stale tokens: nothing acked twice, nothing new to claim
    q.ack_many(nxt)
    assert q.pending() == 0
