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
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.cli import run
from durastate.devstack import LocalStack, StepReport

from .helpers import QUIET, FakeClock, drain_queue, executions, reset_moto, send, start

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
        reset_moto(st)
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
