"""Retry policies on every sync store: a failing call is retried with backoff on a durable timer.

A failing attempt rolls the step back (the execution stays where it was, nothing is emitted), events
arriving meanwhile wait and then apply in order, the attempts run out into the nearest ``on_error`` or a
failure that can be redriven, and a crash between the failure and the retry loses nothing. A ManualClock
moves time; the sweeper fires the retry timers as it fires any timer.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.errors import DefinitionError
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore
from durastate.store.control import redrive

RETRY = {"max_attempts": 3, "backoff": {"initial": 10, "factor": 3, "max": 60}, "on": ["ConnectionError"]}


class Provider:
    def __init__(self) -> None:
        self.failures_left = 0
        self.error: type[Exception] = ConnectionError
        self.calls = 0

    def charge(self, context: dict[str, Any], event: Event) -> dict[str, Any]:
        self.calls += 1
        if self.failures_left:
            self.failures_left -= 1
            raise self.error("provider unreachable")
        return {"charged": context["amount"], "emails": context["emails"] + 1}

    def in_stock(self, context: dict[str, Any], event: Event) -> bool:
        self.calls += 1
        if self.failures_left:
            self.failures_left -= 1
            raise ConnectionError("stock service down")
        return True


def shop(provider: Provider, *, on_error: bool = True) -> dict[str, Any]:
    paying: dict[str, Any] = {"entry": [{"call": provider.charge, "retry": RETRY}], "on": {"ship": "done"}}
    states: dict[str, Any] = {
        "cart": {"on": {
            "submit": "paying",
            "note": {"actions": [{"assign": {"notes": {"add": ["$context.notes", 1]}}}]},
            "check": {"target": "checked", "guard": {"call": provider.in_stock, "retry": RETRY}},
        }},
        "paying": paying,
        "checked": {},
        "done": {"type": "final", "outcome": "shipped"},
        "declined": {"type": "final", "outcome": "declined"},
    }
    if on_error:
        paying["on_error"] = {"target": "declined", "actions": [{"assign": {"why": "$event.error"}}]}
        states["cart"]["on_error"] = {"target": "declined", "actions": [{"assign": {"why": "$event.error"}}]}
    return {"id": "shop", "initial": "cart", "context": {"amount": 5, "emails": 0, "notes": 0}, "states": states}


@pytest.fixture
def store(every_store: ExecutionStore) -> ExecutionStore:
    return every_store


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


def runtime(store: ExecutionStore, provider: Provider, clock: ManualClock, *, on_error: bool = True) -> LocalRuntime:
    reg = DefinitionRegistry()
    reg.register(load_definition(shop(provider, on_error=on_error)))
    return LocalRuntime(store, reg, clock=clock)


def send(rt: LocalRuntime, *events: Event) -> None:
    for ev in events:
        rt.send("s", ev)
    rt.run_until_idle()


def test_a_failing_call_is_retried_with_backoff_then_succeeds_and_held_events_follow_in_order(
        store: ExecutionStore, provider: Provider, clock: ManualClock) -> None:
    rt = runtime(store, provider, clock)
    rt.start("shop", execution_id="s")
    provider.failures_left = 2
    send(rt, Event(id="sub", name="submit"))
    s = rt.get("s")
    assert s is not None and (s.status, s.active_path, s.context["emails"]) == ("running", "cart", 0)
    assert s.retry is not None and s.retry.attempt == 1 and s.retry.fire_at == clock() + 10
    send(rt, Event(id="n1", name="note"), Event(id="shp", name="ship"))  # wait behind the retry, in order
    s = rt.get("s")
    assert s is not None and [e.id for e in s.held] == ["n1", "shp"] and s.context["notes"] == 0
    clock.advance(10)
    rt.run_until_idle()  # attempt 2 fails: the next wait is 10 * 3
    s = rt.get("s")
    assert s is not None and s.retry is not None and (s.retry.attempt, s.retry.fire_at) == (2, clock() + 30)
    clock.advance(30)
    rt.run_until_idle()  # attempt 3 succeeds; then `note` and `ship` apply, in that order
    s = rt.get("s")
    assert s is not None and (s.status, s.outcome, s.retry, s.held) == ("finished", "shipped", None, [])
    assert (s.context["charged"], s.context["emails"], s.context["notes"]) == (5, 1, 0)  # note: unhandled
    assert provider.calls == 3
    attempts = [step.get("attempt") for step in rt.store.read_trace("s") if "attempt" in step]
    assert attempts == [1, 2]
    assert rt.dead_letters == []


def test_when_the_attempts_run_out_the_nearest_on_error_catches_it(
        store: ExecutionStore, provider: Provider, clock: ManualClock) -> None:
    rt = runtime(store, provider, clock)
    rt.start("shop", execution_id="s")
    provider.failures_left = 99
    send(rt, Event(id="sub", name="submit"))
    for wait in (10, 30):
        clock.advance(wait)
        rt.run_until_idle()
    s = rt.get("s")
    assert s is not None and (s.status, s.outcome) == ("finished", "declined")
    assert s.context["why"] == "ConnectionError: provider unreachable" and provider.calls == 3


def test_without_on_error_the_execution_fails_and_is_redriven_after_the_fix(
        store: ExecutionStore, provider: Provider, clock: ManualClock) -> None:
    rt = runtime(store, provider, clock, on_error=False)
    rt.start("shop", execution_id="s")
    provider.failures_left = 3
    send(rt, Event(id="sub", name="submit"))
    for wait in (10, 30):
        clock.advance(wait)
        rt.run_until_idle()
    s = rt.get("s")
    assert s is not None and s.status == "failed" and "provider unreachable" in (s.error or "")
    assert s.failure is not None and s.failure.event.id == "sub"
    redrive(rt.store, "s", clock=clock)
    send(rt, Event(id="shp", name="ship"))
    s = rt.get("s")
    assert s is not None and (s.status, s.outcome, s.context["emails"]) == ("finished", "shipped", 1)


def test_an_exception_the_policy_does_not_cover_fails_at_once(
        store: ExecutionStore, provider: Provider, clock: ManualClock) -> None:
    rt = runtime(store, provider, clock, on_error=False)
    rt.start("shop", execution_id="s")
    provider.failures_left, provider.error = 1, ValueError
    send(rt, Event(id="sub", name="submit"))
    s = rt.get("s")
    assert s is not None and s.status == "failed" and s.retry is None and provider.calls == 1


def test_a_guard_with_a_retry_policy_is_retried(store: ExecutionStore, provider: Provider,
                                                clock: ManualClock) -> None:
    rt = runtime(store, provider, clock)
    rt.start("shop", execution_id="s")
    provider.failures_left = 1
    send(rt, Event(id="chk", name="check"))
    assert rt.get("s").active_path == "cart"  # type: ignore[union-attr]
    clock.advance(10)
    rt.run_until_idle()
    assert rt.get("s").active_path == "checked"  # type: ignore[union-attr]


def test_a_crash_between_the_failure_and_the_retry_loses_nothing(
        store: ExecutionStore, provider: Provider, clock: ManualClock) -> None:
    rt = runtime(store, provider, clock)
    rt.start("shop", execution_id="s")
    provider.failures_left = 1
    send(rt, Event(id="sub", name="submit"))
    del rt  # the process dies: only what the store holds survives
    clock.advance(10)
    again = runtime(store, provider, clock)
    again.run_until_idle()  # a new process's sweeper fires the stored retry timer
    again.send("s", Event(id="shp", name="ship"))
    again.run_until_idle()
    s = again.get("s")
    assert s is not None and (s.status, s.context["emails"], provider.calls) == ("finished", 1, 2)


def test_a_bad_retry_policy_is_a_definition_error(provider: Provider) -> None:
    doc = shop(provider)
    doc["states"]["paying"]["entry"] = [{"call": provider.charge, "retry": {
        "max_attempts": 0, "backoff": {"initial": -1, "factor": 0.5, "maxx": 1}, "on": "x"}}]
    with pytest.raises(DefinitionError) as err:
        load_definition(doc)
    text = str(err.value)
    for fragment in ("max_attempts: a whole number from 1 to 1000", "backoff.initial", "backoff.maxx: unknown key",
                     "backoff.factor: 1 or more"):
        assert fragment in text, text


def test_a_failed_invoked_child_is_followed_by_a_new_one_after_the_backoff(
        store: ExecutionStore, provider: Provider, clock: ManualClock) -> None:
    reg = DefinitionRegistry()
    reg.register(load_definition({"id": "pay", "initial": "charging", "context": {"amount": 5, "emails": 0},
                                  "states": {"charging": {"entry": [provider.charge], "always": "paid"},
                                             "paid": {"type": "final", "outcome": "paid"}}}))
    reg.register(load_definition({"id": "order", "initial": "paying", "states": {
        "paying": {"invoke": {"definition": "pay", "retry": {"max_attempts": 3, "backoff": {"initial": 5},
                                                             "on": ["ConnectionError"]}},
                   "on_done": "done", "on_error": "gave_up"},
        "done": {"type": "final", "outcome": "paid"},
        "gave_up": {"type": "final", "outcome": "gave up"}}}))
    rt = LocalRuntime(store, reg, clock=clock)
    provider.failures_left = 1
    rt.start("order", execution_id="o")
    rt.run_until_idle()
    o = rt.get("o")
    assert o is not None and o.status == "running" and list(o.timers) == ["~invoke:paying"]
    first = rt.get("o~1")
    assert first is not None and first.status == "failed"
    clock.advance(5)
    rt.run_until_idle()
    o = rt.get("o")
    assert o is not None and (o.status, o.outcome) == ("finished", "paid")
    assert rt.get("o~2").status == "finished" and provider.calls == 2  # type: ignore[union-attr]


def test_an_invoke_whose_tries_run_out_goes_to_on_error(store: ExecutionStore, provider: Provider,
                                                        clock: ManualClock) -> None:
    reg = DefinitionRegistry()
    reg.register(load_definition({"id": "pay", "initial": "charging", "context": {"amount": 5, "emails": 0},
                                  "states": {"charging": {"entry": [provider.charge], "always": "paid"},
                                             "paid": {"type": "final"}}}))
    reg.register(load_definition({"id": "order", "initial": "paying", "states": {
        "paying": {"invoke": {"definition": "pay", "retry": {"max_attempts": 2, "backoff": {"initial": 5}}},
                   "on_done": "done", "on_error": "gave_up"},
        "done": {"type": "final", "outcome": "paid"},
        "gave_up": {"type": "final", "outcome": "gave up"}}}))
    rt = LocalRuntime(store, reg, clock=clock)
    provider.failures_left = 5
    rt.start("order", execution_id="o")
    rt.run_until_idle()
    clock.advance(5)
    rt.run_until_idle()
    o = rt.get("o")
    assert o is not None and (o.status, o.outcome, provider.calls) == ("finished", "gave up", 2)
