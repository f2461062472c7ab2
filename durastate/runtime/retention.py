"""Retention: purge executions that ended long enough ago, a bounded batch at a time.

The store does the work (``purge``, see :mod:`durastate.store.retention`): it turns ended executions
older than the cutoff into tombstones that still recognise their events, and deletes expired tombstones.
This piece decides *when*: ``durastate serve --retention 30d`` and the sweeper Lambda (the CDK construct's
``retention`` property) call :meth:`Retention.run_if_due` every round / invocation; it runs at most
``max_batches`` batches of ``batch`` executions each time, so a large backlog drains over several rounds
without ever holding a round (or a Lambda invocation) for long. Between runs it waits ``interval``
seconds of the runtime's clock — unless the last run left work behind, then the next round goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from durastate.runtime.clock import Clock
from durastate.store.base import ExecutionStore
from durastate.store.retention import DEFAULT_PURGE_LIMIT, DEFAULT_TOMBSTONE_TTL, PURGEABLE, ended_cutoff

__all__ = ["Retention", "RetentionRun"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RetentionRun:
    """What one run did, over its batches."""

    purged: int = 0
    expired: int = 0
    batches: int = 0
    more: bool = False
    """The last batch was full: there is more to purge now."""


class Retention:
    """Purges ``store``'s executions that ended more than ``older_than`` seconds ago (see the module).

    ``clock`` is the time the cutoff is measured on. Left out, it is the clock of the runtime the
    retention is given to (``LocalRuntime(..., clock=ManualClock(...), retention=Retention(store, DAY))``
    purges by the manual clock: a runtime adopts its own clock into a retention built without one), and
    wall time for a retention used on its own."""

    def __init__(self, store: ExecutionStore, older_than: float, clock: Clock | None = None, *,
                 statuses: Sequence[str] = PURGEABLE, definition_id: str | None = None,
                 batch: int = DEFAULT_PURGE_LIMIT, max_batches: int = 4,
                 tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL, interval: float = 60.0) -> None:
        if older_than < 0:
            raise ValueError(f"retention must not be negative, got {older_than}")
        self.store = store
        self.older_than = older_than
        self._clock = clock
        self.statuses = tuple(statuses)
        self.definition_id = definition_id
        self.batch = batch
        self.max_batches = max(1, max_batches)
        self.tombstone_ttl = tombstone_ttl
        self.interval = interval
        self._next = float("-inf")

    @property
    def clock(self) -> Clock:
        """The clock the cutoff and the interval are measured on (see the class)."""
        return self._clock if self._clock is not None else time.time

    def adopt_clock(self, clock: Clock) -> None:
        """Measure on ``clock`` unless this retention was given a clock of its own (what a runtime does
        with the retention it is given, so that both run on one time)."""
        if self._clock is None:
            self._clock = clock

    def run_once(self, max_batches: int | None = None) -> RetentionRun:
        """Up to ``max_batches`` purge batches (the configured number by default), stopping early once
        a batch is not full."""
        run = RetentionRun()
        for _ in range(self.max_batches if max_batches is None else max(1, max_batches)):
            now = self.clock()
            result = self.store.purge(ended_cutoff(now, self.older_than), self.statuses, self.definition_id,
                                      self.batch, now, self.tombstone_ttl)
            run.batches += 1
            run.purged += result.purged
            run.expired += result.expired
            run.more = result.more
            if not result.more:
                break
        if run.purged or run.expired:
            log.info("retention: purged %d execution(s), deleted %d expired tombstone(s)", run.purged, run.expired)
        return run

    def run_if_due(self) -> RetentionRun:
        """:meth:`run_once` if ``interval`` has passed since the last run (or it left work behind)."""
        now = self.clock()
        if now < self._next:
            return RetentionRun()
        run = self.run_once()
        self._next = now if run.more else now + self.interval
        return run
