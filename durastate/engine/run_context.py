"""What the compiled pieces of a definition see of a running step, below the interpreter that runs them.

An action (:mod:`durastate.engine.expressions`) is compiled long before a step runs and is called with the
step's :class:`durastate.engine.interpreter.Run`. It needs only a few of its parts, named here as the
:class:`ActionContext` protocol, so that the expressions module does not import the interpreter (which
imports it). The step's failure signal and its microstep bound live here for the same reason: the modules
the interpreter calls into raise and count them too.
"""

from __future__ import annotations

from typing import Any, Protocol

from durastate.engine.model import Event, Execution

__all__ = ["MAX_MICROSTEPS", "ActionContext", "ExecutionFailed"]

MAX_MICROSTEPS = 200
"""Bound on eventless (``always``) and raised-event transitions in one step; past it the execution fails."""


class ExecutionFailed(Exception):
    """Raised inside a step to stop it and mark the execution failed (never escapes ``step``)."""


class ActionContext(Protocol):
    """The parts of a running step an action uses: the execution, the event in hand and what it may emit."""

    exe: Execution
    event: Event
    site: str
    """Where the running action sits in the definition (``state.entry[0]``), for error messages."""
    logs: list[str]

    def emit(self, target: str | None, name: str, data: dict[str, Any]) -> None:
        """Queue an event for another execution (``target``) or the notification sink (``None``)."""

    def raise_internal(self, name: str, data: dict[str, Any]) -> None:
        """Queue an internal event, processed in this step before any later external event."""
