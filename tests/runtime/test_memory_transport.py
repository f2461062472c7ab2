"""InMemoryTransport keeps the SQS FIFO discipline: one in-flight message per target, in order."""

from __future__ import annotations

from durastate.engine.model import Event
from durastate.runtime.clock import ManualClock
from durastate.transport import Claimed, InMemorySink, InMemoryTransport, QueueTransport, Sink, Transport


def ev(name: str) -> Event:
    return Event(id=name, name=name)


def test_it_satisfies_the_protocols() -> None:
    t = InMemoryTransport()
    assert isinstance(t, Transport) and isinstance(t, QueueTransport)
    assert isinstance(InMemorySink(), Sink)


def test_one_in_flight_per_target_in_order_and_other_targets_proceed() -> None:
    t = InMemoryTransport()
    t.send([("a", ev("a1")), ("a", ev("a2")), ("b", ev("b1")), ("a", ev("a3"))])
    first = t.claim(10)
    assert [(c.target_id, c.event.id) for c in first] == [("a", "a1"), ("b", "b1")]
    assert t.claim(10) == []  # both targets have a message in flight
    a1 = first[0]
    t.ack(a1)
    second = t.claim(10)
    assert [(c.target_id, c.event.id) for c in second] == [("a", "a2")]
    t.ack(first[1])
    t.ack(second[0])
    assert [c.event.id for c in t.claim(10)] == ["a3"]
    assert t.pending() == 1


def test_claim_respects_max_messages_and_is_fair_across_targets() -> None:
    t = InMemoryTransport()
    t.send([(f"t{i}", ev(f"e{i}")) for i in range(5)])
    got = t.claim(2)
    assert [c.target_id for c in got] == ["t0", "t1"]
    assert [c.target_id for c in t.claim(10)] == ["t2", "t3", "t4"]


def test_release_redelivers_the_same_message_first_with_attempts_counted() -> None:
    t = InMemoryTransport()
    t.send([("a", ev("a1")), ("a", ev("a2"))])
    (c,) = t.claim(10)
    assert c.attempts == 1
    t.release(c)
    (again,) = t.claim(10)
    assert again.event.id == "a1" and again.attempts == 2 and again.token != c.token
    t.ack(c)  # the stale token of the first claim changes nothing
    assert t.pending() == 2
    t.ack(again)
    assert [m.event.id for m in t.claim(10)] == ["a2"]


def test_an_expired_lease_makes_the_message_claimable_again() -> None:
    clock = ManualClock()
    t = InMemoryTransport(clock)
    t.send([("a", ev("a1"))])
    (c,) = t.claim(1, lease_seconds=10)
    clock.advance(5)
    assert t.claim(1) == []
    clock.advance(6)
    (again,) = t.claim(1, lease_seconds=10)
    assert again.event.id == "a1" and again.attempts == 2
    t.ack(c)  # the first holder's late ack is stale now
    assert t.pending() == 1
    t.ack(again)
    assert t.pending() == 0 and t.claim(5) == []


def test_a_late_ack_before_anyone_reclaims_is_honoured() -> None:
    clock = ManualClock()
    t = InMemoryTransport(clock)
    t.send([("a", ev("a1")), ("a", ev("a2"))])
    (c,) = t.claim(1, lease_seconds=1)
    clock.advance(2)
    t.ack(c)
    assert [m.event.id for m in t.claim(5)] == ["a2"]


def test_messages_snapshot_and_sink_records() -> None:
    t = InMemoryTransport()
    t.send([("a", ev("x")), ("b", ev("y"))])
    assert [(tid, e.id) for tid, e in t.messages()] == [("a", "x"), ("b", "y")]
    assert len(t) == 2
    sink = InMemorySink()
    sink.publish([ev("n1"), ev("n2")])
    assert sink.names() == ["n1", "n2"]


def test_claimed_is_a_plain_value() -> None:
    c = Claimed("1", "a", ev("x"))
    assert c.attempts == 1


def test_a_delayed_release_keeps_the_message_first_and_its_target_back_until_due() -> None:
    clock = ManualClock()
    t = InMemoryTransport(clock)
    t.send([("a", ev("a1")), ("a", ev("a2")), ("b", ev("b1"))])
    ca, cb = t.claim(10)
    t.release(ca, delay=5.0)
    t.ack(cb)
    assert t.claim(10) == []  # a1 is not due, and a2 never overtakes it
    clock.advance(4.999)
    assert t.claim(10) == []
    clock.advance(0.001)
    (again,) = t.claim(10)
    assert (again.event.id, again.attempts) == ("a1", 2)
    t.ack(ca)  # the released claim's token is dead
    assert t.pending() == 2
    t.release(again, delay=0)  # no delay: claimable at once, as before
    (third,) = t.claim(10)
    assert (third.event.id, third.attempts) == ("a1", 3)
    t.ack(third)
    assert [c.event.id for c in t.claim(10)] == ["a2"]
