"""A task's answer cannot be forged by someone who can only enqueue events (on SQLite and DynamoDB).

An invoked child's ``durastate.finished`` notice is checked against the child's stored state; a task has
none, so its id is the witness: ``<execution id>~<n>~<mac>``, the mac derived from a secret the execution
keeps in the store (:func:`durastate.engine.ids.task_id`). A notice naming the guessable ``<id>~<n>``, or
any other id, is ignored like one from a child the execution does not know; the real answer still routes,
and a second copy of it is a duplicate. Each test drives a real :class:`Worker` on a real store and reads
the task request from the store's outbox, as the relay does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.cli.output import execution_json
from durastate.engine import DefinitionRegistry, Event, load_definition
from durastate.engine.ids import (
    FINISHED,
    START,
    TASK,
    child_execution_id,
    finished_event_id,
    start_event_id,
    task_id,
)
from durastate.engine.model import ChildRef
from durastate.engine.tasks import TaskRequest, task_result
from durastate.errors import MalformedEvent
from durastate.runtime import ManualClock
from durastate.runtime.worker import HandleResult, Worker
from durastate.store import SqliteStore
from durastate.store.base import ExecutionStore

CHART: dict[str, Any] = {
    "id": "pay",
    "initial": "charging",
    "states": {
        "charging": {
            "invoke": {"task": {"python": "billing:charge"}, "input": {"amount": 5}},
            "on_done": {"target": "paid", "actions": [{"assign": {"receipt": "$event.output.receipt"}}]},
            "on_error": {"target": "declined", "actions": [{"assign": {"why": "$event.error"}}]},
        },
        "paid": {"on": {"again": "charging"}},
        "declined": {"type": "final"},
    },
}
EID = "order-1"


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExecutionStore]:
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "tasks.db")
        yield sqlite
        sqlite.close()
        return
    from moto import mock_aws

    from durastate.store.dynamodb.sync import DynamoDBStore
    from tests._aws import boto3_client, unique_prefix

    with mock_aws():
        dynamo = DynamoDBStore(boto3_client("dynamodb"), prefix=unique_prefix())
        dynamo.ensure_tables()
        yield dynamo


def worker(store: ExecutionStore) -> Worker:
    return Worker(store, DefinitionRegistry([load_definition(CHART)]), ManualClock(1000.0))


def requests(store: ExecutionStore) -> list[TaskRequest]:
    """The task requests waiting in the outbox, oldest first (what the relay would run)."""
    return [TaskRequest.from_event(e.target_id or "", e.event) for e in store.pending_outbox()
            if e.event.name == TASK]


def started(store: ExecutionStore) -> tuple[Worker, TaskRequest]:
    w = worker(store)
    assert w.handle(EID, Event(id=start_event_id(EID), name=START, data={"definition_id": "pay"})) == "applied"
    (request,) = requests(store)
    return w, request


def forged(child_id: str, receipt: str = "forged", event_id: str | None = None) -> Event:
    return Event(id=event_id or finished_event_id(child_id), name=FINISHED,
                 data={"child_id": child_id, "status": "finished", "outcome": None,
                       "output": {"receipt": receipt}, "task_id": child_id})


def test_a_forged_answer_for_a_running_task_is_ignored_and_the_real_one_still_counts(
        store: ExecutionStore) -> None:
    w, request = started(store)
    guessable = child_execution_id(EID, 1)  # what a task id was before: <execution id>~<n>
    for n, guess in enumerate((guessable, f"{guessable}~0123456789abcdef", f"{EID}~2")):
        assert w.handle(EID, forged(guess)) == HandleResult.IGNORED
        with pytest.raises(MalformedEvent, match="does not have the id of its child"):
            w.handle(EID, forged(guess, event_id=f"forged-{n}"))  # not the id durastate derives for it
    exe = store.load(EID)
    assert exe is not None and exe.active_path == "charging" and "receipt" not in exe.context
    assert list(exe.children) == [request.task_id] and exe.children[request.task_id].status == "running"

    answer = task_result(request, {"receipt": "real"})
    assert w.handle(EID, answer) == HandleResult.APPLIED
    assert w.handle(EID, answer) == HandleResult.DUPLICATE  # redelivered: the same event id
    assert worker(store).handle(EID, answer) == HandleResult.DUPLICATE  # by a worker that kept nothing
    exe = store.load(EID)
    assert exe is not None and (exe.active_path, exe.context) == ("paid", {"receipt": "real"})


def test_the_task_id_is_unguessable_and_the_secret_never_leaves_the_store(store: ExecutionStore) -> None:
    w, request = started(store)
    exe = store.load(EID)
    assert exe is not None and exe.secret is not None and len(exe.secret) == 32
    assert request.task_id.startswith(f"{EID}~1~") and len(request.task_id) == len(EID) + 3 + 16
    assert w.handle(EID, task_result(request, {"receipt": "r"})) == HandleResult.APPLIED
    assert w.handle(EID, Event(name="again")) == HandleResult.APPLIED  # a second task: another mac
    second = requests(store)[-1]
    assert second.task_id.startswith(f"{EID}~2~") and second.task_id[-16:] != request.task_id[-16:]
    exe = store.load(EID)
    assert exe is not None and exe.secret is not None
    seen = json.dumps([[e.event.model_dump(mode="json") for e in store.pending_outbox()],
                       store.read_trace(EID), execution_json(exe), second.payload(), repr(exe)])
    assert exe.secret not in seen
    assert "secret" not in execution_json(exe)


def test_nothing_can_be_started_under_a_task_id(store: ExecutionStore) -> None:
    w, request = started(store)
    start = Event(name=START, data={"definition_id": "pay", "parent_id": EID, "child_id": request.task_id})
    with pytest.raises(MalformedEvent, match="never invoked it"):
        w.handle(request.task_id, start)


def test_an_execution_stored_without_a_secret_keeps_its_running_task_and_gets_one(store: ExecutionStore) -> None:
    """Stored before executions had secrets: its running task keeps the plain id (and is answered as
    before); its next step gives it a secret, so the tasks it starts from then on are unforgeable."""
    started(store)
    exe = store.load(EID)
    assert exe is not None
    legacy = child_execution_id(EID, 1)
    exe.secret = None
    exe.children = {legacy: ChildRef(path="charging", kind="task")}
    store.commit(exe, [], processed_event_id="make-it-legacy")
    old = TaskRequest(task_id=legacy, execution_id=EID, path="charging", kind="python", target="billing:charge",
                      input={"amount": 5}, timeout=None, attempt=1)
    assert worker(store).handle(EID, task_result(old, {"receipt": "old"})) == HandleResult.APPLIED
    exe = store.load(EID)
    assert exe is not None and exe.context == {"receipt": "old"} and exe.secret is not None
    assert worker(store).handle(EID, Event(name="again")) == HandleResult.APPLIED
    assert requests(store)[-1].task_id == task_id(EID, 2, exe.secret) != child_execution_id(EID, 2)
    assert worker(store).handle(EID, forged(f"{EID}~2")) == HandleResult.IGNORED
