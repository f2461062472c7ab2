"""Lambda tasks on the no-Docker local stack: the relay Lambda runs ``invoke: {task: {lambda: ...}}``.

Why not moto's Lambda: moto stores functions but runs their code only in Docker, which this suite does
not have. So the task function is given to the local stack as a handler, and the stack's relay calls it the
way it calls every handler here — with the JSON event and a Lambda context, answering as ``Invoke`` does
(:mod:`durastate.devstack.task_functions`). The rest is the deployed path: the request is committed to the
DynamoDB outbox with the state entry, the relay handler (woken by the outbox stream) runs it and sends the
answer to the SQS FIFO queue (deduplicated by its event id), and the worker Lambda routes it. The template
grants the relay ``lambda:InvokeFunction`` on that function (``durastate:taskFunctions``), as a deployment
must: the local stack denies what the role does not allow.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.devstack import LocalStack
from durastate.engine.ids import task_id
from durastate.store.dynamodb.sync import DynamoDBStore

from .helpers import QUIET, FakeClock, start

pytestmark = pytest.mark.slow

CHART = """\
id: charge
initial: charging
context: {amount: 5}
states:
  charging:
    invoke:
      task: {lambda: "arn:aws:lambda:us-east-1:123456789012:function:charge-card"}
      input: {amount: $context.amount}
    on_done: {target: paid, actions: [{assign: {receipt: $event.output.receipt}}]}
    on_error: {target: declined, actions: [{assign: {why: $event.error}}]}
  paid: {type: final}
  declined: {type: final}
"""


HEARTBEATS: list[DurastateClient] = []
"""The client a task function heartbeats with (set by a test: the local stack's queue)."""


def charge_card(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event["input"]["amount"] > 100:
        raise ValueError("over the limit")
    for client in HEARTBEATS:  # a long charge reports its progress through the queue, as on AWS
        client.heartbeat(event["task_id"], {"step": "authorised"}, execution_id=event["execution_id"])
    return {"receipt": f"r-{event['task_id']}", "by": context.function_name}


@pytest.fixture()
def stack(full_template: Path, tmp_path: Path) -> Iterator[LocalStack]:
    """The stack synthesized with ``durastate:taskFunctions=charge-card``: the relay's role may invoke it."""
    (tmp_path / "charge.yaml").write_text(CHART)
    with LocalStack(full_template, port=0, clock=FakeClock(), retry_delay=0,
                    definitions_dir=tmp_path, task_functions={"charge-card": charge_card},
                    environment=QUIET
                    ) as st:
        yield st


def test_the_relay_runs_a_lambda_task_and_the_worker_routes_its_answer(stack: LocalStack) -> None:
    sqs = stack.client("sqs")
    start(sqs, stack.queue_url, "ok", "charge", {"amount": 5})
    start(sqs, stack.queue_url, "no", "charge", {"amount": 500})
    stack.run_until_idle(max_steps=500)
    store = DynamoDBStore(stack.client("dynamodb"), prefix="durastate")
    ok, no = store.load("ok"), store.load("no")
    assert ok is not None and no is not None and ok.secret and no.secret
    ok_task, no_task = task_id("ok", 1, ok.secret), task_id("no", 1, no.secret)  # <id>~1~<mac>
    assert ok.active_path == "paid" and ok.context["receipt"] == f"r-{ok_task}"
    assert no.active_path == "declined"
    assert no.context["why"].startswith("ValueError: over the limit (Lambda arn:aws:lambda:")
    assert sorted(event["task_id"] for _, event in stack.task_functions.calls) == sorted([no_task, ok_task])
    assert store.pending_outbox() == []  # each request acked once its answer was sent


def test_an_unknown_task_function_is_an_error_the_chart_can_route(stack: LocalStack, tmp_path: Path) -> None:
    stack.task_functions.handlers.clear()
    start(stack.client("sqs"), stack.queue_url, "lost", "charge", {"amount": 5})
    stack.run_until_idle(max_steps=500)
    exe = DynamoDBStore(stack.client("dynamodb"), prefix="durastate").load("lost")
    assert exe is not None and exe.active_path == "declined"
    assert exe.context["why"].startswith("ResourceNotFoundException: Function not found")


def test_a_lambda_tasks_heartbeat_through_the_queue_is_applied_by_the_worker(stack: LocalStack) -> None:
    from durastate.transport.sqs import SqsTransport

    sqs = stack.client("sqs")
    HEARTBEATS.append(DurastateClient(SqsTransport(sqs, stack.queue_url)))
    try:
        start(sqs, stack.queue_url, "beat", "charge", {"amount": 5})
        stack.run_until_idle(max_steps=500)
    finally:
        HEARTBEATS.clear()
    store = DynamoDBStore(stack.client("dynamodb"), prefix="durastate")
    exe = store.load("beat")
    assert exe is not None and exe.active_path == "paid"
    beats = [t for t in store.read_trace("beat") if t["event"] == "durastate.heartbeat"]
    assert [t["data"]["details"] for t in beats] == [{"step": "authorised"}]
    assert not beats[0].get("ignored")  # applied while the task ran: before its answer (one FIFO group)
