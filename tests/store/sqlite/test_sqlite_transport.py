"""SqliteTransport: the durable inbox — durability, per-target order and exclusivity, leases."""

from __future__ import annotations

import multiprocessing as mp
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from durastate.engine.model import Event
from durastate.store.sqlite.sync import SqliteStore
from durastate.transport.base import Claimed, QueueTransport
from durastate.transport.sqlite import SqliteTransport

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


# -- the head flag: a claim reads the heads, not the backlog -----------------------------------------------


def assert_heads(path: Path) -> None:
    """Every target with messages queued has exactly one head, its oldest message; nothing else is one."""
    with closing(sqlite3.connect(path)) as conn:
        heads = conn.execute("SELECT target_id, seq FROM inbox WHERE head = 1 ORDER BY seq").fetchall()
        per_target = "SELECT target_id, MIN(seq) FROM inbox GROUP BY target_id ORDER BY 2"
        oldest = conn.execute(per_target).fetchall()
    assert heads == oldest


def test_order_and_one_in_flight_hold_across_acks_with_interleaved_targets(tmp_path: Path) -> None:
    """Random interleavings of sends, claims, acks and releases: each target's messages are delivered one at
    a time, in the order sent, none stranded behind an ack (a message sent to a drained target, or behind a
    head in flight, must become the head at the right moment)."""
    path = tmp_path / "h.db"
    rng = random.Random(7)
    targets = ["a", "b", "c", "d", "e"]
    sent: dict[str, list[str]] = {t: [] for t in targets}
    acked: dict[str, list[str]] = {t: [] for t in targets}
    in_flight: dict[str, Claimed] = {}
    n = 0

    def send(t: SqliteTransport, k: int) -> None:
        nonlocal n
        batch = []
        for _ in range(k):
            target = rng.choice(targets)
            n += 1
            batch.append((target, ev(f"{target}{n}")))
            sent[target].append(f"{target}{n}")
        t.send(batch)

    def claim(t: SqliteTransport, k: int) -> list[Claimed]:
        got = t.claim(k)
        for c in got:
            assert c.target_id not in in_flight  # one in flight per target
            assert c.event.id == sent[c.target_id][len(acked[c.target_id])]  # its oldest unacked message
            in_flight[c.target_id] = c
        return got

    def ack(t: SqliteTransport, c: Claimed) -> None:
        t.ack(c)
        acked[c.target_id].append(c.event.id)
        del in_flight[c.target_id]

    with SqliteTransport(path, clock=Clock()) as t:
        send(t, 12)
        for _ in range(400):
            step = rng.random()
            if step < 0.3:
                send(t, rng.randint(1, 3))
            elif step < 0.6:
                claim(t, rng.randint(1, 3))
            elif in_flight and step < 0.9:
                ack(t, in_flight[rng.choice(sorted(in_flight))])
            elif in_flight:
                c = in_flight.pop(rng.choice(sorted(in_flight)))
                t.release(c)
            assert_heads(path)
        while t.pending():
            got = claim(t, 2)
            assert got or in_flight, "messages queued but none claimable: one was stranded without a head"
            for c in list(in_flight.values()):
                ack(t, c)
            assert_heads(path)
    assert acked == sent
    assert sum(map(len, sent.values())) > 100


