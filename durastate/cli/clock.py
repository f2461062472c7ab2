"""The one clock of every ``durastate`` command: real time, or a manual clock that stands still.

Every command that reads the time (``serve`` and ``local`` to fire timers, ``show`` to say "in 15m",
``purge``'s cut-off, a schedule's next tick …) reads it here, never ``time.time`` itself
(``tests/cli/test_clock.py`` checks the package for strays). ``--advance DURATION`` adds to it.

``DURASTATE_CLOCK=INSTANT`` (epoch seconds, or an ISO 8601 time such as ``2026-01-05T10:00:00Z``) makes it
a manual clock: every command sees that instant, however long the machine takes between two commands, and
only ``--advance`` moves it. The documents' blocks and the command's tests run on it, so what they show
(an attempt's retry, "in 15m") never depends on how fast the machine is. A user never needs it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from durastate.cli.session import UsageError

CLOCK_ENV = "DURASTATE_CLOCK"

Clock = Callable[[], float]


def manual_instant() -> float | None:
    """The instant ``DURASTATE_CLOCK`` fixes, or ``None`` (real time)."""
    raw = os.environ.get(CLOCK_ENV, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"{CLOCK_ENV}={raw!r} is neither epoch seconds nor an ISO 8601 time "
                         "(2026-01-05T10:00:00Z); unset it to run on real time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def command_clock(advance: float = 0.0) -> Clock:
    """The command's clock, ``advance`` seconds ahead: real time, or the manual instant standing still."""
    fixed = manual_instant()
    if fixed is not None:
        instant = fixed + advance
        return lambda: instant
    if not advance:
        return time.time
    return lambda: time.time() + advance


def now() -> float:
    """The time now, on the command's clock."""
    return command_clock()()
