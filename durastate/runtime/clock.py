"""Clocks for the runtime: ``time.time`` in production, :class:`ManualClock` in tests and demos.

Every runtime component takes ``clock: Callable[[], float]`` (epoch seconds) instead of reading the time
itself, so a test fires a 30-minute timeout by advancing a number, never by sleeping. :class:`Backoff` is
the one retry schedule of the runtime (a message retried after a transient error, ``durastate serve``
waiting out a failed round): it computes delays, and whoever waits does so on its own clock.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "Clock", "ManualClock"]

Clock = Callable[[], float]
"""Returns the current time in epoch seconds."""


class ManualClock:
    """A clock that only moves when told to. Call it to read the time; ``advance`` to move it."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (never backwards) and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock does not go backwards (advance({seconds}))")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, now: float) -> None:
        """Jump to ``now`` (not earlier than the current time)."""
        with self._lock:
            if now < self._now:
                raise ValueError(f"a clock does not go backwards ({now} < {self._now})")
            self._now = float(now)

    def __repr__(self) -> str:
        return f"ManualClock({self._now})"


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter, capped: retry ``n`` waits ``min(cap, base * 2**(n-1))``, less a
    random part of at most half of it ("equal jitter": never less than half, so retries really spread
    out, and never all at once, so many failed messages do not come back together)."""

    base: float = 0.5
    cap: float = 60.0

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap < self.base:
            raise ValueError(f"a backoff needs 0 < base <= cap, got base={self.base}, cap={self.cap}")

    def ceiling(self, attempt: int) -> float:
        """The longest wait after failed attempt number ``attempt`` (1 for the first failure)."""
        return min(self.cap, self.base * 2.0 ** min(max(attempt, 1) - 1, 64))

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """How long to wait after failed attempt ``attempt``: between half the ceiling and all of it."""
        ceiling = self.ceiling(attempt)
        return ceiling / 2 + ceiling / 2 * rand()
