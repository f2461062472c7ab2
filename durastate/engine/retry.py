"""Retry policies: what a ``call`` action or a guard callable does when it raises.

``retry: {max_attempts: 5, backoff: {initial: 1, factor: 2, max: 60}, on: [ConnectionError]}`` next to a
``call`` says: when the callable raises one of ``on`` (by class name, matching subclasses; every
exception when ``on`` is left out), roll the whole step back — the execution stays where it was, nothing
is emitted — and try the same event again after the backoff, up to ``max_attempts`` tries in all. The
wait is a durable timer like any other (the sweeper fires it, so it survives restarts and works on
AWS), and events that arrive meanwhile are held and applied, in order, once the retry is through.
When the attempts run out the failure goes to the ``on_error`` of the nearest active state that has
one (``$event.error`` says what failed), else the execution fails as without a policy.

This module is pure: the policy and its parsing. The interpreter raises :class:`RetryableFailure`; the
worker arms the timer and re-applies the event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RETRY_KEYS", "RetryPolicy", "RetryableFailure", "parse_retry"]

RETRY_KEYS = ("max_attempts", "backoff", "on")
_BACKOFF_KEYS = ("initial", "factor", "max")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    """Tries in all, the first included (1 = no retry)."""
    initial: float = 1.0
    """Seconds before the second try."""
    factor: float = 2.0
    """Each later wait is the previous one times this."""
    max: float = 300.0
    """No wait is longer than this."""
    on: tuple[str, ...] = ()
    """Exception class names that are retried (subclasses too); empty: every exception."""

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        return float(min(self.max, self.initial * self.factor ** max(0, attempt - 1)))

    def covers(self, error: str) -> bool:
        """Whether a child's reported ``error`` (``"ValueError: …"``) is one to retry: its type is in
        ``on`` (by the name it reports), or ``on`` is empty."""
        return not self.on or error.split(":", 1)[0].strip() in self.on

    def matches(self, exc: BaseException) -> bool:
        if not self.on:
            return True
        names = {cls.__name__ for cls in type(exc).__mro__} | {
            f"{cls.__module__}.{cls.__qualname__}" for cls in type(exc).__mro__}
        return any(name in names for name in self.on)


class RetryableFailure(Exception):
    """Raised inside a step by a callable with a retry policy whose exception the policy covers."""

    def __init__(self, policy: RetryPolicy, error: BaseException, site: str) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.policy = policy
        self.error = error
        self.site = site


def parse_retry(spec: Any, where: str, issues: list[str]) -> RetryPolicy | None:
    """The policy of a ``retry:`` mapping, or ``None`` with every problem appended to ``issues``."""
    if not isinstance(spec, dict):
        issues.append(f"{where}: retry is a mapping like {{max_attempts: 3, backoff: {{initial: 1, factor: 2, "
                      "max: 60}, on: [ConnectionError]}")
        return None
    ok = True
    for key in spec:
        if key not in RETRY_KEYS:
            issues.append(f"{where}.{key}: unknown key; allowed: {', '.join(RETRY_KEYS)}")
            ok = False
    attempts = spec.get("max_attempts", 3)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000:
        issues.append(f"{where}.max_attempts: a whole number from 1 to 1000, got {attempts!r}")
        ok = False
    backoff = spec.get("backoff", {})
    numbers: dict[str, float] = {}
    if not isinstance(backoff, dict):
        issues.append(f"{where}.backoff: a mapping of {', '.join(_BACKOFF_KEYS)}")
        ok = False
        backoff = {}
    for key, value in backoff.items():
        if key not in _BACKOFF_KEYS:
            issues.append(f"{where}.backoff.{key}: unknown key; allowed: {', '.join(_BACKOFF_KEYS)}")
            ok = False
        elif isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 10**7:
            issues.append(f"{where}.backoff.{key}: a number of seconds from 0, got {value!r}")
            ok = False
        else:
            numbers[key] = float(value)
    if numbers.get("factor", 2.0) < 1:
        issues.append(f"{where}.backoff.factor: 1 or more (each wait at least as long as the one before)")
        ok = False
    on = spec.get("on", [])
    if isinstance(on, str):
        on = [on]
    if not isinstance(on, list) or not all(isinstance(n, str) and n for n in on):
        issues.append(f"{where}.on: a list of exception class names, e.g. [ConnectionError, TimeoutError]")
        ok = False
    if not ok:
        return None
    return RetryPolicy(max_attempts=attempts, initial=numbers.get("initial", 1.0),
                       factor=numbers.get("factor", 2.0), max=numbers.get("max", 300.0), on=tuple(on))
