"""Call the Lambda handlers the way AWS Lambda would, where nothing runs them for us.

moto (and LocalStack without Docker) stores functions, event source mappings and schedules but never runs
handler code, so the no-Docker local stack and the end-to-end tests play Lambda's part themselves:

* :class:`SqsBatchInvoker` is the SQS event source mapping: it receives up to ``batch_size`` (≤ 10)
  messages from the FIFO queue — SQS FIFO itself keeps each message group in order and locked while one
  of its messages is in flight —, turns them into the Lambda ``SQSEvent`` shape, calls the handler,
  deletes the records it reported as processed, and leaves the ``batchItemFailures`` (or, if the handler
  raised, the whole batch) on the queue for their visibility timeout, exactly like Lambda. The queue's
  redrive policy (moto implements it) moves a record to the DLQ once it was received ``maxReceiveCount``
  times. ``retry_delay`` shortens the wait before a failed record is visible again (a local convenience;
  ``None`` keeps Lambda's behaviour).
* :func:`scheduled_event` and :func:`dynamodb_stream_event` build the EventBridge scheduled event and the
  DynamoDB stream batch the relay and the sweeper receive.
* :class:`FakeLambdaContext` is the context object Powertools' ``inject_lambda_context`` reads.
* :class:`HandlerLoop` ties the three together the way the deployed triggers do: worker batches from
  the queue, the relay after every batch (what the outbox/spawns streams would trigger) and on its backstop
  schedule, the sweeper on its schedule. It is the whole "Lambda" of the no-Docker local stack.

The event shapes match what Lambda delivers (and what Powertools' data classes parse).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "BatchResult",
    "FakeLambdaContext",
    "Handler",
    "HandlerLoop",
    "SqsBatchInvoker",
    "dynamodb_stream_event",
    "queue_arn",
    "scheduled_event",
    "sqs_event",
    "sqs_record",
]

Handler = Callable[[dict[str, Any], Any], Any]
"""A Lambda handler: ``handler(event, context) -> response``."""

ACCOUNT = "123456789012"


@dataclass
class FakeLambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    function_name: str = "durastate-worker"
    memory_limit_in_mb: int = 512
    timeout_seconds: float = 60.0
    region: str = "us-east-1"
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = ""
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_seconds
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def queue_arn(queue_url: str, region: str = "us-east-1") -> str:
    """The ARN of a queue from its URL (``…/<account>/<name>``)."""
    parts = queue_url.rstrip("/").split("/")
    account = parts[-2] if len(parts) >= 2 and parts[-2].isdigit() else ACCOUNT
    return f"arn:aws:sqs:{region}:{account}:{parts[-1]}"


def sqs_record(message: Mapping[str, Any], source_arn: str, region: str = "us-east-1") -> dict[str, Any]:
    """One Lambda SQS record from one ``ReceiveMessage`` message (received with all attributes)."""
    attrs = dict(message.get("Attributes") or {})
    body = str(message.get("Body") or "")
    msg_attrs: dict[str, Any] = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        msg_attrs[name] = {"stringValue": value.get("StringValue"), "binaryValue": value.get("BinaryValue"),
                           "stringListValues": list(value.get("StringListValues") or []),
                           "binaryListValues": list(value.get("BinaryListValues") or []),
                           "dataType": value.get("DataType", "String")}
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": {k: str(v) for k, v in attrs.items()},
        "messageAttributes": msg_attrs,
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": source_arn,
        "awsRegion": region,
    }


def sqs_event(messages: Sequence[Mapping[str, Any]], source_arn: str,
              region: str = "us-east-1") -> dict[str, Any]:
    """The Lambda ``SQSEvent`` for a batch of received messages."""
    return {"Records": [sqs_record(m, source_arn, region) for m in messages]}


def scheduled_event(rule: str = "durastate-schedule", region: str = "us-east-1",
                    at: datetime | None = None) -> dict[str, Any]:
    """The event an EventBridge schedule rule delivers to its target."""
    when = (at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": ACCOUNT, "time": when, "region": region,
            "resources": [f"arn:aws:events:{region}:{ACCOUNT}:rule/{rule}"], "detail": {}}


def dynamodb_stream_event(table: str, new_images: Sequence[Mapping[str, Any]], keys: Sequence[str],
                          event_name: str = "INSERT", region: str = "us-east-1") -> dict[str, Any]:
    """A DynamoDB stream batch (``NEW_IMAGE``) for items given in typed attribute-value form."""
    records = []
    for i, image in enumerate(new_images):
        seq = f"{int(time.time() * 1000):021d}{i:04d}"
        records.append({
            "eventID": uuid.uuid4().hex, "eventName": event_name, "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": region,
            "dynamodb": {"ApproximateCreationDateTime": int(time.time()),
                         "Keys": {k: image[k] for k in keys if k in image},
                         **({"NewImage": dict(image)} if event_name != "REMOVE" else {}),
                         "SequenceNumber": seq, "SizeBytes": 100, "StreamViewType": "NEW_IMAGE"},
            "eventSourceARN": f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{table}/stream/2026-01-01T00:00:00",
        })
    return {"Records": records}


@dataclass(frozen=True)
class BatchResult:
    """What one poll did: how many records were received, deleted (processed) and left for retry."""

    received: int
    succeeded: int
    failed: int
    response: Any = None


class SqsBatchInvoker:
    """Plays the SQS event source mapping of one function (see the module docstring)."""

    def __init__(self, client: Any, queue_url: str, handler: Handler, *, batch_size: int = 10,
                 visibility_timeout: int | None = None, retry_delay: int | None = None,
                 function_name: str = "durastate-worker", region: str = "us-east-1",
                 context_factory: Callable[[], Any] | None = None) -> None:
        if not 1 <= batch_size <= 10:
            raise ValueError(f"batch_size must be 1..10 (the SQS event source maximum), got {batch_size}")
        self.sqs = client
        self.queue_url = queue_url
        self.handler = handler
        self.batch_size = batch_size
        self.visibility_timeout = visibility_timeout
        self.retry_delay = retry_delay
        self.region = region
        self.source_arn = queue_arn(queue_url, region)
        self._context = context_factory or (lambda: FakeLambdaContext(function_name=function_name,
                                                                      region=region))

    def poll_once(self) -> BatchResult:
        """Receive one batch, invoke the handler, settle the records. ``received == 0``: queue idle."""
        params: dict[str, Any] = {"QueueUrl": self.queue_url, "MaxNumberOfMessages": self.batch_size,
                                  "MessageSystemAttributeNames": ["All"], "MessageAttributeNames": ["All"],
                                  "WaitTimeSeconds": 0}
        if self.visibility_timeout is not None:
            params["VisibilityTimeout"] = self.visibility_timeout
        messages = self.sqs.receive_message(**params).get("Messages") or []
        if not messages:
            return BatchResult(0, 0, 0)
        event = sqs_event(messages, self.source_arn, self.region)
        try:
            response = self.handler(event, self._context())
        except Exception:
            # Lambda: a failed invocation returns the whole batch to the queue.
            self._retry_later([m["ReceiptHandle"] for m in messages])
            return BatchResult(len(messages), 0, len(messages), None)
        failed_ids = {str(f.get("itemIdentifier")) for f in (response or {}).get("batchItemFailures") or []}
        done = [m for m in messages if m["MessageId"] not in failed_ids]
        failed = [m for m in messages if m["MessageId"] in failed_ids]
        self._delete([m["ReceiptHandle"] for m in done])
        self._retry_later([m["ReceiptHandle"] for m in failed])
        return BatchResult(len(messages), len(done), len(failed), response)

    def drain(self, max_batches: int = 1000, between: Callable[[], None] | None = None) -> int:
        """Poll until the queue yields nothing (or ``max_batches``); ``between`` runs after each batch."""
        total = 0
        for _ in range(max_batches):
            res = self.poll_once()
            if res.received == 0:
                break
            total += res.received
            if between is not None:
                between()
        return total

    def _delete(self, receipts: list[str]) -> None:
        for start in range(0, len(receipts), 10):
            part = receipts[start:start + 10]
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(part)])

    def _retry_later(self, receipts: list[str]) -> None:
        if self.retry_delay is None or not receipts:
            return  # Lambda's way: the records reappear when their visibility timeout ends
        for start in range(0, len(receipts), 10):
            part = receipts[start:start + 10]
            self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": self.retry_delay}
                for i, r in enumerate(part)])


class HandlerLoop:
    """The three functions driven as their triggers would drive them (see the module docstring).

    ``clock`` decides when the schedules are due (inject a manual clock in tests); ``run_once`` returns
    whether anything was done, ``run`` loops until ``stop`` is set, idling ``idle_wait`` seconds between
    empty rounds.
    """

    def __init__(self, worker: SqsBatchInvoker, relay: Handler, sweeper: Handler, *,
                 relay_every: float = 60.0, sweep_every: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, region: str = "us-east-1",
                 stream_table: str = "durastate_outbox") -> None:
        self.worker = worker
        self.relay = relay
        self.sweeper = sweeper
        self.relay_every = relay_every
        self.sweep_every = sweep_every
        self.clock = clock
        self.region = region
        self.stream_table = stream_table
        self._last_relay = float("-inf")
        self._last_sweep = float("-inf")
        self._relay_more = False  # the last relay pass did something: what it created needs a pass too

    def call_relay(self, *, scheduled: bool = False) -> Any:
        # A synthetic stream record names no queue shard (this loop does not know which items a commit
        # inserted), which makes the relay read every shard, as its scheduled backstop does.
        event = (scheduled_event("durastate-relay-backstop", self.region) if scheduled else
                 dynamodb_stream_event(self.stream_table, [{"seq": {"N": "0"}}], ["seq"], region=self.region))
        return self.relay(event, FakeLambdaContext(function_name="durastate-relay", region=self.region))

    def call_sweeper(self) -> Any:
        return self.sweeper(scheduled_event("durastate-sweeper", self.region),
                            FakeLambdaContext(function_name="durastate-sweeper", region=self.region))

    def run_once(self) -> bool:
        batch = self.worker.poll_once()
        now = self.clock()
        busy = batch.received > 0
        if batch.received or self._relay_more or now - self._last_relay >= self.relay_every:
            self._last_relay = now
            res = self.call_relay(scheduled=not (batch.received or self._relay_more)) or {}
            self._relay_more = bool(res.get("spawned") or res.get("sent") or res.get("published"))
            busy = busy or self._relay_more
        if now - self._last_sweep >= self.sweep_every:
            self._last_sweep = now
            busy = bool((self.call_sweeper() or {}).get("fired")) or busy
        return busy

    def run_until_idle(self, max_rounds: int = 10_000) -> int:
        """Rounds until one does nothing (schedules fire on the first round and when due); returns rounds."""
        for n in range(1, max_rounds + 1):
            if not self.run_once():
                return n
        raise RuntimeError(f"still busy after {max_rounds} rounds")

    def run(self, stop: Any, idle_wait: float = 0.5) -> None:
        """Loop until ``stop`` (a ``threading.Event``) is set; errors are the handlers' to report."""
        while not stop.is_set():
            if not self.run_once():
                stop.wait(idle_wait)
