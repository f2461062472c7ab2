"""Durations as people write them: ``90s``, ``15m``, ``14d``, ``2d 3h``, ``1.5h`` — parsed and printed.

One module for every place a duration crosses the user boundary (``serve --advance``, ``purge
--older-than``, ``serve --retention``, schedule ``rate:`` expressions, timer delays in messages), so the
CLI accepts and prints them one way. Pure: no clock.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from durastate.errors import InvalidValue

__all__ = ["UNITS", "format_duration", "parse_duration", "positive_seconds"]

UNITS: dict[str, float] = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
"""Unit suffixes and their length in seconds (``m`` is minutes; ``ms`` milliseconds)."""

_ALIASES = {
    "weeks": "w", "week": "w", "days": "d", "day": "d", "hours": "h", "hour": "h", "hr": "h", "hrs": "h",
    "minutes": "m", "minute": "m", "min": "m", "mins": "m", "seconds": "s", "second": "s", "sec": "s",
    "secs": "s",
}
_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*")


def parse_duration(text: str | float | int, what: str = "duration") -> float:
    """Seconds in ``text``: a number (seconds) or parts such as ``90s``, ``15m``, ``14d``, ``2d 3h``.

    Raises :class:`~durastate.errors.InvalidValue` (saying what is accepted) for anything else,
    including negative or non-finite values.
    """
    if isinstance(text, bool):
        raise InvalidValue(f"{what}: {text!r} is not a duration (use e.g. 90s, 15m, 14d or 2d 3h)")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        s = str(text).strip().lower()
        if not s:
            raise InvalidValue(f"{what}: empty; use e.g. 90s, 15m, 14d or 2d 3h")
        seconds, pos = 0.0, 0
        while pos < len(s):
            m = _PART.match(s, pos)
            if m is None or m.end() == pos:
                raise InvalidValue(f"{what}: {text!r} is not a duration (use e.g. 90s, 15m, 14d or 2d 3h; "
                                   f"units: {', '.join(UNITS)})")
            unit = _ALIASES.get(m.group(2), m.group(2)) or "s"
            if unit not in UNITS:
                raise InvalidValue(f"{what}: unknown unit {m.group(2)!r} in {text!r} (units: {', '.join(UNITS)})")
            seconds += float(m.group(1)) * UNITS[unit]
            pos = m.end()
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidValue(f"{what}: {text!r} must be a finite, non-negative duration")
    return seconds


def positive_seconds(raw: float | str | None, where: str, issues: list[str]) -> float | Literal[False] | None:
    """A definition's duration setting in seconds, more than 0 (``None``: not set; ``False``: bad, the issue
    appended to ``issues`` so a definition reports every problem at once)."""
    if raw is None:
        return None
    try:
        seconds = parse_duration(raw, where)
    except InvalidValue as exc:
        issues.append(str(exc))
        return False
    if seconds <= 0:
        issues.append(f"{where}: more than 0 seconds, got {raw!r}")
        return False
    return seconds


def format_duration(seconds: float, *, exact: bool = False) -> str:
    """``1209600`` → ``14d``, ``183600`` → ``2d 3h``, ``90`` → ``1m 30s``, ``0.25`` → ``250ms``.

    At most the two largest non-zero units (a human reads "2d 3h", not "2d 3h 0m 12s"); ``exact``: every
    non-zero unit, to the second, for a value the reader adds up (how far a store's clock was moved).
    Negative values print with a leading ``-``.
    """
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds < 0:
        return "-" + format_duration(-seconds, exact=exact)
    if seconds < 1:
        ms = round(seconds * 1000)
        return f"{ms}ms" if ms else "0s"
    parts: list[str] = []
    rest = round(seconds)
    for unit in ("d", "h", "m", "s"):
        size = int(UNITS[unit])
        n, rest = divmod(rest, size)
        if n or (unit == "s" and not parts):
            parts.append(f"{n}{unit}")
        if len(parts) == 2 and not exact:
            break
    return " ".join(parts)
