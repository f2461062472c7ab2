"""Search fields end to end on every store: the worker's commits index the values a step computes, and a
listing by them (``DurastateClient.list(where=…)``) finds what the events made of the executions — the
root execution only, not its region children."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore

CART = {
    "id": "cart",
    "initial": "open",
    "context": {"customer": None, "total": 0},
    "search": {"customer": {"path": "customer"}, "total": {"type": "number"}},
    "states": {
        "open": {"on": {
            "add": {"actions": [{"assign": {"total": {"add": ["$context.total", "$event.price"]}}}]},
            "pack": "packing"}},
        "packing": {"type": "parallel", "states": {
            "box": {"initial": "b", "states": {"b": {}}},
            "label": {"initial": "l", "states": {"l": {}}}}},
    },
}


@pytest.fixture
def rt(every_store: ExecutionStore, clock: ManualClock) -> LocalRuntime:
    return LocalRuntime(every_store, DefinitionRegistry([load_definition(CART)]), clock=clock)


def listed(rt: LocalRuntime, **where: Any) -> list[str]:
    client = DurastateClient(rt.transport, rt.store)
    return [s.id for s in client.list(where=where).items]


def test_a_listing_by_search_field_follows_the_events(rt: LocalRuntime) -> None:
    for n, customer in enumerate(["c-17", "c-17", "c-3"]):
        rt.start("cart", {"customer": customer}, execution_id=f"k{n}")
    rt.run_until_idle()
    assert listed(rt, customer="c-17") == ["k0", "k1"]
    rt.send("k1", Event(id="a1", name="add", data={"price": 150}))
    rt.run_until_idle()
    client = DurastateClient(rt.transport, rt.store)
    assert [s.id for s in client.list(where=[("customer", "=", "c-17"), ("total", ">", 100)]).items] == ["k1"]
    assert [s.id for s in client.list(where=[("total", "<=", 0)]).items] == ["k0", "k2"]


def test_region_children_are_found_through_their_parent(rt: LocalRuntime) -> None:
    rt.start("cart", {"customer": "c-5"}, execution_id="p")
    rt.run_until_idle()
    rt.send("p", Event(id="go", name="pack"))
    rt.run_until_idle()
    assert len(rt.store.list_executions(parent_id="p").items) == 2  # the regions run as children
    assert listed(rt, customer="c-5") == ["p"]
