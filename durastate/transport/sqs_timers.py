"""The timer hop: a timeout sent ahead of time to a standard SQS queue, delayed until it is due.

Why this exists: the sweeper runs once a minute, so a timer fired by it alone is up to a minute late.
A standard SQS queue can hold a message back for up to 15 minutes (per-message ``DelaySeconds``; FIFO
queues have no per-message delay), so a timer due within that horizon is sent to the *timers queue*
as soon as it is known, as the very ``durastate.timeout`` event the sweeper would send (deterministic id,
``data = {path, fire_at}``) in the wire format. When the delay ends, the timers function
(:meth:`durastate.runtime.aws.AwsRuntime.fire_timers`) applies it as the worker would. Sending a hop
twice costs one more message and changes nothing (the worker's dedupe marks and stale-timer check).

``DelaySeconds`` is whole seconds: a hop is delayed by the whole seconds until it is due and the timers
function waits out the fraction, so a timer never fires early and is late only by the delivery.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from durastate.engine.model import TIMEOUT, Event
from durastate.transport.sqs import MAX_BATCH_ENTRIES
from durastate.transport.wire import Envelope, dump_envelope

__all__ = ["HOP_HORIZON", "SqsTimerQueue", "hop_delay", "hop_fire_at"]

log = logging.getLogger("durastate.transport.sqs_timers")

HOP_HORIZON = 900.0
"""The longest delay SQS gives a message (15 minutes): timers due within it can take the hop."""


def hop_delay(fire_at: float, now: float) -> int:
    """The ``DelaySeconds`` of a hop for a timer due at ``fire_at``: the whole seconds left, 0..900."""
    return int(min(HOP_HORIZON, max(0.0, math.floor(fire_at - now))))


def hop_fire_at(env: Envelope) -> float | None:
    """When a hop is due (its timeout's ``fire_at``), or ``None`` for anything that is not a timeout."""
    if env.event.name != TIMEOUT:
        return None
    value = env.event.data.get("fire_at")
    return float(value) if isinstance(value, int | float) else None


class SqsTimerQueue:
    """Sends timeouts to the standard timers queue, each delayed until (the whole second before) it is due."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self.queue_url = queue_url
        self.requests = 0
        """``SendMessageBatch`` calls made (a metric: the hop's cost is counted in requests)."""

    def send(self, timeouts: Sequence[tuple[str, Event]], now: float) -> int:
        """Send each ``(execution id, timeout event)`` with its delay, ten per request; return how many
        SQS accepted. Failures are logged, not raised: a hop that did not go is fired by the sweeper."""
        sent = 0
        for i in range(0, len(timeouts), MAX_BATCH_ENTRIES):
            chunk = timeouts[i : i + MAX_BATCH_ENTRIES]
            entries = [{"Id": str(n), "MessageBody": dump_envelope(target, event),
                        "DelaySeconds": hop_delay(float(event.data["fire_at"]), now)}
                       for n, (target, event) in enumerate(chunk)]
            try:
                self.requests += 1
                got = self._sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except Exception:
                log.warning("timer hop of %d timeout(s) not sent; the sweeper fires them when due", len(chunk),
                            exc_info=True)
                continue
            failed = got.get("Failed") or []
            for f in failed:
                log.warning("timer hop %s refused (%s: %s); the sweeper fires it when due",
                            chunk[int(f["Id"])][1].id, f.get("Code"), f.get("Message"))
            sent += len(chunk) - len(failed)
        return sent
