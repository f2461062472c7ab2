"""Control of an execution from outside its statechart: suspend, resume, terminate, hold, redrive (and, in
:mod:`durastate.engine.reset`, reset to a named configuration).

These are not transitions of the user's chart; they act on the execution as a whole, the way Step
Functions' StopExecution and RedriveExecution or Temporal's terminate, pause and reset do. Like the
interpreter they are pure: each function changes the execution it is given and returns what must be
committed with it (events to emit, timer operations), and the worker commits that atomically, so a
crash anywhere leaves either the old execution or the new one.

- **suspend / resume**: a suspended execution keeps every event that reaches it (``held``, in arrival
  order, timeouts included) and applies them in order on resume. Running children are suspended and
  resumed with it.
- **terminate**: ends the execution at once, runs no action (not even exit actions: that is the
  difference from ``cancel``), disarms its timers, terminates its running children and tells its parent.
- **redrive**: a failed execution keeps the event whose step failed and the state before that step
  (:class:`~durastate.engine.model.Failure`, committed with the failure). A redrive restores that state
  and hands back the event to apply again, under a new id (the original is marked applied). Events that
  reach a failed execution meanwhile are held as by a suspended one (up to :data:`MAX_HELD`) and applied,
  in order, once the redriven event has been applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from durastate.engine.ids import (
    FINISHED,
    RESUME,
    RUN_TIMEOUT_PATH,
    SUSPEND,
    TERMINATE,
    TIMEOUT,
    control_event_id,
    finished_event_id,
    redrive_event_id,
)
from durastate.engine.model import ENDED, Emit, Event, Execution, Failure, PendingRetry, TimerOp
from durastate.engine.task_runs import cancel_request

if TYPE_CHECKING:
    from durastate.engine.tables import Tables

__all__ = [
    "MAX_HELD",
    "RESTORED_FIELDS",
    "ControlError",
    "Effects",
    "fail",
    "hold",
    "record_failure",
    "redrivable",
    "redrive",
    "resume",
    "suspend",
    "terminate",
]

MAX_HELD = 1_000
"""How many events a suspended (retry-waiting, or failed) execution keeps before it refuses more: the held
events live in the execution, which must stay within the backend's item size (DynamoDB: 400 KB)."""

RESTORED_FIELDS = ("active_path", "leaves", "history", "context", "timers", "sends", "children", "invoke_seq",
                   "maps")
"""What a redrive puts back: the execution as it stood before the step that failed."""


class ControlError(ValueError):
    """A control operation that does not apply to the execution as it is (the message says why)."""


@dataclass
class Effects:
    """What a control operation asks to commit with the execution."""

    emits: list[Emit] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)


def _children(exe: Execution, name: str, want: str) -> list[Emit]:
    out: list[Emit] = []
    for n, (cid, ref) in enumerate(sorted(exe.children.items()), 1):
        # a task is no execution: nothing to pass on; an abandoned child runs on its own
        if ref.status == want and ref.kind != "task" and not ref.abandoned and not (
                name == TERMINATE and ref.parent_close == "abandon"):
            out.append((cid, Event.model_construct(id=control_event_id(exe.id, name, exe.version, n),
                                                   name=name, data={})))
    return out


def suspend(exe: Execution, reason: str | None, now: float) -> Effects:
    """Pause a running execution: later events are held until :func:`resume`."""
    if exe.status != "running":
        raise ControlError(f"execution {exe.id} is {exe.status}; only a running execution can be suspended")
    exe.status = "suspended"
    exe.reason = reason
    exe.updated_at = now
    return Effects(emits=_children(exe, SUSPEND, "running"),
                   trace={"control": "suspend", "reason": reason})


def resume(exe: Execution, now: float) -> tuple[Effects, list[Event]]:
    """Resume a suspended execution; returns the effects and the held events, to apply now in order
    (the worker keeps waiting those that must wait for a pending retry)."""
    if exe.status != "suspended":
        raise ControlError(f"execution {exe.id} is {exe.status}; only a suspended execution can be resumed")
    exe.status = "running"
    exe.reason = None
    exe.updated_at = now
    held, exe.held = list(exe.held), []  # (a pending retry's own timer is among them: the worker sorts it out)
    # The children were suspended with it; a child that has ended meanwhile has nothing to resume.
    effects = Effects(emits=_resume_children(exe), trace={"control": "resume", "held": len(held)})
    return effects, held


def _resume_children(exe: Execution) -> list[Emit]:
    return _children(exe, RESUME, "running")


def hold(exe: Execution, event: Event) -> None:
    """Keep ``event`` for later (the execution is suspended, waits for a retry, or failed and awaits a
    redrive)."""
    if len(exe.held) >= MAX_HELD:
        then = ("redrive it once its failure is fixed" if exe.status == "failed"
                else "resume it (or let its retry run)")
        raise ControlError(f"execution {exe.id} already holds {MAX_HELD} events while {exe.status}; {then} "
                           "before sending more, and replay this dead letter then")
    exe.held.append(event)


