"""Clocks for the runtime: ``time.time`` in production, :class:`ManualClock` in tests and demos.

Every runtime component takes ``clock: Callable[[], float]`` (epoch seconds) instead of reading the time
itself, so a test fires a 30-minute timeout by advancing a number, never by sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Clock", "ManualClock"]

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
