"""SqliteTransport: the durable inbox — durability, per-target order and exclusivity, leases."""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

import pytest

from harel.engine.model import Event
from harel.engine.store.sqlite import SqliteStore
from harel.transport.base import QueueTransport
from harel.transport.sqlite import SqliteTransport

from . import _procs


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ev(eid: str, name: str = "go") -> Event:
    return Event(id=eid, name=name)


def names(claimed: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(c.target_id, c.event.id) for c in claimed]


def test_is_a_queue_transport(tmp_path: Path) -> None:
    with SqliteTransport(tmp_path / "h.db") as t:
        assert isinstance(t, QueueTransport)


def test_sent_while_no_runtime_runs_is_delivered_later(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    sender = SqliteTransport(path)
    sender.send([("a", Event(id="e1", name="submit", data={"n": [1, "x"]}))])
    sender.close()

    with SqliteStore(path) as store:  # the runtime starts later, on the store's connection
        inbox = SqliteTransport(store)
        [c] = inbox.claim(10)
        assert c.target_id == "a" and c.event == Event(id="e1", name="submit", data={"n": [1, "x"]})
        assert c.attempts == 1
        inbox.ack(c)
        assert inbox.pending() == 0
        inbox.close()  # leaves the store's connection open
        assert store.load("nope") is None


@pytest.mark.slow
def test_nothing_sent_is_lost_when_the_sender_is_killed(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    path = str(tmp_path / "h.db")
    SqliteTransport(path).close()
    sent = ctx.Event()
    proc = ctx.Process(target=_procs.send_then_die, args=(path, sent))
    proc.start()
    assert sent.wait(60)
    proc.join(60)
    assert proc.exitcode == -9  # SIGKILL: nothing was closed or flushed by Python
    with SqliteTransport(path) as t:
        assert t.pending() == 2
        [c] = t.claim(10)
        assert (c.target_id, c.event.id, c.event.data) == ("order-1", "ev-1", {"n": 1})


def test_one_in_flight_per_target_in_order(tmp_path: Path) -> None:
    with SqliteTransport(tmp_path / "h.db") as t:
        t.send([("a", ev("a1")), ("a", ev("a2")), ("b", ev("b1"))])
        t.send([("a", ev("a3")), ("c", ev("c1"))])
        first = t.claim(10)
        assert names(first) == [("a", "a1"), ("b", "b1"), ("c", "c1")]
        assert t.claim(10) == []  # every head is leased
        t.ack(first[0])
        [c] = t.claim(10)
        assert names([c]) == [("a", "a2")]
        t.ack(c)
        t.ack(first[1])
        t.ack(first[2])
        assert names(t.claim(10)) == [("a", "a3")]


def test_claim_respects_max_messages(tmp_path: Path) -> None:
    with SqliteTransport(tmp_path / "h.db") as t:
        t.send([(f"t{n}", ev(f"e{n}")) for n in range(5)])
        assert names(t.claim(2)) == [("t0", "e0"), ("t1", "e1")]
        assert names(t.claim(2)) == [("t2", "e2"), ("t3", "e3")]
        assert t.claim(0) == []
        assert len(t.claim(100)) == 1


def test_lease_expiry_makes_a_message_claimable_again(tmp_path: Path) -> None:
    clock = Clock()
    with SqliteTransport(tmp_path / "h.db", clock=clock) as t:
        t.send([("a", ev("a1")), ("a", ev("a2"))])
        [first] = t.claim(10, lease_seconds=30)
        clock.now += 29.9
        assert t.claim(10) == []
        clock.now += 0.1  # the lease has run out: the consumer is presumed dead
        [second] = t.claim(10, lease_seconds=30)
        assert second.event.id == "a1" and second.attempts == 2 and second.token != first.token
        t.ack(first)  # the stale claim's ack is a no-op: the message belongs to the new holder
        assert t.pending("a") == 2
        t.release(first)  # so is its release
        assert t.claim(10) == []
        t.ack(second)
        assert names(t.claim(10)) == [("a", "a2")]


def test_release_gives_the_message_back_at_once(tmp_path: Path) -> None:
    with SqliteTransport(tmp_path / "h.db", clock=Clock()) as t:
        t.send([("a", ev("a1")), ("a", ev("a2"))])
        [c] = t.claim(10)
        t.release(c)
        [again] = t.claim(10)
        assert again.event.id == "a1" and again.attempts == 2  # still first: order is kept


def test_send_dedupes_a_waiting_event(tmp_path: Path) -> None:
    with SqliteTransport(tmp_path / "h.db") as t:
        t.send([("a", ev("e1")), ("a", ev("e1")), ("b", ev("e1"))])
        t.send([("a", ev("e1"))])
        assert t.pending() == 2 and t.pending("a") == 1
        t.send([])


def test_bad_token(tmp_path: Path) -> None:
    from harel.transport.base import Claimed

    with SqliteTransport(tmp_path / "h.db") as t, pytest.raises(ValueError, match="claim token"):
        t.ack(Claimed("bogus", "a", ev("x")))


def test_competing_consumers_never_share_a_target(tmp_path: Path) -> None:
    """Two consumers with their own connections: each message exactly once, each target in order."""
    path = tmp_path / "h.db"
    with SqliteTransport(path) as t:
        t.send([(f"t{k}", ev(f"t{k}-{n}")) for n in range(15) for k in range(4)])
    seen: list[tuple[str, str, str]] = []
    lock = threading.Lock()
    active: set[str] = set()
    violations: list[str] = []

    def consume(name: str) -> None:
        with SqliteTransport(path) as mine:
            while True:
                batch = mine.claim(2)
                if not batch:
                    if mine.pending() == 0:
                        return
                    continue
                for c in batch:
                    with lock:
                        if c.target_id in active:
                            violations.append(c.target_id)
                        active.add(c.target_id)
                        seen.append((name, c.target_id, c.event.id))
                    with lock:
                        active.discard(c.target_id)
                    mine.ack(c)

    threads = [threading.Thread(target=consume, args=(f"c{i}",)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert violations == []
    assert len(seen) == 60 and len({e for _, _, e in seen}) == 60
    for k in range(4):
        assert [e for _, tgt, e in seen if tgt == f"t{k}"] == [f"t{k}-{n}" for n in range(15)]
