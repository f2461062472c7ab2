"""The runtime: the worker, the relay and the sweeper, and the local runtime that runs all three.

Everything here is synchronous and store-agnostic; the Lambda handlers and the CLI are thin adapters
around these classes.
"""

from __future__ import annotations

from durastate.runtime.clock import Clock, ManualClock
from durastate.runtime.local import PERMANENT_ERRORS, DeadLetter, LocalRuntime, RunStats, check_replay
from durastate.runtime.relay import Relay, RelayStats
from durastate.runtime.sweeper import Sweeper
from durastate.runtime.tasks import TaskHandle, current_task
from durastate.runtime.worker import HandleResult, Worker

__all__ = [
    "PERMANENT_ERRORS",
    "Clock",
    "DeadLetter",
    "HandleResult",
    "LocalRuntime",
    "ManualClock",
    "Relay",
    "RelayStats",
    "RunStats",
    "Sweeper",
    "TaskHandle",
    "Worker",
    "check_replay",
    "current_task",
]
