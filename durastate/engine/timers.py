"""What an ``after`` timer's ``seconds`` (a delay) or ``at`` (a deadline) means, as written or as computed.

A timer's value may be a constant of the document (checked when the definition is loaded, so a typo is a
validation issue) or an expression evaluated when the state is entered (``$context.backoff``,
``$event.deadline``, ``{mul: [$context.backoff, 2]}``). Both go through the same two functions here, so a
constant and a computed value are accepted and refused by the same rules:

- a delay is a finite number of seconds ``>= 0`` or a duration string (``90s``, ``15m``, ``2d 3h``:
  :func:`~durastate.engine.durations.parse_duration`);
- a deadline is an ISO 8601 timestamp (``2026-01-31T17:00:00Z``, ``…+01:00``; one without an offset is
  UTC) or epoch seconds (a finite number ``>= 0``).

Either way the resulting ``fire_at`` must be before year 10000 (what every store keeps and a timestamp can
print). A value that breaks a rule raises :class:`BadTimerValue`, whose message says what was wrong and what
is accepted: at load it becomes a validation issue, at run time the step fails with it (the execution is
``failed``, and can be redriven once the value is fixed). Pure: no clock; the time comes in as ``now``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from durastate.engine.durations import format_duration, parse_duration
from durastate.errors import InvalidValue

__all__ = [
    "DEADLINE_FORMS",
    "DELAY_FORMS",
    "MAX_FIRE_AT",
    "BadTimerValue",
    "deadline_of",
    "delay_of",
    "show_value",
    "timer_label",
]

MAX_FIRE_AT = 253402300799.0
"""9999-12-31T23:59:59Z: no timer fires later (a timestamp past it cannot be printed or parsed back)."""

DELAY_FORMS = "a number of seconds >= 0 or a duration such as '90s', '15m' or '2d 3h'"
DEADLINE_FORMS = (
    "an ISO 8601 time such as '2026-01-31T17:00:00Z' (without an offset it is UTC) or epoch seconds"
)


class BadTimerValue(ValueError):
    """A delay or deadline that is not one (the message says why and what is accepted)."""


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a JSON number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def delay_of(value: Any) -> float:
    """The seconds of a delay: a number of seconds or a duration string; else :class:`BadTimerValue`."""
    if value is None:
        raise BadTimerValue(f"null (missing?) is not a delay; a delay is {DELAY_FORMS}")
    n = _number(value)
    if n is None and not isinstance(value, str):
        raise BadTimerValue(f"{show_value(value)} is a {_kind(value)}, not a delay; a delay is {DELAY_FORMS}")
    if n is not None:
        if not math.isfinite(n) or n < 0:
            raise BadTimerValue(f"{show_value(value)} is not a delay; a delay is {DELAY_FORMS}")
        if n > MAX_FIRE_AT:
            raise BadTimerValue(f"{show_value(value)} seconds is too long: a timer fires before the year 10000")
        return n
    try:
        seconds = parse_duration(value)
    except InvalidValue:
        raise BadTimerValue(f"{show_value(value)} is not a delay; a delay is {DELAY_FORMS}") from None
    if seconds > MAX_FIRE_AT:
        raise BadTimerValue(f"{show_value(value)} is too long: a timer fires before the year 10000")
    return seconds


def deadline_of(value: Any) -> float:
    """The epoch seconds of a deadline: ISO 8601 text or epoch seconds; else :class:`BadTimerValue`."""
    if value is None:
        raise BadTimerValue(f"null (missing?) is not a time; a deadline is {DEADLINE_FORMS}")
    n = _number(value)
    if n is not None:
        if not math.isfinite(n) or n < 0:
            raise BadTimerValue(f"{show_value(value)} is not a time; a deadline is {DEADLINE_FORMS}")
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise BadTimerValue(f"{show_value(value)} is not a time; a deadline is {DEADLINE_FORMS}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        n = when.timestamp()
    else:
        raise BadTimerValue(f"{show_value(value)} is a {_kind(value)}, not a time; a deadline is {DEADLINE_FORMS}")
    if n > MAX_FIRE_AT:
        raise BadTimerValue(f"{show_value(value)} is after the year 9999: a timer fires before the year 10000")
    return n


def timer_label(seconds: Any, at: Any) -> str:
    """How a diagram or a listing names a timer: ``after 2d 3h``, ``after $context.backoff``,
    ``at 2026-01-31T17:00:00Z``, ``at $context.deadline``."""
    if at is not None:
        return f"at {at}" if isinstance(at, str) else f"at {show_value(at)}"
    try:
        return f"after {format_duration(delay_of(seconds))}"
    except BadTimerValue:
        return f"after {seconds}" if isinstance(seconds, str) else f"after {show_value(seconds)}"


def _kind(value: Any) -> str:
    names = {bool: "boolean", dict: "mapping", list: "list", str: "string"}
    return names.get(type(value), type(value).__name__)


def show_value(value: Any) -> str:
    """``repr(value)``, clipped to 60 characters (a value quoted in a message)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
