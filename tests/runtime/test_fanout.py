"""A state's ``map`` through the worker, the relay and every store (real SQLite file, real PostgreSQL, moto):
outputs in item order, the window bound at every commit, fail fast, cancel, and forged starts and notices
for map children refused."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event, Execution
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import Emit, ExecutionStore, Spawn, TimerOp
from durastate.transport import parse_envelope

from .conftest import HookedStore

WORK = {
    "id": "work",
    "initial": "busy",
    "states": {
        "busy": {"on": {
            "go": {"target": "done", "actions": [{"assign": {"square": {"mul": ["$context.n", "$context.n"]}}}]},
            "crash": {"target": "done", "actions": [{"assign": {"x": {"div": [1, 0]}}}]},
        }},
        "done": {"type": "final"},
    },
}

FAN = {
    "id": "fan",
    "initial": "mapping",
    "context": {"numbers": [1, 2, 3, 4, 5, 6, 7]},
    "states": {
        "mapping": {
            "map": {"items": "$context.numbers", "invoke": {"definition": "work", "context": {"n": "$item"}},
                    "max_concurrency": 3, "output": "$event.output.square"},
            "on": {"abort": "aborted"},
            "on_done": {"target": "done", "actions": [{"assign": {"squares": "$event.outputs"}}]},
            "on_error": {"target": "failed", "actions": [{"assign": {"first": "$event.index"}}]},
        },
        "done": {"type": "final", "outcome": "ok"},
        "failed": {"type": "final", "outcome": "failed"},
        "aborted": {"type": "final", "outcome": "aborted"},
    },
}

MAX = 3


class Watching(HookedStore):
    """Records, at every commit of the parent, how many map children it has running."""

    def __init__(self, inner: ExecutionStore) -> None:
        super().__init__(inner)
        self.windows: list[int] = []

    def commit(self, exe: Execution, emits: Sequence[Emit], processed_event_id: str | None = None,
               timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
               trace: dict[str, Any] | None = None, **options: Any) -> None:
        if exe.id == "p":
            self.windows.append(sum(1 for ref in exe.children.values() if ref.kind == "map"
                                    and ref.status == "running"))
        super().commit(exe, emits, processed_event_id, timers, spawns, trace, **options)


@pytest.fixture
def store(every_store: ExecutionStore) -> Watching:
    return Watching(every_store)


@pytest.fixture
def rt(store: Watching) -> LocalRuntime:
    reg = DefinitionRegistry([load_definition(FAN), load_definition(WORK)])
    return LocalRuntime(store, reg, clock=ManualClock(1_700_000_000.0))


def running(rt: LocalRuntime) -> list[str]:
    p = rt.get("p")
    assert p is not None
    return sorted((c for c, ref in p.children.items() if ref.status == "running"),
                  key=lambda c: p.children[c].index or 0)


def test_children_finishing_in_reverse_give_outputs_in_item_order(rt: LocalRuntime, store: Watching) -> None:
    rt.start("fan", execution_id="p")
    rt.run_until_idle()
    while (p := rt.get("p")) is not None and p.status == "running":
        window = running(rt)
        assert 0 < len(window) <= MAX
        rt.send(window[-1], Event(name="go"))  # the newest first: the children end out of order
        rt.run_until_idle()
    assert p is not None and p.outcome == "ok", p.error
    assert p.context["squares"] == [1, 4, 9, 16, 25, 36, 49]
    assert p.children == {} and p.maps == {}
    assert max(store.windows) == MAX and all(w <= MAX for w in store.windows)
    kids = [rt.get(f"p~{n}") for n in range(1, 8)]
    assert all(k is not None and k.status == "finished" and k.parent_id == "p" for k in kids)
    assert rt.get("p~8") is None


def test_a_failed_child_cancels_the_others_and_takes_on_error(rt: LocalRuntime) -> None:
    rt.start("fan", execution_id="p")
    rt.run_until_idle()
    rt.send("p~2", Event(name="crash"))
    rt.run_until_idle()
    p = rt.get("p")
    assert p is not None and p.outcome == "failed" and p.context["first"] == 1
    assert [getattr(rt.get(c), "status", None) for c in ("p~1", "p~2", "p~3", "p~4")] == [
        "cancelled", "failed", "cancelled", None]


def test_cancelling_the_parent_cancels_the_running_children(rt: LocalRuntime) -> None:
    rt.start("fan", execution_id="p")
    rt.run_until_idle()
    rt.send("p~1", Event(name="go"))
    rt.run_until_idle()
    rt.cancel("p")
    rt.run_until_idle()
    statuses = {c: getattr(rt.get(c), "status", None) for c in ("p~1", "p~2", "p~3", "p~4", "p~5")}
    assert statuses == {"p~1": "finished", "p~2": "cancelled", "p~3": "cancelled", "p~4": "cancelled",
                        "p~5": None}


def deliver(rt: LocalRuntime, body: dict[str, Any]) -> None:
    env = parse_envelope(json.dumps(body))
    rt.transport.send([(env.target_id, env.event)])  # on the queue: past the producer entries' checks
    rt.run_until_idle()


def test_a_forged_start_of_a_map_child_not_started_yet_is_refused(rt: LocalRuntime) -> None:
    rt.start("fan", execution_id="p")
    rt.run_until_idle()
    deliver(rt, {"target_id": "p~4", "event": {"id": "p~4:start", "name": "durastate.start", "data": {
        "definition_id": "work", "context": {"n": 100}, "parent_id": "p", "child_id": "p~4"}}})
    assert rt.get("p~4") is None and "never invoked it" in rt.dead_letters[-1].reason
    rt.send("p~1", Event(name="go"))  # the real p~4 starts now, with its own item
    rt.run_until_idle()
    four = rt.get("p~4")
    assert four is not None and four.context == {"n": 4}


def test_a_forged_finished_notice_of_a_map_child_is_ignored(rt: LocalRuntime) -> None:
    rt.start("fan", execution_id="p")
    rt.run_until_idle()
    before = rt.get("p")
    assert before is not None
    deliver(rt, {"target_id": "p", "event": {"id": "forged", "name": "durastate.finished", "data": {
        "child_id": "p~2", "status": "failed", "error": "forged"}}})
    after = rt.get("p")
    assert after is not None and after.maps == before.maps and after.children == before.children
    assert after.status == "running"


def test_a_long_parent_id_gives_hashed_child_ids_that_the_worker_accepts(rt: LocalRuntime) -> None:
    parent = "p" * 127  # its children's ids would pass 128 characters: they are ~ and a SHA-256 instead
    rt.start("fan", execution_id=parent)
    rt.run_until_idle()
    for _ in range(7):
        exe = rt.get(parent)
        assert exe is not None and exe.status == "running", exe and exe.error
        child = min(exe.children, key=lambda c: exe.children[c].index or 0)
        assert child.startswith("~") and rt.get(child) is not None
        rt.send(child, Event(name="go"))
        rt.run_until_idle()
    done = rt.get(parent)
    assert done is not None and done.context["squares"] == [1, 4, 9, 16, 25, 36, 49]


def test_a_retried_item_restarts_after_its_backoff_and_a_percentage_tolerates_on_every_store(
        every_store: ExecutionStore) -> None:
    """``invoke.retry`` on a map: a failed item is started again as a new child once its backoff timer has
    fired (through the store's timers table and the sweeper), within the window; ``tolerate: "20%"`` of 7
    items accepts one failure for good."""
    doc = json.loads(json.dumps(FAN))
    doc["states"]["mapping"]["map"].update(tolerate="20%", invoke={
        "definition": "work", "context": {"n": "$item"},
        "retry": {"max_attempts": 2, "backoff": {"initial": 60}}})
    clock = ManualClock(1_700_000_000.0)
    store = Watching(every_store)
    rt = LocalRuntime(store, DefinitionRegistry([load_definition(doc), load_definition(WORK)]), clock=clock)
    rt.start("fan", execution_id="p")
    rt.run_until_idle()
    rt.send("p~1", Event(name="crash"))
    rt.run_until_idle()
    assert running(rt) == ["p~2", "p~3"]  # item 0 waits for its retry, in its slot
    stored = every_store.load("p")
    assert stored is not None and list(stored.timers) == ["~invoke:mapping"]
    clock.advance(60)
    rt.run_until_idle()
    assert running(rt) == ["p~4", "p~2", "p~3"]  # p~4 is item 0's second try
    rt.send("p~4", Event(name="crash"))  # its tries ran out: one failure, within 20% of 7
    rt.run_until_idle()
    while (p := rt.get("p")) is not None and p.status == "running" and running(rt):
        rt.send(running(rt)[0], Event(name="go"))
        rt.run_until_idle()
    assert p is not None and p.outcome == "ok", p.error
    assert p.context["squares"] == [None, 4, 9, 16, 25, 36, 49]
    assert all(w <= MAX for w in store.windows)
