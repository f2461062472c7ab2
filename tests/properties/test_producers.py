"""4. What the runtime derives cannot be forged or claimed first (the rule: ``durastate.engine.ids``).

Any sequence of producer messages that a producer is not entitled to send — with any id shaped like one
the runtime derives (a timeout's, true or not; a finished notice's; ``~redrive:…``; ``~cancel:…`` and the
other control kinds; a schedule run's ``<name>~<tick>``; a child's ``<id>~<n>``), any reserved name
(``durastate.timeout``, ``durastate.finished``, ``durastate.start`` of an id in the runtime's namespace, the
control events) and any target (a running execution, its invoked child, a schedule record ``~schedule~…``,
an archived definition version ``~definition~…``) — delivered through the wire into the worker at any
point of a legitimate run, either changes nothing in the store or is refused with a typed error; and the
legitimate run ends exactly as it does alone.

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

LEGIT: list[tuple[str, str, str, dict[str, Any]] | float] = [
    ("c1", "durastate.start", "s0", {"definition_id": "counter"}),
    ("i1", "durastate.start", "s1", {"definition_id": "invoker"}),  # invokes i1~1
    ("c1", "wait", "s2", {}),  # arms c1's timer at TIMER
    ("<child>", "stop", "s3", {}),  # the child ends: its notice finishes i1
    31.0,  # c1's timeout fires
    ("c1", "inc", "s4", {}),
]
SLOTS = 6
"""Hostile messages may come before each step after the first (5 slots) and at the end."""


def run_legit(driver: Driver, prefix: str, hostile: list[list[dict[str, Any]]] | None = None) -> None:
    for i, step in enumerate(LEGIT):
        if hostile is not None and i:
            for h in hostile[i - 1]:
                deliver_hostile(driver, prefix, h)
        if isinstance(step, float):
            driver.tick(step)
            continue
        target, name, eid, data = step
        target = child_execution_id(prefix + "i1", 1) if target == "<child>" else prefix + target
        out = driver.deliver({"target_id": target, "event": {"id": eid, "name": name, "data": data}})
        assert out.accepted and out.result is HandleResult.APPLIED, f"legitimate {name} not applied: {out}"
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


@st.composite
def hostile_messages(draw: st.DrawFn) -> dict[str, Any]:
    """A message a producer is not entitled to send, with placeholders (resolved per namespace)."""
    kind = draw(st.sampled_from(["runtime-only", "derived id", "system record", "reserved start"]))
    data: dict[str, Any] = {}
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
    @given(st.lists(st.lists(hostile_messages(), max_size=3), min_size=SLOTS, max_size=SLOTS))
    def prop(hostile: list[list[dict[str, Any]]]) -> None:
        with namespaces.namespace() as (store, prefix):
            driver = Driver(store)
            run_legit(driver, prefix, hostile)
            got = _state(driver, prefix)
        diff = strict_diff(renamed(want, alone_prefix, "<ns>"), renamed(got, prefix, "<ns>"))
        assert diff is None, f"forged messages changed how the legitimate run ends: {diff}"

    prop()
