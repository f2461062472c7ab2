"""The relay: spawns before outbox, ack only what was delivered, redelivery changes nothing."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.model import FINISHED, Event
from durastate.errors import DeliveryFailed
from durastate.runtime import LocalRuntime, ManualClock, Relay, Worker
from durastate.runtime.relay import UNDELIVERABLE
from durastate.store import DictStore
from durastate.store.base import SpawnEntry
from durastate.transport import InMemorySink, InMemoryTransport

from .conftest import HookedStore, ev
from .test_worker import start_event


class FailingTransport(InMemoryTransport):
    def __init__(self) -> None:
        super().__init__()
        self.fail = 0

    def send(self, messages: list[tuple[str, Event]]) -> None:  # type: ignore[override]
        if self.fail:
            self.fail -= 1
            raise ConnectionError("queue unreachable")
        super().send(messages)


def test_a_crash_between_send_and_ack_duplicates_nothing_in_effect(registry: DefinitionRegistry) -> None:
    store = HookedStore(DictStore())
    transport = InMemoryTransport()
    rt = LocalRuntime(store, registry, transport)  # type: ignore[arg-type]
    rt.start("counter", execution_id="target")
    rt.start("counter", {"peer": "target"}, execution_id="src")
    rt.run_until_idle()
    rt.send("src", ev("poke", "p1"))
    rt.worker.handle("src", ev("poke", "p1"))  # applied directly: one (target, inc) in the outbox
    (entry,) = store.pending_outbox()
    store.fail_ack_outbox = 1
    with pytest.raises(RuntimeError, match="simulated crash"):
        rt.relay.run_once()
    assert store.pending_outbox() == [entry]  # sent, but not acked
    assert rt.relay.run_once().sent == 1  # the next pass sends it again, then acks
    assert store.pending_outbox() == []
    stats = rt.run_until_idle()
    assert stats.duplicates == 2  # the second copy of the inc, and the second poke
    target = store.load("target")
    assert target is not None and target.context["count"] == 1


def test_only_what_was_sent_is_acked(registry: DefinitionRegistry) -> None:
    store = DictStore()
    w = Worker(store, registry)
    w.handle("src", start_event("src", context={"peer": "t"}))
    w.handle("src", ev("poke", "p1"))
    w.handle("src", ev("poke", "p2"))
    transport = FailingTransport()
    relay = Relay(store, registry, transport, batch_size=1)
    transport.fail = 1
    with pytest.raises(ConnectionError):
        relay.run_once()
    assert len(store.pending_outbox()) == 2 and transport.pending() == 0
    assert relay.run_once().sent == 2
    assert [e.name for _t, e in transport.messages()] == ["inc", "inc"]
    assert store.pending_outbox() == []


def test_spawns_are_created_before_the_outbox_is_sent_and_idempotently(
        registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    w = Worker(store, registry, clock)
    w.handle("p", start_event("p", "fork"))
    (s1, s2) = store.pending_spawns()
    assert {s1.root_path, s2.root_path} == {"both.left", "both.right"}
    w.handle("p", ev("go"))  # forwarded to both regions: the outbox targets children not yet created
    assert {e.target_id for e in store.pending_outbox()} == {s1.child_id, s2.child_id}
    transport = InMemoryTransport()
    stats = Relay(store, registry, transport, clock=clock).run_once()
    assert (stats.spawned, stats.sent) == (2, 2)
    for s in (s1, s2):
        child = store.load(s.child_id)
        assert child is not None and child.parent_id == "p" and child.root_path == s.root_path
        assert child.child_id == s.child_id and child.active_path is not None
        assert store.is_processed(s.child_id, f"{s.child_id}:start")
    # A replayed spawn (crash between creating the child and acking the intent) creates nothing new.
    child = store.load(s1.child_id)
    assert child is not None
    version = child.version
    Relay(store, registry, transport).create_child(s1)
    again = store.load(s1.child_id)
    assert again is not None and again.version == version


def test_a_spawn_racing_another_relay_is_fine(registry: DefinitionRegistry) -> None:
    store = HookedStore(DictStore())
    w = Worker(store, registry)  # type: ignore[arg-type]
    w.handle("p", start_event("p", "fork"))
    spawn: SpawnEntry = store.pending_spawns()[0]
    other = Relay(DictStore(), registry, InMemoryTransport())
    other.store = store  # type: ignore[assignment]
    # The other relay creates the child between our existence check and our insert.
    store.before_commit = lambda _exe: other.create_child(spawn)
    Relay(store, registry, InMemoryTransport()).create_child(spawn)  # type: ignore[arg-type]
    child = store.load(spawn.child_id)
    assert child is not None and child.version == 1


def test_a_budget_defers_spawns_and_the_events_that_target_them(registry: DefinitionRegistry) -> None:
    store = DictStore()
    w = Worker(store, registry)
    w.handle("p", start_event("p", "fork"))
    w.handle("p", ev("go"))
    transport = InMemoryTransport()
    relay = Relay(store, registry, transport)
    assert (relay.run_once(max_items=0).spawned, transport.pending()) == (0, 0)
    first = relay.run_once(max_items=1)  # one spawn uses the whole budget: no event may leave yet
    assert (first.spawned, first.sent, transport.pending()) == (1, 0, 0)
    second = relay.run_once(max_items=2)  # the other spawn, then one event
    assert (second.spawned, second.sent) == (1, 1)
    third = relay.run_once(max_items=10)
    assert (third.spawned, third.sent) == (0, 1)
    assert sorted(t for t, _e in transport.messages()) == ["p~1", "p~2"]


def test_untargeted_emits_go_to_the_sink_or_are_dropped_with_a_log_line(
        registry: DefinitionRegistry, caplog: pytest.LogCaptureFixture) -> None:
    store = DictStore()
    w = Worker(store, registry)
    for eid in ("c1", "c2"):
        w.handle(eid, start_event(eid, context={"peer": "c2"}))
    w.handle("c1", ev("poke"))  # targeted: inc -> c2
    w.handle("c1", ev("stop"))  # a root execution that ends notifies the sink (no parent to tell)
    sink = InMemorySink()
    transport = InMemoryTransport()
    stats = Relay(store, registry, transport, sink).run_once()
    assert (stats.sent, stats.published) == (1, 1)
    (notice,) = sink.events
    assert notice.name == FINISHED and notice.data["status"] == "finished" and notice.data["outcome"] == "ok"
    w.handle("c2", ev("stop"))
    with caplog.at_level(logging.INFO, logger="durastate.runtime"):
        assert Relay(store, registry, transport).run_once().published == 1
    assert "durastate.finished" in caplog.text and "no sink" in caplog.text
    assert store.pending_outbox() == []


class RejectingTransport(InMemoryTransport):
    """Rejects some event ids for good (as SQS does an oversized body) and others for now."""

    def __init__(self, permanent: set[str], transient: set[str]) -> None:
        super().__init__()
        self.permanent, self.transient = permanent, transient

    def send(self, messages: list[tuple[str, Event]]) -> None:  # type: ignore[override]
        bad = [(e.id, "Rejected", "") for _, e in messages if e.id in self.permanent | self.transient]
        super().send([(t, e) for t, e in messages if e.id not in self.permanent | self.transient])
        if bad:
            raise DeliveryFailed("test queue", bad, frozenset(self.permanent))


def test_an_undeliverable_entry_is_dropped_and_announced_not_retried_forever(
        registry: DefinitionRegistry) -> None:
    store = DictStore()
    w = Worker(store, registry)
    w.handle("src", start_event("src", context={"peer": "t"}))
    for n in (1, 2, 3):
        w.handle("src", ev("poke", f"p{n}"))
    first, second, third = store.pending_outbox()
    sink = InMemorySink()
    transport = RejectingTransport(permanent={second.event.id}, transient={third.event.id})
    relay = Relay(store, registry, transport, sink)
    with pytest.raises(DeliveryFailed):
        relay.run_once()  # the transient failure is still reported to the caller
    assert store.pending_outbox() == [third]  # delivered and undeliverable acked; the transient kept
    assert [e.id for _, e in transport.messages()] == [first.event.id]
    assert [(e.seq, reason) for e, reason in relay.undeliverable] == [(second.seq, "Rejected")]
    (notice,) = sink.events
    assert notice.name == UNDELIVERABLE and notice.data["event"]["id"] == second.event.id
    transport.transient.clear()
    assert relay.run_once().sent == 1  # the next pass delivers the transient one
    assert store.pending_outbox() == []


def test_nothing_of_a_target_after_its_failed_entry_is_acked(registry: DefinitionRegistry) -> None:
    """A transport that reports an entry failed while later entries of the same target went (what SQS
    does per entry) must not get those later entries acked: the failed one would be re-sent behind them.
    Other targets' entries are acked as usual."""
    store = DictStore()
    w = Worker(store, registry)
    w.handle("s1", start_event("s1", context={"peer": "t1"}))
    w.handle("s2", start_event("s2", context={"peer": "t2"}))
    w.handle("s1", ev("poke", "p1"))
    w.handle("s2", ev("poke", "p2"))
    w.handle("s1", ev("poke", "p3"))
    t1_first, t2_only, t1_second = store.pending_outbox()
    assert (t1_first.target_id, t2_only.target_id, t1_second.target_id) == ("t1", "t2", "t1")
    transport = RejectingTransport(permanent=set(), transient={t1_first.event.id})
    relay = Relay(store, registry, transport)
    with pytest.raises(DeliveryFailed):
        relay.run_once()
    assert store.pending_outbox() == [t1_first, t1_second]  # t1 held from its failed entry on; t2 acked
    transport.transient.clear()
    assert relay.run_once().sent == 2
    assert store.pending_outbox() == []


