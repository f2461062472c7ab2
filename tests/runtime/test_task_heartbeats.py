"""Task heartbeats and cancellation through the runtime, on every sync store.

A "remote" task here is one that accepted its request and works elsewhere (an HTTP job queue, a Lambda
that hands off): :class:`Remote` answers the relay with the task's first heartbeat instead of a result, so
the execution keeps waiting, and the test plays the worker doing the job — heartbeating through
``LocalRuntime.heartbeat`` (what ``DurastateClient.heartbeat`` does on a deployment) and answering through
the transport, as the relay would. The runtime's clock is a manual one: the durable heartbeat timer fires
only when the test advances it.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import HEARTBEAT_TIMEOUT_PREFIX, heartbeat_event_id
from durastate.engine.model import Event
from durastate.engine.tasks import TaskCancel, TaskRequest, heartbeat_message, task_result
from durastate.errors import InvalidValue, ReservedId
from durastate.runtime import LocalRuntime, ManualClock
from durastate.runtime.tasks import TaskRunner, current_task
from durastate.store import DictStore
from durastate.store.base import ExecutionStore
from durastate.transport import InMemoryTransport

KEY = HEARTBEAT_TIMEOUT_PREFIX + "exporting"


def chart(task: dict[str, str] | None = None, **invoke: Any) -> dict[str, Any]:
    return {
        "id": "export",
        "initial": "exporting",
        "states": {
            "exporting": {
                "invoke": {"task": task or {"lambda": "export"}, "heartbeat_timeout": "1m", **invoke},
                "on_done": {"target": "exported", "actions": [{"assign": {"rows": "$event.output.rows"}}]},
                "on_error": {"target": "failed", "actions": [{"assign": {"why": "$event.error"}}]},
                "on": {"abandon": "abandoned"},
            },
            "exported": {"type": "final"},
            "failed": {"type": "final"},
            "abandoned": {"on": {"close": "failed"}},
        },
    }


class Remote(TaskRunner):
    """Hands each request to a "remote" worker: the answer to the relay is the task's first heartbeat."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[TaskRequest] = []

    def run(self, request: TaskRequest) -> Event:
        self.requests.append(request)
        return heartbeat_message(request.task_id, {"accepted": True}, request.execution_id)[1]


def runtime(store: ExecutionStore, clock: ManualClock, doc: dict[str, Any] | None = None) -> tuple[LocalRuntime,
                                                                                                  Remote]:
    remote = Remote()
    rt = LocalRuntime(store, DefinitionRegistry([load_definition(doc or chart())]), InMemoryTransport(clock),
                      clock, tasks=remote)
    return rt, remote


def started(store: ExecutionStore, clock: ManualClock, doc: dict[str, Any] | None = None,
            ) -> tuple[LocalRuntime, Remote, TaskRequest]:
    rt, remote = runtime(store, clock, doc)
    rt.start("export", execution_id="e")
    rt.run_until_idle()
    (request,) = remote.requests
    return rt, remote, request


def test_heartbeats_keep_a_long_task_alive_and_its_details_are_visible(every_store: ExecutionStore,
                                                                       clock: ManualClock) -> None:
    rt, _, request = started(every_store, clock)
    assert request.payload()["heartbeat_timeout"] == 60.0
    for done in (30, 60, 90):  # each within the minute of the one before: 3 minutes in all
        clock.advance(50)
        rt.heartbeat(request.task_id, {"done": done, "of": 100})
        rt.run_until_idle()
    exe = rt.get("e")
    assert exe is not None and exe.active_path == "exporting"
    ref = exe.children[request.task_id]
    assert (ref.heartbeat, ref.heartbeat_at) == ({"done": 90, "of": 100}, clock())
    assert exe.timers[KEY] == clock() + 60
    beats = [t for t in every_store.read_trace("e") if t["event"] == "durastate.heartbeat"]
    assert [t["data"]["details"] for t in beats] == [{"accepted": True}, {"done": 30, "of": 100},
                                                     {"done": 60, "of": 100}, {"done": 90, "of": 100}]
    rt.transport.send([("e", task_result(request, {"rows": 7}))])  # the relay, once the job is done
    rt.run_until_idle()
    exe = rt.get("e")
    assert exe is not None and (exe.active_path, exe.context["rows"], exe.timers) == ("exported", 7, {})


def test_no_heartbeat_within_the_timeout_fails_the_task_through_on_error(every_store: ExecutionStore,
                                                                          clock: ManualClock) -> None:
    rt, _, request = started(every_store, clock)
    clock.advance(59)
    assert rt.run_until_idle().fired == 0
    clock.advance(1)
    assert rt.run_until_idle().fired == 1  # the durable heartbeat timer, swept like any other
    exe = rt.get("e")
    assert exe is not None and exe.active_path == "failed"
    assert exe.context["why"] == f"TaskTimeout: task {request.task_id} sent no heartbeat within 60s"


