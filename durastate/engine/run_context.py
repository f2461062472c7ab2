"""What the compiled pieces of a definition see of a running step, below the interpreter that runs them.

An action (:mod:`durastate.engine.expressions`) is compiled long before a step runs and is called with the
step's :class:`durastate.engine.run.Run`. It needs only a few of its parts, named here as the
:class:`ActionContext` protocol, so that the expressions module does not import the run (which imports it).
The step's result, its failure signal and its microstep bound live here for the same reason: the modules
the run calls into fill, raise and count them too.
"""

from __future__ import annotations

from typing import Any, Protocol

from durastate.engine.model import Event, Execution, TimerOp
from durastate.engine.retry import RetryableFailure

__all__ = ["EXECUTION_ERROR", "MAX_MICROSTEPS", "ActionContext", "ActionFailed", "ExecutionFailed", "StepResult"]

EXECUTION_ERROR = "error.execution"
"""The event a definition with ``action_errors: raise`` gets when one of its guards or actions fails (SCXML's)."""

MAX_MICROSTEPS = 200
"""Bound on eventless (``always``) and raised-event transitions in one step; past it the execution fails."""


class ExecutionFailed(Exception):
    """Raised inside a step to stop it and mark the execution failed (never escapes ``step``)."""


class ActionFailed(ExecutionFailed):
    """What a ``fail`` action raises: the execution fails with its message, or, under ``action_errors:
    raise``, ``error.execution`` is raised carrying it (and ``send_id``: the send whose failure it reports)."""

    def __init__(self, message: str, send_id: str | None = None) -> None:
        super().__init__(message)
        self.send_id = send_id


def unsettled(last: str) -> ExecutionFailed:
    """The failure of a step that reached :data:`MAX_MICROSTEPS` (``last``: the transition or raised event
    it took last), whichever run (one leaf or inline regions) counted them."""
    return ExecutionFailed(
        f"did not settle after {MAX_MICROSTEPS} eventless transitions and raised events "
        f"(last: {last}); an `always` or `raise` cycle that never stops?"
    )


class ActionContext(Protocol):
    """The parts of a running step an action uses: the execution, the event in hand and what it may emit."""

    exe: Execution
    event: Event
    site: str
    """Where the running action sits in the definition (``state.entry[0]``), for error messages."""
    logs: list[str]

    def emit(self, target: str | None, name: str, data: dict[str, Any], send_id: str | None = None) -> None:
        """Queue an event for another execution (``target``) or the notification sink (``None``)."""

    def new_send_id(self) -> str:
        """A send id no other send of this execution gets."""

    def failed_action(self, exc: Exception) -> None:
        """An action raised ``exc``: raise it again (it fails the step), or under ``action_errors: raise``
        raise ``error.execution`` and go on."""

    def raise_internal(self, name: str, data: dict[str, Any]) -> None:
        """Queue an internal event, processed in this step before any later external event."""

    def send_later(self, send_id: str | None, seconds: float, name: str, data: dict[str, Any]) -> None:
        """Deliver an event to this execution ``seconds`` from now (a durable timer), named ``send_id``."""

    def cancel_send(self, send_id: str) -> None:
        """Drop the pending delayed send ``send_id``, if there is one."""


class StepResult:
    """What one step produced; the worker commits it together with the mutated execution."""

    __slots__ = ("emits", "ignored", "logs", "spawns", "timers", "trace")

    retry: RetryableFailure | None = None
    """Set (on the step's own result) when a callable with a retry policy failed: the caller discards the
    step, the execution it mutated included, and retries or catches it (:mod:`durastate.engine.retry`)."""

    def __init__(self) -> None:
        # (A hand-written __init__: list literals are cheaper than dataclass default factories.)
        self.emits: list[tuple[str | None, Event]] = []
        """Events to deliver: (target execution id, event), or (None, event) for the notification sink."""
        self.timers: list[TimerOp] = []
        """Timer arms/cancels, at most one per timer key (the last one of the step)."""
        self.spawns: list[tuple[str, str, dict[str, Any]]] = []
        """Region children to create: (child id, region root path, seed context)."""
        self.trace: dict[str, Any] = {}
        """The step's trace entry: event, event_id, from, to, status (+ ignored, error, log)."""
        self.ignored = False
        """Nothing changed: no transition handled the event (or it was a stale timeout, a repeated start,
        an event for an execution that already ended). The event is still consumed."""
        self.logs: list[str] = []
        """What ``log`` actions wrote, in order (also in ``trace["log"]``)."""

    def __repr__(self) -> str:
        return (
            f"StepResult(emits={self.emits!r}, timers={self.timers!r}, spawns={self.spawns!r}, "
            f"trace={self.trace!r}, ignored={self.ignored!r}, logs={self.logs!r})"
        )
