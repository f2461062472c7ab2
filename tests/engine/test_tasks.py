"""Tasks in the pure engine: the request is recorded on entry, the answer is routed like an invoked
child's, a late answer is ignored, the timeout is a durable timer, and the invoke retry policy applies."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.ids import (
    MAX_ID_LENGTH,
    REINVOKE_PREFIX,
    START,
    TASK,
    TASK_TIMEOUT_PREFIX,
    child_execution_id,
    finished_event_id,
    task_id,
    task_request_id,
    timeout_event_id,
)
from durastate.engine.tasks import TaskRequest, task_result
from durastate.errors import DefinitionError

CHART: dict[str, Any] = {
    "id": "charge",
    "initial": "charging",
    "context": {"amount": 5},
    "states": {
        "charging": {
            "invoke": {"task": {"python": "billing.tasks:charge"}, "input": {"amount": "$context.amount"},
                       "timeout": "30s", "retry": {"max_attempts": 2, "backoff": {"initial": 10}}},
            "on_done": {"target": "paid", "actions": [{"assign": {"receipt": "$event.output.receipt"}}]},
            "on_error": {"target": "declined", "actions": [{"assign": {"why": "$event.error"}}]},
            "on": {"abandon": "abandoned"},
        },
        "paid": {"type": "final"},
        "declined": {"type": "final"},
        "abandoned": {"type": "final"},
    },
}


def _start(chart: dict[str, Any] = CHART) -> tuple[Any, Execution, TaskRequest]:
    defn = load_definition(chart)
    exe = Execution(id="x", definition_id=defn.id, context=dict(chart.get("context", {})))
    res = step(defn, exe, Event(id="s", name=START), 100.0)
    (target, ev), = res.emits
    return defn, exe, TaskRequest.from_event(target, ev)


def _timeout(defn: Any, exe: Execution, path: str, now: float) -> Any:
    fire_at = exe.timers[path]
    return step(defn, exe, Event(id=timeout_event_id(exe.id, path, fire_at), name="durastate.timeout",
                                 data={"path": path, "fire_at": fire_at}), now)


def test_a_task_id_is_keyed_by_the_execution_secret() -> None:
    """``<id>~<n>~<16 hex>``: deterministic, different for every invoke number and every secret, and
    plain ``<id>~<n>`` without a secret (the engine alone, or a task started before there were secrets)."""
    secret = "0" * 32
    tid = task_id("x", 1, secret)
    assert tid == task_id("x", 1, secret) and tid.startswith("x~1~") and len(tid) == len("x~1~") + 16
    macs = {t[-16:] for t in (tid, task_id("x", 2, secret), task_id("x", 1, "1" * 32), task_id("y", 1, secret))}
    assert len(macs) == 4
    assert task_id("x", 1, None) == child_execution_id("x", 1) == "x~1"
    long = task_id("a" * 120, 7, secret)  # over the cap: hashed, still deterministic and in the namespace
    assert long.startswith("~") and len(long) <= MAX_ID_LENGTH and long == task_id("a" * 120, 7, secret)
    assert long != child_execution_id("a" * 120, 7)

    defn = load_definition(CHART)
    exe = Execution(id="x", definition_id=defn.id, context={"amount": 5}, secret=secret)
    (target, ev), = step(defn, exe, Event(id="s", name=START), 100.0).emits
    assert TaskRequest.from_event(target, ev).task_id == tid and list(exe.children) == [tid]
    assert secret not in ev.model_dump_json()


def test_entry_records_the_request_and_arms_the_timeout() -> None:
    defn = load_definition(CHART)
    exe = Execution(id="x", definition_id="charge", context={"amount": 5})
    res = step(defn, exe, Event(id="s", name=START), 100.0)
    (target, ev), = res.emits
    assert target == "x" and ev.name == TASK and ev.id == task_request_id("x~1")
    req = TaskRequest.from_event(target, ev)
    assert (req.task_id, req.kind, req.target, req.input, req.timeout, req.attempt) == (
        "x~1", "python", "billing.tasks:charge", {"amount": 5}, 30.0, 1)
    assert req.payload()["task_id"] == "x~1"
    assert exe.children["x~1"].kind == "task"
    assert exe.timers == {TASK_TIMEOUT_PREFIX + "charging": 130.0}
    assert [(op.action, op.path) for op in res.timers] == [("schedule", "~task:charging")]


def test_answer_goes_to_on_done_with_the_output_and_disarms_the_timeout() -> None:
    defn, exe, req = _start()
    ev = task_result(req, {"receipt": "r-1"})
    assert ev.id == finished_event_id("x~1")
    res = step(defn, exe, ev, 101.0)
    assert (exe.status, exe.active_path, exe.context["receipt"]) == ("finished", "paid", "r-1")
    assert not exe.timers
    assert ("cancel", "~task:charging") in [(op.action, op.path) for op in res.timers]
    assert not any(e.name == "durastate.cancel" for _, e in res.emits)  # a task is no execution


def test_error_after_the_last_try_goes_to_on_error_with_the_error_text() -> None:
    defn, exe, req = _start()
    step(defn, exe, task_result(req, error="ValueError: card declined"), 101.0)
    assert exe.active_path == "charging" and REINVOKE_PREFIX + "charging" in exe.timers  # retry armed
    res = _timeout(defn, exe, REINVOKE_PREFIX + "charging", 111.0)
    (target, ev), = [(t, e) for t, e in res.emits if e.name == TASK]
    second = TaskRequest.from_event(target, ev)
    assert (second.task_id, second.attempt) == ("x~2", 2)  # a new task id for the new try
    assert "x~1" not in exe.children
    step(defn, exe, task_result(second, error="ValueError: still declined"), 112.0)
    assert (exe.status, exe.active_path, exe.context["why"]) == ("finished", "declined",
                                                                "ValueError: still declined")


def test_a_late_answer_after_leaving_the_state_is_ignored() -> None:
    defn, exe, req = _start({**CHART, "states": {**CHART["states"], "abandoned": {"on": {"x": "paid"}}}})
    step(defn, exe, Event(id="a", name="abandon"), 101.0)
    assert exe.active_path == "abandoned" and not exe.children and not exe.timers
    res = step(defn, exe, task_result(req, {"receipt": "late"}), 102.0)
    assert res.ignored and exe.active_path == "abandoned" and "receipt" not in exe.context


def test_a_repeated_answer_is_ignored_once_the_first_was_applied() -> None:
    chart = {**CHART, "states": {**CHART["states"],
                                 "charging": {**CHART["states"]["charging"], "on_done": "charging"}}}
    defn, exe, req = _start(chart)
    step(defn, exe, task_result(req, {"receipt": "r"}), 101.0)  # re-entered: a new task x~2 runs
    assert list(exe.children) == ["x~2"]
    assert step(defn, exe, task_result(req, {"receipt": "r"}), 102.0).ignored


def test_timeout_fails_the_task_and_retries_then_on_error() -> None:
    defn, exe, req = _start()
    _timeout(defn, exe, "~task:charging", 130.0)
    assert exe.children["x~1"].status == "failed" and REINVOKE_PREFIX + "charging" in exe.timers
    res = _timeout(defn, exe, REINVOKE_PREFIX + "charging", 140.0)
    second = TaskRequest.from_event(*next((t, e) for t, e in res.emits if e.name == TASK))
    assert exe.timers[TASK_TIMEOUT_PREFIX + "charging"] == 170.0
    step(defn, exe, task_result(req, {"receipt": "too late"}), 141.0)  # the first try's answer: stale
    assert exe.active_path == "charging"
    _timeout(defn, exe, "~task:charging", 170.0)
    assert exe.active_path == "declined"
    assert exe.context["why"] == f"TaskTimeout: task {second.task_id} did not answer within 30s"


def test_retry_on_names_the_error_kind() -> None:
    charging = {**CHART["states"]["charging"]}
    charging["invoke"] = {**charging["invoke"], "retry": {"max_attempts": 3, "on": ["TaskTimeout"]}}
    defn, exe, req = _start({**CHART, "states": {**CHART["states"], "charging": charging}})
    step(defn, exe, task_result(req, error="ValueError: no"), 101.0)
    assert exe.active_path == "declined"  # not retried: only timeouts are


def test_without_on_error_a_failed_task_fails_the_execution() -> None:
    charging = {k: v for k, v in CHART["states"]["charging"].items() if k != "on_error"}
    charging["invoke"] = {"task": {"http": "http://127.0.0.1:1/charge"}}
    defn, exe, req = _start({**CHART, "states": {**CHART["states"], "charging": charging}})
    step(defn, exe, task_result(req, error="TaskError: HTTP 500"), 101.0)
    assert exe.status == "failed" and "task x~1 failed: TaskError: HTTP 500" in (exe.error or "")


def test_a_bad_input_fails_the_step_with_nothing_half_made() -> None:
    charging = {**CHART["states"]["charging"]}
    charging["invoke"] = {"task": {"lambda": "charge"}, "input": {"n": {"div": [1, 0]}}}
    defn = load_definition({**CHART, "states": {**CHART["states"], "charging": charging}})
    exe = Execution(id="x", definition_id="charge")
    res = step(defn, exe, Event(id="s", name=START), 100.0)
    assert exe.status == "failed" and "invoke.input" in (exe.error or "")
    assert not any(e.name == TASK for _, e in res.emits)


@pytest.mark.parametrize(("invoke", "says"), [
    ({"task": {"ruby": "x"}}, "one of {python"),
    ({"task": {"python": "no_function"}}, "package.module:function"),
    ({"task": {"http": "ftp://x"}}, "http:// or https://"),
    ({"task": {"lambda": "f"}, "timeout": "soon"}, "timeout"),
    ({"task": {"lambda": "f"}, "definition": "other"}, "not both"),
    ({"task": {"lambda": "f"}, "context": {"a": 1}}, "give what it receives as `input`"),
    ({"definition": "other", "timeout": 5}, "for tasks"),
    ({}, "invoke.definition: required"),
])
def test_bad_task_specs_are_refused_at_load(invoke: dict[str, Any], says: str) -> None:
    chart = {"id": "t", "initial": "a", "states": {"a": {"invoke": invoke, "on_done": "b"}, "b": {"type": "final"}}}
    with pytest.raises(DefinitionError) as info:
        load_definition(chart)
    assert says in str(info.value)