def test_a_late_heartbeat_or_answer_is_ignored_and_the_trace_says_why(every_store: ExecutionStore,
                                                                      clock: ManualClock) -> None:
    rt, _, request = started(every_store, clock)
    rt.send("e", Event(id="a", name="abandon"))
    rt.run_until_idle()
    rt.heartbeat(request.task_id, {"done": 99})
    rt.transport.send([("e", task_result(request, {"rows": 7}))])  # a Lambda cannot be stopped: it answers
    stats = rt.run_until_idle()
    assert stats.ignored == 2 and not rt.dead_letters
    exe = rt.get("e")
    assert exe is not None and exe.active_path == "abandoned" and "rows" not in exe.context
    late = [t for t in every_store.read_trace("e") if t.get("ignored")]
    assert [t["event"] for t in late] == ["durastate.heartbeat", "durastate.finished"]
    assert "is not running" in late[0]["reason"]
    assert "answered after the execution stopped waiting for it" in late[1]["reason"]


def test_a_forged_heartbeat_changes_nothing_and_leaves_no_mark(every_store: ExecutionStore,
                                                               clock: ManualClock) -> None:
    rt, _, request = started(every_store, clock)
    guessed = "e~1~" + "0" * 16  # the right shape, without the secret
    assert guessed != request.task_id
    rt.heartbeat(guessed, {"done": 100}, execution_id="e")
    before = len(every_store.read_trace("e"))
    rt.run_until_idle()
    exe = rt.get("e")
    assert exe is not None and exe.children[request.task_id].heartbeat == {"accepted": True}
    assert len(every_store.read_trace("e")) == before and not rt.dead_letters


def test_a_heartbeat_while_suspended_is_not_held(every_store: ExecutionStore, clock: ManualClock) -> None:
    rt, _, request = started(every_store, clock)
    rt.suspend("e")
    rt.run_until_idle()
    rt.heartbeat(request.task_id, {"done": 50})
    rt.run_until_idle()
    exe = rt.get("e")
    assert exe is not None and exe.status == "suspended" and exe.held == []
    assert "while the execution is suspended" in every_store.read_trace("e")[-1]["reason"]


def test_producers_cannot_send_a_heartbeat_by_hand_and_bad_details_are_refused(clock: ManualClock) -> None:
    rt, _ = runtime(DictStore(), clock)
    with pytest.raises(ReservedId):
        rt.send("e", Event(id="h1", name="durastate.heartbeat", data={"task_id": "e~1~x"}))
    client = DurastateClient(rt.transport)
    with pytest.raises(InvalidValue, match=r"heartbeat details are \d+ bytes of JSON"):
        client.heartbeat("e~1~" + "0" * 16, "x" * 9000)
    with pytest.raises(InvalidValue, match="pass the task's `execution_id` too"):
        client.heartbeat("~" + "a" * 64)
    eid = client.heartbeat("e~1~" + "0" * 16, {"done": 1})
    assert eid.startswith(heartbeat_event_id("e~1~" + "0" * 16, "")[:12])


# -- cancellation of an HTTP task --------------------------------------------------------------------------
class Jobs(http.server.BaseHTTPRequestHandler):
    cancels: list[dict[str, Any]] = []
    release = threading.Event()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/cancel":
            Jobs.cancels.append({"body": body, "key": self.headers["Idempotency-Key"]})
            answer = b"{}"
        else:
            Jobs.release.wait(60)  # a job that outlasts the relay's patience
            answer = json.dumps({"rows": 1}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer)
        except BrokenPipeError:  # the relay stopped waiting for the job long ago
            pass

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def jobs() -> Iterator[str]:
    Jobs.cancels = []
    Jobs.release = threading.Event()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Jobs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        Jobs.release.set()
        server.shutdown()
        thread.join(60)


def test_leaving_the_state_posts_a_cancel_to_the_http_tasks_cancel_url(every_store: ExecutionStore,
                                                                       clock: ManualClock, jobs: str) -> None:
    doc = chart({"http": f"{jobs}/run"}, cancel_url=f"{jobs}/cancel")
    rt, _, request = started(every_store, clock, doc)  # (Remote stands for the job's endpoint)
    rt.send("e", Event(id="a", name="abandon"))
    rt.run_until_idle()
    assert Jobs.cancels == [{"key": f"cancel:{request.task_id}", "body": {
        "task_id": request.task_id, "execution_id": "e", "state": "exporting",
        "reason": "the execution left state exporting"}}]
    rt.send("e", Event(id="b", name="close"))  # nothing runs any more: no second cancel
    rt.run_until_idle()
    assert len(Jobs.cancels) == 1


def test_terminate_posts_a_cancel_to_a_running_http_tasks_cancel_url(every_store: ExecutionStore,
                                                                     clock: ManualClock, jobs: str) -> None:
    doc = chart({"http": f"{jobs}/run"}, cancel_url=f"{jobs}/cancel")
    rt, _, request = started(every_store, clock, doc)
    exe = rt.terminate("e", reason="operator stop")
    assert exe.status == "terminated"
    rt.run_until_idle()  # the relay passes the cancel request in the outbox on, as when the state is left
    assert Jobs.cancels == [{"key": f"cancel:{request.task_id}", "body": {
        "task_id": request.task_id, "execution_id": "e", "state": "exporting",
        "reason": "the execution was terminated: operator stop"}}]


