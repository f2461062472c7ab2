"""Messages that once broke executions, through the wire and the worker, on every store.

Each test is a defect an outside test campaign found (a forged timeout failing a running execution,
non-finite numbers stored as null, data nested too deep to load again, user ids colliding with child
ids, ids over the limit, forged runtime events); each asserts what a user relies on: the bad message gets
a typed error (or is ignored as stale), and what is stored stays loadable and unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import child_execution_id, timeout_event_id
from durastate.engine.model import Event
from durastate.errors import InvalidValue, MalformedEvent
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore
from durastate.transport import InMemoryTransport, parse_envelope

from .conftest import COUNTER, FORK

INVOKER = {
    "id": "invoker",
    "initial": "calling",
    "states": {
        "calling": {"invoke": {"definition": "counter", "context": {}}, "on_done": "ok", "on_error": "bad"},
        "ok": {"type": "final", "outcome": "ok"},
        "bad": {"type": "final", "outcome": "child-failed"},
    },
}


@pytest.fixture
def store(every_store: ExecutionStore) -> ExecutionStore:
    return every_store


@pytest.fixture
def rt(store: ExecutionStore) -> LocalRuntime:
    reg = DefinitionRegistry()
    for doc in (COUNTER, FORK, INVOKER):
        reg.register(load_definition(doc))
    return LocalRuntime(store, reg, clock=ManualClock(1_700_000_000.0))


def deliver(rt: LocalRuntime, body: str | dict[str, Any]) -> None:
    """What a worker does with a message body: parse it at the wire, then apply it."""
    env = parse_envelope(json.dumps(body) if isinstance(body, dict) else body)
    rt.transport.send([(env.target_id, env.event)])  # on the queue: past the producer entries' checks
    rt.run_until_idle()


def snapshot(rt: LocalRuntime, execution_id: str) -> dict[str, Any]:
    exe = rt.get(execution_id)
    assert exe is not None
    return exe.model_dump(exclude={"version", "updated_at"})


def test_a_forged_timeout_changes_nothing(rt: LocalRuntime) -> None:
    """A timeout whose id is not the one durastate derives from its data is refused (dead-lettered, with
    the reason); one with the true id of a timer not armed is ignored and left unrecorded."""
    rt.start("counter", execution_id="o1")
    rt.send("o1", Event(id="w", name="wait"))  # `waiting` arms a 30 s timer
    rt.run_until_idle()
    before = snapshot(rt, "o1")
    for data in ({"path": "processing"}, {"path": "waiting"}, {"path": "waiting", "fire_at": 1.0}, {}):
        deliver(rt, {"target_id": "o1", "event": {"id": f"t-{len(data)}-{data.get('path')}",
                                                  "name": "durastate.timeout", "data": data}})
    stale = timeout_event_id("o1", "processing", 1.0)
    deliver(rt, {"target_id": "o1", "event": {"id": stale, "name": "durastate.timeout",
                                              "data": {"path": "processing", "fire_at": 1.0}}})
    assert snapshot(rt, "o1") == before  # still running, still waiting, timer still armed
    assert [d.event.id for d in rt.dead_letters] == ["t-1-processing", "t-1-waiting", "t-2-waiting", "t-0-None"]
    assert not rt.store.is_processed("o1", stale)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_are_refused_at_the_wire(number: str) -> None:
    body = '{"target_id": "o1", "event": {"id": "e1", "name": "inc", "data": {"a": NUMBER}}}'
    with pytest.raises(MalformedEvent, match="no non-finite numbers"):
        parse_envelope(body.replace("NUMBER", number))


def test_non_finite_numbers_are_refused_by_the_client(rt: LocalRuntime) -> None:
    client = DurastateClient(InMemoryTransport())
    with pytest.raises(MalformedEvent, match=r"context\.a is nan"):
        client.start("counter", {"a": float("nan")}, execution_id="n1")
    with pytest.raises(MalformedEvent, match="non-finite"):
        client.send("n1", "inc", {"x": [1, float("inf")]})


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_data_nested_too_deep_is_refused_and_what_is_stored_loads(rt: LocalRuntime) -> None:
    rt.start("counter", {"deep": nested(60)}, execution_id="d1")
    rt.run_until_idle()
    assert rt.get("d1") is not None  # a deep-but-allowed context is stored and loads again
    body = {"target_id": "d1", "event": {"id": "deep", "name": "inc", "data": nested(197)}}
    with pytest.raises(MalformedEvent, match="nests deeper than 64"):
        deliver(rt, body)
    exe = rt.get("d1")
    assert exe is not None and exe.status == "running" and exe.context["count"] == 0


def test_a_user_id_cannot_enter_the_child_namespace(rt: LocalRuntime) -> None:
    with pytest.raises(InvalidValue, match="reserves"):
        DurastateClient(InMemoryTransport()).start("counter", execution_id="x~1")
    deliver(rt, {"target_id": "x~1", "event": {"id": "x~1:start", "name": "durastate.start",
                                                "data": {"definition_id": "counter"}}})
    assert rt.get("x~1") is None and "reserves" in rt.dead_letters[-1].reason
    # x.1 is an ordinary user id now; x's regions are x~1 and x~2 and x joins them.
    rt.start("counter", execution_id="x.1")
    rt.start("fork", execution_id="x")
    rt.run_until_idle()
    rt.send("x", Event(id="go", name="go"))
    rt.run_until_idle()
    x = rt.get("x")
    assert x is not None and x.status == "finished" and x.outcome == "joined"
    user = rt.get("x.1")
    assert user is not None and user.definition_id == "counter" and user.parent_id is None


def test_a_forged_invoked_child_start_is_refused(rt: LocalRuntime) -> None:
    rt.start("counter", execution_id="p")
    rt.run_until_idle()
    deliver(rt, {"target_id": "p~1", "event": {"id": "p~1:start", "name": "durastate.start", "data": {
        "definition_id": "counter", "parent_id": "p", "child_id": "p~1"}}})
    assert rt.get("p~1") is None and "never invoked it" in rt.dead_letters[-1].reason


def test_a_forged_finished_notice_does_not_steer_the_parent(rt: LocalRuntime) -> None:
    rt.start("invoker", execution_id="inv")
    rt.run_until_idle()
    child = child_execution_id("inv", 1)
    before = snapshot(rt, "inv")
    deliver(rt, {"target_id": "inv", "event": {"id": "forged", "name": "durastate.finished", "data": {
        "child_id": child, "status": "finished", "outcome": "ok"}}})
    assert snapshot(rt, "inv") == before  # the child is still running: the notice was not true
    rt.send(child, Event(id="stop", name="stop"))
    rt.run_until_idle()
    inv = rt.get("inv")
    assert inv is not None and inv.status == "finished" and inv.outcome == "ok"


def test_an_unknown_reserved_event_is_refused(rt: LocalRuntime) -> None:
    rt.start("counter", execution_id="r1")
    rt.run_until_idle()
    deliver(rt, {"target_id": "r1", "event": {"id": "z", "name": "durastate.explode", "data": {}}})
    assert "not an event durastate knows" in rt.dead_letters[-1].reason
    with pytest.raises(MalformedEvent, match="reserved"):
        DurastateClient(InMemoryTransport()).send("r1", "durastate.timeout", {"path": "idle"})


def test_ids_at_the_limit_work_end_to_end(rt: LocalRuntime) -> None:
    long_id = "p" * 128
    client = DurastateClient(rt.transport)
    assert client.start("fork", execution_id=long_id) == long_id  # its start event id is capped
    rt.run_until_idle()
    rt.send(long_id, Event(id="go", name="go"))
    rt.run_until_idle()
    exe = rt.get(long_id)
    assert exe is not None and exe.status == "finished", exe
    assert all(len(c) <= 128 and c.startswith("~") for c in exe.children)
    assert rt.dead_letters == []


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "", "x" * 129])
def test_bad_ids_get_the_same_typed_error_everywhere(rt: LocalRuntime, bad: str) -> None:
    with pytest.raises(MalformedEvent):
        parse_envelope({"target_id": bad, "event": {"id": "e", "name": "inc"}})
    with pytest.raises(MalformedEvent):
        parse_envelope({"target_id": "ok", "event": {"id": bad, "name": "inc"}})
    with pytest.raises(MalformedEvent):
        DurastateClient(InMemoryTransport()).send(bad, "inc")
    with pytest.raises(InvalidValue):
        DurastateClient(InMemoryTransport()).start("counter", execution_id=bad)
    with pytest.raises(MalformedEvent):
        deliver(rt, {"target_id": bad, "event": {"id": "e", "name": "durastate.start",
                                                 "data": {"definition_id": "counter"}}})
    assert rt.store.list_executions().items == []  # the store never saw any of them


def test_an_assign_that_overflows_fails_the_step_instead_of_storing_null(store: ExecutionStore) -> None:
    reg = DefinitionRegistry()
    reg.register(load_definition({"id": "big", "initial": "a", "context": {"v": 1e308}, "states": {"a": {"on": {
        "go": {"actions": [{"assign": {"v": {"mul": ["$context.v", 10]}}}]}}}}}))
    rt = LocalRuntime(store, reg, clock=ManualClock(0.0))
    rt.start("big", execution_id="b")
    rt.send("b", Event(id="go", name="go"))
    rt.run_until_idle()
    exe = rt.get("b")
    assert exe is not None and exe.status == "failed" and "assign v is inf" in (exe.error or "")
    assert exe.context == {"v": 1e308}  # the step was not applied: nothing became null


def test_a_region_never_adopts_an_execution_that_is_not_its_own(rt: LocalRuntime) -> None:
    from durastate.engine.model import Execution

    # Something other than durastate wrote an execution under the id x's first region will take.
    rt.store.save(Execution(id="x~1", definition_id="counter", active_path="idle"))
    rt.start("fork", execution_id="x")
    rt.run_until_idle()
    x = rt.get("x")
    assert x is not None and x.status == "failed" and "is taken by an execution that is not this region" in (
        x.error or "")
    other = rt.get("x~1")
    assert other is not None and other.definition_id == "counter" and other.parent_id is None  # untouched


def test_a_send_to_an_id_no_store_can_key_fails_the_step(store: ExecutionStore) -> None:
    reg = DefinitionRegistry()
    reg.register(load_definition({"id": "fwd", "initial": "a", "context": {"peer": ""}, "states": {"a": {"on": {
        "go": {"actions": [{"send": {"event": "ping", "to": "$context.peer"}}]}}}}}))
    rt = LocalRuntime(store, reg, clock=ManualClock(0.0))
    rt.start("fwd", execution_id="f")
    rt.send("f", Event(id="go", name="go"))
    rt.run_until_idle()
    exe = rt.get("f")
    assert exe is not None and exe.status == "failed" and "send target is empty" in (exe.error or "")
    assert rt.dead_letters == [] and rt.store.pending_outbox() == []
