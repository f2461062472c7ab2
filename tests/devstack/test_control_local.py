"""Control of executions on the no-Docker local stack, driven as a user drives the deployed stack.

``cancel``, ``suspend`` and ``resume`` go through the event queue (``durastate … --queue-url``, in the
execution's FIFO group, behind its other events); events are sent with a plain boto3 ``send_message`` in
the wire format; ``terminate`` commits straight to the store (``durastate --store dynamodb://…``); what
happened is read back from the store (``durastate show --json``, the trace). The stack records a trace
step per commit here (``DURASTATE_TRACE=1``, the stack's ``trace=True`` option) so the test can read what
the worker did with each event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from durastate.cli import run
from durastate.devstack import LocalStack
from durastate.engine.model import Execution
from durastate.errors import StoreThrottled
from durastate.store.base import ExecutionStore
from durastate.store.dynamodb.sync import DynamoDBStore

from .helpers import FakeClock, drain_queue, send, settle, start

pytestmark = pytest.mark.slow

ENVIRONMENT = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true", "DURASTATE_TRACE": "1"}


@pytest.fixture()
def stack(cloud_assembly: Path) -> Iterator[LocalStack]:
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=FakeClock(), retry_delay=0,
                    environment=ENVIRONMENT) as st:
        yield st


@pytest.fixture()
def store_url(stack: LocalStack) -> str:
    return f"dynamodb://durastate?endpoint_url={stack.endpoint_url}"


@pytest.fixture()
def store(stack: LocalStack) -> DynamoDBStore:
    """A reader of the stack's tables, apart from the worker's store."""
    return DynamoDBStore(stack.client("dynamodb"), prefix="durastate")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``durastate ARGV``, which must succeed; its standard output."""
    capsys.readouterr()
    code = run(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def show(capsys: pytest.CaptureFixture[str], store_url: str, execution_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(cli(capsys, "--store", store_url, "show", execution_id, "--json"))
    return shown


def on_queue(stack: LocalStack) -> int:
    """Messages on the event queue, visible or in flight."""
    attrs = stack.client("sqs").get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return sum(int(v) for v in attrs.values())


def traced(store: DynamoDBStore, execution_id: str, event_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The trace steps of ``execution_id`` for these events, oldest first."""
    return [s for s in store.read_trace(execution_id) if s.get("event_id") in event_ids]


def test_suspended_execution_keeps_events_sent_meanwhile_and_applies_them_in_order_after_resume(
        stack: LocalStack, store_url: str, store: DynamoDBStore, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "ctl-a")
    settle(stack)

    out = cli(capsys, "suspend", "ctl-a", "--reason", "stock check", "--id", "a-suspend", "--queue-url", q)
    assert f"queued suspend for ctl-a (event a-suspend) on {q}" in out
    # Sent after the suspend, in the same group: they reach the execution suspended, and it keeps them.
    # In this order they leave the order being paid for 30; in any other, not (5 more, or still a cart).
    held = [send(sqs, q, "ctl-a", "add_item", {"price": 30}, event_id="a-1"),
            send(sqs, q, "ctl-a", "submit", event_id="a-2"),
            send(sqs, q, "ctl-a", "add_item", {"price": 5}, event_id="a-3")]
    settle(stack)
    exe = show(capsys, store_url, "ctl-a")
    assert (exe["status"], exe["reason"], exe["active_path"]) == ("suspended", "stock check", "cart")
    assert exe["context"] == {"items": 0, "total": 0}
    assert [e["id"] for e in exe["held"]] == held

    monkeypatch.setenv("DURASTATE_QUEUE_URL", q)  # the environment variable works as --queue-url does
    assert "queued resume for ctl-a (event a-resume)" in cli(capsys, "resume", "ctl-a", "--id", "a-resume")
    settle(stack)
    exe = show(capsys, store_url, "ctl-a")
    assert (exe["status"], exe["active_path"]) == ("running", "processing.payment")
    assert exe["context"] == {"items": 1, "total": 30}
    assert "held" not in exe and "reason" not in exe
    assert show(capsys, store_url, "ctl-a~1")["context"]["amount"] == 30  # the payment the submit invoked
    steps = traced(store, "ctl-a", ["a-suspend", *held, "a-resume"])
    assert [s["event_id"] for s in steps] == ["a-suspend", *held, "a-resume"]
    assert [s.get("held") for s in steps[1:4]] == [1, 2, 3]  # kept, one after the other
    released = steps[4]["steps"]  # applied by the resume's commit, in the order they arrived
    assert [(s["event_id"], s["to"], s.get("ignored", False)) for s in released] == [
        ("a-1", "cart", False), ("a-2", "processing.payment", False), ("a-3", "processing.payment", True)]
    assert drain_queue(sqs, stack.dlq_url) == []


def test_cancel_through_the_queue_keeps_its_reason(stack: LocalStack, store_url: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "ctl-b")
    send(sqs, q, "ctl-b", "add_item", {"price": 12})
    out = cli(capsys, "cancel", "ctl-b", "--reason", "customer asked", "--queue-url", q)
    assert out.startswith("queued cancel for ctl-b (event ctl-b:cancel:")  # behind the add_item: it applies first
    settle(stack)
    exe = show(capsys, store_url, "ctl-b")
    assert (exe["status"], exe["reason"]) == ("cancelled", "customer asked")
    assert exe["context"] == {"items": 1, "total": 12}
    assert drain_queue(sqs, stack.dlq_url) == []


class CannotCommitSteps:
    """The worker's store, except that it refuses every commit leaving ``execution_id`` running.

    An injected fault — see the test below for why, and what it stands for.
    """

    def __init__(self, store: ExecutionStore, execution_id: str) -> None:
        self._store = store
        self.execution_id = execution_id
        self.refused: list[str | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def commit(self, exe: Execution, emits: Sequence[Any], processed_event_id: str | None = None,
               **rest: Any) -> None:
        if exe.id == self.execution_id and exe.status == "running":
            self.refused.append(processed_event_id)
            raise StoreThrottled(f"DynamoDB kept throttling the writes of {exe.id} (injected by the test)")
        self._store.commit(exe, emits, processed_event_id, **rest)


def test_terminate_ends_an_execution_whose_group_a_failing_message_blocks(
        stack: LocalStack, store_url: str, store: DynamoDBStore, capsys: pytest.CaptureFixture[str]) -> None:
    """``terminate`` reaches the store at once while a message that keeps failing holds the execution's
    FIFO group; when the stack takes the group up again, that message and the ones behind it meet a
    terminated execution and are consumed (ignored); other executions carry on throughout.

    The blocking is an INJECTED FAULT: moto never refuses a write for a while, and nothing a user can send
    blocks a group — an unusable message is dead-lettered at once, and an error in a user's action fails
    the execution. What blocks a group on AWS is a failure of the worker's own machinery while it applies
    the message: DynamoDB throttling the writes of the execution past the SDK's and the store's retries,
    or a step whose Lambda invocation times out every time. So the worker's store — the worker's only: the
    CLI's ``terminate`` has its own — is wrapped (:class:`CannotCommitSteps`) to refuse, with the
    ``StoreThrottled`` the DynamoDB store raises in that case, every commit that leaves execution
    ``ctl-x`` running: its steps cannot be committed. Everything around it is the real path: the packaged
    worker handler lets the error through as a transient failure, reports the record in
    ``batchItemFailures``, the emulated event source mapping leaves it (and the later records of its
    group) on the queue, and SQS FIFO — moto — keeps it at the head of the group, counting receives.
    A commit for an *ended* execution is let through: that is the premise of ``terminate`` as the way
    out, and what the fault stands for (a step that cannot be completed) does not stop an ended
    execution from consuming an event, which runs no step.
    """
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "ctl-x")
    start(sqs, q, "ctl-y")
    send(sqs, q, "ctl-x", "add_item", {"price": 10}, event_id="x-0")
    settle(stack)
    before = show(capsys, store_url, "ctl-x")

    fault = CannotCommitSteps(stack.runtime.worker.store, "ctl-x")
    stack.runtime.worker.store = fault
    send(sqs, q, "ctl-x", "add_item", {"price": 20}, event_id="x-stuck")
    send(sqs, q, "ctl-x", "submit", event_id="x-later")
    send(sqs, q, "ctl-y", "add_item", {"price": 7}, event_id="y-1")
    redrive = stack.client("sqs").get_queue_attributes(QueueUrl=q, AttributeNames=["RedrivePolicy"])
    max_receives = int(json.loads(redrive["Attributes"]["RedrivePolicy"])["maxReceiveCount"])
    failed = 0
    for _ in range(max_receives - 2):  # fewer receives than the redrive policy allows: no DLQ yet
        report = stack.step()
        failed += report.worker_failed
        if len(fault.refused) >= 2 and store.is_processed("ctl-y", "y-1"):
            break
    assert fault.refused == ["x-stuck"] * len(fault.refused) and len(fault.refused) >= 2  # never x-later
    assert failed >= len(fault.refused)  # reported as batch item failures, returned to the queue
    assert on_queue(stack) == 2  # x-stuck at the head of ctl-x's group, x-later behind it
    assert show(capsys, store_url, "ctl-x") == before
    assert show(capsys, store_url, "ctl-y")["context"] == {"items": 1, "total": 7}  # not held up
    assert drain_queue(sqs, stack.dlq_url) == []

    out = cli(capsys, "--store", store_url, "terminate", "ctl-x", "--reason", "stuck")
    assert out.startswith("terminated ctl-x: stuck")
    exe = show(capsys, store_url, "ctl-x")  # at once: the stack has not run since
    assert (exe["status"], exe["reason"], exe["error"]) == ("terminated", "stuck", "terminated: stuck")
    assert on_queue(stack) == 2  # the group is still blocked: terminate did not go through it

    send(sqs, q, "ctl-y", "submit", event_id="y-2")
    refused = len(fault.refused)
    settle(stack)  # the fault is still there; the group moves on all the same
    assert len(fault.refused) == refused  # no step of ctl-x was tried again
    exe = show(capsys, store_url, "ctl-x")
    assert (exe["status"], exe["reason"]) == ("terminated", "stuck")
    assert (exe["context"], exe["active_path"]) == (before["context"], before["active_path"])
    assert (exe["children"], exe["timers"]) == ({}, {})  # the submit behind it invoked no payment
    assert all(store.is_processed("ctl-x", e) for e in ("x-stuck", "x-later"))  # consumed, each once
    steps = traced(store, "ctl-x", ["x-stuck", "x-later"])
    assert [(s["event_id"], s.get("ignored")) for s in steps] == [("x-stuck", True), ("x-later", True)]
    assert show(capsys, store_url, "ctl-y")["active_path"] == "processing.payment"
    assert drain_queue(sqs, stack.dlq_url) == []
