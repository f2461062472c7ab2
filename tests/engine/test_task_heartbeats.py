"""Task heartbeats and cancellation in the pure engine: a heartbeat records its details and re-arms the
durable ``~heartbeat:`` timer, a silent task fails with ``TaskTimeout`` through the invoke's retry/catch
policy, and an execution that stops waiting for a running task records a cancel request for the relay."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.ids import (
    HEARTBEAT,
    HEARTBEAT_TIMEOUT_PREFIX,
    REINVOKE_PREFIX,
    START,
    TASK,
    TASK_CANCEL,
    describe_timer_key,
    heartbeat_event_id,
    task_cancel_id,
    task_execution_id,
    task_id,
    task_seq,
    timeout_event_id,
    timer_key_state,
)
from durastate.engine.tasks import MAX_HEARTBEAT_BYTES, TaskCancel, TaskRequest, task_result
from durastate.errors import DefinitionError


def chart(task: dict[str, str] | None = None, **invoke: Any) -> dict[str, Any]:
    return {
        "id": "export",
        "initial": "exporting",
        "states": {
            "exporting": {
                "invoke": {"task": task or {"python": "reports.tasks:export"}, "heartbeat_timeout": "1m",
                           **invoke},
                "on_done": "exported",
                "on_error": {"target": "failed", "actions": [{"assign": {"why": "$event.error"}}]},
                "on": {"abandon": "abandoned"},
            },
            "exported": {"on": {"close": "failed"}},
            "failed": {"type": "final"},
            "abandoned": {"on": {"close": "failed"}},
        },
    }


KEY = HEARTBEAT_TIMEOUT_PREFIX + "exporting"


def _start(doc: dict[str, Any]) -> tuple[Any, Execution, TaskRequest]:
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id=defn.id)
    res = step(defn, exe, Event(id="s", name=START), 100.0)
    (target, ev), = [(t, e) for t, e in res.emits if e.name == TASK]
    return defn, exe, TaskRequest.from_event(target, ev)


def beat(task_id: str, details: Any = None, nonce: str = "1") -> Event:
    return Event(id=heartbeat_event_id(task_id, nonce), name=HEARTBEAT, data={"task_id": task_id, "details": details})


def fire(defn: Any, exe: Execution, key: str, now: float) -> Any:
    fire_at = exe.timers[key]
    return step(defn, exe, Event(id=timeout_event_id(exe.id, key, fire_at), name="durastate.timeout",
                                 data={"path": key, "fire_at": fire_at}), now)


def test_entry_arms_the_heartbeat_timer_and_tells_the_task_its_deadline() -> None:
    _defn, exe, req = _start(chart())
    assert exe.timers == {KEY: 160.0}
    assert req.heartbeat_timeout == 60.0 and req.payload()["heartbeat_timeout"] == 60.0
    assert timer_key_state(KEY) == "exporting" and describe_timer_key(KEY) == "exporting (task heartbeat timeout)"


def test_a_heartbeat_records_its_details_and_rearms_the_timer_from_now() -> None:
    defn, exe, req = _start(chart())
    res = step(defn, exe, beat(req.task_id, {"done": 40, "of": 100}), 150.0)
    assert not res.ignored and exe.active_path == "exporting"
    ref = exe.children[req.task_id]
    assert (ref.heartbeat, ref.heartbeat_at) == ({"done": 40, "of": 100}, 150.0)
    assert exe.timers[KEY] == 210.0
    assert [(op.action, op.path, op.fire_at) for op in res.timers] == [("schedule", KEY, 210.0)]
    assert fire(defn, exe, KEY, 211.0).ignored is False and exe.active_path == "failed"


def test_a_silent_task_fails_with_task_timeout_and_is_asked_to_stop() -> None:
    defn, exe, req = _start(chart())
    res = fire(defn, exe, KEY, 160.0)
    assert exe.active_path == "failed"
    assert exe.context["why"] == f"TaskTimeout: task {req.task_id} sent no heartbeat within 60s"
    (target, cancel), = [(t, e) for t, e in res.emits if e.name == TASK_CANCEL]
    assert cancel.id == task_cancel_id(req.task_id)
    assert TaskCancel.from_event(target, cancel).reason == exe.context["why"]


def test_a_heartbeat_timeout_is_retried_by_the_invokes_retry_policy() -> None:
    defn, exe, _req = _start(chart(retry={"max_attempts": 2, "on": ["TaskTimeout"], "backoff": {"initial": 5}}))
    fire(defn, exe, KEY, 160.0)
    assert exe.active_path == "exporting" and REINVOKE_PREFIX + "exporting" in exe.timers
    assert KEY not in exe.timers  # the silent try's timer is disarmed with it
    res = fire(defn, exe, REINVOKE_PREFIX + "exporting", 165.0)
    second = TaskRequest.from_event(*next((t, e) for t, e in res.emits if e.name == TASK))
    assert second.attempt == 2 and exe.timers[KEY] == 225.0


def test_a_heartbeat_for_a_task_not_running_is_ignored_with_the_reason() -> None:
    defn, exe, req = _start(chart())
    step(defn, exe, task_result(req, {"rows": 3}), 101.0)
    res = step(defn, exe, beat(req.task_id), 102.0)
    assert res.ignored and "is not running" in res.trace["reason"]
    defn, exe, req = _start(chart())
    res = step(defn, exe, beat("x~9~0000000000000000"), 102.0)  # no task of it at all
    assert res.ignored and exe.timers == {KEY: 160.0}


def test_heartbeat_details_that_cannot_be_kept_are_ignored_with_the_reason() -> None:
    defn, exe, req = _start(chart())
    res = step(defn, exe, beat(req.task_id, "x" * (MAX_HEARTBEAT_BYTES + 1)), 150.0)
    assert res.ignored and "over the" in res.trace["reason"] and exe.timers[KEY] == 160.0
    assert exe.children[req.task_id].heartbeat is None


def test_leaving_the_state_asks_a_running_task_to_stop() -> None:
    defn, exe, req = _start(chart())
    res = step(defn, exe, Event(id="a", name="abandon"), 120.0)
    (target, ev), = [(t, e) for t, e in res.emits if e.name == TASK_CANCEL]
    cancel = TaskCancel.from_event(target, ev)
    assert (cancel.task_id, cancel.kind, cancel.cancel_url) == (req.task_id, "python", None)
    assert cancel.reason == "the execution left state exporting" and not exe.timers


def test_an_http_task_is_cancelled_at_its_cancel_url_and_a_lambda_task_not_at_all() -> None:
    doc = chart({"http": "https://jobs.example/run"}, cancel_url="https://jobs.example/cancel")
    defn, exe, req = _start(doc)
    res = step(defn, exe, Event(id="c", name="durastate.cancel"), 120.0)  # the execution is cancelled
    (target, ev), = [(t, e) for t, e in res.emits if e.name == TASK_CANCEL]
    cancel = TaskCancel.from_event(target, ev)
    assert (cancel.cancel_url, cancel.reason) == ("https://jobs.example/cancel", "the execution cancelled")
    assert cancel.payload() == {"task_id": req.task_id, "execution_id": "x", "state": "exporting",
                                "reason": "the execution cancelled"}
    for task in ({"http": "https://jobs.example/run"}, {"lambda": "export"}):
        defn, exe, req = _start(chart(task))
        res = step(defn, exe, Event(id="a", name="abandon"), 120.0)
        assert not [e for _, e in res.emits if e.name == TASK_CANCEL]


def test_an_answered_task_is_not_cancelled_when_the_state_is_left() -> None:
    doc = chart()
    doc["states"]["exporting"]["on_done"] = "exporting"  # re-entered: the answered task is not asked to stop
    defn, exe, req = _start(doc)
    res = step(defn, exe, task_result(req, {"rows": 3}), 101.0)
    assert not [e for _, e in res.emits if e.name == TASK_CANCEL]


def test_a_late_answer_says_why_it_is_ignored() -> None:
    defn, exe, req = _start(chart({"lambda": "export"}))
    step(defn, exe, Event(id="a", name="abandon"), 120.0)
    res = step(defn, exe, task_result(req, {"rows": 3}), 121.0)
    assert res.ignored and "answered after the execution stopped waiting for it" in res.trace["reason"]


@pytest.mark.parametrize(("invoke", "says"), [
    ({"heartbeat_timeout": 0}, "heartbeat_timeout: more than 0 seconds"),
    ({"heartbeat_timeout": "soon"}, "heartbeat_timeout"),
    ({"heartbeat_timeout": "1m", "timeout": "30s"}, "heartbeat_timeout: shorter than `timeout`"),
    ({"cancel_url": "https://x/cancel"}, "cancel_url: only for an `http` task"),
])
def test_bad_heartbeat_and_cancel_settings_are_refused_at_load(invoke: dict[str, Any], says: str) -> None:
    with pytest.raises(DefinitionError, match=says):
        load_definition(chart(**invoke))


def test_an_http_cancel_url_must_be_a_url_and_a_child_invoke_takes_no_task_settings() -> None:
    with pytest.raises(DefinitionError, match="cancel_url: an http:// or https:// URL"):
        load_definition(chart({"http": "https://x/run"}, cancel_url="ftp://x"))
    doc = {"id": "p", "initial": "a", "states": {"a": {"invoke": {"definition": "c", "heartbeat_timeout": 5},
                                                       "on_done": "b"}, "b": {"type": "final"}}}
    with pytest.raises(DefinitionError, match="`heartbeat_timeout` is for tasks"):
        load_definition(doc)


def test_a_task_id_names_its_execution_and_only_the_secret_makes_a_true_one() -> None:
    secret = "0" * 32
    tid = task_id("order~7", 3, secret)  # a child execution's task: its id holds a `~` of its own
    assert task_execution_id(tid) == "order~7" and task_seq("order~7", tid, secret, 3) == 3
    assert task_seq("order~7", tid, secret, 2) is None  # an invoke number it has not used yet
    assert task_seq("order~7", tid, "1" * 32, 3) is None  # another secret: not its task
    assert task_seq("order~7", "order~7~3~" + "0" * 16, secret, 3) is None  # the right shape, a guessed mac
    long = task_id("a" * 120, 2, secret)  # hashed: it does not hold its execution, the candidates are tried
    assert task_execution_id(long) is None and task_seq("a" * 120, long, secret, 5) == 2
    assert task_execution_id("order-1") is None and task_execution_id("x~1") is None
