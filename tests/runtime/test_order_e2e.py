"""The example order workflow driven end to end through LocalRuntime, with a fake clock.

Covers what the example was written to show: hierarchy, guards, an invoked child (the payment), a
parallel state whose two regions join, a deep history state, timeouts — on the in-memory store and on
SQLite with its durable inbox, so the runtime is tested on a store that returns live objects and on one
that does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.model import FINISHED, Event, Execution
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store import DictStore
from durastate.store.base import ExecutionStore
from durastate.transport import InMemorySink, InMemoryTransport, QueueTransport

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def examples() -> DefinitionRegistry:
    return DefinitionRegistry.from_dir(EXAMPLES)


@pytest.fixture(params=["dict", "sqlite"])
def rt(request: pytest.FixtureRequest, examples: DefinitionRegistry,
       tmp_path: Path) -> Iterator[LocalRuntime]:
    clock = ManualClock(1_700_000_000.0)
    store: ExecutionStore
    transport: QueueTransport
    if request.param == "dict":
        store, transport = DictStore(), InMemoryTransport(clock)
    else:
        from durastate.store import SqliteStore
        from durastate.transport.sqlite import SqliteTransport

        store = SqliteStore(tmp_path / "durastate.db")
        transport = SqliteTransport(store, clock)
    runtime = LocalRuntime(store, examples, transport, clock, sink=InMemorySink())
    yield runtime
    store.close()


def send(rt: LocalRuntime, target: str, name: str, eid: str | None = None, **data: object) -> None:
    rt.send(target, Event(id=eid or f"{target}:{name}", name=name, data=data))


def load(rt: LocalRuntime, eid: str) -> Execution:
    exe = rt.get(eid)
    assert exe is not None, eid
    return exe


def advance(rt: LocalRuntime, seconds: float) -> None:
    assert isinstance(rt.clock, ManualClock)
    rt.clock.advance(seconds)


def cart_with_two_items(rt: LocalRuntime, oid: str) -> None:
    rt.start("order", execution_id=oid)
    send(rt, oid, "add_item", f"{oid}-i1", price=40)
    send(rt, oid, "add_item", f"{oid}-i2", price=60)
    send(rt, oid, "submit")
    assert rt.run_until_idle().idle


def payment_child(exe: Execution) -> str:
    (cid,) = [cid for cid, ref in exe.children.items() if ref.kind == "invoke" and ref.status == "running"]
    return cid


def test_an_order_is_paid_packed_shipped_and_completed(rt: LocalRuntime) -> None:
    cart_with_two_items(rt, "o1")
    order = load(rt, "o1")
    assert order.active_path == "processing.payment" and order.context["total"] == 100
    pay = payment_child(order)
    payment = load(rt, pay)
    assert payment.definition_id == "payment" and payment.parent_id == "o1"
    assert payment.context["amount"] == 100 and payment.active_path == "pending"

    send(rt, pay, "authorize", receipt="r-77")
    stats = rt.run_until_idle()
    assert stats.spawned == 2  # the fulfilment regions
    order = load(rt, "o1")
    assert order.active_path == "processing.fulfilment" and order.context["receipt"] == "r-77"
    assert load(rt, pay).outcome == "paid"
    regions = {ref.path: cid for cid, ref in order.children.items() if ref.kind == "region"}
    assert set(regions) == {"processing.fulfilment.packing", "processing.fulfilment.shipping"}

    # Events the order does not handle itself are forwarded to both regions; the shipping region tells
    # its parent the tracking number with a `send: {to: parent}`.
    send(rt, "o1", "label_printed", tracking="TRK-1")
    rt.run_until_idle()
    order = load(rt, "o1")
    assert order.status == "running" and order.context["tracking"] == "TRK-1"
    assert load(rt, regions["processing.fulfilment.shipping"]).status == "finished"
    assert load(rt, regions["processing.fulfilment.packing"]).status == "running"

    send(rt, "o1", "picked")
    rt.run_until_idle()
    order = load(rt, "o1")
    assert (order.status, order.outcome, order.active_path) == ("finished", "fulfilled", "completed")
    assert all(ref.status == "finished" for ref in order.children.values())
    assert rt.dead_letters == []
    assert isinstance(rt.sink, InMemorySink)
    (notice,) = [e for e in rt.sink.events if e.name == FINISHED]
    assert notice.data["outcome"] == "fulfilled" and notice.data["output"]["tracking"] == "TRK-1"
    steps = [(t["event"], t["to"]) for t in rt.store.read_trace("o1")]
    assert steps[0] == ("durastate.start", "cart") and steps[-1] == ("durastate.finished", "completed")


def test_a_payment_that_times_out_fails_the_order(rt: LocalRuntime) -> None:
    cart_with_two_items(rt, "o2")
    pay = payment_child(load(rt, "o2"))
    advance(rt, 899)
    assert rt.run_until_idle().fired == 0
    advance(rt, 1)
    stats = rt.run_until_idle()
    assert stats.fired == 1
    assert load(rt, pay).outcome == "expired"
    order = load(rt, "o2")
    assert (order.status, order.outcome) == ("finished", "payment_failed")
    assert rt.store.due_timers(rt.clock() + 10**6) == []  # the cart timer was cancelled long ago


def test_an_abandoned_cart_times_out(rt: LocalRuntime) -> None:
    rt.start("order", execution_id="o3")
    rt.run_until_idle()
    send(rt, "o3", "submit")  # guard: no items yet -> not taken
    rt.run_until_idle()
    assert load(rt, "o3").active_path == "cart"
    advance(rt, 3600)
    rt.run_until_idle()
    order = load(rt, "o3")
    assert (order.status, order.outcome) == ("finished", "abandoned")


def test_hold_cancels_the_regions_and_resume_returns_through_deep_history(rt: LocalRuntime) -> None:
    cart_with_two_items(rt, "o4")
    send(rt, payment_child(load(rt, "o4")), "authorize", receipt="r-1")
    rt.run_until_idle()
    first_regions = [cid for cid, ref in load(rt, "o4").children.items() if ref.kind == "region"]

    send(rt, "o4", "hold")
    rt.run_until_idle()
    order = load(rt, "o4")
    assert order.active_path == "on_hold"
    for cid in first_regions:
        assert load(rt, cid).status == "cancelled"
    assert [t[1] for t in rt.store.due_timers(rt.clock() + 86_400)] == ["on_hold"]

    advance(rt, 3_600)
    send(rt, "o4", "resume")
    rt.run_until_idle()
    order = load(rt, "o4")
    assert order.active_path == "processing.fulfilment"  # deep history: back where it was held
    assert rt.store.due_timers(rt.clock() + 86_400) == []  # leaving on_hold cancelled its timer
    running = [cid for cid, ref in order.children.items() if ref.kind == "region" and ref.status == "running"]
    assert len(running) == 2 and not set(running) & set(first_regions)

    send(rt, "o4", "picked")
    send(rt, "o4", "label_printed", tracking="TRK-4")
    rt.run_until_idle()
    order = load(rt, "o4")
    assert (order.status, order.outcome) == ("finished", "fulfilled")
    assert rt.dead_letters == []


def test_an_order_left_on_hold_is_cancelled_with_its_payment(rt: LocalRuntime) -> None:
    cart_with_two_items(rt, "o5")
    pay = payment_child(load(rt, "o5"))
    send(rt, "o5", "hold")
    rt.run_until_idle()
    assert load(rt, pay).status == "cancelled"  # leaving the invoking state cancels the child
    advance(rt, 86_400)
    rt.run_until_idle()
    order = load(rt, "o5")
    assert (order.status, order.outcome) == ("finished", "cancelled")
    send(rt, pay, "authorize", receipt="too-late")  # an ended execution: consumed, ignored
    stats = rt.run_until_idle()
    assert stats.ignored == 1 and rt.dead_letters == []


def test_redelivering_every_event_changes_nothing(examples: DefinitionRegistry) -> None:
    """Every message delivered twice (at-least-once transports do this) gives the same final state."""

    class Twice(InMemoryTransport):
        def send(self, messages: list[tuple[str, Event]]) -> None:  # type: ignore[override]
            super().send([m for m in messages for _ in range(2)])

    results = []
    for transport in (InMemoryTransport(), Twice()):
        clock = ManualClock(1_700_000_000.0)
        rt = LocalRuntime(DictStore(), examples, transport, clock)
        cart_with_two_items(rt, "o6")
        send(rt, payment_child(load(rt, "o6")), "authorize", receipt="r")
        rt.run_until_idle()
        send(rt, "o6", "picked")
        send(rt, "o6", "label_printed", tracking="T")
        stats = rt.run_until_idle()
        ids = sorted(s.id for s in rt.store.list_executions(limit=1000).items)
        # Each execution's secret (the key of its task ids) is random by design: compared on being there.
        results.append([{**d, "secret": bool(d.get("secret"))} for d in (load(rt, i).model_dump() for i in ids)])
        assert rt.dead_letters == []
        if isinstance(transport, Twice):
            assert stats.duplicates > 0
    assert results[0] == results[1]
    assert results[0][0]["outcome"] == "fulfilled"