def test_an_http_task_the_relay_stops_waiting_for_is_cancelled_too(clock: ManualClock, jobs: str) -> None:
    doc = chart({"http": f"{jobs}/run"}, cancel_url=f"{jobs}/cancel", timeout=0.2, heartbeat_timeout=None)
    rt = LocalRuntime(DictStore(), DefinitionRegistry([load_definition(doc)]), InMemoryTransport(clock), clock)
    rt.start("export", execution_id="e")
    rt.run_until_idle()  # the POST times out after 0.2 s of wall time: the relay gives up and cancels
    exe = rt.get("e")
    assert exe is not None and exe.active_path == "failed" and exe.context["why"].startswith("TaskTimeout: ")
    (cancel,) = Jobs.cancels
    assert cancel["body"]["task_id"].startswith("e~1~") and cancel["key"] == f"cancel:{cancel['body']['task_id']}"
    assert cancel["body"]["reason"] == exe.context["why"]


# -- Python tasks: current_task() ---------------------------------------------------------------------------
STARTED = threading.Event()
NOTICED = threading.Event()
"""Set by a task below once it noticed its cancellation."""
SAW: list[str | None] = []
"""What the tasks below saw of their cancellation (the reason), once they noticed it."""


def beating(doc: dict[str, Any]) -> dict[str, Any]:
    """Reports each step of its work, then answers."""
    for step in (1, 2, 3):
        assert current_task().heartbeat({"step": step, "of": 3})
    return {"rows": 3}


def waits_for_cancel(doc: dict[str, Any]) -> dict[str, Any]:
    """Heartbeats once, then works until it is told to stop (it polls ``cancelled`` as a loop would)."""
    task = current_task()
    assert task.task_id == doc["task_id"] and task.heartbeat_timeout == doc.get("heartbeat_timeout")
    task.heartbeat({"started": True})
    STARTED.set()
    task.wait_cancelled(60)  # (a bound only so that a broken test cannot leave the thread behind)
    SAW.append(task.cancel_reason)
    NOTICED.set()
    assert not task.heartbeat({"too": "late"})  # nobody waits for it any more: not sent
    return {"rows": 0}


@pytest.fixture
def python_task() -> Iterator[None]:
    STARTED.clear()
    NOTICED.clear()
    SAW.clear()
    yield


def test_a_python_task_heartbeats_through_current_task(every_store: ExecutionStore, clock: ManualClock) -> None:
    rt = LocalRuntime(every_store, DefinitionRegistry([load_definition(chart(
        {"python": "tests.runtime.test_task_heartbeats:beating"}))]), InMemoryTransport(clock), clock)
    rt.start("export", execution_id="e")
    rt.run_until_idle()
    exe = rt.get("e")
    assert exe is not None and (exe.active_path, exe.context["rows"]) == ("exported", 3)
    beats = [t["data"]["details"] for t in every_store.read_trace("e") if t["event"] == "durastate.heartbeat"]
    assert beats == [{"step": 1, "of": 3}, {"step": 2, "of": 3}, {"step": 3, "of": 3}]


def test_a_silent_python_task_is_abandoned_at_its_heartbeat_deadline_and_told_so(python_task: None,
                                                                                 clock: ManualClock) -> None:
    doc = chart({"python": "tests.runtime.test_task_heartbeats:waits_for_cancel"}, heartbeat_timeout=0.2)
    rt = LocalRuntime(DictStore(), DefinitionRegistry([load_definition(doc)]), InMemoryTransport(clock), clock)
    rt.start("export", execution_id="e")
    rt.run_until_idle()  # 0.2 s of wall time after its one heartbeat, the runner stops waiting
    exe = rt.get("e")
    assert exe is not None and exe.active_path == "failed"
    assert exe.context["why"].endswith("sent no heartbeat within 0.2s")
    assert NOTICED.wait(60)  # the abandoned call's thread was told, and can stop
    assert [exe.context["why"]] == SAW


def test_a_cancel_request_reaches_a_python_task_running_in_this_process(python_task: None) -> None:
    runner = TaskRunner()
    request = TaskRequest(task_id="e~1~" + "0" * 16, execution_id="e", path="exporting", kind="python",
                          target="tests.runtime.test_task_heartbeats:waits_for_cancel", input={}, timeout=None,
                          attempt=1)
    answers: list[Event] = []
    call = threading.Thread(target=lambda: answers.append(runner.run(request)))
    call.start()
    assert STARTED.wait(60)
    runner.cancel(TaskCancel.of(request, "the execution left state exporting"))
    call.join(60)
    assert SAW == ["the execution left state exporting"]
    assert answers[0].data["output"] == {"rows": 0} and [c.task_id for c in runner.cancels] == [request.task_id]
    runner.cancel(TaskCancel.of(request, "again"))  # no longer running: nothing to reach, nothing raised
    assert len(runner.cancels) == 1


def test_current_task_outside_a_task_says_so() -> None:
    with pytest.raises(RuntimeError, match="outside a Python task"):
        current_task()
