"""Events for a suspended or a retrying execution on the no-Docker local stack: kept, then applied in order,
and never redelivered.

The worker keeps such an event in the execution (``HandleResult.HELD``) and commits; for SQS the record is
done. Were it reported as a failure instead, SQS would hide it for the queue's visibility timeout (180 s)
and hold every later event of the execution's FIFO group behind it — a ``resume`` included. So these
tests run the stack the way Lambda's event source mapping does, with ``retry_delay=None``: a failed
record is *not* made visible again at once (the local shortcut would turn the redelivery into a harmless
duplicate and hide the failure). Each turn's batch must report no failure, and the queue must be empty —
nothing in flight — when the stack is idle.

The retrying execution calls :func:`charge` (this module) through a retry policy; the test plays the
payment provider going down and coming back with :data:`PROVIDER`.

A transient failure is the opposite case: the record *is* handed back, and then the worker hides it for a
delay that grows with its receive count (``ChangeMessageVisibility``), and it never reaches the DLQ by its
receives, however many it takes.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from durastate.cli import run
from durastate.devstack import LocalStack, StepReport
from durastate.engine.model import Execution
from durastate.errors import StoreThrottled
from durastate.runtime.aws import RETRY_BACKOFF
from durastate.store.base import ExecutionStore

from .helpers import QUIET, FakeClock, drain_queue, executions, send, start

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PROVIDER = {"down": False}
"""Whether :func:`charge` fails (a payment provider that is down for a while)."""


def charge(context: dict[str, Any], event: Any) -> dict[str, Any]:
    if PROVIDER["down"]:
        raise ConnectionError("payment provider unreachable")
    return {"charged": context["amount"]}


SHOP = f"""
id: shop
initial: cart
context: {{amount: 25, note: ""}}
states:
  cart:
    on:
      note: {{actions: [{{assign: {{note: "$event.text"}}}}]}}
      submit: paying
  paying:
    entry:
      - call: "{__name__}:charge"
        retry: {{max_attempts: 3, backoff: {{initial: 10}}, on: [ConnectionError]}}
    on:
      note: {{actions: [{{assign: {{note: "$event.text"}}}}]}}
      ship: shipped
  shipped: {{type: final, outcome: shipped}}
