"""The sweeper: turns due timers into ``durastate.timeout`` events.

Each timeout gets a deterministic event id (execution, state path, fire_at), so sweeping the same timer
twice — a crash between send and delete, two sweepers racing — delivers one event in effect. The delete
is guarded by ``fire_at``: a timer re-armed to a new time while the sweep ran survives, and the timeout
already sent for the old time is recognised as stale by the engine and ignored.

A due timer of a *system record* (an id starting with ``~``: a schedule's ``tick``) is no execution's
timeout: it goes to :func:`~durastate.runtime.schedules.fire_schedule_timer`, which starts the schedule's
due execution and re-arms the timer in one commit of the record. That is how schedules run on every
backend, AWS included, with no resource of their own.

With ``hops`` (on AWS: the standard timers queue, :mod:`durastate.transport.sqs_timers`) the sweeper does
not wait for a timer to be due: each run hands the timers that came within the hop horizon (15 minutes)
since its previous run to the queue, delayed until they are due, so they fire within a second instead of
up to a sweep interval late. The worker hops the timers it arms within the horizon itself, right after
its commit. A timer whose hop was lost — the worker died before sending it, a send failed, the sweeper's
container is new — is still in the timers table when it is due: a timer overdue by more than ``grace``
is fired directly, as without hops. A timer hopped twice (the first run of a container hops everything
in range; a timer armed between two runs near the horizon edge is hopped by both) fires once in effect:
the timeout's id is deterministic.

A schedule's tick takes the hop too: the sweeper hops the record's timer like any other, the timers
function fires it when due (:meth:`Sweeper.fire_schedule`), and whoever fires a tick hops the next one
at once when it falls within the horizon — so a `rate: 30s` schedule ticks every 30 seconds on AWS, not
once a sweep. A tick's timer that was not hopped (armed by a command between two sweeps) is fired by the
next sweep as soon as it is due; firing a tick twice starts nothing twice (the record's ``last_tick``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Protocol

from durastate.engine import timeout_event_id
from durastate.engine.ids import is_system_id
from durastate.engine.model import TIMEOUT, Event
from durastate.runtime.clock import Clock
from durastate.runtime.schedules import TICK_TIMER, FiredTick, fire_schedule_timer
from durastate.store.base import ExecutionStore
from durastate.transport.base import Transport

__all__ = ["HOP_GRACE", "HOP_HORIZON", "SWEPT", "Sweeper", "TimerHops", "timeout_event"]

log = logging.getLogger("durastate.runtime.sweeper")

HOP_HORIZON = 900.0
"""How far ahead timers are hopped: SQS's longest message delay (15 minutes)."""
SWEPT = "swept"
"""Key of a timeout's data saying the sweeper deleted its timer (see :func:`timeout_event`)."""
HOP_GRACE = 30.0
"""How long past due a hopped timer may still be in flight before the sweeper fires it itself."""


class TimerHops(Protocol):
    """Where timeouts go ahead of time, each delivered when due (on AWS the standard timers queue)."""

    def send(self, timeouts: Sequence[tuple[str, Event]], now: float) -> int: ...


def timeout_event(execution_id: str, path: str, fire_at: float, *, swept: bool = False) -> Event:
    """The ``durastate.timeout`` of a timer: the same id whoever sends it, however often.

    ``swept``: the sender deletes the timer itself (the sweeper, right after sending), so the worker does
    not delete it again after the timeout's commit — on DynamoDB a conditional delete of a missing item
    still costs a write unit. A timeout hopped ahead of time leaves its timer armed and carries no flag."""
    data: dict[str, object] = {"path": path, "fire_at": fire_at}
    if swept:
        data[SWEPT] = True
    return Event(id=timeout_event_id(execution_id, path, fire_at), name=TIMEOUT, data=data)


