"""What entering, leaving, answering and timing out a task state do to the execution (see
:mod:`durastate.engine.tasks` for the semantics and the spec): called by the interpreter, on its step.

Beside the spec rather than in it: these take the running step (:class:`~durastate.engine.step_context.StepContext`),
which holds the compiled tables, which hold the compiled tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from durastate.engine.ids import (
    FINISHED,
    HEARTBEAT_TIMEOUT_PREFIX,
    TASK,
    TASK_CANCEL,
    TASK_TIMEOUT_PREFIX,
    task_cancel_id,
    task_id,
    task_request_id,
)
from durastate.engine.model import ChildRef, Emit, Event, TimerOp
from durastate.engine.tasks import (
    CompiledTask,
    heartbeat_error,
    heartbeat_problem,
    timeout_error,
)
from durastate.engine.values import _json_problem

if TYPE_CHECKING:
    from durastate.engine.compiled import Tables
    from durastate.engine.step_context import StepContext

__all__ = ["cancel", "cancel_request", "disarm", "heartbeat", "leave", "start", "timed_out"]


def start(run: StepContext, s: int, task: CompiledTask) -> None:
    """Enter: record the request for the task of state ``s`` (in the outbox, with the commit) and arm its
    timeouts. The input is evaluated and checked first, so a bad one fails the step with nothing half-made."""
    exe, path = run.exe, run.t.paths[s]
    run.site = run.t.sites[s] + ".invoke.input"
    value = task.input(exe.context, run.event)
    problem = _json_problem(value, "task input", 0)
    if problem is not None:
        raise ValueError(problem)
    exe.invoke_seq += 1
    tid = task_id(exe.id, exe.invoke_seq, exe.secret)
    exe.children[tid] = ChildRef(path=path, kind="task", attempt=run.invoke_attempt)
    data = {"task_id": tid, "path": path, "kind": task.kind, "target": task.target, "input": value,
            "timeout": task.timeout, "attempt": run.invoke_attempt}
    if task.heartbeat_timeout is not None:
        data["heartbeat_timeout"] = task.heartbeat_timeout
    if task.cancel_url is not None:
        data["cancel_url"] = task.cancel_url
    run.res.emits.append((exe.id, Event.model_construct(id=task_request_id(tid), name=TASK, data=data)))
    if task.timeout is not None:
        _arm(run, TASK_TIMEOUT_PREFIX + path, run.now + task.timeout)
    if task.heartbeat_timeout is not None:
        _arm(run, HEARTBEAT_TIMEOUT_PREFIX + path, run.now + task.heartbeat_timeout)


def _arm(run: StepContext, key: str, fire_at: float) -> None:
    run.exe.timers[key] = fire_at
    run._timer(TimerOp("schedule", key, fire_at))


def leave(run: StepContext, s: int) -> None:
    """Exit state ``s``: forget its tasks (a late answer is then ignored), ask a running one to stop, and
    disarm their timeouts."""
    exe, path = run.exe, run.t.paths[s]
    for cid in [c for c, ref in exe.children.items() if ref.kind == "task" and ref.path == path]:
        ref = exe.children.pop(cid)
        if ref.status == "running":
            cancel(run, cid, ref, f"the execution left state {path}")
    disarm(run, path)


def cancel(run: StepContext, tid: str, ref: ChildRef, reason: str) -> None:
    """The execution stops waiting for task ``tid`` while it may still run: record the cancel request the
    relay passes on, when its kind can be stopped (:attr:`CompiledTask.cancellable`)."""
    request = cancel_request(run.t, run.exe.id, tid, ref, reason)
    if request is not None:
        run.res.emits.append(request)


def cancel_request(t: Tables, execution_id: str, tid: str, ref: ChildRef, reason: str) -> Emit | None:
    """The cancel request of task ``tid`` (run by the state ``ref.path`` of ``t``'s definition), which the
    relay passes on; ``None`` when its kind cannot be stopped (:attr:`CompiledTask.cancellable`). Also what
    a terminate sends (:func:`durastate.engine.control.terminate`), which has no step."""
    s = t.index.get(ref.path, -1)
    task = t.task[s] if s >= 0 else None
    if task is None or not task.cancellable:
        return None
    data = {"task_id": tid, "path": ref.path, "kind": task.kind, "target": task.target,
            "cancel_url": task.cancel_url, "reason": reason}
    return execution_id, Event.model_construct(id=task_cancel_id(tid), name=TASK_CANCEL, data=data)


def disarm(run: StepContext, path: str) -> None:
    """Disarm the timeouts of the task of the state at ``path`` (answered, or left)."""
    timers = run.exe.timers
    for key in (TASK_TIMEOUT_PREFIX + path, HEARTBEAT_TIMEOUT_PREFIX + path):
        if timers.pop(key, None) is not None:
            run._timer(TimerOp("cancel", key))


def timed_out(run: StepContext, path: str, ev: Event, *, heartbeat: bool = False) -> bool:
    """A timeout of the task of ``path`` fired first (its ``timeout``, or with ``heartbeat`` its
    ``heartbeat_timeout``): the running task counts as failed (``TaskTimeout``), is asked to stop, and goes
    where a failed answer goes (a retry, else ``on_error``)."""
    running = [(cid, ref) for cid, ref in run.exe.children.items()
               if ref.kind == "task" and ref.path == path and ref.status == "running"]
    if not running:
        return False
    tid, ref = running[-1]
    s = run.t.index.get(path, -1)
    task = run.t.task[s] if s >= 0 else None
    if heartbeat:
        error = heartbeat_error(tid, task.heartbeat_timeout if task is not None else None)
    else:
        error = timeout_error(tid, task.timeout if task is not None else None)
    cancel(run, tid, ref, error)
    return run.on_finished(Event.model_construct(
        id=ev.id, name=FINISHED,
        data={"child_id": tid, "status": "failed", "outcome": None, "output": None, "error": error,
              "task_id": tid}))


def heartbeat(run: StepContext, ev: Event) -> bool:
    """A ``durastate.heartbeat`` for a task: record its details and, with a ``heartbeat_timeout``, re-arm the
    heartbeat timer from now. ``False`` (ignored, with the reason in ``run.note``) when the execution does
    not wait for that task (any more) or the details are not fit to keep."""
    tid = ev.data.get("task_id")
    ref = run.exe.children.get(tid) if isinstance(tid, str) else None
    if ref is None or ref.kind != "task" or ref.status != "running":
        run.note = f"task {tid} is not running (answered, timed out or left); its heartbeat is ignored"
        return False
    details = ev.data.get("details")
    problem = heartbeat_problem(details)
    if problem is not None:
        run.note = f"{problem}; the heartbeat is ignored"
        return False
    ref.heartbeat = details
    ref.heartbeat_at = run.now
    s = run.t.index.get(ref.path, -1)
    task = run.t.task[s] if s >= 0 else None
    if task is not None and task.heartbeat_timeout is not None:
        _arm(run, HEARTBEAT_TIMEOUT_PREFIX + ref.path, run.now + task.heartbeat_timeout)
    return True
