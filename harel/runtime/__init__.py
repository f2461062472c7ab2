"""The runtime: the worker, the relay and the sweeper, and the local runtime that runs all three.

Everything here is synchronous and store-agnostic; the Lambda handlers and the CLI are thin adapters
around these classes.
"""

from __future__ import annotations

from harel.runtime.clock import Clock, ManualClock
from harel.runtime.local import PERMANENT_ERRORS, DeadLetter, LocalRuntime, RunStats
from harel.runtime.relay import Relay, RelayStats
from harel.runtime.sweeper import Sweeper
from harel.runtime.worker import HandleResult, Worker

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
    "Worker",
]
