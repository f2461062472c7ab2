"""Delayed sends (``send: {to: self, delay, id}``) and ``cancel``, on every sync store, through the worker.

What an SCXML user expects of ``<send delay>``/``<cancel>``: the event reaches the execution after the
delay whichever state it is in by then (the timer belongs to the execution, not to the state that sent
it), with the data as it was when it was sent; a cancel before it is due drops it; the execution's end
drops whatever is still pending.
"""

from __future__ import annotations

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import SEND_PREFIX
from durastate.engine.model import Event
from durastate.errors import DefinitionError
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore

REMINDER = {"id": "reminder", "initial": "asking", "context": {"n": 1}, "states": {
    "asking": {
        "entry": [{"send": {"event": "nudge", "to": "self", "delay": "90s", "id": "nudge-1",
                            "data": {"n": "$context.n"}}},
                  {"assign": {"n": 2}}],
        "on": {"answered": "waiting", "never": {"actions": [{"cancel": "nudge-1"}]}},
    },
    "waiting": {"on": {"nudge": {"target": "nudged", "actions": [{"assign": {"got": "$event.data.n"}}]},
                       "stop": "stopped"}},
    "nudged": {"type": "final", "outcome": "nudged"},
    "stopped": {"type": "final", "outcome": "stopped"},
}}


@pytest.fixture
def rt(every_store: ExecutionStore, clock: ManualClock) -> LocalRuntime:
    return LocalRuntime(every_store, DefinitionRegistry([load_definition(REMINDER)]), clock=clock)


def test_a_delayed_send_outlives_the_state_that_sent_it(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("reminder", execution_id="r")
    rt.run_until_idle()
    r = rt.get("r")
    assert r is not None and r.timers == {SEND_PREFIX + "nudge-1": clock() + 90}
    rt.send("r", Event(name="answered"))  # leaves `asking`: the pending send stays
    rt.run_until_idle()
    clock.advance(89)
    rt.run_until_idle()
    assert rt.get("r").active_path == "waiting"  # type: ignore[union-attr]
    clock.advance(1)
    rt.run_until_idle()
    r = rt.get("r")
    assert r is not None and (r.status, r.outcome, r.context["got"]) == ("finished", "nudged", 1)
    assert (r.timers, r.sends) == ({}, {})


def test_a_cancel_drops_the_pending_send(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("reminder", execution_id="r")
    rt.send("r", Event(name="never"))
    rt.send("r", Event(name="answered"))
    rt.run_until_idle()
    clock.advance(3600)
    rt.run_until_idle()
    r = rt.get("r")
    assert r is not None and (r.active_path, r.timers, r.sends) == ("waiting", {}, {})


def test_the_end_of_the_execution_drops_what_is_pending(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("reminder", execution_id="r")
    rt.send("r", Event(name="answered"))
    rt.send("r", Event(name="stop"))
    rt.run_until_idle()
    r = rt.get("r")
    assert r is not None and (r.outcome, r.timers, r.sends) == ("stopped", {}, {})


BROKEN = {"on": True}


def check(context: dict[str, object], event: object) -> dict[str, object]:
    """A step that fails until it is fixed (what a redrive is for)."""
    if BROKEN["on"]:
        raise RuntimeError("not yet")
    return {"checked": True}


def test_a_redrive_restores_what_was_pending_before_the_failed_step(every_store: ExecutionStore,
                                                                     clock: ManualClock) -> None:
    doc = {"id": "fragile", "initial": "a", "states": {
        "a": {"entry": [{"send": {"event": "later", "to": "self", "delay": 60, "id": "l"}}],
              "on": {"check": {"target": "b", "actions": [{"call": f"{__name__}:check"}]}}},
        "b": {"on": {"later": "done"}}, "done": {"type": "final"}}}
    rt = LocalRuntime(every_store, DefinitionRegistry([load_definition(doc)]), clock=clock)
    rt.start("fragile", execution_id="f")
    rt.send("f", Event(name="check"))
    rt.run_until_idle()
    f = rt.get("f")
    assert f is not None and (f.status, f.timers, f.sends) == ("failed", {}, {})  # the failure dropped it
    BROKEN["on"] = False
    try:
        rt.redrive("f")
        rt.run_until_idle()
        clock.advance(60)
        rt.run_until_idle()
    finally:
        BROKEN["on"] = True
    f = rt.get("f")
    assert f is not None and (f.status, f.active_path, f.context) == ("finished", "done", {"checked": True})


def test_a_delayed_send_goes_to_the_execution_itself() -> None:
    bad = {"id": "b", "initial": "a", "states": {"a": {"entry": [
        {"send": {"event": "x", "delay": 5}}, {"send": {"event": "x", "to": "self", "delay": "soon"}},
        {"cancel": 3}]}}}
    with pytest.raises(DefinitionError) as info:
        load_definition(bad)
    text = str(info.value)
    assert "add `to: self`" in text and "delay" in text and "cancel" in text