class Sweeper:
    """Fires the due timers of ``store`` into ``transport``."""

    def __init__(self, store: ExecutionStore, transport: Transport, clock: Clock = time.time, *,
                 batch_size: int = 10, hops: TimerHops | None = None, grace: float = HOP_GRACE) -> None:
        self.store = store
        self.transport = transport
        self.clock = clock
        self.batch_size = max(1, batch_size)
        self.hops = hops
        self.grace = grace
        self.hopped = 0
        """Timers handed to ``hops`` by the last run (a metric)."""
        self._hopped_to: float | None = None  # every timer due up to here was hopped (None: none known)

    def run_once(self, limit: int = 500) -> int:
        """Fire at most ``limit`` due timers, oldest first; return how many were fired (and hopped).

        Bounded so that a large backlog drains over several runs (a Lambda invocation must not time out).
        """
        now = self.clock()
        self.hopped = 0
        if self.hops is not None:
            return self._run_with_hops(now, limit)
        due = self.store.due_timers(now)[: max(0, limit)]
        return self._fire(due)

    def _run_with_hops(self, now: float, limit: int) -> int:
        """Fire what is overdue past ``grace`` (its hop was lost), hop what came within the horizon."""
        hops = self.hops
        assert hops is not None
        horizon = now + HOP_HORIZON
        floor = now - self.grace if self._hopped_to is None else max(self._hopped_to, now - self.grace)
        # Two reads: everything due by now (open below, so an overdue timer — its hop lost, a sweep missed —
        # is never skipped), then only the window after what earlier runs hopped (not every timer still
        # waiting for its hop: up to 15 minutes of them).
        in_range = self.store.due_timers(now)
        if horizon > now:
            later = self.store.due_timers(horizon, since=max(floor, now))
            in_range += [t for t in later if t[2] > now]
        # A schedule's tick that is due already is fired here and now (its hop may never have been sent).
        overdue = [t for t in in_range if t[2] <= now - self.grace or (is_system_id(t[0]) and t[2] <= now)]
        to_hop = [t for t in in_range if t[2] > floor and not (is_system_id(t[0]) and t[2] <= now)
                  ][: max(0, limit)]
        if to_hop:
            self.hopped = hops.send([(eid, timeout_event(eid, path, fire_at)) for eid, path, fire_at in to_hop], now)
        # A hop that failed is fired by a later run once overdue; a run cut short by ``limit`` resumes after
        # the last timer it hopped.
        self._hopped_to = to_hop[-1][2] if len(to_hop) >= max(0, limit) > 0 else horizon
        return self._fire(overdue[: max(0, limit)]) + self.hopped

    def _fire(self, due: list[tuple[str, str, float]]) -> int:
        """Send the timeouts of ``due`` (schedule timers: start their executions), then delete them."""
        failed = 0
        for eid, path, fire_at in [t for t in due if is_system_id(t[0])]:
            try:
                fired = fire_schedule_timer(self.store, eid, self.clock())
            except Exception:  # the timer stays armed and is tried again; the timeouts below still fire
                log.exception("schedule timer of %s failed; it stays armed and is retried by the next sweep", eid)
                failed += 1
                continue
            self._after_tick(eid, path, fire_at, fired)
        timeouts = [t for t in due if not is_system_id(t[0])]
        for i in range(0, len(timeouts), self.batch_size):
            chunk = timeouts[i : i + self.batch_size]
            self.transport.send([(eid, timeout_event(eid, path, fire_at, swept=True))
                                 for eid, path, fire_at in chunk])
            for eid, path, fire_at in chunk:
                self.store.delete_timer(eid, path, fire_at)
        return len(due) - failed  # a failed schedule timer is not work done (an idle loop must not spin on it)

    def fire_schedule(self, record_id: str, path: str, fire_at: float) -> None:
        """Fire a schedule record's due timer (found by a sweep, or delivered by its hop): start what is
        due, delete the timer (guarded: the one the commit re-armed survives), and hop the next tick at once
        when it falls within the horizon, so that it too fires on time rather than at a sweep."""
        self._after_tick(record_id, path, fire_at, fire_schedule_timer(self.store, record_id, self.clock()))

    def _after_tick(self, record_id: str, path: str, fire_at: float, fired: FiredTick) -> None:
        self.store.delete_timer(record_id, path, fire_at)  # guarded: the timer the commit re-armed survives
        now, nxt = self.clock(), fired.next_tick
        if self.hops is not None and fired.moved and nxt is not None and nxt <= now + HOP_HORIZON:
            self.hopped += self.hops.send([(record_id, timeout_event(record_id, TICK_TIMER, nxt))], now)
