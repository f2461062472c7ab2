"""Task heartbeats and cancelling through the deployed path, on moto: the client's heartbeat goes on the SQS
FIFO queue, the worker Lambda applies it, the sweeper Lambda fires the durable heartbeat timer of a task that
went silent (``TaskTimeout`` to ``on_error``), and the relay Lambda POSTs the cancel to the task's
``cancel_url``.

The task is a "remote" one (:class:`Remote`): the relay's runner hands it off and answers with its first
heartbeat, so the execution keeps waiting as it does for a long HTTP job on AWS (the relay Lambda blocked
on the call while the worker and the sweeper, other Lambdas, go on).
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.engine.ids import HEARTBEAT_TIMEOUT_PREFIX
from durastate.engine.model import Event
from durastate.engine.tasks import TaskRequest, heartbeat_message
from durastate.runtime.tasks import TaskRunner
from durastate.transport.sqs import SqsTransport

from .harness import Stack


class Remote(TaskRunner):
    """Hands the request off: the relay's answer is the task's first heartbeat."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[TaskRequest] = []

    def run(self, request: TaskRequest) -> Event:
        self.requests.append(request)
        return heartbeat_message(request.task_id, {"accepted": True}, request.execution_id)[1]


class Cancels(http.server.BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        Cancels.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def cancel_url() -> Iterator[str]:
    Cancels.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Cancels)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/cancel"
    finally:
        server.shutdown()
        thread.join(60)


@pytest.fixture
def stack(queues: tuple[str, str], tmp_path: Path, cancel_url: str) -> Iterator[Stack]:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "rebuild.yaml").write_text(json.dumps({
        "id": "rebuild", "initial": "rebuilding",
        "states": {
            "rebuilding": {"invoke": {"task": {"http": "http://127.0.0.1:9/rebuild"}, "heartbeat_timeout": "1m",
                                      "cancel_url": cancel_url},
                           "on_done": "rebuilt", "on_error": {"target": "failed",
                                                              "actions": [{"assign": {"why": "$event.error"}}]}},
            "rebuilt": {"type": "final"},
            "failed": {"type": "final"}}}))
    s = Stack(*queues, folder)
    s.runtime.relay.tasks = Remote()
    yield s
    s.close()


def test_heartbeats_on_the_queue_keep_a_task_alive_until_it_goes_silent(stack: Stack) -> None:
    client = DurastateClient(SqsTransport(stack.sqs, stack.queue_url))
    client.start("rebuild", execution_id="r1")
    stack.pump()
    remote = stack.runtime.relay.tasks
    assert isinstance(remote, Remote)
    (request,) = remote.requests
    assert stack.advance(50) == 0
    client.heartbeat(request.task_id, {"indexed": 5000})  # the job, from wherever it runs
    stack.pump()
    exe = stack.raw_store.load("r1")
    assert exe is not None and exe.children[request.task_id].heartbeat == {"indexed": 5000}
    assert exe.timers[HEARTBEAT_TIMEOUT_PREFIX + "rebuilding"] == stack.clock() + 60
    assert stack.advance(59) == 0  # 109 s after the start, 59 s after the last heartbeat
    assert stack.advance(1) == 1  # the sweeper Lambda fires the durable heartbeat timer
    exe = stack.raw_store.load("r1")
    assert exe is not None and exe.active_path == "failed"
    assert exe.context["why"] == f"TaskTimeout: task {request.task_id} sent no heartbeat within 60s"
    assert Cancels.received == [{"task_id": request.task_id, "execution_id": "r1", "state": "rebuilding",
                                 "reason": exe.context["why"]}]  # the relay Lambda asked the job to stop
