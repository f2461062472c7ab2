"""What the local-stack tests share: a settable clock, plain-boto3 access to the stack's resources, and
the stack's quiet environment, settling and clean-up."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from durastate.devstack import LocalStack

QUIET = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}
"""The functions' environment for tests that do not read their logs or metrics."""


def settle(stack: LocalStack) -> None:
    """Run the stack until a turn finds nothing to do, and check nothing is left in flight."""
    stack.run_until_idle(max_steps=500)
    assert stack.settled()


@dataclass
class FakeClock:
    """The schedules and the runtime read this; a test moves it instead of waiting."""

    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def send(sqs: Any, queue_url: str, target: str, name: str, data: dict[str, Any] | None = None,
         event_id: str | None = None, group: str | None = None) -> str:
    """Enqueue one event in the wire format with a plain ``send_message`` — what any producer does."""
    eid = event_id or uuid.uuid4().hex
    body = json.dumps({"target_id": target, "event": {"id": eid, "name": name, "data": data or {}}})
    sqs.send_message(QueueUrl=queue_url, MessageBody=body, MessageGroupId=group or target,
                     MessageDeduplicationId=eid)
    return eid


def start(sqs: Any, queue_url: str, execution_id: str, definition_id: str = "order",
          context: dict[str, Any] | None = None) -> str:
    return send(sqs, queue_url, execution_id, "durastate.start",
                {"definition_id": definition_id, "context": context or {}}, event_id=f"{execution_id}:start")


def executions(ddb: Any, prefix: str = "durastate") -> dict[str, dict[str, Any]]:
    """Every execution in the table, as the stored JSON document (not the system records kept beside them,
    such as the archived definition versions: their ids start with ``~``)."""
    out: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"TableName": f"{prefix}_executions", "ConsistentRead": True}
    while True:
        page = ddb.scan(**kwargs)
        for item in page.get("Items", []):
            if item["id"]["S"].startswith("~"):
                continue
            out[item["id"]["S"]] = json.loads(item["data"]["S"])
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def count(ddb: Any, table: str) -> int:
    return int(ddb.scan(TableName=table, Select="COUNT", ConsistentRead=True)["Count"])


def drain_queue(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message on a queue (received and deleted), with its attributes."""
    out: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                  MessageSystemAttributeNames=["All"]).get("Messages", [])
        if not got:
            return out
        out += got
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
