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

Dead letters: a message that can never apply goes to the FIFO dead-letter queue with why in its message
attributes (:func:`dead_letter`); SQS's redrive policy moves there, without a reason, what kept failing.
:class:`SqsDeadLetters` reads that queue as a :class:`~durastate.transport.DeadLetterBox` and replays
from it (receive, send to the event queue, then delete: see its docstring).

The consumer side (:meth:`SqsTransport.claim` / ``ack`` / ``release``) exists for the local stack, the
CLI and tests; on Lambda the event source mapping receives and deletes messages and the worker handler
(``functions/worker.py``) never calls it.

boto3 is an optional extra: it is imported lazily, only by :meth:`SqsTransport.create`; the constructor
takes any boto3-compatible SQS client (tests pass a moto-backed one).
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import logging
import math
import random
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from durastate.engine.ids import is_derived_event_id
from durastate.engine.model import Event
from durastate.errors import DeliveryFailed, DurastateError, InvalidCursor, MalformedEvent
from durastate.transport.base import (
    Claimed,
    DeadLetter,
    DeadLetterPage,
    QueueTransport,
    UnknownDeadLetter,
    check_replayable,
    dead_letter_id,
    unreadable_event,
)
from durastate.transport.tracecontext import MESSAGE_ATTRIBUTE, from_message_attributes
from durastate.transport.wire import dump_envelope, parse_envelope, with_traceparent

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ENTRIES",
    "REDRIVE_POLICY",
    "REPLAY_OF",
    "SqsDeadLetters",
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


def _derived_dedup_id(key: bytes, event_id: str) -> str:
    """The ``MessageDeduplicationId`` of an event whose id the runtime derives: keyed, so unguessable."""
    return "d-" + hmac.digest(key, event_id.encode("utf-8"), "sha256").hex()


def sqs_id(value: str) -> str:
    """``value`` as a legal ``MessageGroupId`` / ``MessageDeduplicationId``.

    SQS allows 1-128 printable ASCII characters. durastate ids (uuid hex, ``{parent}.{n}``, ``{id}:start``)
    already qualify and are used verbatim; anything else (spaces, non-ASCII, over 128 characters) maps to a
    stable hash, which keeps per-target ordering and deduplication intact because the mapping is a function.
    """
    if _SQS_ID.match(value):
        return value
    return "h-" + hashlib.sha256(value.encode("utf-8")).hexdigest()


REDRIVE_POLICY = "RedrivePolicy"
"""The ``error`` of a dead letter SQS's redrive policy moved (it carries no reason of durastate's)."""
REPLAY_OF = "durastate.replay_of"
"""Message attribute of an event replayed from the dead-letter queue: the dead-letter message's id."""


