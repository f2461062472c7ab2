"""``EventBridgeSink``: untargeted emits (notifications) published to an Amazon EventBridge bus.

An event emitted without a target is not addressed to an execution: it is a fact other systems may want
("order shipped"). On AWS the relay publishes those to the stack's event bus, where users attach rules
(``source = "durastate"``, ``detail-type = <event name>``) that route them to anything EventBridge reaches.

Each entry's ``Detail`` is the event as JSON (``{"id", "name", "data"}``). ``PutEvents`` takes at most 10
entries and reports failures per entry; failed entries are retried with bounded backoff and never
dropped — what is still undelivered raises :class:`~durastate.errors.DeliveryFailed` (an entry over the size
cap as permanent: the relay drops it). The relay acks what was published, so a retry re-publishes only
the failed entries; still, EventBridge has no deduplication (a lost response can publish an event
twice): consumers dedupe on ``detail.id``. Nor does EventBridge keep order, so retrying only the failed
entries — which lets later notifications overtake them — breaks no promise: notifications have no
target, and consumers must not rely on their order.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from durastate.engine.model import Event
from durastate.errors import DeliveryFailed
from durastate.transport.base import Sink

__all__ = ["DEFAULT_SOURCE", "MAX_ENTRY_BYTES", "EventBridgeSink"]

DEFAULT_SOURCE = "durastate"
MAX_ENTRY_BYTES = 256 * 1024
"""EventBridge's cap on one entry (and on one ``PutEvents`` request)."""
_MAX_ENTRIES = 10


class EventBridgeSink(Sink):
    """A :class:`~durastate.transport.Sink` that publishes to one EventBridge bus (``"default"`` if unnamed)."""

    def __init__(self, client: Any, bus_name: str = "default", *, source: str = DEFAULT_SOURCE,
                 max_attempts: int = 6, base_delay: float = 0.05, max_delay: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._events = client
        self.bus_name = bus_name
        self.source = source
        self._max_attempts = max(1, max_attempts)
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._sleep = sleep

    @classmethod
    def create(cls, bus_name: str = "default", *, region: str | None = None,
               endpoint_url: str | None = None, **kwargs: Any) -> EventBridgeSink:
        """Build the boto3 ``events`` client lazily; ``endpoint_url=None`` honours ``AWS_ENDPOINT_URL*``."""
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        client = boto3.client("events", region_name=region, endpoint_url=endpoint_url,
                              config=Config(retries={"mode": "standard", "max_attempts": 8}))
        return cls(client, bus_name, **kwargs)

    def entry(self, event: Event) -> dict[str, Any]:
        """The ``PutEvents`` entry for one event (public so tests and rules can rely on its shape)."""
        return {"Source": self.source, "DetailType": event.name, "Detail": event.model_dump_json(),
                "EventBusName": self.bus_name}

    def publish(self, events: Sequence[Event]) -> None:
        failures: list[tuple[str, str, str]] = []
        for start in range(0, len(events), _MAX_ENTRIES):
            failures.extend(self._put(list(events[start:start + _MAX_ENTRIES])))
        if failures:
            # An entry over the size cap can never be published: permanent, so the relay drops it (with a
            # log line) instead of retrying it — and every notification queued behind it — forever.
            too_big = frozenset(key for key, code, _ in failures if code == "EntryTooLarge")
            raise DeliveryFailed(f"EventBridge bus {self.bus_name}", failures, too_big)

    def _put(self, batch: list[Event]) -> list[tuple[str, str, str]]:
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        too_big = [e for e in batch if len(json.dumps(self.entry(e)).encode()) > MAX_ENTRY_BYTES]
        failures = [(e.id, "EntryTooLarge", f"over {MAX_ENTRY_BYTES} bytes") for e in too_big]
        todo = [e for e in batch if e not in too_big]
        last: dict[str, tuple[str, str]] = {}
        for attempt in range(1, self._max_attempts + 1):
            if not todo:
                break
            try:
                resp = self._events.put_events(Entries=[self.entry(e) for e in todo])
            except ClientError as exc:
                err = exc.response.get("Error", {})
                code, msg = str(err.get("Code", "ClientError")), str(err.get("Message", ""))
                last = {e.id: (code, msg) for e in todo}
            else:
                results = resp.get("Entries") or []
                if not resp.get("FailedEntryCount"):
                    return failures
                still = []
                for e, r in zip(todo, results, strict=False):  # results are in request order
                    if r.get("ErrorCode"):
                        still.append(e)
                        last[e.id] = (str(r.get("ErrorCode")), str(r.get("ErrorMessage", "")))
                todo = still
            if todo and attempt < self._max_attempts:
                delay = min(self._max_delay, self._base_delay * 2 ** (attempt - 1))
                self._sleep(delay * (0.5 + random.random() / 2))
        return failures + [(e.id, *last.get(e.id, ("Unknown", ""))) for e in todo]
