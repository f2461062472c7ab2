"""The one clock of every ``durastate`` command: real time, or a manual clock that stands still.

Every command that reads the time (``serve`` and ``local`` to fire timers, ``show`` to say "in 15m",
``purge``'s cut-off, a schedule's next tick …) reads it here, never ``time.time`` itself
(``tests/cli/test_clock.py`` checks the package for strays). ``--advance DURATION`` adds to it.

``DURASTATE_CLOCK=INSTANT`` (epoch seconds, or an ISO 8601 time such as ``2026-01-05T10:00:00Z``) makes it
a manual clock: every command sees that instant, however long the machine takes between two commands, and
only ``--advance`` moves it. The documents' blocks and the command's tests run on it, so what they show
(an attempt's retry, "in 15m") never depends on how fast the machine is. A user never needs it.

**The store keeps the clock where ``--advance`` left it.** ``serve --advance 3d`` commits what it applies
at times up to three days ahead (creation times, ends, the timers it arms), so every later command on that
store must see those three days too — or ``show`` would say a run ended "in 2d" and ``list`` would show
creation times in the future. The store holds the offset in one system record, ``~clock~offset``
(:data:`~durastate.engine.ids.CLOCK_RECORD_ID`, in the executions table of every backend, hidden from
listings); each command adds it to real time (or to ``DURASTATE_CLOCK``) the first time it reads the clock,
and each ``--advance`` moves it further: time on a store never goes backwards. A store that was never
advanced has no record and runs on real time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from durastate.cli.session import UsageError
from durastate.engine.ids import CLOCK_RECORD, CLOCK_RECORD_ID
from durastate.engine.model import Execution
from durastate.errors import StoreConflict
from durastate.store.base import ExecutionStore

CLOCK_ENV = "DURASTATE_CLOCK"

Clock = Callable[[], float]

CAS_ATTEMPTS = 8


class _Offset:
    """The store's offset of this invocation: read from it on first use, through ``source``."""

    source: Callable[[], float] | None = None
    value: float | None = None

    def __call__(self) -> float:
        if self.value is None:
            self.value = self.source() if self.source is not None else 0.0
        return self.value


_offset = _Offset()


def use_store_offset(source: Callable[[], float] | None) -> None:
    """Make ``source`` (the session's store's offset, read once, on first use) part of every clock of this
    command; ``None``: no store, real time (or ``DURASTATE_CLOCK``) alone."""
    _offset.source, _offset.value = source, None


def store_offset() -> float:
    """How far ``--advance`` has moved this command's store's clock, in seconds (0 if never)."""
    return _offset()


def read_offset(store: ExecutionStore) -> float:
    """The offset ``store`` keeps (:data:`~durastate.engine.ids.CLOCK_RECORD_ID`), 0 if none."""
    record = store.load(CLOCK_RECORD_ID)
    value = record.context.get("offset") if record is not None else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def move_offset(store: ExecutionStore, offset: float, at: float) -> None:
    """Keep ``offset`` as ``store``'s clock offset (never less than it already is: two servers that advance
    one store at once leave the larger), and as this command's. ``at``: the time on the moved clock."""
    for _ in range(CAS_ATTEMPTS):
        record = store.load(CLOCK_RECORD_ID)
        if record is None:
            record = Execution(id=CLOCK_RECORD_ID, definition_id=CLOCK_RECORD, status="running",
                               context={"offset": offset}, created_at=at, updated_at=at)
        else:
            record = record.model_copy(deep=True)
            stored = record.context.get("offset")
            if isinstance(stored, int | float) and stored >= offset:
                _offset.value = float(stored)
                return
            record.context["offset"] = offset
            record.updated_at = at
        try:
            store.commit(record, [])
        except StoreConflict:
            continue
        _offset.value = offset
        return
    raise StoreConflict(CLOCK_RECORD_ID, None, None)


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
    """The command's clock, ``advance`` seconds ahead of the store's: real time, or the manual instant standing
    still, plus the offset the store keeps (which ``serve --advance`` moves while it runs)."""
    fixed = manual_instant()
    if fixed is not None:
        return lambda: fixed + _offset() + advance
    return lambda: time.time() + _offset() + advance


def now() -> float:
    """The time now, on the command's clock."""
    return command_clock()()