def test_a_duplicate_of_a_head_makes_no_second_head(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    with SqliteTransport(path) as t:
        t.send([("a", ev("a1")), ("a", ev("a1")), ("a", ev("a2"))])
        t.send([("a", ev("a1"))])
        assert_heads(path)
        [c] = t.claim(10)
        t.send([("a", ev("a1"))])  # still waiting (in flight): deduped, and not a head
        assert t.claim(10) == []
        t.ack(c)
        assert names(t.claim(10)) == [("a", "a2")]
        assert_heads(path)


_OLD_DDL = (  # the inbox as durastate wrote it before the head flag
    "CREATE TABLE inbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, target_id TEXT NOT NULL, "
    "event_id TEXT NOT NULL, event TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, token TEXT, "
    "lease_until REAL)",
    "CREATE UNIQUE INDEX inbox_target_event ON inbox (target_id, event_id)",
    "CREATE INDEX inbox_target_seq ON inbox (target_id, seq)",
)


def old_inbox(path: Path, now: float) -> None:
    """An inbox file of the old schema with messages of three targets queued, c's oldest in flight."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        for stmt in _OLD_DDL:
            conn.execute(stmt)
        for target, eid in [("c", "c1"), ("b", "b1"), ("a", "a1"), ("b", "b2"), ("c", "c2"), ("a", "a2"),
                            ("b", "b3")]:
            conn.execute("INSERT INTO inbox (target_id, event_id, event) VALUES (?, ?, ?)",
                         (target, eid, ev(eid).model_dump_json()))
        conn.execute("UPDATE inbox SET attempts = 1, token = '1:old', lease_until = ? WHERE seq = 1",
                     (now + 30,))
        conn.commit()


def test_an_old_inbox_is_migrated_and_its_heads_claimable_in_order(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    clock = Clock()
    old_inbox(path, clock.now)
    with SqliteTransport(path, clock=clock) as t:
        assert_heads(path)
        assert t.pending() == 7
        first = t.claim(10)
        assert names(first) == [("b", "b1"), ("a", "a1")]  # c's head is still leased by the old worker
        t.ack(Claimed("1:old", "c", ev("c1")))  # the old worker's ack still counts, and promotes c2
        assert_heads(path)
        for c in first:
            t.ack(c)
        # the next heads in the order their targets were served (acked): c, then b, then a
        assert names(t.claim(10)) == [("c", "c2"), ("b", "b2"), ("a", "a2")]
    with SqliteTransport(path, clock=clock) as again:  # reopening migrates nothing twice
        assert again.pending() == 4
        assert_heads(path)
    with closing(sqlite3.connect(path)) as conn:
        plan = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'inbox_turns'").fetchone()
        old_index = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'inbox_heads'").fetchone()
    assert plan is not None and "head = 1" in plan[0] and old_index is None


def test_processes_opening_an_old_inbox_at_once_migrate_it_once(tmp_path: Path) -> None:
    """The column is looked for under the write lock: openers queued behind it find it and add nothing."""
    path = tmp_path / "h.db"
    old_inbox(path, 1000.0)
    errors: list[BaseException] = []
    opened: list[SqliteTransport] = []

    def open_it() -> None:
        try:
            opened.append(SqliteTransport(path))
        except BaseException as exc:  # pragma: no cover - what the test looks for
            errors.append(exc)

    with closing(sqlite3.connect(path, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")  # every opener waits for this lock, then they race for it
        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for th in threads:
            th.start()
        time.sleep(0.3)
        holder.execute("COMMIT")
        for th in threads:
            th.join(60)
    for t in opened:
        t.close()
    assert errors == [] and len(opened) == 4
    assert_heads(path)


def claim_plan(t: SqliteTransport, conn: sqlite3.Connection) -> list[str]:
    """The query plan of every SELECT a claim runs (as traced, with its values bound)."""
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    try:
        t.claim(4)
    finally:
        conn.set_trace_callback(None)
    selects = [s for s in traced if s.lstrip().upper().startswith("SELECT")]
    assert selects
    return [row[3] for s in selects for row in conn.execute("EXPLAIN QUERY PLAN " + s).fetchall()]


def test_a_claim_reads_the_partial_index_of_heads(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "h.db") as store:
        t = SqliteTransport(store)
        t.send([(f"t{k}", ev(f"t{k}-{n}")) for n in range(20) for k in range(50)])
        store.db.conn.execute("ANALYZE")  # with statistics too, the planner keeps to the heads
        plan = claim_plan(t, store.db.conn)
        assert plan == ["SCAN inbox USING INDEX inbox_turns"], plan  # no table scan, no sort


def vm_steps(conn: sqlite3.Connection, call: Callable[[], object]) -> int:
    """How many SQLite virtual-machine instructions ``call`` runs on ``conn`` (not a timing)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 1)
    try:
        call()
    finally:
        conn.set_progress_handler(None, 1)
    return steps


@pytest.mark.parametrize("targets, per_target", [(50, 1000), (5000, 10)])
def test_a_claim_costs_what_it_returns_not_the_backlog(tmp_path: Path, targets: int,
                                                       per_target: int) -> None:
    """The same claim, ack (which promotes a next message) and send on a backlog of 32 messages and of
    50 000 (deep or wide) run the same number of SQLite instructions; a claim that looked at every queued
    message would run hundreds of thousands more."""

    def costs(path: Path, targets: int, per_target: int) -> tuple[int, int, int, int]:
        with SqliteStore(path) as store:
            t = SqliteTransport(store, clock=Clock())
            conn = store.db.conn
            t.send([(f"t{k:05d}", ev(f"{k}-{n}")) for n in range(per_target) for k in range(targets)])
            claimed: list[Claimed] = []
            first = vm_steps(conn, lambda: claimed.extend(t.claim(8)))
            second = vm_steps(conn, lambda: claimed.extend(t.claim(8)))  # skips the 8 heads in flight
            assert len(claimed) == 16
            ack = vm_steps(conn, lambda: t.ack(claimed[0]))
            send = vm_steps(conn, lambda: t.send([("t00001", ev("more"))]))
            return first, second, ack, send

    small = costs(tmp_path / "small.db", 16, 2)
    big = costs(tmp_path / "big.db", targets, per_target)
    assert all(b <= s + 10 for s, b in zip(small, big, strict=True)), (small, big)


def test_a_delayed_release_keeps_the_head_and_its_target_back_until_due(tmp_path: Path) -> None:
    clock = Clock()
    with SqliteTransport(tmp_path / "h.db", clock=clock) as t:
        t.send([("a", ev("a1")), ("a", ev("a2")), ("b", ev("b1"))])
        ca, cb = t.claim(10)
        t.release(ca, delay=5.0)
        t.ack(cb)
        assert t.claim(10) == []  # a1 is not due, and a2 never overtakes it
        clock.now += 4.999
        assert t.claim(10) == []
        clock.now += 0.001
        [again] = t.claim(10)
        assert (again.event.id, again.attempts) == ("a1", 2)
        t.ack(ca)  # the released claim's token is dead
        assert t.pending() == 2
        t.release(again, delay=0)
        [third] = t.claim(10)
        assert (third.event.id, third.attempts) == ("a1", 3)
        t.ack(third)
        assert names(t.claim(10)) == [("a", "a2")]


def test_a_delayed_release_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    with SqliteTransport(tmp_path / "h.db", clock=clock) as t:
        t.send([("a", ev("a1"))])
        [c] = t.claim(10)
        t.release(c, delay=60.0)
    with SqliteTransport(tmp_path / "h.db", clock=clock) as t:  # another process, later
        assert t.claim(10) == []
        clock.now += 60
        assert names(t.claim(10)) == [("a", "a1")]
