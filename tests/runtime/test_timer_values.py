"""Timers from data through the worker, the sweeper and a real store (every sync backend).

Several timers of one state are stored, swept and cancelled by their own keys; a deadline given when the
execution starts fires then; a computed delay that is not one fails that execution (``failed``, with the
reason, redrivable once the value is fixed) while the worker goes on with the others.
"""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.model import Event
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore

DAY = 86400.0
T0 = 1_700_000_000.0


class Policy:
    """Where a backoff comes from: a service the test can get wrong, then fix."""

    def __init__(self) -> None:
        self.backoff: Any = -5

    def __call__(self, context: dict[str, Any], event: Event) -> dict[str, Any]:
        return {"backoff": self.backoff}


def definitions(policy: Policy) -> list[dict[str, Any]]:
    ticket = {
        "id": "ticket",
        "initial": "open",
        "context": {"deadline": None},
        "states": {
            "open": {
                "on": {"answer": "answered"},
                "after": [{"seconds": "1d", "actions": [{"send": {"event": "reminder"}}]},
                          {"seconds": "3d", "target": "escalated"}],
            },
            "escalated": {"on": {"answer": "answered"}, "after": {"at": "$context.deadline", "target": "breached"}},
            "answered": {"type": "final"},
            "breached": {"type": "final"},
        },
    }
    retry = {
        "id": "retry",
        "initial": "idle",
        "states": {
            "idle": {"on": {"fail": {"target": "waiting", "actions": [policy]}}},
            "waiting": {"after": {"seconds": "$context.backoff", "target": "done"}},
            "done": {"type": "final", "outcome": "retried"},
        },
    }
    return [ticket, retry]


@pytest.fixture
def policy() -> Policy:
    return Policy()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def rt(every_store: ExecutionStore, policy: Policy, clock: ManualClock) -> LocalRuntime:
    reg = DefinitionRegistry([load_definition(doc) for doc in definitions(policy)])
    return LocalRuntime(every_store, reg, clock=clock)


def armed(rt: LocalRuntime) -> list[tuple[str, str, float]]:
    return sorted(rt.store.due_timers(T0 + 3650 * DAY))


def test_two_timers_of_one_state_are_stored_and_swept_by_their_own_keys(rt: LocalRuntime,
                                                                       clock: ManualClock) -> None:
    rt.start("ticket", {"deadline": "2023-11-22T00:00:00Z"}, execution_id="t")
    rt.run_until_idle()
    assert armed(rt) == [("t", "open", T0 + DAY), ("t", "open~after:1", T0 + 3 * DAY)]
    clock.advance(DAY)
    stats = rt.run_until_idle()
    t = rt.get("t")
    assert t is not None and t.active_path == "open" and stats.fired == 1
    assert armed(rt) == [("t", "open~after:1", T0 + 3 * DAY)]  # the reminder is gone, the escalation stays
    clock.advance(2 * DAY)
    rt.run_until_idle()
    t = rt.get("t")
    deadline = 1_700_611_200.0  # 2023-11-22T00:00:00Z, given at start
    assert t is not None and t.active_path == "escalated" and armed(rt) == [("t", "escalated", deadline)]
    clock.advance(deadline - clock())
    rt.run_until_idle()
    t = rt.get("t")
    assert t is not None and (t.status, t.outcome) == ("finished", "breached") and armed(rt) == []


def test_leaving_a_state_deletes_every_timer_it_armed_from_the_store(rt: LocalRuntime) -> None:
    rt.start("ticket", execution_id="t")
    rt.run_until_idle()
    rt.send("t", Event(id="a", name="answer"))
    rt.run_until_idle()
    t = rt.get("t")
    assert t is not None and t.outcome == "answered" and t.timers == {} and armed(rt) == []


def test_a_bad_computed_delay_fails_the_execution_not_the_worker_and_a_redrive_after_the_fix_runs_on(
        rt: LocalRuntime, policy: Policy, clock: ManualClock) -> None:
    rt.start("retry", execution_id="bad")
    rt.start("ticket", execution_id="other")
    rt.send("bad", Event(id="f", name="fail"))
    rt.run_until_idle()
    bad = rt.get("bad")
    assert bad is not None and bad.status == "failed"
    assert bad.error is not None and bad.error.startswith(
        "state 'waiting', after[0]: seconds $context.backoff = -5 is not a delay")
    assert bad.failure is not None and bad.failure.event.id == "f"
    other = rt.get("other")
    assert other is not None and other.status == "running" and rt.dead_letters == []
    assert [k for _, k, _ in armed(rt)] == ["open", "open~after:1"]  # only the other execution's timers

    policy.backoff = "30s"
    rt.redrive("bad")
    rt.run_until_idle()
    bad = rt.get("bad")
    assert bad is not None and (bad.status, bad.active_path) == ("running", "waiting")
    assert bad.timers == {"waiting": clock() + 30}
    clock.advance(30)
    rt.run_until_idle()
    bad = rt.get("bad")
    assert bad is not None and (bad.status, bad.outcome) == ("finished", "retried")


def test_a_missing_deadline_fails_the_step_that_enters_its_state(rt: LocalRuntime, clock: ManualClock) -> None:
    rt.start("ticket", execution_id="t")  # no deadline given
    rt.run_until_idle()
    clock.advance(3 * DAY)
    rt.run_until_idle()
    t = rt.get("t")
    assert t is not None and t.status == "failed" and armed(rt) == []
    assert (t.error or "").startswith(
        "state 'escalated', after[0]: at $context.deadline = null (missing?) is not a time")
