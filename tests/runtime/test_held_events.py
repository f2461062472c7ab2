"""What an execution that cannot apply an event now does with it: it keeps it, on every sync store.

Two stories a user relies on, through ``LocalRuntime`` (the entry ``durastate serve`` runs):

- a suspended parent keeps its child's true ``finished`` notice, and applies it on resume even if
  retention purged the ended child meanwhile (the notice is checked when it arrives, while the child's
  record still says how it ended; a tombstone afterwards does not make it stale);
- a failed execution keeps the events sent to it (as a suspended one does, up to ``MAX_HELD``; past that
  they are dead-lettered with the reason) and applies them after a redrive, so ``submit`` (fails),
  ``note``, fix, ``redrive``, ``ship`` ends as the fault-free run ends.

Events for an execution that can never step again (finished, cancelled, terminated, purged) are consumed,
traced and ignored: no step exists that could apply them.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine import control as engine_control
from durastate.engine.model import Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.retention import Retention
from durastate.store.base import ExecutionStore
from durastate.store.control import redrive

DAY = 86400.0

CHILD = {
    "id": "child",
    "initial": "working",
    "context": {"n": 0},
    "states": {"working": {"on": {"go": "done"}}, "done": {"type": "final", "outcome": "ok"}},
}

PARENT = {
    "id": "parent",
    "initial": "calling",
    "states": {
        "calling": {"invoke": {"definition": "child", "context": {}}, "on_done": "ok", "on_error": "bad"},
        "ok": {"type": "final", "outcome": "ok"},
        "bad": {"type": "final", "outcome": "child-failed"},
    },
}


class Provider:
    """A payment provider that is down until the test fixes it."""

    def __init__(self) -> None:
        self.up = False

    def charge(self, context: dict[str, Any], event: Event) -> dict[str, Any]:
        if not self.up:
            raise ConnectionError("provider unreachable")
        return {"charged": context["amount"]}


def order(provider: Provider) -> dict[str, Any]:
    return {
        "id": "order",
        "initial": "cart",
        "context": {"amount": 10, "noted": None},
        "states": {
            "cart": {"on": {"submit": "paying"}},
            "paying": {"entry": [provider.charge],
                       "on": {"ship": "done", "note": {"actions": [{"assign": {"noted": "$event.data.n"}}]}}},
            "done": {"type": "final", "outcome": "shipped"},
        },
    }


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def rt(every_store: ExecutionStore, provider: Provider, clock: ManualClock) -> LocalRuntime:
    reg = DefinitionRegistry()
    for doc in (CHILD, PARENT, order(provider)):
        reg.register(load_definition(doc))
    return LocalRuntime(every_store, reg, clock=clock, retention=Retention(every_store, DAY, clock))


def run(rt: LocalRuntime, target: str, *events: Event) -> None:
    for ev in events:
        rt.send(target, ev)
    rt.run_until_idle()


def the_child(rt: LocalRuntime, parent_id: str) -> str:
    parent = rt.get(parent_id)
    assert parent is not None and len(parent.children) == 1
    return next(iter(parent.children))


# -- a suspended parent and a purged child ----------------------------------------------------------------


def test_a_suspended_parent_applies_its_purged_childs_notice_on_resume(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("parent", execution_id="p")
    rt.run_until_idle()
    child = the_child(rt, "p")
    rt.suspend("p")
    rt.send(child, Event(id="go", name="go"))  # the child ends before the parent's suspend reaches it
    rt.run_until_idle()
    p, c = rt.get("p"), rt.get(child)
    assert p is not None and c is not None and (p.status, c.status) == ("suspended", "finished")
    assert [e.name for e in p.held] == ["durastate.finished"]  # the true notice waits in the parent

    clock.advance(DAY + 61)
    assert rt.run_until_idle().purged == 1  # retention purges the ended child, not the suspended parent
    assert rt.get(child).status == "purged"  # type: ignore[union-attr]

    rt.resume("p")
    rt.run_until_idle()
    p = rt.get("p")
    assert p is not None and (p.status, p.outcome, p.held) == ("finished", "ok", [])


def test_a_suspended_parent_still_ignores_a_forged_notice(rt: LocalRuntime) -> None:
    rt.start("parent", execution_id="p")
    rt.run_until_idle()
    child = the_child(rt, "p")
    rt.suspend("p")
    rt.run_until_idle()
    forged = Event(id="forged", name="durastate.finished",
                   data={"child_id": child, "status": "finished", "outcome": "ok"})
    # Producers cannot send it (rt.send refuses durastate.finished); a forged one can only be put on the
    # queue, as a hostile sender with queue access would.
    rt.transport.send([("p", forged)])
    rt.run_until_idle()  # the child is running (suspended with its parent): the notice is not true
    p = rt.get("p")
    assert p is not None and p.held == [] and p.status == "suspended"
    rt.resume("p")
    rt.run_until_idle()
    assert rt.get("p").active_path == "calling"  # type: ignore[union-attr]
    run(rt, child, Event(id="go", name="go"))
    p = rt.get("p")
    assert p is not None and (p.status, p.outcome) == ("finished", "ok")


# -- a failed execution keeps what is sent to it --------------------------------------------------------------


def fault_free(rt: LocalRuntime, provider: Provider) -> dict[str, Any]:
    provider.up = True
    rt.start("order", execution_id="ok")
    run(rt, "ok", Event(id="sub", name="submit"), Event(id="n", name="note", data={"n": 1}),
        Event(id="shp", name="ship"))
    provider.up = False
    exe = rt.get("ok")
    assert exe is not None
    return {"status": exe.status, "outcome": exe.outcome, "context": exe.context}


def test_events_sent_to_a_failed_execution_apply_after_the_redrive(rt: LocalRuntime, provider: Provider) -> None:
    expected = fault_free(rt, provider)
    rt.start("order", execution_id="o")
    run(rt, "o", Event(id="sub", name="submit"))
    run(rt, "o", Event(id="n", name="note", data={"n": 1}))
    o = rt.get("o")
    assert o is not None and o.status == "failed" and [e.id for e in o.held] == ["n"]
    assert rt.dead_letters == []
    provider.up = True
    redrive(rt.store, "o", clock=rt.clock)
    rt.run_until_idle()
    run(rt, "o", Event(id="shp", name="ship"))
    o = rt.get("o")
    assert o is not None and o.held == []
    assert {"status": o.status, "outcome": o.outcome, "context": o.context} == expected
    assert o.context["noted"] == 1


def test_a_failed_execution_holds_events_in_order_behind_a_redrive_that_fails_again(
        rt: LocalRuntime, provider: Provider) -> None:
    rt.start("order", execution_id="o")
    run(rt, "o", Event(id="sub", name="submit"), Event(id="n1", name="note", data={"n": 1}))
    redrive(rt.store, "o", clock=rt.clock)  # not fixed yet: it fails again, and keeps what it held
    rt.run_until_idle()
    run(rt, "o", Event(id="n2", name="note", data={"n": 2}))
    o = rt.get("o")
    assert o is not None and o.status == "failed" and [e.id for e in o.held] == ["n1", "n2"]
    provider.up = True
    redrive(rt.store, "o", clock=rt.clock)
    rt.run_until_idle()
    o = rt.get("o")
    assert o is not None and (o.status, o.active_path, o.context["noted"], o.held) == ("running", "paying", 2, [])


def test_past_the_cap_a_failed_execution_dead_letters_with_the_reason(
        rt: LocalRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_control, "MAX_HELD", 2)
    rt.start("order", execution_id="o")
    run(rt, "o", Event(id="sub", name="submit"))
    run(rt, "o", *(Event(id=f"n{i}", name="note", data={"n": i}) for i in range(3)))
    o = rt.get("o")
    assert o is not None and [e.id for e in o.held] == ["n0", "n1"]
    [letter] = rt.dead_letters
    assert letter.event.id == "n2" and "holds 2 events" in letter.reason and "redrive" in letter.reason


def test_a_failed_execution_ignores_suspend_and_resume_and_holds_a_cancel(rt: LocalRuntime) -> None:
    rt.start("order", execution_id="o")
    run(rt, "o", Event(id="sub", name="submit"))
    rt.suspend("o")
    rt.resume("o")
    rt.cancel("o", reason="changed my mind")
    stats = rt.run_until_idle()
    o = rt.get("o")
    assert o is not None and o.status == "failed" and (stats.ignored, stats.held) == (2, 1)
    assert [e.name for e in o.held] == ["durastate.cancel"]
    reasons = [s.get("reason") for s in rt.store.read_trace("o") if s.get("ignored")]
    assert reasons == ["suspend of a failed execution", "resume of a failed execution"]
    redrive(rt.store, "o", clock=rt.clock)  # the provider is still down: it fails again, the cancel waits
    rt.run_until_idle()
    assert [e.name for e in rt.get("o").held] == ["durastate.cancel"]  # type: ignore[union-attr]


@pytest.mark.parametrize("end", ["finish", "cancel", "terminate"])
def test_events_sent_to_an_ended_execution_are_traced_and_ignored(rt: LocalRuntime, provider: Provider,
                                                                    end: str) -> None:
    provider.up = True
    rt.start("order", execution_id="o")
    run(rt, "o", Event(id="sub", name="submit"))
    if end == "finish":
        run(rt, "o", Event(id="shp", name="ship"))
    elif end == "cancel":
        rt.cancel("o")
        rt.run_until_idle()
    else:
        rt.terminate("o")
    before = rt.get("o")
    assert before is not None and before.status in ("finished", "cancelled", "terminated")
    stats = rt.send("o", Event(id="late", name="note", data={"n": 9})) or rt.run_until_idle()
    after = rt.get("o")
    assert after is not None and stats.ignored == 1 and rt.dead_letters == []
    assert (after.status, after.context, after.held) == (before.status, before.context, [])
    last = rt.store.read_trace("o")[-1]
    assert (last["event_id"], last["ignored"]) == ("late", True)
