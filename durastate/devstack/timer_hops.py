"""The timers queue's event source on the local stack, on the stack's clock.

Why this exists: on AWS a timer due within 15 minutes waits in the standard timers queue for its
``DelaySeconds`` and Lambda hands it to the timers function when the delay ends. moto implements message
delays, but on *real* time, while the local stack runs on its own clock (``durastate local --advance``,
a test's settable clock). So here the delay is played on the stack's clock:

* on a clock that is not real time, the hops are sent without their delay (a hook on the runtime's SQS
  client zeroes ``DelaySeconds`` for the timers queue only), so moto makes them visible at once;
* either way, :class:`HeldHopsInvoker` receives the visible hops, keeps each (invisible, in flight) until
  the stack's clock reaches its ``fire_at``, and then calls the timers function with the due ones, as the
  event source would when their delay ends (partial batch responses honoured). On real time moto's delay
  has already held a hop back to the whole second before it is due, and this waits out the fraction that
  the function itself waits on AWS (without blocking the loop, which plays every function at once).

A hop held in memory when the loop dies becomes visible again after its visibility timeout; until then
its timer is fired by the sweeper once overdue — the same recovery as a lost hop on AWS.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from durastate.devstack.lambda_emulator import BatchResult, Handler, queue_arn, sqs_event
from durastate.transport.sqs_timers import hop_fire_at
from durastate.transport.wire import parse_envelope

__all__ = ["HeldHopsInvoker", "zero_hop_delays"]

log = logging.getLogger("durastate.devstack.timer_hops")

HOLD_SECONDS = 12 * 3600
"""The visibility timeout of a held hop (SQS's maximum): it stays with this loop until due."""


def zero_hop_delays(client: Any, timers_queue_url: str) -> None:
    """Make ``client`` send hops to ``timers_queue_url`` without ``DelaySeconds`` (the stack's clock is not
    real time, so :class:`HeldHopsInvoker` holds them until due instead)."""

    def strip(params: dict[str, Any], **_: Any) -> None:
        if params.get("QueueUrl") != timers_queue_url:
            return
        params.pop("DelaySeconds", None)
        for entry in params.get("Entries") or []:
            entry.pop("DelaySeconds", None)

    for op in ("SendMessage", "SendMessageBatch"):
        client.meta.events.register(f"provide-client-params.sqs.{op}", strip)


def _due_at(message: dict[str, Any]) -> float:
    """When a hop is due; a message that is not a timeout is handed over at once (the function drops it)."""
    try:
        fire_at = hop_fire_at(parse_envelope(str(message.get("Body") or "")))
    except Exception:
        return float("-inf")
    return float("-inf") if fire_at is None else fire_at


class HeldHopsInvoker:
    """Plays the timers queue's event source: hops go to the handler when the clock says they are due."""

    def __init__(self, client: Any, queue_url: str, handler: Handler, clock: Callable[[], float], *,
                 region: str = "us-east-1", context_factory: Callable[[], Any] | None = None) -> None:
        self.sqs = client
        self.queue_url = queue_url
        self.handler = handler
        self.clock = clock
        self.region = region
        self.source_arn = queue_arn(queue_url, region)
        self._context = context_factory or (lambda: None)
        self.held: dict[str, dict[str, Any]] = {}
        """Received hops not yet due, by message id."""

    def poll_once(self) -> BatchResult:
        """Receive what is visible, hand the due hops (at most 10) to the handler; ``received == 0``: idle."""
        while True:
            got = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                           VisibilityTimeout=HOLD_SECONDS, MessageSystemAttributeNames=["All"],
                                           MessageAttributeNames=["All"]).get("Messages") or []
            for m in got:
                self.held[m["MessageId"]] = m
            if len(got) < 10:
                break
        now = self.clock()
        due = sorted((m for m in self.held.values() if _due_at(m) <= now), key=_due_at)[:10]
        if not due:
            return BatchResult(0, 0, 0)
        for m in due:
            del self.held[m["MessageId"]]
        receipts = [m["ReceiptHandle"] for m in due]
        try:
            response = self.handler(sqs_event(due, self.source_arn, self.region), self._context())
        except Exception:
            log.warning("the timers function failed on %d hop(s); they come back for another try", len(due),
                        exc_info=True)
            self._settle(receipts, delete=False)
            return BatchResult(len(due), 0, len(due), None)
        failed_ids = {str(f.get("itemIdentifier")) for f in (response or {}).get("batchItemFailures") or []}
        self._settle([m["ReceiptHandle"] for m in due if m["MessageId"] not in failed_ids], delete=True)
        self._settle([m["ReceiptHandle"] for m in due if m["MessageId"] in failed_ids], delete=False)
        return BatchResult(len(due), len(due) - len(failed_ids), len(failed_ids), response)

    def _settle(self, receipts: list[str], *, delete: bool) -> None:
        if not receipts:
            return
        if delete:
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(receipts)])
        else:
            self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": 0} for i, r in enumerate(receipts)])
