"""Focused regression tests for the bugs the properties of ``test_wire_worker.py`` found.

Each is the shrunk counterexample, made minimal. Those whose fix belongs to the wire, the engine or a
store (not to this suite) are strict ``xfail``s: the suite stays green while the bug is visible, and the
day it is fixed the test XPASSes and fails — then drop the marker and the bug's entry in
``known_bugs.py``, which keeps the properties from finding the same bug over and over meanwhile.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import (
    child_execution_id,
    emit_event_id,
    finished_event_id,
    forwarded_event_id,
    is_system_id,
    timeout_event_id,
)
from durastate.engine.model import Event
from durastate.errors import DurastateError, MalformedEvent
from durastate.transport import parse_envelope
from tests.store.conformance.backends import BACKENDS, BackendRequest, open_backend

from .definitions import DEFINITIONS
from .harness import Driver, check_namespace, list_all
from .strategies import chain

STORES = ["dict", "sqlite", "postgres", "dynamodb-moto"]


def store_params(xfail_on: tuple[str, ...], reason: str) -> list[Any]:
    """The stores above; strict xfail on ``xfail_on`` (where the bug shows)."""
    out = []
    for name in STORES:
        marks = list(BACKENDS[name].marks)
        if name in xfail_on:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        out.append(pytest.param(name, id=name, marks=marks))
    return out


@pytest.fixture
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Driver]:
    req = BackendRequest(tmp_path, unique=f"h{uuid.uuid4().hex[:16]}")
    with open_backend(BACKENDS[request.param], req) as store:
        yield Driver(store)


def deliver_all(driver: Driver, *messages: tuple[str, str, dict[str, Any]]) -> None:
    """Deliver ``(target, name, data)`` messages as JSON text through the wire, each must be accepted."""
    for i, (target, name, data) in enumerate(messages):
        out = driver.deliver(json.dumps({"target_id": target, "event": {"id": f"e{i}", "name": name, "data": data}}))
        assert out.accepted, out


def envelope(data: Any, target: str = "k1", name: str = "put") -> dict[str, Any]:
    return {"target_id": target, "event": {"id": "e1", "name": name, "data": data}}


# -- the wire -----------------------------------------------------------------------------------------


def test_a_lone_surrogate_in_event_data_is_refused_at_the_wire() -> None:
    with pytest.raises(MalformedEvent):
        parse_envelope(envelope({"s": "\ud800"}))


@pytest.mark.parametrize("where", ["value", "key"])
@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_a_lone_surrogate_in_event_data_never_reaches_a_store(driver: Driver, where: str) -> None:
    deliver_all(driver, ("k1", "durastate.start", {"definition_id": "keeper"}))
    data = {"s": "\ud800"} if where == "value" else {"\ud800": 1}
    driver.deliver(envelope(data))  # an untyped error escaping the worker fails the test
    check_namespace(driver, "k1")


@pytest.mark.parametrize("body", ['{"target_id": "a\ud800", "event": {"id": "e", "name": "n"}}', "\ud800"])
def test_the_error_for_a_text_body_with_a_raw_surrogate_can_be_printed(body: str) -> None:
    with pytest.raises(MalformedEvent) as err:
        parse_envelope(body)
    str(err.value).encode("utf-8")


@pytest.mark.parametrize("depth", [1000, 5000])
def test_a_mapping_body_nested_1000_deep_gets_a_malformed_event(depth: int) -> None:
    with pytest.raises(MalformedEvent, match="nests deeper than 64"):
        parse_envelope(envelope({"k": chain(depth)}))


@pytest.mark.parametrize("bad", [float("nan"), chain(64), (1, 2)], ids=["nan", "deep", "tuple"])
def test_an_entry_rule_error_under_a_surrogate_key_is_a_malformed_event(bad: Any) -> None:
    with pytest.raises(MalformedEvent):
        parse_envelope(envelope({"\ud800": bad}))


@pytest.mark.parametrize("field", ["target_id", "id", "name"])
def test_an_id_with_a_c1_control_character_is_refused(field: str) -> None:
    body = envelope({}, target="k1", name="put")
    if field == "target_id":
        body["target_id"] = "k\x851"
    else:
        body["event"][field] = "a\x85b"
    with pytest.raises(MalformedEvent):
        parse_envelope(body)


# -- what a definition computes from event data -------------------------------------------------------


@pytest.mark.parametrize("event", ["mul2", "mul3"])
@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_assign_inside_a_list_or_a_send_that_overflows_to_infinity_is_refused(driver: Driver, event: str) -> None:
    deliver_all(driver, ("k1", "durastate.start", {"definition_id": "keeper"}), ("k1", event, {"a": 1e308, "b": 10}))
    check_namespace(driver, "k1")


def test_an_assign_that_overflows_to_infinity_fails_the_step(tmp_path: Path) -> None:
    """Fixed (a8627a2): the top-level case the properties found first; kept as a regression test."""
    with open_backend(BACKENDS["sqlite"], BackendRequest(tmp_path)) as store:
        driver = Driver(store)
        deliver_all(driver, ("k1", "durastate.start", {"definition_id": "keeper"}),
                    ("k1", "mul", {"a": 1e308, "b": 10}))
        exe = store.load("k1")
        assert exe is not None and exe.status == "failed" and exe.context["m"] is None
        check_namespace(driver, "k1")


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_assign_that_makes_an_integer_too_long_for_json_is_refused(driver: Driver) -> None:
    big = 10**2500  # each within the entry rules; their product is not
    deliver_all(driver, ("k1", "durastate.start", {"definition_id": "keeper"}), ("k1", "mul", {"a": big, "b": big}))
    check_namespace(driver, "k1")


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_event_a_definition_sends_deeper_than_64_levels_is_not_a_poison_outbox_entry(driver: Driver) -> None:
    deliver_all(driver, ("k1", "durastate.start", {"definition_id": "keeper"}))
    out = driver.deliver(json.dumps(envelope({"d": chain(63)}, name="wrap")))  # 63 levels: within the rules
    assert out.accepted
    check_namespace(driver, "k1")


@pytest.mark.parametrize("via", ["context", "event"])
@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_a_send_to_an_id_with_nul_is_not_an_untyped_postgres_error(driver: Driver, via: str) -> None:
    """Found on PostgreSQL (a send to a target holding NUL failed the commit with psycopg's untyped
    DataError: retried forever, the execution stuck); fixed meanwhile (b3896af): the step fails."""
    if via == "context":
        deliver_all(driver, ("c1", "durastate.start", {"definition_id": "counter", "context": {"peer": "a\x00b"}}),
                    ("c1", "poke", {}))
    else:
        deliver_all(driver, ("c1", "durastate.start", {"definition_id": "keeper"}), ("c1", "tell", {"to": "a\x00b"}))
    exe = driver.store.load("c1")
    assert exe is not None and exe.status == "failed" and "send target" in str(exe.error)
    check_namespace(driver, "c1")


@pytest.mark.parametrize(("a", "b"), [("ab", 3), (3, "ab"), ([1], 3)])
def test_mul_of_a_string_and_a_count_is_refused(tmp_path: Path, a: Any, b: Any) -> None:
    with open_backend(BACKENDS["dict"], BackendRequest(tmp_path)) as store:
        driver = Driver(store)
        deliver_all(driver, ("k1", "durastate.start", {"definition_id": "keeper"}), ("k1", "mul", {"a": a, "b": b}))
        exe = store.load("k1")
        assert exe is not None
        assert exe.status == "failed" and exe.context["m"] is None, f"mul computed {exe.context['m']!r}"


# -- event ids ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_event_id_a_producer_chose_cannot_suppress_a_timeout(driver: Driver) -> None:
    """Found by the properties: a producer's event that took the id the sweeper derives for a timer's
    timeout was marked applied, the real timeout then dropped as a duplicate, and the execution waited in
    its state forever. Runtime-derived ids of reserved events now live in a namespace of their own
    (``~timeout:…``) that the wire refuses on any other event."""
    deliver_all(driver, ("c1", "durastate.start", {"definition_id": "counter"}), ("c1", "wait", {}))
    exe = driver.store.load("c1")
    assert exe is not None and exe.active_path == "waiting"
    claim = timeout_event_id("c1", "waiting", exe.timers["waiting"])
    out = driver.deliver(json.dumps({"target_id": "c1", "event": {"id": claim, "name": "inc", "data": {}}}))
    assert not out.accepted and isinstance(out.error, MalformedEvent) and "durastate.timeout" in str(out.error)
    driver.tick(31)
    exe = driver.store.load("c1")
    assert exe is not None and exe.active_path == "idle", f"still in {exe.active_path!r} after its 30 s timeout"
    check_namespace(driver, "c1")


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_event_id_a_producer_chose_cannot_suppress_a_finished_notice(driver: Driver) -> None:
    """The sibling: a producer's event that took the id of a child's finished notice to its parent."""
    deliver_all(driver, ("i1", "durastate.start", {"definition_id": "invoker"}))
    child = child_execution_id("i1", 1)
    out = driver.deliver(json.dumps({"target_id": "i1", "event": {"id": finished_event_id(child), "name": "hello"}}))
    assert not out.accepted and isinstance(out.error, MalformedEvent)
    deliver_all(driver, (child, "stop", {}))
    parent = driver.store.load("i1")
    assert parent is not None and (parent.status, parent.outcome) == ("finished", "ok"), (
        f"the parent is {parent.status} in {parent.active_path!r} after its child finished")


def send(driver: Driver, target: str, eid: str, name: str, data: dict[str, Any] | None = None) -> None:
    """One message on the raw queue (no producer entry's check), which must be accepted."""
    out = driver.deliver(json.dumps({"target_id": target, "event": {"id": eid, "name": name, "data": data or {}}}))
    assert out.accepted, out


@pytest.mark.parametrize("name", ["inc", "unhandled"])
@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_event_id_a_producer_chose_cannot_suppress_an_emitted_event(driver: Driver, name: str) -> None:
    """Emitted events had the plain ids ``<execution>:<version>:<n>``, in the producers' namespace: a
    producer's event to the receiver under that id, first, was marked applied and the true event then
    dropped as a duplicate. The id now carries a mac under the emitter's secret (``emit_event_id``)."""
    send(driver, "c1", "s1", "durastate.start", {"definition_id": "counter"})
    send(driver, "c2", "s2", "durastate.start", {"definition_id": "counter", "context": {"peer": "c1"}})
    emitter = driver.store.load("c2")
    assert emitter is not None
    guess = emit_event_id("c2", emitter.version, 1)  # the id c2's next step would have given its first event
    send(driver, "c1", guess, name)
    send(driver, "c2", "p1", "poke")  # c2 sends c1 an inc
    c1 = driver.store.load("c1")
    own = 1 if name == "inc" else 0  # the producer's own inc counts, under whatever id it chose
    assert c1 is not None and c1.context["count"] == own + 1, f"c2's inc was dropped: {c1.context}"
    check_namespace(driver, "c1")


@pytest.mark.parametrize("name", ["go", "unhandled"])
@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_event_id_a_producer_chose_cannot_suppress_a_forwarded_event(driver: Driver, name: str) -> None:
    """The sibling for a parallel state's regions: the event it forwards to region ``f1~1`` had the id
    ``<event id>:f1~1``. A producer's event to the region under it, first, left the region waiting for an
    event it had dropped, and the parallel state never done."""
    send(driver, "f1", "s1", "durastate.start", {"definition_id": "fork"})
    left = child_execution_id("f1", 1)
    send(driver, left, forwarded_event_id("go1", left), name)
    send(driver, "f1", "go1", "go")  # forwarded to both regions: both end, so does f1
    f1 = driver.store.load("f1")
    assert f1 is not None and (f1.status, f1.outcome) == ("finished", "joined"), (
        f"f1 is {f1.status} in {f1.active_path!r}: the forwarded go was dropped")
    check_namespace(driver, "f1")


@pytest.mark.parametrize("witness", [None, "0123456789abcdef"])
@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_a_producer_cannot_start_an_invoked_child_before_its_parent_does(driver: Driver, witness: str | None) -> None:
    """An invoked child's start was taken on the word of its data (``parent_id``, ``child_id``) and of the
    parent's invoke count: a producer's start under the child's id, sent between the parent's commit and
    the relay's delivery of the true start, created the child with a context of its own, whose output the
    parent then took for its child's. The parent now signs its children's starts (a witness under its
    secret); the forged one is refused and the true one creates the child."""
    assert driver.rt.worker.handle("i1", Event(id="s1", name="durastate.start", data={"definition_id": "invoker"}))
    child = child_execution_id("i1", 1)  # its start is in the outbox, not relayed yet
    forged = {"definition_id": "counter", "context": {"count": 666}, "parent_id": "i1", "child_id": child,
              **({"witness": witness} if witness else {})}
    out = driver.deliver({"target_id": child, "event": {"id": f"{child}:start", "name": "durastate.start",
                                                        "data": forged}})
    assert not out.accepted and isinstance(out.error, DurastateError), out  # then the relay's round
    send(driver, child, "stop1", "stop")
    kid, parent = driver.store.load(child), driver.store.load("i1")
    assert kid is not None and kid.context["count"] == 0, f"the child runs the producer's context: {kid.context}"
    assert parent is not None and (parent.status, parent.outcome) == ("finished", "ok"), parent


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_a_parent_stored_before_secrets_gets_none_while_its_child_may_still_be_starting(driver: Driver) -> None:
    """A parent stored before secrets sent its child's start without a witness. It gets no secret while
    that child runs (it would no longer vouch for the start), so the start still creates the child; once
    the child has ended, the parent's next step gives it one."""
    worker = driver.rt.worker
    assert worker.handle("i1", Event(id="s1", name="durastate.start", data={"definition_id": "invoker"}))
    parent = driver.store.load("i1")
    assert parent is not None
    parent.secret = None
    driver.store.commit(parent, [], processed_event_id="stored-before-secrets")
    worker.forget()
    assert worker.handle("i1", Event(id="u1", name="unhandled")) == "ignored"
    parent = driver.store.load("i1")
    assert parent is not None and parent.secret is None
    child = child_execution_id("i1", 1)
    legacy = {"definition_id": "counter", "context": {}, "parent_id": "i1", "child_id": child}
    send(driver, child, f"{child}:start", "durastate.start", legacy)  # as the relay sent it before secrets
    assert driver.store.load(child) is not None
    send(driver, child, "stop1", "stop")
    send(driver, "i1", "u2", "unhandled")
    parent = driver.store.load("i1")
    assert parent is not None and (parent.status, parent.outcome) == ("finished", "ok") and parent.secret


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_the_events_two_held_steps_emit_in_one_commit_are_all_delivered(driver: Driver) -> None:
    """Found on the way: a resume applies the events held meanwhile in one commit, and each step numbered
    its emitted events from 1 at the same version, so the second step's event had the first one's id and
    was dropped by the receiver as a duplicate. The numbering now runs over the whole commit."""
    send(driver, "c1", "s1", "durastate.start", {"definition_id": "counter"})
    send(driver, "c2", "s2", "durastate.start", {"definition_id": "counter", "context": {"peer": "c1"}})
    send(driver, "c2", "z1", "durastate.suspend")
    send(driver, "c2", "p1", "poke")
    send(driver, "c2", "p2", "poke")  # both held
    send(driver, "c2", "r1", "durastate.resume")
    c1 = driver.store.load("c1")
    assert c1 is not None and c1.context["count"] == 2, f"one of the two incs was dropped: {c1.context}"


@pytest.mark.parametrize("name", ["durastate.timeout", "durastate.finished", "durastate.cancel",
                                  "durastate.suspend", "durastate.resume", "durastate.terminate"])
def test_every_runtime_derived_id_of_a_reserved_event_is_refused_on_any_other_event(name: str) -> None:
    """The class: each reserved event the runtime derives ids for keeps its namespace."""
    kind = name.removeprefix("durastate.")
    with pytest.raises(MalformedEvent, match=f"~{kind}:"):
        parse_envelope(envelope({}, name="put") | {"event": {"id": f"~{kind}:x", "name": "put"}})
    assert parse_envelope({"target_id": "k1", "event": {"id": f"~{kind}:x", "name": name}}).event.id == f"~{kind}:x"


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_a_send_to_the_empty_id_is_not_an_untyped_dynamodb_error(driver: Driver) -> None:
    """Found on DynamoDB (a send to the empty id reached the worker, whose read failed with botocore's
    untyped ValidationException, retried forever); fixed meanwhile in the engine: the step fails."""
    deliver_all(driver, ("k1", "durastate.start", {"definition_id": "keeper"}), ("k1", "tell", {"to": ""}))
    exe = driver.store.load("k1")
    assert exe is not None and exe.status == "failed" and "send target is empty" in str(exe.error)
    check_namespace(driver, "k1")


def test_every_known_bug_names_a_regression_test_here() -> None:
    """``known_bugs.py`` keeps the properties from rediscovering these bugs; each of its entries must name
    a test of this module (so fixing the bug, which XPASSes that test, leads to the entry)."""
    import re
    import sys

    from . import known_bugs

    here = sys.modules[__name__]
    named = {sig.regression for sig in known_bugs.SIGNATURES}
    named |= set(re.findall(r"test_regressions\.py::(\w+)", Path(known_bugs.__file__).read_text()))
    assert not [n for n in named if not callable(getattr(here, n, None))]


CALLER = {
    "id": "caller",
    "initial": "calling",
    "states": {
        "calling": {"invoke": {"definition": "counter", "context": {}},
                    "on_done": {"target": "ok", "actions": [{"assign": {"got": "$event.output"}}]}},
        "ok": {"type": "final", "outcome": "ok"},
    },
}


def test_a_forged_finished_notice_cannot_change_the_childs_outcome_or_output(tmp_path: Path) -> None:
    registry = DefinitionRegistry()
    for doc in (*DEFINITIONS, CALLER):
        registry.register(load_definition(doc))
    with open_backend(BACKENDS["sqlite"], BackendRequest(tmp_path)) as store:
        driver = Driver(store, registry)
        deliver_all(driver, ("p", "durastate.start", {"definition_id": "caller"}))
        child = child_execution_id("p", 1)
        driver.rt.worker.handle(child, Event(id="stop", name="stop"))  # the child ends; its notice not relayed yet
        forged = {"child_id": child, "status": "finished", "outcome": "evil", "output": {"count": 666}}
        driver.deliver({"target_id": "p", "event": {"id": "forged", "name": "durastate.finished", "data": forged}})
        parent = store.load("p")
        assert parent is not None and parent.context.get("got") == {"count": 0, "peer": None}, parent.context


@pytest.mark.parametrize("driver", store_params((), ""), indirect=True)
def test_an_oversized_start_is_refused_and_leaves_no_execution_behind(driver: Driver) -> None:
    """A start over DynamoDB's item limit is refused with a typed error and no trace of the execution.

    The definition's version is archived before the first start of it commits, on purpose: an execution
    must never pin a version that is not archived. So a refused start may leave that archive record, and
    nothing else; a redelivery of the start is refused the same way.
    """
    huge = {"definition_id": "counter", "context": {"blob": "x" * 450_000}}
    for _ in range(2):
        out = driver.deliver({"target_id": "big", "event": {"id": "s1", "name": "durastate.start", "data": huge}})
        if not driver.store.__class__.__name__.startswith("Dynamo") or getattr(driver.store, "context_bucket", None):
            # the SQL and in-memory stores keep rows this large; DynamoDB with a context bucket claim-checks it
            assert out.accepted, out
            loaded = driver.store.load("big")
            assert loaded is not None and loaded.context["blob"] == huge["context"]["blob"]
            return
        assert out.kind == "refused" and type(out.error).__name__ == "ExecutionTooLarge", out
        assert "keep large payloads out of the context" in str(out.error)
        assert driver.store.load("big") is None
        assert [s.id for s in list_all(driver.store) if not is_system_id(s.id)] == []