class FlakySink(InMemorySink):
    """Publishes all but ``failing`` (reported failed for now, as EventBridge does per entry)."""

    def __init__(self, failing: set[str]) -> None:
        super().__init__()
        self.failing = failing

    def publish(self, events: Sequence[Event]) -> None:
        super().publish([e for e in events if e.id not in self.failing])
        bad = [(e.id, "InternalFailure", "") for e in events if e.id in self.failing]
        if bad:
            raise DeliveryFailed("test bus", bad)


def finished_roots(store: DictStore, registry: DefinitionRegistry, *contexts: dict[str, object]) -> None:
    """Root executions that end at once: each leaves one untargeted ``durastate.finished`` notification."""
    w = Worker(store, registry)
    for n, context in enumerate(contexts):
        w.handle(f"r{n}", start_event(f"r{n}", context=context))
        w.handle(f"r{n}", ev("stop", f"stop{n}"))


def test_a_partly_failed_publish_acks_what_went_and_retries_only_the_rest(registry: DefinitionRegistry) -> None:
    store = DictStore()
    finished_roots(store, registry, {}, {}, {})
    first, second, third = store.pending_outbox()
    sink = FlakySink({second.event.id})
    relay = Relay(store, registry, InMemoryTransport(), sink)
    with pytest.raises(DeliveryFailed):
        relay.run_once()
    assert store.pending_outbox() == [second]
    sink.failing.clear()
    assert relay.run_once().published == 1
    assert [e.id for e in sink.events] == [first.event.id, third.event.id, second.event.id]  # each once


def test_a_notification_the_bus_can_never_take_is_dropped_not_retried_forever(
        registry: DefinitionRegistry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    from durastate.transport.eventbridge import EventBridgeSink

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EVENTBRIDGE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    store = DictStore()
    finished_roots(store, registry, {}, {"blob": "x" * 300_000}, {})  # the second's notice is over 256 KiB
    with moto.mock_aws():
        events = boto3.client("events", region_name="us-east-1")
        events.create_event_bus(Name="bus")
        relay = Relay(store, registry, InMemoryTransport(), EventBridgeSink(events, "bus", sleep=lambda s: None))
        with caplog.at_level(logging.ERROR, logger="durastate.runtime"):
            assert relay.run_once().published == 3  # no DeliveryFailed: the oversized one is dropped
    assert store.pending_outbox() == []
    assert "can never be published" in caplog.text and "EntryTooLarge" in caplog.text