"""


@pytest.fixture()
def definitions(tmp_path: Path) -> Path:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "shop.yaml").write_text(SHOP)
    shutil.copy(EXAMPLES / "order.yaml", folder / "order.yaml")
    shutil.copy(EXAMPLES / "payment.yaml", folder / "payment.yaml")
    return folder


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def stack(cloud_assembly: Path, definitions: Path, clock: FakeClock) -> Iterator[LocalStack]:
    # retry_delay=None: a failed record waits out the queue's visibility timeout, as under Lambda.
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=clock, retry_delay=None,
                    definitions_dir=definitions, environment={**QUIET, "DURASTATE_TRACE": "1"}) as st:
        yield st
    PROVIDER["down"] = False


def settle_without_failures(stack: LocalStack) -> int:
    """Run until idle; every batch must succeed whole, and nothing may be left on the queue or in flight.
    Returns the records the worker received."""
    reports: list[StepReport] = []
    stack.run_until_idle(max_steps=500, on_step=reports.append)
    assert [r.worker_failed for r in reports if r.worker_failed] == [], "records went back to the queue"
    assert stack.settled(), "records are left on the event queue (in flight: a failure SQS would redeliver)"
    return sum(r.worker_received for r in reports)


def execution(stack: LocalStack, execution_id: str) -> dict[str, Any]:
    return executions(stack.client("dynamodb"))[execution_id]


def test_events_for_a_suspended_execution_are_held_and_applied_in_order_after_resume(
        stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "held-s")
    settle_without_failures(stack)
    assert run(["suspend", "held-s", "--reason", "stock check", "--id", "s-suspend", "--queue-url", q]) == 0
    held = [send(sqs, q, "held-s", "add_item", {"price": 30}, event_id="s-1"),
            send(sqs, q, "held-s", "submit", event_id="s-2"),
            send(sqs, q, "held-s", "add_item", {"price": 5}, event_id="s-3")]
    assert settle_without_failures(stack) == 4  # the suspend and the three held events, each received once
    exe = execution(stack, "held-s")
    assert (exe["status"], exe["active_path"]) == ("suspended", "cart")
    assert [e["id"] for e in exe["held"]] == held

    assert run(["resume", "held-s", "--id", "s-resume", "--queue-url", q]) == 0
    assert settle_without_failures(stack) >= 1  # the resume (then the payment child's events)
    exe = execution(stack, "held-s")
    # Only this order leaves the order being paid for 30 (s-3 comes after the submit: ignored).
    assert (exe["status"], exe["active_path"]) == ("running", "processing.payment")
    assert exe["context"] == {"items": 1, "total": 30}
    assert not exe.get("held")
    assert drain_queue(sqs, stack.dlq_url) == []
    capsys.readouterr()


def test_events_for_a_retrying_execution_are_held_and_applied_in_order_after_the_retry(
        stack: LocalStack, clock: FakeClock) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "held-r", "shop")
    settle_without_failures(stack)

    PROVIDER["down"] = True
    send(sqs, q, "held-r", "submit", event_id="r-submit")
    settle_without_failures(stack)  # the step failed and was rolled back; a retry is armed, ten seconds on
    exe = execution(stack, "held-r")
    assert (exe["status"], exe["active_path"]) == ("running", "cart")
    assert exe["retry"]["event"]["id"] == "r-submit"
    held = [send(sqs, q, "held-r", "note", {"text": "first"}, event_id="r-1"),
            send(sqs, q, "held-r", "note", {"text": "gift wrap"}, event_id="r-2"),
            send(sqs, q, "held-r", "ship", event_id="r-3")]
    assert settle_without_failures(stack) == 3
    assert [e["id"] for e in execution(stack, "held-r")["held"]] == held

    PROVIDER["down"] = False
    clock.advance(10)  # the retry is due: its timer hop (or the sweeper) fires it
    settle_without_failures(stack)
    exe = execution(stack, "held-r")
    assert (exe["status"], exe["active_path"]) == ("finished", "shipped")
    assert exe["context"] == {"amount": 25, "charged": 25, "note": "gift wrap"}  # notes in the order sent
    assert not exe.get("held") and not exe.get("retry")
    assert drain_queue(sqs, stack.dlq_url) == []


def test_the_cli_reports_the_held_events(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    """What a user sees meanwhile: ``show`` lists the events waiting in the suspended execution."""
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "held-c")
    settle_without_failures(stack)
    assert run(["suspend", "held-c", "--queue-url", q]) == 0
    send(sqs, q, "held-c", "add_item", {"price": 3}, event_id="c-1")
    settle_without_failures(stack)
    capsys.readouterr()
    assert run(["--store", f"dynamodb://durastate?endpoint_url={stack.endpoint_url}", "show", "held-c",
                "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "suspended" and [e["id"] for e in shown["held"]] == ["c-1"]


class ThrottledFor:
    """The worker's store, except that the first ``times`` commits of ``execution_id`` are refused with the
    ``StoreThrottled`` the DynamoDB store raises when DynamoDB keeps throttling past the SDK's retries.

    An INJECTED FAULT: moto never throttles. Everything around it is the real path — the packaged worker
    handler, the partial batch response, the visibility change, SQS FIFO (moto) counting receives and
    applying the redrive policy the template declares.
    """

    def __init__(self, store: ExecutionStore, execution_id: str, times: int) -> None:
        self._store, self.execution_id, self.left = store, execution_id, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def commit(self, exe: Execution, emits: Sequence[Any], processed_event_id: str | None = None,
               **rest: Any) -> None:
        if exe.id == self.execution_id and self.left > 0:
            self.left -= 1
            raise StoreThrottled(f"DynamoDB kept throttling the writes of {exe.id} (injected by the test)")
        self._store.commit(exe, emits, processed_event_id, **rest)


def test_a_transient_failure_backs_off_by_visibility_and_never_reaches_the_dlq(stack: LocalStack) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "tr-x")
    settle_without_failures(stack)
    redrive = json.loads(sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["RedrivePolicy"])
                         ["Attributes"]["RedrivePolicy"])
    failures = 7  # more receives than the old redrive policy's 5 allowed
    assert int(redrive["maxReceiveCount"]) > failures

    delays: list[list[tuple[str, int]]] = []  # what the worker asked SQS for, request by request

    def record(params: dict[str, Any], **_: Any) -> None:
        delays.append([(e["ReceiptHandle"], e["VisibilityTimeout"]) for e in params["Entries"]])

    stack.runtime.sqs.meta.events.register("provide-client-params.sqs.ChangeMessageVisibilityBatch", record)
    stack.runtime.worker.store = ThrottledFor(stack.runtime.worker.store, "tr-x", failures)
    send(sqs, q, "tr-x", "add_item", {"price": 20}, event_id="x-1")
    send(sqs, q, "tr-x", "submit", event_id="x-2")  # behind it in the group: handed back with it

    for receive in range(1, failures + 1):
        report = stack.step()
        assert (report.worker_received, report.worker_failed) == (2, 2), receive
        [entries] = delays[-1:]
        assert len(entries) == 2
        ceiling = RETRY_BACKOFF.ceiling(receive)
        assert all(math.floor(ceiling / 2) <= v <= math.ceil(ceiling) for _, v in entries), (receive, entries)
        attrs = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        assert attrs == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "2"}
        for receipt, _ in entries:  # the test lets the delay pass (moto's visibility runs on real time)
            sqs.change_message_visibility(QueueUrl=q, ReceiptHandle=receipt, VisibilityTimeout=0)
    assert min(v for _, v in delays[-1]) > max(v for _, v in delays[0])  # they grew with the receives

    settle_without_failures(stack)  # the eighth receive applies both, in order
    exe = execution(stack, "tr-x")
    assert (exe["context"], exe["active_path"]) == ({"items": 1, "total": 20}, "processing.payment")
    assert drain_queue(sqs, stack.dlq_url) == []