def terminate(exe: Execution, reason: str | None, now: float, tables: Tables | None = None) -> Effects:
    """End the execution now: no action runs, timers are disarmed, running children are terminated and
    the parent is told (as a child that failed, so its ``on_error`` can react). With the ``tables`` of the
    definition version it runs on, each running task that can be stopped is asked to stop too (the cancel
    request the relay passes on, as when a state is left); without them its answer is only ignored."""
    if exe.status in ENDED:
        raise ControlError(f"execution {exe.id} has already {exe.status}; there is nothing to terminate")
    effects = Effects(trace={"control": "terminate", "reason": reason})
    effects.timers = [TimerOp("cancel", path) for path in exe.timers]
    effects.emits = _children(exe, TERMINATE, "running")
    if tables is not None:
        why = f"the execution was terminated: {reason}" if reason else "the execution was terminated"
        for tid, ref in sorted(exe.children.items()):
            if ref.kind == "task" and ref.status == "running":
                request = cancel_request(tables, exe.id, tid, ref, why)
                if request is not None:
                    effects.emits.append(request)
    for ref in exe.children.values():
        if ref.status == "running" and not ref.abandoned:
            if ref.parent_close == "abandon":
                ref.abandoned = True  # it runs on; its finished notice is traced as ignored
            else:
                ref.status = "cancelled"
    exe.timers = {}
    exe.sends = {}
    exe.retry = None
    exe.held = []
    exe.status = "terminated"
    exe.reason = reason
    exe.error = f"terminated: {reason}" if reason else "terminated"
    exe.updated_at = now
    if exe.parent_id is not None:
        data = {"child_id": exe.child_id, "status": "terminated", "outcome": None,
                "output": dict(exe.context), "error": exe.error}
        effects.emits.append((exe.parent_id, Event.model_construct(id=finished_event_id(exe.id), name=FINISHED,
                                                                   data=data)))
    return effects


def fail(exe: Execution, error: str, now: float) -> Effects:
    """Fail an execution that has not entered a state yet (its start could not be applied): nothing to
    exit or disarm; the parent, if any, is told as it is of any failed child."""
    exe.status = "failed"
    exe.error = error
    exe.updated_at = now
    effects = Effects(trace={"control": "fail", "error": error})
    if exe.parent_id is not None:
        data = {"child_id": exe.child_id, "status": "failed", "outcome": None, "output": dict(exe.context),
                "error": error}
        effects.emits.append((exe.parent_id, Event.model_construct(id=finished_event_id(exe.id), name=FINISHED,
                                                                   data=data)))
    return effects


def record_failure(exe: Execution, before: Execution | None, event: Event) -> None:
    """Keep what a redrive needs on an execution whose step with ``event`` just failed.

    ``before`` is the execution as committed before that step (``None`` if the step created it).
    """
    if before is None:
        restored: dict[str, Any] = {"active_path": None, "history": {}, "context": dict(exe.context),
                                    "timers": {}, "sends": {}, "children": {}, "invoke_seq": 0,
                                    "maps": {}}
    else:
        restored = before.model_dump(include=set(RESTORED_FIELDS), mode="json")
    redrives = exe.failure.redrives if exe.failure is not None else 0
    exe.failure = Failure(event=event, before=restored, redrives=redrives)


def redrivable(exe: Execution) -> bool:
    """Whether ``exe`` failed and kept what a redrive needs: it may step again, so the events that reach
    it meanwhile are held for after the redrive (an execution ended any other way never steps again)."""
    return exe.status == "failed" and exe.failure is not None


def redrive(exe: Execution, now: float) -> tuple[Effects, Event]:
    """Restore a failed execution to the state before its failed step; returns the event to apply again.

    The timers that were armed then are armed again. Children that the failure cancelled stay
    cancelled (their notices reach the restored execution as cancelled children).
    """
    if exe.status != "failed":
        raise ControlError(f"execution {exe.id} is {exe.status}; only a failed execution can be redriven")
    failure = exe.failure
    if failure is None:
        raise ControlError(f"execution {exe.id} failed before durastate kept what a redrive needs (no failed "
                           "event recorded); start a new execution instead")
    before = failure.before
    if failure.event.name == TIMEOUT and failure.event.data.get("path") == RUN_TIMEOUT_PATH:
        # It failed by its run timeout: redriven, it runs on without one (the timeout applies again as a
        # stale timer, ignored), or it would time out again at once.
        before = {**before, "timers": {k: v for k, v in before.get("timers", {}).items() if k != RUN_TIMEOUT_PATH}}
    restored = Execution.model_validate({"id": exe.id, "definition_id": exe.definition_id, **before})
    for name in RESTORED_FIELDS:
        setattr(exe, name, getattr(restored, name))
    exe.status = "running"
    exe.error = None
    exe.outcome = None
    exe.updated_at = now
    n = failure.redrives + 1
    exe.failure = Failure(event=failure.event, before=failure.before, redrives=n)
    effects = Effects(timers=[TimerOp("schedule", path, at) for path, at in exe.timers.items()],
                      trace={"control": "redrive", "attempt": n, "event": failure.event.name,
                             "event_id": failure.event.id})
    event = failure.event
    again = Event.model_construct(id=redrive_event_id(event.id, n), name=event.name, data=event.data)
    # Until the event comes back through the outbox, later events wait (as for a retry), so nothing sent
    # after the redrive can overtake the step it re-applies.
    exe.retry = PendingRetry(event=again, attempt=0, error=f"redrive {n}", fire_at=now)
    return effects, again