def dead_letter(client: Any, dlq_url: str, body: str, *, reason: str, error: str,
                group_id: str | None, dedup_id: str, extra: dict[str, str] | None = None,
                attempts: int | None = None, at: float | None = None) -> None:
    """Move one undeliverable message to the FIFO dead-letter queue, its reason attached.

    The original body is kept verbatim (so it can be replayed as it was); why it was dead-lettered travels
    in message attributes — ``durastate.reason``, ``durastate.error``, ``durastate.at`` (epoch seconds,
    default now) and ``durastate.attempts`` (deliveries so far), plus ``extra``, e.g. the source message
    id and target — which :class:`SqsDeadLetters` reads back. The deduplication id is the source message
    id, so dead-lettering the same delivery twice stores it once.
    """
    attrs = {"durastate.reason": reason[:1024] or "unknown", "durastate.error": error or "unknown",
             "durastate.at": repr(time.time() if at is None else at)}
    if attempts:
        attrs["durastate.attempts"] = str(attempts)
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
        self.dead_letter_box = SqsDeadLetters(client, dlq_url, queue_url) if dlq_url else None
        self._dedup_key = secrets.token_bytes(16)
        """Keys the deduplication ids of the runtime's own events (:meth:`_dedup_id`)."""
        """The dead-letter queue as a box (``None`` without ``dlq_url``)."""
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

    def _dedup_id(self, event_id: str) -> str:
        """``MessageDeduplicationId = event id`` — except for an id the runtime derives (``~…``: a timeout,
        a finished notice, a redrive): anyone who can send to the queue could send that id first, and SQS
        would then drop the runtime's true message as a duplicate for five minutes, whatever the worker
        does. Those get a deduplication id keyed by this transport's own random key instead: a re-send by
        the same transport (the relay retrying) still dedupes in SQS, and one from another process (a
        crashed relay's successor) is a duplicate the worker's dedupe marks catch."""
        if is_derived_event_id(event_id):
            return _derived_dedup_id(self._dedup_key, event_id)
        return sqs_id(event_id)

    def _send_batch(self, batch: list[tuple[int, tuple[str, Event, str]]]
                    ) -> dict[int, tuple[str, str, bool] | None]:
        """One ``SendMessageBatch``: per entry ``None`` (sent) or ``(code, message, sender_fault)``."""
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        entries: list[dict[str, Any]] = [{"Id": str(i), "MessageBody": body, "MessageGroupId": sqs_id(t),
                                          "MessageDeduplicationId": self._dedup_id(e.id)} for i, (t, e, body) in batch]
        for entry, (_, (_, e, _)) in zip(entries, batch, strict=True):
            if e.traceparent is not None:  # also where OpenTelemetry's SQS instrumentations look for it
                entry["MessageAttributes"] = {MESSAGE_ATTRIBUTE: {"DataType": "String", "StringValue": e.traceparent}}
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
                env = with_traceparent(parse_envelope(m.get("Body") or ""),
                                       from_message_attributes(m.get("MessageAttributes"), attrs))
            except MalformedEvent as exc:
                self._poison(m, group, str(exc), int(attrs.get("ApproximateReceiveCount", 1)))
                continue
            out.append(_Received(m["ReceiptHandle"], group or sqs_id(env.target_id), env.target_id,
                                 env.event, int(attrs.get("ApproximateReceiveCount", 1))))
        return out

    def _poison(self, m: dict[str, Any], group: str, reason: str, attempts: int) -> None:
        """A body that is not the wire format can never be applied: dead-letter it, or leave it to redrive."""
        if self.dlq_url is None:
            log.error("malformed message %s left for the queue's redrive policy: %s", m.get("MessageId"),
                      reason)
            return
        dead_letter(self._sqs, self.dlq_url, m.get("Body") or "", reason=reason, error="MalformedEvent",
                    group_id=group or None, dedup_id=str(m.get("MessageId")), attempts=attempts,
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


@dataclass(slots=True)
class _Held:
    """A dead-letter message received (in flight) while a box operation runs."""

    letter: DeadLetter
    receipt: str
    message_id: str
    group: str
    body: str
    order: tuple[float, str, int, str] = (0.0, "", 0, "")
    """Where it lists: dead-lettered at, then its message group and place in it (a group's FIFO order,
    for letters of the same instant), then the id."""


class SqsDeadLetters:
    """The FIFO dead-letter queue ``dlq_url`` of the event queue ``queue_url`` as a
    :class:`~durastate.transport.DeadLetterBox`.

    **Reading.** A queue cannot be peeked at: every operation receives the visible messages (holding
    them for ``lease_seconds``), works on them, and makes what it kept visible again at once. A message
    durastate dead-lettered carries its reason, error, time and attempts in message attributes; one that
    SQS's redrive policy moved carries none and is shown as "moved by the queue's redrive policy after N
    receives", N from its ``ApproximateReceiveCount`` (which counts receives on every queue: the one that
    reads it here is taken off, and N is capped at the queue's ``maxReceiveCount`` when ``queue_url``'s
    redrive policy can be read, since earlier readings of the DLQ count too). A FIFO queue hands out
    nothing of a message group while an earlier message of it is in flight, and at most ten per receive,
    so an execution with more than ten dead letters shows its first ones; replaying or dropping them
    brings up the next. At most ``max_scan`` messages are read per operation.

    **Replay** moves each chosen message back *in order per message group*: send it to the event queue
    (same body, so the same event id; ``MessageGroupId`` = target; a deduplication id derived from the
    dead-letter message, so a replay repeated after a crash within SQS's five minutes is dropped by SQS
    and after them by the worker's dedupe marks), and only once that send succeeded, delete it from the
    dead-letter queue. A crash between the two leaves the letter in the dead-letter queue *and* the event
    on the event queue: replaying again sends it again, which applies nothing twice. A failed send stops
    its group (later messages of the group stay dead letters, in order) and is reported as
    :class:`~durastate.errors.DeliveryFailed` once the other groups are done. (SQS's own message move
    tasks were not used: they move a whole queue, not chosen letters, to the queue each message came
    from, and moto does not emulate them.)

    ``add`` puts a letter on the dead-letter queue with its attributes (what a runtime consuming the
    event queue with :class:`SqsTransport` does). ``queue_url`` may be left out: the queue whose redrive
    policy names ``dlq_url`` is looked up when a replay needs it.
    """

    def __init__(self, client: Any, dlq_url: str, queue_url: str | None = None, *, lease_seconds: int = 300,
                 max_scan: int = 1000) -> None:
        self._sqs = client
        self.dlq_url = dlq_url
        self._queue_url = queue_url
        self.lease_seconds = lease_seconds
        self.max_scan = max_scan
        self._max_receives: int | None = None
        self._looked_up = False

    # -- the event queue -------------------------------------------------------------------------------
    @property
    def queue_url(self) -> str:
        """The event queue replays go to: given, or the one whose redrive policy names this DLQ."""
        if self._queue_url is None:
            sources = self._sqs.list_dead_letter_source_queues(QueueUrl=self.dlq_url).get("queueUrls") or []
            if len(sources) != 1:
                found = f"{len(sources)} queues ({', '.join(sources)})" if sources else "no queue"
                raise DurastateError(f"{found} send their dead letters to {self.dlq_url}: name the event queue "
                                     "to replay to (--queue-url / DURASTATE_QUEUE_URL)")
            self._queue_url = str(sources[0])
        return self._queue_url

    def _max_receive_count(self) -> int | None:
        if not self._looked_up:
            self._looked_up = True
            try:
                url = self.queue_url
                got = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
                policy = json.loads((got.get("Attributes") or {}).get("RedrivePolicy") or "{}")
                self._max_receives = int(policy["maxReceiveCount"])
            except Exception:  # only a nicer number in a listing: never a reason to fail one
                log.debug("no redrive policy found for %s", self.dlq_url, exc_info=True)
        return self._max_receives

    # -- DeadLetterBox ---------------------------------------------------------------------------------
    def add(self, letter: DeadLetter) -> None:
        body = dump_envelope(letter.target_id, letter.event) if letter.body is None else letter.body
        extra = {"durastate.target_id": letter.target_id, "durastate.event_id": letter.event.id,
                 "durastate.event_name": letter.event.name}
        # Kept again after a replay within five minutes is a new message: its dedup id says when.
        dead_letter(self._sqs, self.dlq_url, body, reason=letter.reason, error=letter.error,
                    group_id=letter.target_id or None, dedup_id=f"{letter.id}.{letter.at!r}", extra=extra,
                    attempts=letter.attempts, at=letter.at)

    def list(self, limit: int = 100, cursor: str | None = None) -> DeadLetterPage:
        after = _letter_cursor(cursor)
        held = sorted(self._snapshot().values(), key=lambda h: h.order)
        rest = [h for h in held if after is None or h.order > after]
        n = max(1, limit)
        page = rest[:n]
        more = len(rest) > n
        last = page[-1].order if page else None
        cursor = f"{last[0]!r}/{last[2]}/{last[3]}/{last[1]}" if more and last is not None else None
        return DeadLetterPage([h.letter for h in page], cursor)

    def get(self, letter_id: str) -> DeadLetter | None:
        h = self._snapshot().get(letter_id)
        return h.letter if h is not None else None

    def drop(self, letter_id: str) -> DeadLetter:
        held = self._scan()
        try:
            mine = [h for h in held if h.letter.id == letter_id]
            if not mine:
                raise UnknownDeadLetter(letter_id)
            for h in mine:
                self._delete(h)
                held.remove(h)
            return mine[0].letter
        finally:
            self._release(held)

    def replay(self, ids: Sequence[str] | None = None) -> builtins.list[DeadLetter]:
        queue_url = self.queue_url  # an error about it before anything moved
        wanted = None if ids is None else set(ids)
        kept: builtins.list[_Held] = []  # received and not replayed: visible again at the end
        done: builtins.list[_Held] = []
        sent: set[str] = set()
        stopped: dict[str, tuple[str, str, str]] = {}  # group -> the failure that stopped it
        pending = self._scan()
        try:
            if ids is not None:
                first: dict[str, DeadLetter] = {}
                for h in pending:
                    first.setdefault(h.letter.id, h.letter)
                check_replayable(first, ids)  # unknown or without an event: raises, nothing moved
            while pending:
                moved = False
                for h in pending:  # receive order: per message group, the order of the group
                    chosen = h.letter.replayable and (wanted is None or h.letter.id in wanted)
                    if not chosen or h.group in stopped:
                        kept.append(h)
                        continue
                    if h.letter.id not in sent:  # a second copy of a letter (a crash mid-replay) is only deleted
                        failure = self._send_back(queue_url, h)
                        if failure is not None:
                            stopped[h.group] = failure
                            kept.append(h)
                            continue
                        sent.add(h.letter.id)
                        done.append(h)
                    self._delete(h)  # only now: its event is on the event queue
                    moved = True
                pending = self._scan() if moved else []  # a group's next messages, now reachable
        finally:
            self._release(kept + pending)
        if stopped:
            raise DeliveryFailed(f"SQS queue {queue_url}", [(f, code, msg) for f, code, msg in stopped.values()])
        return [h.letter for h in done]  # in the order sent: per group, the group's order

    # -- plumbing --------------------------------------------------------------------------------------
    def _snapshot(self) -> dict[str, _Held]:
        """Every letter once (the first copy of one held twice), its messages visible again at once."""
        held = self._scan()
        self._release(held)
        out: dict[str, _Held] = {}
        for h in held:
            out.setdefault(h.letter.id, h)
        return out

    def _scan(self) -> builtins.list[_Held]:
        """Receive every visible message (up to ``max_scan``), in receive order; the caller releases them."""
        out: builtins.list[_Held] = []
        while len(out) < self.max_scan:
            resp = self._sqs.receive_message(
                QueueUrl=self.dlq_url, MaxNumberOfMessages=min(MAX_BATCH_ENTRIES, self.max_scan - len(out)),
                VisibilityTimeout=self.lease_seconds, WaitTimeSeconds=0,
                MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"])
            got = resp.get("Messages") or []
            if not got:
                break
            out.extend(self._held(m) for m in got)
        places: dict[str, int] = {}
        for h in out:  # receive order is each group's FIFO order
            place = places[h.group] = places.get(h.group, -1) + 1
            h.order = (h.letter.at, h.group, place, h.letter.id)
        return out

    def _held(self, m: dict[str, Any]) -> _Held:
        attrs = m.get("Attributes") or {}
        values = {k: str(v.get("StringValue") or "") for k, v in (m.get("MessageAttributes") or {}).items()}
        body = str(m.get("Body") or "")
        message_id = str(m.get("MessageId"))
        try:
            env = parse_envelope(body)
            target_id, event = env.target_id, env.event
            letter_id = dead_letter_id(target_id, event.id)
        except MalformedEvent:
            source = values.get("durastate.source_message_id") or message_id
            target_id, event = values.get("durastate.target_id", ""), unreadable_event(source)
            letter_id = dead_letter_id("", "message:" + source)
        sent_at = float(attrs.get("SentTimestamp", 0)) / 1000.0
        at = _float(values.get("durastate.at"), sent_at)
        if "durastate.reason" in values:
            reason, error = values["durastate.reason"], values.get("durastate.error") or "unknown"
            attempts = int(_float(values.get("durastate.attempts"), 1))
        else:
            # This receive counts too; so do earlier readings of the DLQ, which the policy's cap removes.
            attempts = max(1, int(attrs.get("ApproximateReceiveCount", 1)) - 1)
            cap = self._max_receive_count()
            if cap is not None:
                attempts = min(attempts, cap)
            reason = (f"moved by the queue's redrive policy after {attempts} receives (a worker kept failing "
                      "on it without deciding it could never apply: see the worker's logs)")
            error = REDRIVE_POLICY
        unreadable = not event.name
        letter = DeadLetter(target_id, event, reason, error, attempts, at, letter_id, body if unreadable else None)
        return _Held(letter, str(m["ReceiptHandle"]), message_id, str(attrs.get("MessageGroupId") or ""), body)

    def _send_back(self, queue_url: str, h: _Held) -> tuple[str, str, str] | None:
        """Put a letter's message back on the event queue; ``None``, or what failed (event id, code, text)."""
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        event = h.letter.event
        params: dict[str, Any] = {
            "QueueUrl": queue_url, "MessageBody": h.body,
            "MessageAttributes": {REPLAY_OF: {"DataType": "String", "StringValue": h.message_id}}}
        if queue_url.endswith(".fifo"):
            params["MessageGroupId"] = sqs_id(h.letter.target_id)
            params["MessageDeduplicationId"] = sqs_id(f"{event.id}.replay.{h.message_id}")
        try:
            self._sqs.send_message(**params)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            return event.id, str(err.get("Code", "ClientError")), str(err.get("Message", ""))
        return None

    def _delete(self, h: _Held) -> None:
        self._sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=h.receipt)

    def _release(self, held: Sequence[_Held]) -> None:
        for start in range(0, len(held), MAX_BATCH_ENTRIES):
            part = held[start:start + MAX_BATCH_ENTRIES]
            try:
                self._sqs.change_message_visibility_batch(QueueUrl=self.dlq_url, Entries=[
                    {"Id": str(i), "ReceiptHandle": h.receipt, "VisibilityTimeout": 0}
                    for i, h in enumerate(part)])
            except Exception:  # they come back by themselves once the lease ends
                log.warning("could not make %d dead letter(s) visible again; they are after %ss", len(part),
                            self.lease_seconds, exc_info=True)


def _letter_cursor(cursor: str | None) -> tuple[float, str, int, str] | None:
    """``at/place/id/group`` (the group last: it may hold a slash) as the order tuple of a letter."""
    if cursor is None:
        return None
    parts = cursor.split("/", 3)
    try:
        if len(parts) != 4 or not parts[2]:
            raise ValueError(cursor)
        return (float(parts[0]), parts[3], int(parts[1]), parts[2])
    except ValueError:
        raise InvalidCursor(cursor) from None


def _float(raw: str | None, default: float) -> float:
    try:
        return float(raw) if raw else default
    except ValueError:
        return default


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
