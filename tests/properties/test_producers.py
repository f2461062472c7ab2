"""4. What the runtime derives cannot be forged or claimed first (the rule: ``durastate.engine.ids``).

Any sequence of producer messages that a producer is not entitled to send — with any id shaped like one
the runtime derives (a timeout's, true or not; a finished notice's; ``~redrive:…``; ``~cancel:…`` and the
other control kinds; a schedule run's ``<name>~<tick>``; a child's ``<id>~<n>``), any reserved name
(``durastate.timeout``, ``durastate.finished``, ``durastate.start`` of an id in the runtime's namespace, the
control events) and any target (a running execution, its invoked child, a schedule record ``~schedule~…``,
an archived definition version ``~definition~…``) — delivered through the wire into the worker at any
point of a legitimate run, either changes nothing in the store or is refused with a typed error; and the
legitimate run ends exactly as it does alone.

And a producer's own event to any execution, under an id it guessed for one the runtime derives without
checking it against stored state — the id of an event an execution emits (``<execution>:<version>:<n>``, the
form it had, or with any mac), of one a parallel state forwards to a region (``<event>:<region>``) — acts
exactly as the same event under an id of its own: it never takes the id from the true event, which still
applies when it comes (the run ends as it does with the producer's events under fresh ids).

Not in it: what a producer may do and which does change a run (its own events with its own ids, the
control events it may send to an execution it names): that is not forging. The examples per store follow
the suite's profiles (``ci``; ``DURASTATE_HYPOTHESIS_EXAMPLES=N`` for ``deep``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from durastate.engine.ids import (
    child_execution_id,
    control_event_id,
    definition_record_id,
    emit_event_id,
    finished_event_id,
    redrive_event_id,
    reserved_event_id,
    timeout_event_id,
)
from durastate.engine.schedules import schedule_record_id, tick_execution_id
from durastate.errors import DurastateError
from durastate.runtime.worker import HandleResult
from tests.store.conformance.backends import BACKENDS

from .harness import T0, Driver, Namespaces, backend_params, renamed, settings_for, snapshot, strict_diff
from .test_wire_worker import _state

CONTROL = ("durastate.cancel", "durastate.suspend", "durastate.resume", "durastate.terminate")
RUNTIME_ONLY = ("durastate.timeout", "durastate.finished")
USER = ("inc", "wait", "stop", "rearm")
TIMER = T0 + 30.0
"""When the legitimate run's ``wait`` (at T0) arms ``c1``'s timer."""


@pytest.fixture(params=backend_params())
def namespaces(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Namespaces]:
    with Namespaces(BACKENDS[request.param], tmp_path) as ns:
        yield ns


# -- the legitimate run ---------------------------------------------------------------------------------

GO_TARGET, GO = "f1", "s8"
"""The parallel state of the legitimate run and the id of the event it forwards to its regions."""
LEGIT: list[tuple[str, str, str, dict[str, Any]] | float] = [
    ("c1", "durastate.start", "s0", {"definition_id": "counter"}),
    ("i1", "durastate.start", "s1", {"definition_id": "invoker"}),  # invokes i1~1
    ("c2", "durastate.start", "s5", {"definition_id": "counter", "context": {"peer": "<c1>"}}),
    ("f1", "durastate.start", "s6", {"definition_id": "fork"}),  # regions f1~1, f1~2
    ("c1", "wait", "s2", {}),  # arms c1's timer at TIMER
    ("<child>", "stop", "s3", {}),  # the child ends: its notice finishes i1
    31.0,  # c1's timeout fires
    ("c2", "poke", "s7", {}),  # c2 emits an inc to c1
    (GO_TARGET, "go", GO, {}),  # forwarded to both regions: f1 is done
    ("c1", "inc", "s4", {}),
]
SLOTS = len(LEGIT)
"""Hostile messages may come before each step after the first and at the end."""


def run_legit(driver: Driver, prefix: str, hostile: list[list[dict[str, Any]]] | None = None) -> None:
    own_events = any(h["why"] == PRE_CLAIM for slot in hostile or () for h in slot)
    for i, step in enumerate(LEGIT):
        if hostile is not None and i:
            for h in hostile[i - 1]:
                deliver_hostile(driver, prefix, h)
        if isinstance(step, float):
            driver.tick(step)
            continue
        target, name, eid, data = step
        target = child_execution_id(prefix + "i1", 1) if target == "<child>" else prefix + target
        if "context" in data:
            data = {**data, "context": {k: prefix + "c1" if v == "<c1>" else v for k, v in data["context"].items()}}
        out = driver.deliver({"target_id": target, "event": {"id": eid, "name": name, "data": data}})
        # (a producer's own events may make a legitimate one moot — its go ended f1's regions first —
        # which the comparison with the same events under the producer's own ids judges)
        assert out.accepted and (out.result is HandleResult.APPLIED or own_events), f"legitimate {name}: {out}"
    if hostile is not None:
        for h in hostile[-1]:
            deliver_hostile(driver, prefix, h)


# -- hostile messages -----------------------------------------------------------------------------------

def targets(p: str) -> dict[str, str]:
    return {
        "c1": p + "c1", "i1": p + "i1", "child": child_execution_id(p + "i1", 1),
        "unborn child": child_execution_id(p + "c1", 1),
        "schedule": schedule_record_id(p + "hb"), "archive": definition_record_id("counter", p + "v1"),
        "tick run": tick_execution_id(p + "hb", T0 + 900), "manual run": p + "hb~manual-20231114T221320Z",
    }


def ids(p: str) -> dict[str, str]:
    c1, i1, child = p + "c1", p + "i1", child_execution_id(p + "i1", 1)
    return {
        "true timeout": timeout_event_id(c1, "waiting", TIMER),
        "early fire_at": timeout_event_id(c1, "waiting", TIMER - 20),
        "retry timeout": timeout_event_id(c1, "~retry", T0 + 1),
        "schedule tick": timeout_event_id(schedule_record_id(p + "hb"), "tick", T0 + 900),
        "finished notice": finished_event_id(child),
        "child's finished": finished_event_id(c1),
        "redrive": redrive_event_id("s2", 1),
        "cancel": reserved_event_id("durastate.cancel", child),
        "child's control": control_event_id(i1, "durastate.resume", 3, 1),
        "another kind": "~whatever:1",
    }


OWN_KIND_ONLY = {"another kind"}
"""Ids a raw queue message may carry on an event of its own (the worker takes ``~<kind>:`` of a kind it
does not derive for an ordinary id; only the producer entries refuse every ``~``): with the reserved
names only."""


PRE_CLAIM = "pre-claim"
GUESSES = ("c2's next emit", "c2's next emit, any mac", "go to f1~1", "go to f1~2", "go to f1~1, any mac")
"""What a producer may guess of the ids the runtime derives unchecked (resolved by :func:`guessed_id`)."""


def guessed_id(guess: str, p: str, store: Any) -> tuple[str, str]:
    """The target and the id of a pre-claim ``guess`` in namespace ``p``, as a producer would derive them
    (the plain forms the ids had, from what it knows: ids, and the emitter's version as ``show`` prints it)."""
    if guess.startswith("c2's"):
        c2 = store.load(p + "c2")
        eid = emit_event_id(p + "c2", c2.version if c2 is not None else 1, 1)
        target = p + "c1"
    else:
        target = child_execution_id(p + GO_TARGET, int(guess[len("go to f1~")]))
        eid = f"{GO}:{target}"
    return target, (f"{eid}:0123456789abcdef" if guess.endswith("any mac") else eid)


@st.composite
def hostile_messages(draw: st.DrawFn) -> dict[str, Any]:
    """A message a producer is not entitled to send, with placeholders (resolved per namespace)."""
    kind = draw(st.sampled_from(["runtime-only", "derived id", "system record", "reserved start", PRE_CLAIM]))
    data: dict[str, Any] = {}
    if kind == PRE_CLAIM:
        guess = draw(st.sampled_from(GUESSES))
        name = draw(st.sampled_from(["unhandled", "inc" if guess.startswith("c2's") else "go"]))
        return {"target": guess, "name": name, "id": guess, "data": {}, "why": kind}
    if kind == "runtime-only":
        name = draw(st.sampled_from(RUNTIME_ONLY))
        target = draw(st.sampled_from(["c1", "i1", "child", "schedule", "archive"]))
        if name == "durastate.timeout":
            data = {"path": draw(st.sampled_from(["waiting", "idle", "~retry", "tick"])),
                    "fire_at": draw(st.sampled_from([TIMER, TIMER - 20, T0, T0 + 900, T0 + 31, 1e12]))}
        else:
            data = {"child_id": draw(st.sampled_from(["<child>", "<c1>", "junk"])),
                    "status": draw(st.sampled_from(["finished", "failed", "cancelled"])),
                    "outcome": draw(st.sampled_from([None, "ok"])),
                    "output": draw(st.sampled_from([{"count": 0}, {"count": 666}]))}
    elif kind == "derived id":
        name = draw(st.sampled_from((*USER, *RUNTIME_ONLY)))
        target = draw(st.sampled_from(["c1", "i1", "child"]))
    elif kind == "system record":
        name = draw(st.sampled_from((*CONTROL, *RUNTIME_ONLY, *USER, "durastate.start")))
        target = draw(st.sampled_from(["schedule", "archive"]))
        if name == "durastate.timeout":
            data = {"path": "tick", "fire_at": draw(st.sampled_from([T0, T0 + 900]))}
    else:
        name = "durastate.start"
        target = draw(st.sampled_from(["unborn child", "tick run", "manual run", "child"]))
        data = {"definition_id": draw(st.sampled_from(["counter", "invoker"])),
                "context": {"count": 666}}
        extra = draw(st.sampled_from([{}, {"witness": "0123456789abcdef"}, {"parent_id": "<c1>"},
                                      {"parent_id": "<i1>", "child_id": "<target>"}]))
        data.update(extra)
    names = sorted(ids("")) if name in RUNTIME_ONLY or name in CONTROL else sorted(set(ids("")) - OWN_KIND_ONLY)
    eid = draw(st.sampled_from(names)) if kind != "reserved start" else "start"
    return {"target": target, "name": name, "id": eid, "data": data, "why": kind}


def resolve(h: dict[str, Any], p: str) -> dict[str, Any]:
    target = targets(p)[h["target"]]
    eid = f"{target}:start" if h["why"] == "reserved start" else ids(p)[h["id"]]
    subs = {"<child>": child_execution_id(p + "i1", 1), "<c1>": p + "c1", "<i1>": p + "i1", "<target>": target}
    data = {k: subs.get(v, v) if isinstance(v, str) else v for k, v in h["data"].items()}
    return {"target_id": target, "event": {"id": eid, "name": h["name"], "data": data}}


def deliver_hostile(driver: Driver, prefix: str, h: dict[str, Any]) -> None:
    if h["why"] == PRE_CLAIM:  # the producer's own event, under a guessed id (or, for the reference, its own)
        target, eid = guessed_id(h["id"], prefix, driver.store)
        if h.get("own id"):
            eid = f"own:{eid}"  # the same guess, the same id: a repeat is the producer's own duplicate
        out = driver.deliver({"target_id": target, "event": {"id": eid, "name": h["name"], "data": {}}})
        note(f"{h['why']}: {h['name']} {eid!r} to {target!r} -> {out.kind} {out.result or repr(out.error)}")
        assert out.accepted or isinstance(out.error, DurastateError), f"refused without a typed error: {out.error!r}"
        return
    body = resolve(h, prefix)
    before = snapshot(driver.store, prefix)
    out = driver.deliver(body)
    note(f"{h['why']}: {body} -> {out.kind} {out.result or repr(out.error)}")
    if out.accepted:
        assert out.result in (HandleResult.IGNORED, HandleResult.DUPLICATE), (
            f"a forged message ({h['why']}) was applied: {body} -> {out.result}")
    else:
        assert isinstance(out.error, DurastateError), f"refused without a typed error: {out.error!r}"
    diff = strict_diff(before, snapshot(driver.store, prefix))
    assert diff is None, f"a forged message ({h['why']}: {body}) changed the store: {diff}"
    system = body["target_id"]
    if system.startswith("~"):
        assert driver.store.load(system) is None, f"{system!r} was created by a forged message"


def test_forged_and_pre_claimed_derived_events_change_nothing(namespaces: Namespaces) -> None:
    backend = namespaces.backend.name
    with namespaces.namespace() as (store, alone_prefix):
        alone = Driver(store)
        run_legit(alone, alone_prefix)
        want = _state(alone, alone_prefix)

    @settings_for(backend)
    @given(st.lists(st.lists(hostile_messages(), max_size=2), min_size=SLOTS, max_size=SLOTS))
    def prop(hostile: list[list[dict[str, Any]]]) -> None:
        with namespaces.namespace() as (store, prefix):
            driver = Driver(store)
            run_legit(driver, prefix, hostile)
            got = _state(driver, prefix)
        own = [[{**h, "own id": True} if h["why"] == PRE_CLAIM else h for h in slot] for slot in hostile]
        if own == hostile:
            ref, ref_prefix = want, alone_prefix  # nothing but forgeries: the run ends as it does alone
        else:  # the producer's own events change the run: as they do under ids of its own
            with namespaces.namespace() as (store, ref_prefix):
                reference = Driver(store)
                run_legit(reference, ref_prefix, own)
                ref = _state(reference, ref_prefix)
        diff = strict_diff(renamed(ref, ref_prefix, "<ns>"), renamed(got, prefix, "<ns>"))
        assert diff is None, f"forged or pre-claiming messages changed how the legitimate run ends: {diff}"

    prop()
