"""LocalRuntime: rounds until idle, dead letters for bad input, bounded retries, serve with a stop."""

from __future__ import annotations

import logging
import threading

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.model import START, Event
from durastate.errors import StoreUnavailable, UnknownDefinition
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store import DictStore
from durastate.transport import Claimed, InMemoryTransport

from .conftest import ev


def test_start_send_and_run_until_idle(registry: DefinitionRegistry, clock: ManualClock) -> None:
    rt = LocalRuntime(DictStore(), registry, clock=clock)
    eid = rt.start("counter", {"count": 10}, execution_id="c1")
    assert eid == "c1"
    for i in range(3):
        rt.send(eid, ev("inc", f"i{i}"))
    rt.send(eid, ev("inc", "i0"))  # a redelivery
    stats = rt.run_until_idle()
    assert stats.idle and (stats.applied, stats.duplicates, stats.dead_lettered) == (4, 1, 0)
    exe = rt.get(eid)
    assert exe is not None and exe.context["count"] == 13
    assert rt.start("counter", execution_id="c1") == "c1"  # idempotent start
    assert rt.run_until_idle().duplicates == 1
    generated = rt.start("counter")
    assert generated != "c1" and len(generated) == 32


def test_start_of_an_unknown_definition_fails_at_once(registry: DefinitionRegistry) -> None:
    rt = LocalRuntime(DictStore(), registry)
    with pytest.raises(UnknownDefinition, match="known: counter, fork"):
        rt.start("nope")
    assert rt.transport.claim(10) == []


def test_bad_input_becomes_dead_letters_not_retries_or_silent_drops(
        registry: DefinitionRegistry, caplog: pytest.LogCaptureFixture) -> None:
    rt = LocalRuntime(DictStore(), registry)
    rt.send("ghost", ev("inc", "g1"))
    rt.send("new", Event(id="s1", name=START, data={"definition_id": "nope"}))
    rt.send("bad", Event(id="s2", name=START, data={"context": {}}))
    rt.start("counter", execution_id="ok")
    rt.send("ok", ev("inc"))
    with caplog.at_level(logging.ERROR, logger="durastate.runtime"):
        stats = rt.run_until_idle()
    assert stats.idle and stats.dead_lettered == 3 and stats.retried == 0
    by_target = {d.target_id: d for d in rt.dead_letters}
    ghost = by_target["ghost"]
    assert ghost.error == "UnknownExecution" and "no execution 'ghost'" in ghost.reason
    assert by_target["new"].error == "UnknownDefinition"
    assert by_target["bad"].error == "MalformedEvent" and "definition_id" in by_target["bad"].reason
    assert all(d.attempts == 1 for d in rt.dead_letters)
    assert caplog.text.count("dead letter") == 3
    ok = rt.get("ok")
    assert ok is not None and ok.context["count"] == 1  # the good execution was never blocked
    assert rt.transport.claim(10) == []


