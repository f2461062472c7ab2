"""The run timeout (a definition's ``timeout``, or a start's), on every sync store, through the worker.

What a Step Functions user expects of ``TimeoutSeconds``: a durable deadline armed at the start by the
runtime's clock; when it passes the execution fails with the reason, or (``on_timeout: cancel``) is
cancelled with its exit actions run; an execution that ends in time disarms it.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import RUN_TIMEOUT_PATH
from durastate.engine.model import Event
from durastate.errors import DefinitionError, InvalidValue
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore


def slow(**root: Any) -> dict[str, Any]:
    return {"id": root.pop("id", "slow"), "initial": "working", **root, "states": {
        "working": {"on": {"done": "finished"}, "exit": [{"assign": {"cleaned_up": True}}]},
        "finished": {"type": "final", "outcome": "ok"},
    }}


@pytest.fixture
def store(every_store: ExecutionStore) -> ExecutionStore:
    return every_store


@pytest.fixture
def rt(store: ExecutionStore, clock: ManualClock) -> LocalRuntime:
    reg = DefinitionRegistry()
    reg.register(load_definition(slow(timeout="1h")))
    reg.register(load_definition(slow(id="polite", timeout=600, on_timeout="cancel")))
    reg.register(load_definition(slow(id="open_ended")))
    return LocalRuntime(store, reg, clock=clock)


def test_the_run_fails_with_the_reason_when_its_timeout_passes(rt: LocalRuntime, store: ExecutionStore,
                                                               clock: ManualClock) -> None:
    rt.start("slow", execution_id="s")
    rt.run_until_idle()
    s = rt.get("s")
    assert s is not None and s.timers == {RUN_TIMEOUT_PATH: clock() + 3600}
    assert [(e, p) for e, p, _ in store.due_timers(clock() + 3600)] == [("s", RUN_TIMEOUT_PATH)]
    clock.advance(3599)
    rt.run_until_idle()
    assert rt.get("s").status == "running"  # type: ignore[union-attr]
    clock.advance(1)
    rt.run_until_idle()
    s = rt.get("s")
    assert s is not None and s.status == "failed"
    assert s.error == "timed out: the run did not end within its timeout of 1h"
    assert "cleaned_up" not in s.context  # a failure runs no exit action


def test_on_timeout_cancel_runs_the_exit_actions_and_keeps_the_reason(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("polite", execution_id="p")
    rt.run_until_idle()
    clock.advance(600)
    rt.run_until_idle()
    p = rt.get("p")
    assert p is not None and (p.status, p.reason, p.context.get("cleaned_up")) == (
        "cancelled", "timed out: the run did not end within its timeout of 10m", True)


def test_an_execution_that_ends_in_time_disarms_its_timeout(rt: LocalRuntime, store: ExecutionStore,
                                                            clock: ManualClock) -> None:
    rt.start("slow", execution_id="s")
    rt.send("s", Event(id="d", name="done"))
    rt.run_until_idle()
    assert rt.get("s").status == "finished"  # type: ignore[union-attr]
    assert store.due_timers(clock() + 7200) == []


def test_a_start_gives_its_own_timeout(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("open_ended", execution_id="o", timeout="30m")
    rt.start("slow", execution_id="s", timeout=60)
    rt.run_until_idle()
    clock.advance(60)
    rt.run_until_idle()
    assert rt.get("s").status == "failed"  # type: ignore[union-attr]
    assert rt.get("o").status == "running"  # type: ignore[union-attr]
    clock.advance(1800)
    rt.run_until_idle()
    assert rt.get("o").error == "timed out: the run did not end within its timeout of 30m"  # type: ignore[union-attr]


def test_a_redriven_timed_out_execution_runs_on_without_its_timeout(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("slow", execution_id="s")
    rt.run_until_idle()
    clock.advance(3600)
    rt.run_until_idle()
    rt.redrive("s")
    rt.run_until_idle()
    s = rt.get("s")
    assert s is not None and (s.status, s.active_path, s.timers) == ("running", "working", {})
    rt.send("s", Event(id="d", name="done"))
    rt.run_until_idle()
    assert rt.get("s").status == "finished"  # type: ignore[union-attr]


@pytest.mark.parametrize(("root", "says"), [
    ({"timeout": "soon"}, "timeout: 'soon' is not a duration"),
    ({"timeout": 0}, "timeout: more than 0 seconds"),
    ({"timeout": "1h", "on_timeout": "retry"}, "on_timeout"),
])
def test_a_bad_timeout_in_a_definition_is_refused(root: dict[str, Any], says: str) -> None:
    with pytest.raises(DefinitionError, match=says):
        load_definition(slow(**root))


@pytest.mark.parametrize("bad", [0, -5, "forever", True])
def test_a_bad_timeout_at_the_start_is_refused_and_nothing_is_queued(rt: LocalRuntime, bad: Any) -> None:
    with pytest.raises(InvalidValue):
        rt.start("slow", execution_id="b", timeout=bad)
    rt.run_until_idle()
    assert rt.get("b") is None


def test_a_reset_keeps_the_deadline_and_one_of_a_failed_execution_arms_it_again(
        rt: LocalRuntime, store: ExecutionStore, clock: ManualClock) -> None:
    reg = DefinitionRegistry()
    reg.register(load_definition({**slow(timeout="1h"), "states": {
        "working": {"on": {"done": "finished", "break": "broken"}},
        "broken": {"entry": [{"assign": {"x": {"div": [1, 0]}}}]},
        "finished": {"type": "final", "outcome": "ok"}}}))
    local = LocalRuntime(store, reg, clock=clock)
    local.start("slow", execution_id="s")
    local.run_until_idle()
    deadline = clock() + 3600
    local.send("s", Event(id="b", name="break"))
    local.run_until_idle()
    assert local.get("s").status == "failed"  # type: ignore[union-attr]
    local.reset("s", ["working"])
    local.run_until_idle()
    s = local.get("s")
    assert s is not None and (s.status, s.timers) == ("running", {RUN_TIMEOUT_PATH: deadline})
    clock.advance(3600)
    local.run_until_idle()
    assert local.get("s").error == "timed out: the run did not end within its timeout of 1h"  # type: ignore[union-attr]
