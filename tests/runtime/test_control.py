"""Suspend, resume, cancel with a reason, terminate and redrive, on every sync store, through the worker.

The stories a user of Step Functions or Temporal expects: a suspended execution keeps what reaches it
(timeouts included) and applies it in order on resume; terminate ends it at once even with a message
stuck ahead of it; a failed execution is redriven after the fix and finishes as a fault-free run would.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore
from durastate.store.control import (
    ControlRefused,
    cancel_event,
    redrive,
    redrive_many,
    resume_event,
    suspend_event,
    terminate,
)

from .conftest import COUNTER, FORK


class Provider:
    """A payment provider that is down until the test fixes it."""

    def __init__(self) -> None:
        self.up = False
        self.calls = 0

    def charge(self, context: dict[str, Any], event: Event) -> dict[str, Any]:
        self.calls += 1
        if not self.up:
            raise ConnectionError("provider unreachable")
        return {"charged": context["amount"]}


def order(provider: Provider) -> dict[str, Any]:
    return {
        "id": "order",
        "initial": "cart",
        "context": {"amount": 10, "noted": None},
        "states": {
            "cart": {"on": {"submit": "paying", "note": {"actions": [{"assign": {"noted": "$event.data.n"}}]}}},
            "paying": {"entry": [provider.charge], "on": {"ship": "done"},
                       "exit": [{"assign": {"exited": True}}]},
            "done": {"type": "final", "outcome": "shipped"},
        },
    }


@pytest.fixture
def store(every_store: ExecutionStore) -> ExecutionStore:
    return every_store


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def rt(store: ExecutionStore, provider: Provider, clock: ManualClock) -> LocalRuntime:
    reg = DefinitionRegistry()
    for doc in (COUNTER, FORK, order(provider)):
        reg.register(load_definition(doc))
    return LocalRuntime(store, reg, clock=clock)


def run(rt: LocalRuntime, target: str, *events: Event) -> None:
    for ev in events:
        rt.send(target, ev)
    rt.run_until_idle()


def test_a_suspended_execution_holds_events_and_timeouts_and_applies_them_in_order_on_resume(
        rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("counter", execution_id="c")
    run(rt, "c", Event(id="w", name="wait"), suspend_event("c", reason="maintenance", event_id="s1"))
    c = rt.get("c")
    assert c is not None and (c.status, c.reason, c.active_path) == ("suspended", "maintenance", "waiting")
    run(rt, "c", Event(id="i1", name="inc"), Event(id="i2", name="inc"))
    clock.advance(31)  # the 30 s timer comes due while suspended: its timeout is held too
    rt.run_until_idle()
    c = rt.get("c")
    assert c is not None and c.context["count"] == 0 and [e.id for e in c.held][:2] == ["i1", "i2"]
    assert len(c.held) == 3 and c.held[2].name == "durastate.timeout"
    assert [s.id for s in rt.store.list_executions(status="suspended").items] == ["c"]
    run(rt, "c", resume_event("c", event_id="r1"))
    c = rt.get("c")
    assert c is not None and (c.status, c.context["count"], c.active_path, c.held) == ("running", 2, "idle", [])


def test_suspend_and_resume_reach_the_regions(rt: LocalRuntime) -> None:
    rt.start("fork", execution_id="f")
    rt.run_until_idle()
    run(rt, "f", suspend_event("f", event_id="s"))
    children = sorted(rt.get("f").children)  # type: ignore[union-attr]
    assert [rt.get(cid).status for cid in children] == ["suspended", "suspended"]  # type: ignore[union-attr]
    run(rt, "f", Event(id="go", name="go"))  # held by the parent, not forwarded yet
    assert rt.get("f").status == "suspended"  # type: ignore[union-attr]
    run(rt, "f", resume_event("f", event_id="r"))
    f = rt.get("f")
    assert f is not None and (f.status, f.outcome) == ("finished", "joined")


def test_cancel_records_its_reason_and_runs_exit_actions(rt: LocalRuntime, provider: Provider) -> None:
    provider.up = True
    rt.start("order", execution_id="o")
    run(rt, "o", Event(id="sub", name="submit"), cancel_event("o", reason="customer asked", event_id="x"))
    o = rt.get("o")
    assert o is not None and (o.status, o.reason) == ("cancelled", "customer asked")


def test_terminate_works_with_a_poison_message_ahead_of_it(rt: LocalRuntime, provider: Provider) -> None:
    rt.start("order", execution_id="o")
    rt.run_until_idle()
    terminate(rt.store, "o", reason="stuck", clock=rt.clock)  # straight to the store, not queued
    o = rt.get("o")
    assert o is not None and (o.status, o.reason, o.error) == ("terminated", "stuck", "terminated: stuck")
    run(rt, "o", Event(id="sub", name="submit"))  # a message that would have failed is now consumed
    assert provider.calls == 0 and rt.dead_letters == []
    with pytest.raises(ControlRefused, match="already terminated"):
        terminate(rt.store, "o")


def test_terminate_ends_the_regions_and_no_action_runs(rt: LocalRuntime) -> None:
    rt.start("fork", execution_id="f")
    rt.run_until_idle()
    children = sorted(rt.get("f").children)  # type: ignore[union-attr]
    terminate(rt.store, "f", reason="stop")
    rt.run_until_idle()
    assert [rt.get(c).status for c in children] == ["terminated", "terminated"]  # type: ignore[union-attr]
    assert rt.get("f").status == "terminated"  # type: ignore[union-attr]


def test_a_failed_execution_is_redriven_after_the_fix_and_finishes_like_a_fault_free_run(
        rt: LocalRuntime, provider: Provider) -> None:
    rt.start("order", execution_id="o")
    run(rt, "o", Event(id="n1", name="note", data={"n": 1}), Event(id="sub", name="submit"))
    o = rt.get("o")
    assert o is not None and o.status == "failed" and "provider unreachable" in (o.error or "")
    assert o.failure is not None and o.failure.event.id == "sub" and o.failure.before["active_path"] == "cart"
    with pytest.raises(ControlRefused, match="only a failed execution"):
        rt.start("counter", execution_id="ok")
        rt.run_until_idle()
        redrive(rt.store, "ok")
    provider.up = True
    again = redrive(rt.store, "o", clock=rt.clock)
    assert again.event.name == "submit" and again.event.id != "sub"
    rt.run_until_idle()  # the relay delivers the submit again, the worker applies it
    assert rt.get("o").active_path == "paying"  # type: ignore[union-attr]
    run(rt, "o", Event(id="shp", name="ship"))
    o = rt.get("o")
    assert o is not None and (o.status, o.outcome, o.context["charged"], o.context["noted"]) == (
        "finished", "shipped", 10, 1)


def test_redrive_many_redrives_every_failed_execution_of_a_definition(
        rt: LocalRuntime, provider: Provider) -> None:
    for i in range(3):
        rt.start("order", execution_id=f"o{i}")
        rt.send(f"o{i}", Event(id=f"sub{i}", name="submit"))
    rt.run_until_idle()
    assert len(rt.store.list_executions(status="failed").items) == 3
    provider.up = True
    results = list(redrive_many(rt.store, "order", limit=10))
    assert sorted(r.execution_id for r in results) == ["o0", "o1", "o2"]  # type: ignore[union-attr]
    rt.run_until_idle()
    assert {s.active_path for s in rt.store.list_executions(definition_id="order").items} == {"paying"}