def test_transient_failures_are_retried_later_and_never_dead_lettered_a_bug_is_after_max_attempts(
        registry: DefinitionRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    class Flaky(DictStore):
        failures = 0
        error: Exception = StoreUnavailable("database is down; retry later")

        def load_for_event(self, execution_id: str, event_id: str):  # type: ignore[no-untyped-def]
            if self.failures:
                self.failures -= 1
                raise self.error
            return super().load_for_event(execution_id, event_id)

    store = Flaky()
    rt = LocalRuntime(store, registry, InMemoryTransport(clock), clock, max_attempts=3)
    rt.start("counter", execution_id="c1")
    rt.run_until_idle()
    store.failures = 8  # transient: past max_attempts, and still never dead-lettered
    rt.send("c1", ev("inc", "i1"))
    stats = rt.run_until_idle()
    assert (stats.retried, stats.applied, stats.dead_lettered) == (1, 0, 0)  # the retry is not due yet
    for _ in range(8):
        clock.advance(rt.retry_backoff.cap)
        stats = rt.run_until_idle()
    assert (stats.applied, stats.dead_lettered) == (1, 0) and rt.dead_letters == []
    store.failures, store.error = 8, KeyError("a bug")  # neither transient nor permanent
    rt.send("c1", ev("inc", "i2"))
    with caplog.at_level(logging.WARNING, logger="durastate.runtime"):
        for _ in range(4):
            rt.run_until_idle()
            clock.advance(rt.retry_backoff.cap)
    assert caplog.text.count("with an unexpected KeyError, will retry") == 2  # attempts 1 and 2
    [letter] = rt.dead_letters  # attempt 3: kept as a dead letter, no longer retried
    assert (letter.error, letter.attempts, letter.event.id) == ("KeyError", 3, "i2")
    assert rt.list_dead_letters().items == [letter]
    exe = rt.get("c1")
    assert exe is not None and exe.context["count"] == 1
    store.failures = 0  # the bug is fixed: the replay applies it
    assert rt.replay_dead_letters() == [letter]
    rt.run_until_idle()
    exe = rt.get("c1")
    assert exe is not None and exe.context["count"] == 2 and rt.list_dead_letters().items == []


def test_run_until_idle_reports_when_it_stopped_early(registry: DefinitionRegistry) -> None:
    rt = LocalRuntime(DictStore(), registry, batch_size=1)
    rt.start("counter", execution_id="c1")
    for i in range(5):
        rt.send("c1", ev("inc", f"i{i}"))
    stats = rt.run_until_idle(max_rounds=2)
    assert not stats.idle and stats.handled == 2
    one = rt.run_once()
    assert (one.rounds, one.handled, one.idle) == (1, 1, False)
    assert rt.run_until_idle().idle
    assert rt.run_once().idle


def test_timers_fire_by_advancing_the_clock(registry: DefinitionRegistry, clock: ManualClock) -> None:
    rt = LocalRuntime(DictStore(), registry, clock=clock)
    rt.start("counter", execution_id="c1")
    rt.send("c1", ev("wait"))
    rt.run_until_idle()
    clock.advance(29)
    assert rt.run_until_idle().fired == 0
    clock.advance(1)
    stats = rt.run_until_idle()
    assert stats.fired == 1 and stats.applied == 1
    exe = rt.get("c1")
    assert exe is not None and exe.active_path == "idle" and exe.timers == {}


def test_a_parallel_state_forks_forwards_and_joins(registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = DictStore()
    rt = LocalRuntime(store, registry, clock=clock)
    rt.start("fork", execution_id="p")
    assert rt.run_until_idle().spawned == 2
    parent = rt.get("p")
    assert parent is not None and parent.active_path == "both" and set(parent.children) == {"p~1", "p~2"}
    rt.send("p", ev("go"))  # not handled by the parent: forwarded to both regions
    rt.run_until_idle()
    parent = rt.get("p")
    assert parent is not None and parent.status == "finished" and parent.outcome == "joined"
    for cid in ("p~1", "p~2"):
        child = rt.get(cid)
        assert child is not None and child.status == "finished"
    assert rt.dead_letters == []


def test_serve_runs_until_stopped(registry: DefinitionRegistry) -> None:
    stop = threading.Event()

    class StopWhenDrained(InMemoryTransport):
        def ack(self, c: Claimed) -> None:
            super().ack(c)
            if self.pending() == 0:
                stop.set()

    rt = LocalRuntime(DictStore(), registry, StopWhenDrained())
    rt.start("counter", execution_id="c1")
    for i in range(3):
        rt.send("c1", ev("inc", f"i{i}"))
    stats = rt.serve(stop, poll_interval=0.01)
    exe = rt.get("c1")
    assert exe is not None and exe.context["count"] == 3 and stats.applied == 4


def test_serve_in_a_thread_stops_cleanly(registry: DefinitionRegistry) -> None:
    rt = LocalRuntime(DictStore(), registry)
    stop = threading.Event()
    stop.set()
    t = threading.Thread(target=rt.serve, args=(stop, 0.01))
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()


def test_dead_letters_are_handed_to_a_callback(registry: DefinitionRegistry) -> None:
    seen: list[str] = []
    rt = LocalRuntime(DictStore(), registry, on_dead_letter=lambda d: seen.append(d.error))
    rt.send("ghost", ev("inc"))
    rt.run_until_idle()
    assert seen == ["UnknownExecution"] and len(rt.dead_letters) == 1


def test_serve_survives_a_failing_relay(
        registry: DefinitionRegistry, caplog: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()
    rt = LocalRuntime(DictStore(), registry)
    calls = {"n": 0}
    real = rt.relay.run_once

    def flaky(max_items: int | None = None):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("queue unreachable")
        result = real(max_items)
        if rt.get("c1") is not None:
            stop.set()
        return result

    rt.relay.run_once = flaky  # type: ignore[method-assign]
    rt.start("counter", execution_id="c1")
    with caplog.at_level(logging.WARNING, logger="durastate.runtime"):
        rt.serve(stop, poll_interval=0.001)
    assert "round failed" in caplog.text and rt.get("c1") is not None
