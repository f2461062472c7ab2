"""The run timeout: a whole execution's deadline, as Step Functions' ``TimeoutSeconds``.

A definition's ``timeout`` (or the start's own, ``start(..., timeout=)``, ``durastate start --timeout``)
arms one durable timer when the execution starts (:data:`~durastate.engine.ids.RUN_TIMEOUT_PATH`, at the
start's time by the runtime's clock plus the timeout): a timer like any ``after``, so it is swept, hopped
and fired on every store and on AWS, and survives restarts. When it fires while the execution still runs,
``on_timeout`` says what happens: ``fail`` (the default) fails the execution with the reason, ``cancel``
ends it as a ``durastate.cancel`` does (exit actions run, children are cancelled) with the reason kept.
Only executions started by a ``durastate.start`` get one (a region's child execution is part of its
parent's run); an invoked child gets its own definition's.
"""

from __future__ import annotations

import math
from typing import Any

from durastate.engine.durations import format_duration, parse_duration, positive_seconds
from durastate.errors import InvalidValue

__all__ = ["check_start_timeout", "run_timeout_of", "timed_out_reason"]


def run_timeout_of(raw: float | str | None, where: str, issues: list[str]) -> float | None:
    """The seconds of a definition's ``timeout`` (``None``: none), appending an issue if it is not one."""
    return positive_seconds(raw, where, issues) or None


def check_start_timeout(value: Any, where: str = "timeout") -> float:
    """A start's own run timeout in seconds (a positive number, or a duration such as ``1h``); raises
    :class:`InvalidValue` saying what is accepted."""
    if isinstance(value, bool):
        raise InvalidValue(f"{where}: {value!r} is not a duration (use e.g. 90s, 15m, 1h or 2d 3h)")
    seconds = parse_duration(value, where)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidValue(f"{where}: more than 0 seconds, got {value!r}")
    return seconds


def timed_out_reason(seconds: float) -> str:
    """What a timed-out execution says (its error, or its reason when cancelled)."""
    return f"timed out: the run did not end within its timeout of {format_duration(seconds)}"
