"""``SqsTransport``: events over an Amazon SQS FIFO queue — the production transport on AWS.

Why SQS FIFO fits the transport seam: ``MessageGroupId = target_id`` makes SQS itself guarantee that the
events of one execution are delivered in order and that, while one of them is in flight, no other consumer
receives the next — the single-writer-per-execution property the stores' trace ring and the worker's
optimistic commit rely on. ``MessageDeduplicationId = event.id`` makes a re-send of the same event within
SQS's five-minute window a no-op, so the relay can crash between "sent" and "acked" without duplicating
anything (and the worker's dedupe marks cover re-sends after the window).

The message body is the wire format of :mod:`durastate.transport.wire`, so users can enqueue events with plain
boto3 ``send_message`` calls.

Sending is batched (up to 10 entries per ``SendMessageBatch``, the SQS maximum, and under the 256 KiB
batch payload cap), but never two entries of one message group in one call. SQS reports failures *per
entry*: if the first of two entries for one target failed and the second went, retrying the first would
put it *behind* the second — the parent of a region would see ``durastate.finished`` before the
``shipped_with`` sent just ahead of it. So a group's next entry is sent only once the one before it was
accepted. Entries that failed on the server side are retried with bounded exponential backoff, never
dropped: if one is still undelivered after the retries, it and everything after it for the same target
(code ``HeldBack``, never sent) are named by :class:`~durastate.errors.DeliveryFailed`, as is an entry
rejected as the sender's fault (reported as permanent). Entries that did go out stay sent — a retry of
the whole call is harmless because of the deduplication id.

The consumer side (:meth:`SqsTransport.claim` / ``ack`` / ``release``) exists for the local stack, the
CLI and tests; on Lambda the event source mapping receives and deletes messages and the worker handler
(``functions/worker.py``) never calls it.

boto3 is an optional extra: it is imported lazily, only by :meth:`SqsTransport.create`; the constructor
takes any boto3-compatible SQS client (tests pass a moto-backed one).
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from durastate.engine.model import Event
from durastate.errors import DeliveryFailed, MalformedEvent
from durastate.transport.base import Claimed, QueueTransport
from durastate.transport.wire import dump_envelope, parse_envelope

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ENTRIES",
    "SqsTransport",
    "dead_letter",
    "sqs_id",
]

log = logging.getLogger(__name__)

MAX_BATCH_ENTRIES = 10
"""SQS accepts at most 10 entries per ``SendMessageBatch`` / ``ReceiveMessage`` / ``DeleteMessageBatch``."""
MAX_BATCH_BYTES = 256 * 1024
"""The conservative payload cap of one batch call (every SQS endpoint, LocalStack and moto accept it)."""

_SQS_ID = re.compile(r"^[!-~]{1,128}$")  # printable ASCII without space, 1..128: what SQS allows


def sqs_id(value: str) -> str:
    """``value`` as a legal ``MessageGroupId`` / ``MessageDeduplicationId``.

    SQS allows 1-128 printable ASCII characters. durastate ids (uuid hex, ``{parent}.{n}``, ``{id}:start``)
    already qualify and are used verbatim; anything else (spaces, non-ASCII, over 128 characters) maps to a
    stable hash, which keeps per-target ordering and deduplication intact because the mapping is a function.
    """
    if _SQS_ID.match(value):
        return value
    return "h-" + hashlib.sha256(value.encode("utf-8")).hexdigest()


def dead_letter(client: Any, dlq_url: str, body: str, *, reason: str, error: str,
                group_id: str | None, dedup_id: str, extra: dict[str, str] | None = None) -> None:
    """Move one undeliverable message to the FIFO dead-letter queue, its reason attached.

    The original body is kept verbatim (so a fixed deployment can redrive it to the source queue with SQS's
    own "start DLQ redrive"); why it was dead-lettered travels in message attributes ``durastate.reason`` and
    ``durastate.error`` (plus ``extra``, e.g. the source message id and target). The deduplication id is the
    source message id, so dead-lettering the same delivery twice stores it once.
    """
    attrs = {"durastate.reason": reason[:1024] or "unknown", "durastate.error": error or "unknown"}
    attrs.update({k: v[:1024] for k, v in (extra or {}).items() if v})
    params: dict[str, Any] = {
        "QueueUrl": dlq_url,
        "MessageBody": body if body else "<empty body>",
        "MessageAttributes": {k: {"DataType": "String", "StringValue": v} for k, v in attrs.items()},
    }
    if dlq_url.endswith(".fifo"):
        params["MessageGroupId"] = sqs_id(group_id or "durastate.dead-letter")
        params["MessageDeduplicationId"] = sqs_id(dedup_id)
    client.send_message(**params)


@dataclass(slots=True)
class _Received:
    receipt: str
    group: str
    target_id: str
    event: Event
    attempts: int


class SqsTransport(QueueTransport):
    """A :class:`~durastate.transport.QueueTransport` over one SQS FIFO queue.

    ``sleep`` and ``max_attempts`` bound the per-entry retry of sends (tests inject a no-op sleep);
    ``dlq_url`` lets the consumer side move a message whose body is not the wire format to the
    dead-letter queue instead of leaving it to block its group until the queue's redrive policy fires.
    """

    def __init__(self, client: Any, queue_url: str, *, dlq_url: str | None = None, max_attempts: int = 6,
                 base_delay: float = 0.05, max_delay: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep, wait_seconds: int = 0) -> None:
        self._sqs = client
        self.queue_url = queue_url
        self.dlq_url = dlq_url
        self._max_attempts = max(1, max_attempts)
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._sleep = sleep
        self._wait_seconds = wait_seconds
        self._lock = threading.Lock()
        self._inflight: dict[str, str] = {}  # receipt handle -> group handed out and not yet acked
        self._busy_groups: set[str] = set()
        self._buffer: deque[_Received] = deque()  # received but held back: their group is busy

    @classmethod
    def create(cls, queue_url: str, *, region: str | None = None, endpoint_url: str | None = None,
               dlq_url: str | None = None, **kwargs: Any) -> SqsTransport:
        """Build the boto3 client (lazily imported) with explicit retries and wrap it.

        ``endpoint_url=None`` lets botocore resolve the endpoint itself, which honours the standard
        ``AWS_ENDPOINT_URL_SQS`` / ``AWS_ENDPOINT_URL`` variables (LocalStack, moto server).
        """
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        client = boto3.client("sqs", region_name=region, endpoint_url=endpoint_url,
                              config=Config(retries={"mode": "standard", "max_attempts": 8}))
        return cls(client, queue_url, dlq_url=dlq_url, **kwargs)

    # -- sending -------------------------------------------------------------------------------------
    def send(self, messages: Sequence[tuple[str, Event]]) -> None:
        """Deliver every ``(target_id, event)``; raise :class:`DeliveryFailed` naming any that did not go.

        Order per target is kept even when SQS fails some entries of a batch: each ``SendMessageBatch``
        carries at most one entry per message group (the next unsent one of each group, up to ten
        groups), so an entry is only ever sent after every earlier entry of its group was accepted. A
        failed entry is retried (with backoff) before anything after it in its group is sent; if it is
        still failing after ``max_attempts``, it and every later entry of its group are reported in
        :class:`DeliveryFailed` (those with code ``HeldBack``) and none of them was sent, while other
        groups carry on. An entry rejected as the sender's fault is reported as permanent and its group
        carries on (the relay drops it: it can never be delivered). Events for one target therefore cost
        one call each; events for many targets still share calls.
        """
        items = [(t, e, dump_envelope(t, e)) for t, e in messages]
        groups: dict[str, deque[int]] = {}  # group -> its unsent entries (indexes), in send order
        for i, (t, _, _) in enumerate(items):
            groups.setdefault(sqs_id(t), deque()).append(i)
        tries = [0] * len(items)  # failed attempts per entry
        failed: dict[int, tuple[str, str]] = {}
        permanent: set[str] = set()
        backing_off: set[str] = set()  # groups whose head failed and waits for the next backoff
        while groups:
            ready = [g for g in groups if g not in backing_off]
            if not ready:  # only failed heads are left: wait, then try them again
                worst = max(tries[groups[g][0]] for g in backing_off)
                delay = min(self._max_delay, self._base_delay * 2 ** min(worst - 1, 30))
                self._sleep(delay * (0.5 + random.random() / 2))
                backing_off.clear()
                continue
            batch = _batch([(i, len(items[i][2].encode("utf-8"))) for i in (groups[g][0] for g in ready)])
            for i, outcome in self._send_batch([(i, items[i]) for i in batch]).items():
                t, e, _ = items[i]
                g = sqs_id(t)
                queue = groups[g]
                if outcome is None:  # accepted
                    queue.popleft()
                elif outcome[2]:  # the sender's fault (too large, bad id): a retry cannot succeed
                    failed[i] = outcome[:2]
                    permanent.add(e.id)
                    queue.popleft()
                else:
                    tries[i] += 1
                    if tries[i] < self._max_attempts:
                        backing_off.add(g)
                        continue
                    failed[i] = outcome[:2]
                    for j in list(queue)[1:]:  # never sent: each would overtake the failed entry
                        failed[j] = ("HeldBack", f"not sent: {e.id} before it for the same target failed")
                    queue.clear()
                if not queue:
                    del groups[g]
        if failed:
            raise DeliveryFailed(f"SQS queue {self.queue_url}",
                                 [(items[i][1].id, *failed[i]) for i in sorted(failed)], frozenset(permanent))

    def _send_batch(self, batch: list[tuple[int, tuple[str, Event, str]]]
                    ) -> dict[int, tuple[str, str, bool] | None]:
        """One ``SendMessageBatch``: per entry ``None`` (sent) or ``(code, message, sender_fault)``."""
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        entries = [{"Id": str(i), "MessageBody": body, "MessageGroupId": sqs_id(t),
                    "MessageDeduplicationId": sqs_id(e.id)} for i, (t, e, body) in batch]
        try:
            resp = self._sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        except ClientError as exc:  # the whole call failed (botocore already retried throttling)
            err = exc.response.get("Error", {})
            code, msg = str(err.get("Code", "ClientError")), str(err.get("Message", ""))
            return {i: (code, msg, False) for i, _ in batch}
        out: dict[int, tuple[str, str, bool] | None] = {i: None for i, _ in batch}
        for f in resp.get("Failed") or []:
            i = int(f["Id"])
            if i in out:
                out[i] = (str(f.get("Code", "")), str(f.get("Message", "")), bool(f.get("SenderFault")))
        return out

    # -- consuming (local stack, CLI, tests) ---------------------------------------------------------
    def claim(self, max_messages: int, lease_seconds: float = 30.0) -> list[Claimed]:
        """Receive up to ``max_messages``, at most one per target, in order per target.

        SQS FIFO may return several messages of one group in a receive; the later ones are held back in
        this object (still invisible to other consumers) and handed out once the earlier one is acked, with
        their lease renewed. Re-releasing them instead would count a receive each time and push healthy
        messages toward the queue's ``maxReceiveCount``.
        """
        lease = max(0, min(43200, math.ceil(lease_seconds)))
        out: list[Claimed] = []
        with self._lock:
            out.extend(self._from_buffer(max_messages, lease))
            if len(out) < max_messages:
                for rec in self._receive(max_messages - len(out), lease):
                    if rec.group in self._busy_groups or len(out) >= max_messages:
                        self._buffer.append(rec)
                    else:
                        out.append(self._hand_out(rec))
        return out

    def ack(self, c: Claimed) -> None:
        """Delete the message: it was applied (or deduplicated)."""
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        receipt = str(c.token)
        try:
            self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)
        except ClientError as exc:
            # The lease ran out and the message was received again elsewhere: that delivery will be
            # deduplicated by the worker, so there is nothing to undo here.
            if exc.response.get("Error", {}).get("Code") != "ReceiptHandleIsInvalid":
                raise
            log.warning("ack of an expired lease for %s (event %s): it will be redelivered and deduplicated",
                        c.target_id, c.event.id)
        finally:
            self._settle(receipt)

    def release(self, c: Claimed, delay: float = 0.0) -> None:
        """Make the message visible again now, or after ``delay`` seconds (rounded up to whole seconds, at
        most SQS's 12 hours); held-back messages of its group go back to the queue at once.

        That keeps the group's order: SQS FIFO hands out nothing of a group while an earlier message of
        it is invisible, so the held-back ones wait behind the released one however long its delay.
        """
        receipt = str(c.token)
        with self._lock:
            group = self._inflight.get(receipt)
            held = [r for r in self._buffer if r.group == group]
            for r in held:
                self._buffer.remove(r)
        self._change_visibility([receipt], max(0, min(43200, math.ceil(delay))))
        if held:
            self._change_visibility([r.receipt for r in held], 0)
        self._settle(receipt)

    def _settle(self, receipt: str) -> None:
        with self._lock:
            group = self._inflight.pop(receipt, None)
            if group is not None:
                self._busy_groups.discard(group)

    def _hand_out(self, rec: _Received) -> Claimed:
        self._inflight[rec.receipt] = rec.group
        self._busy_groups.add(rec.group)
        return Claimed(rec.receipt, rec.target_id, rec.event, rec.attempts)

    def _from_buffer(self, limit: int, lease: int) -> list[Claimed]:
        out: list[Claimed] = []
        seen: set[str] = set()
        for rec in list(self._buffer):
            if len(out) >= limit:
                break
            if rec.group in self._busy_groups or rec.group in seen:
                seen.add(rec.group)  # keep the group's order: nothing after a held-back message
                continue
            self._buffer.remove(rec)
            seen.add(rec.group)
            if self._change_visibility([rec.receipt], lease):
                out.append(self._hand_out(rec))
            else:  # its lease lapsed: SQS will redeliver it (and what follows it) in order
                self._drop_group_from_buffer(rec.group)
        return out

    def _drop_group_from_buffer(self, group: str) -> None:
        for r in [r for r in self._buffer if r.group == group]:
            self._buffer.remove(r)

    def _receive(self, n: int, lease: int) -> list[_Received]:
        resp = self._sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=max(1, min(MAX_BATCH_ENTRIES, n)),
            VisibilityTimeout=lease, WaitTimeSeconds=self._wait_seconds,
            MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"])
        out: list[_Received] = []
        for m in resp.get("Messages") or []:
            attrs = m.get("Attributes") or {}
            group = str(attrs.get("MessageGroupId") or "")
            try:
                env = parse_envelope(m.get("Body") or "")
            except MalformedEvent as exc:
                self._poison(m, group, str(exc))
                continue
            out.append(_Received(m["ReceiptHandle"], group or sqs_id(env.target_id), env.target_id,
                                 env.event, int(attrs.get("ApproximateReceiveCount", 1))))
        return out

    def _poison(self, m: dict[str, Any], group: str, reason: str) -> None:
        """A body that is not the wire format can never be applied: dead-letter it, or leave it to redrive."""
        if self.dlq_url is None:
            log.error("malformed message %s left for the queue's redrive policy: %s", m.get("MessageId"),
                      reason)
            return
        dead_letter(self._sqs, self.dlq_url, m.get("Body") or "", reason=reason, error="MalformedEvent",
                    group_id=group or None, dedup_id=str(m.get("MessageId")),
                    extra={"durastate.source_message_id": str(m.get("MessageId"))})
        self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])

    def _change_visibility(self, receipts: list[str], seconds: int) -> bool:
        """Change the visibility of ``receipts``; False if any handle was no longer valid."""
        ok = True
        for start in range(0, len(receipts), MAX_BATCH_ENTRIES):
            part = receipts[start:start + MAX_BATCH_ENTRIES]
            resp = self._sqs.change_message_visibility_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": seconds}
                         for i, r in enumerate(part)])
            ok = ok and not resp.get("Failed")
        return ok

    def close(self) -> None:
        """Give held-back messages back to the queue so another consumer can take them at once."""
        with self._lock:
            held = [r.receipt for r in self._buffer]
            self._buffer.clear()
        if held:
            self._change_visibility(held, 0)


def _batch(candidates: list[tuple[int, int]]) -> list[int]:
    """The first candidates ``(index, body bytes)`` that fit one call: ≤ 10 entries and ≤ 256 KiB of
    bodies (an oversized one goes alone, for SQS to reject)."""
    out: list[int] = []
    size = 0
    for i, n in candidates:
        if out and (len(out) >= MAX_BATCH_ENTRIES or size + n > MAX_BATCH_BYTES):
            break
        out.append(i)
        size += n
    return out
