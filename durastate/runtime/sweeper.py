"""The sweeper: turns due timers into ``durastate.timeout`` events.

Each timeout gets a deterministic event id (execution, state path, fire_at), so sweeping the same timer
twice — a crash between send and delete, two sweepers racing — delivers one event in effect. The delete
is guarded by ``fire_at``: a timer re-armed to a new time while the sweep ran survives, and the timeout
already sent for the old time is recognised as stale by the engine and ignored.
"""

from __future__ import annotations

import time

from durastate.engine import timeout_event_id
from durastate.engine.model import TIMEOUT, Event
from durastate.runtime.clock import Clock
from durastate.store.base import ExecutionStore
from durastate.transport.base import Transport

__all__ = ["Sweeper"]


class Sweeper:
    """Fires the due timers of ``store`` into ``transport``."""

    def __init__(self, store: ExecutionStore, transport: Transport, clock: Clock = time.time, *,
                 batch_size: int = 10) -> None:
        self.store = store
        self.transport = transport
        self.clock = clock
        self.batch_size = max(1, batch_size)

    def run_once(self, limit: int = 500) -> int:
        """Fire at most ``limit`` due timers, oldest first; return how many were fired.

        Bounded so that a large backlog drains over several runs (a Lambda invocation must not time out).
        """
        due = self.store.due_timers(self.clock())[: max(0, limit)]
        for i in range(0, len(due), self.batch_size):
            chunk = due[i : i + self.batch_size]
            self.transport.send([
                (eid, Event(id=timeout_event_id(eid, path, fire_at), name=TIMEOUT,
                            data={"path": path, "fire_at": fire_at}))
                for eid, path, fire_at in chunk
            ])
            for eid, path, fire_at in chunk:
                self.store.delete_timer(eid, path, fire_at)
        return len(due)
