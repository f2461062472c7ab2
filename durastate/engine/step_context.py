"""What the run-time halves of tasks and maps (:mod:`durastate.engine.task_runs`, :mod:`durastate.engine.map_runs`)
use of the running step: the :class:`StepContext` protocol, which :class:`durastate.engine.run.Run` fulfils.

A protocol rather than the class, so that the run can call them and they need not import the run back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from durastate.engine.run_context import ActionContext, StepResult

if TYPE_CHECKING:
    from durastate.engine.model import Event, TimerOp
    from durastate.engine.tables import Tables

__all__ = ["StepContext"]


class StepContext(ActionContext, Protocol):
    """The parts of :class:`durastate.engine.run.Run` that entering, leaving and answering a task or a map use."""

    t: Tables
    now: float
    leaf: int
    res: StepResult
    fanouts: list[int] | None
    invoke_attempt: int
    note: str | None

    def _timer(self, op: TimerOp) -> None: ...

    def _queue(self, ev: Event) -> None: ...

    def dispatch(self, ev: Event) -> bool: ...

    def on_finished(self, ev: Event) -> bool: ...
