"""Tasks: ``invoke: {task: ..., input, timeout, retry}`` runs work *outside* the commit.

A state that invokes a task asks, on entry, for a Python callable, an AWS Lambda function or an HTTP
endpoint to be called with a JSON input. The step itself calls nothing (the engine stays pure): it records
a *task request* in the outbox, in the same commit as the state change, and the relay's task runner
(:mod:`durastate.runtime.tasks`) calls the task after that commit and delivers its answer back to the
execution as a ``durastate.finished`` notice, exactly as an invoked child's: ``on_done`` sees the result as
``$event.output``, ``on_error`` the failure as ``$event.error``. So:

- **ids**: the task id is ``<execution id>~<invoke number>~<mac>`` (:func:`durastate.engine.ids.task_id`):
  the mac, derived from the execution's secret, makes it unguessable, so a forged answer (one naming any
  other id) is ignored like a notice from an unknown child. The request's outbox id is derived from it
  (``~task:<task id>``) and the answer's event id too (``~finished:<task id>``).
  A task is run *at least once* (a relay that crashes after the call and before its ack calls it again),
  and a repeated answer is a duplicate the worker drops by id: a task whose callee is idempotent on the
  task id (it gets it in every call) therefore runs once in effect;
- **state**: the execution records the running task among its ``children`` (``kind: task``); leaving the
  state forgets it, so a late answer is ignored like a late child notice. A task is not an execution:
  nothing is cancelled, suspended or terminated with it;
- **timeout**: a durable timer (``~task:<path>``, like ``after``): when it fires first, the task counts as
  failed with ``TaskTimeout: ...`` (its late answer is then ignored);
- **retry**: the invoke's retry policy (:mod:`durastate.engine.retry`): a failed try (an error, a
  ``TaskTimeout``) starts a new task, with a new task id, after the backoff.

This module holds the pure parts: the spec and its checks, what entering, leaving, answering and timing
out do to the execution, and the request's wire form, which the runtime reads back
(:class:`TaskRequest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from durastate.engine.durations import parse_duration
from durastate.engine.expressions import Issues, Value, compile_value
from durastate.engine.ids import (
    FINISHED,
    TASK,
    TASK_TIMEOUT_PREFIX,
    finished_event_id,
    task_id,
    task_request_id,
)
from durastate.engine.model import ChildRef, Event, TimerOp
from durastate.engine.values import _json_problem
from durastate.errors import InvalidValue

if TYPE_CHECKING:
    from durastate.engine.definition import Invoke
    from durastate.engine.interpreter import Run

__all__ = [
    "TASK_KINDS",
    "CompiledTask",
    "TaskKind",
    "TaskRequest",
    "compile_task",
    "invoked",
    "task_result",
    "timeout_error",
]

TaskKind = Literal["python", "lambda", "http"]
TASK_KINDS: tuple[TaskKind, ...] = ("python", "lambda", "http")
_SPELLING = "{python: 'module:function'}, {lambda: '<function name or ARN>'} or {http: 'https://...'}"


@dataclass(frozen=True, slots=True)
class CompiledTask:
    """A state's task: what to call (``kind``, ``target``), with what (``input``), for how long."""

    kind: TaskKind
    target: str
    input: Value
    timeout: float | None


def compile_task(invoke: Invoke, where: str, issues: Issues) -> CompiledTask | None:
    """The task of an ``invoke`` (``None`` with every problem appended to ``issues``)."""
    ok = True
    spec = invoke.task
    if invoke.definition is not None:
        issues.append(f"{where}: both `definition` and `task`; an invoke starts a child execution "
                      "(`definition`) or runs a task (`task`), not both")
        ok = False
    if invoke.context:
        issues.append(f"{where}.context: a task has no context; give what it receives as `input`")
        ok = False
    kind: Any = None
    target: Any = None
    if spec is None:
        issues.append(f"{where}.definition: required: the id of the definition a child execution runs, or "
                      f"instead `task` ({_SPELLING})")
        return None
    if len(spec) != 1 or next(iter(spec)) not in TASK_KINDS:
        issues.append(f"{where}.task: one of {_SPELLING}, got {spec!r}")
        ok = False
    else:
        ((kind, target),) = spec.items()
        if not isinstance(target, str) or not target.strip():
            issues.append(f"{where}.task.{kind}: a non-empty string, got {target!r}")
            ok = False
        elif kind == "python" and not _callable_path(target):
            issues.append(f"{where}.task.python: 'package.module:function' (an importable module and a "
                          f"callable in it), got {target!r}")
            ok = False
        elif kind == "http" and not target.startswith(("http://", "https://")):
            issues.append(f"{where}.task.http: an http:// or https:// URL, got {target!r}")
            ok = False
    if invoke.parent_close is not None:
        issues.append(f"{where}.parent_close: for child executions (`definition`); a task's late answer is "
                      "ignored once its state is left")
        ok = False
    timeout: float | None = None
    if invoke.timeout is not None:
        try:
            timeout = parse_duration(invoke.timeout, f"{where}.timeout")
        except InvalidValue as exc:
            issues.append(str(exc))
            ok = False
        else:
            if timeout <= 0:
                issues.append(f"{where}.timeout: more than 0 seconds, got {invoke.timeout!r}")
                ok = False
    value = compile_value({} if invoke.input is None else invoke.input, f"{where}.input", issues)
    if not ok:
        return None
    return CompiledTask(kind, target, value, timeout)


def invoked(invoke: Invoke) -> str:
    """What an invoke starts, for pictures and listings: the child's definition id, or ``task <kind>:
    <target>``."""
    if invoke.definition is not None:
        return invoke.definition
    return "task " + ", ".join(f"{k} {v}" for k, v in (invoke.task or {}).items())


def _callable_path(text: str) -> bool:
    module, sep, name = text.partition(":")
    if not sep:
        module, _, name = text.rpartition(".")
    parts = [*module.split("."), *name.split(".")]
    return bool(module and name) and all(p.isidentifier() for p in parts)


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """A task request as the relay reads it from the outbox (the event :func:`start` records)."""

    task_id: str
    execution_id: str
    path: str
    kind: TaskKind
    target: str
    input: Any
    timeout: float | None
    attempt: int

    @classmethod
    def from_event(cls, target_id: str, event: Event) -> TaskRequest:
        """Read a ``durastate.task`` outbox event back; ``ValueError`` when it is not one."""
        d = event.data
        kind = d.get("kind")
        if event.name != TASK or kind not in TASK_KINDS or not isinstance(d.get("task_id"), str) \
                or not isinstance(d.get("target"), str):
            raise ValueError(f"event {event.id} ({event.name}) is not a task request")
        timeout = d.get("timeout")
        return cls(task_id=d["task_id"], execution_id=target_id, path=str(d.get("path", "")), kind=kind,
                   target=d["target"], input=d.get("input"),
                   timeout=float(timeout) if isinstance(timeout, int | float) else None,
                   attempt=int(d.get("attempt", 1)))

    def payload(self) -> dict[str, Any]:
        """What the callee receives (the Lambda event, the HTTP body): the input and the ids to be
        idempotent on."""
        return {"task_id": self.task_id, "execution_id": self.execution_id, "state": self.path,
                "attempt": self.attempt, "input": self.input}


def timeout_error(task_id: str, timeout: float | None) -> str:
    """The error of a task that did not answer in time: the same whether its durable timer fired first or
    the runner stopped waiting for it (a Python task's deadline)."""
    after = f" within {timeout:g}s" if timeout is not None else ""
    return f"TaskTimeout: task {task_id} did not answer{after}"


def task_result(request: TaskRequest, output: Any = None, error: str | None = None) -> Event:
    """The answer to ``request``: the ``durastate.finished`` notice the execution routes to ``on_done``
    (``output``, when ``error`` is ``None``) or ``on_error`` (``error``). Same request, same event id."""
    data: dict[str, Any] = {"child_id": request.task_id, "status": "failed" if error is not None else "finished",
                            "outcome": None, "output": output if error is None else None,
                            "task_id": request.task_id}
    if error is not None:
        data["error"] = error
    return Event(id=finished_event_id(request.task_id), name=FINISHED, data=data)


# -- what the interpreter calls ---------------------------------------------------------------------------
def start(run: Run, s: int, task: CompiledTask) -> None:
    """Enter: record the request for the task of state ``s`` (in the outbox, with the commit) and arm its
    timeout. The input is evaluated and checked first, so a bad one fails the step with nothing half-made."""
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
    run.res.emits.append((exe.id, Event.model_construct(id=task_request_id(tid), name=TASK, data=data)))
    if task.timeout is not None:
        key = TASK_TIMEOUT_PREFIX + path
        fire_at = run.now + task.timeout
        exe.timers[key] = fire_at
        run._timer(TimerOp("schedule", key, fire_at))


def leave(run: Run, s: int) -> None:
    """Exit state ``s``: forget its tasks (a late answer is then ignored) and disarm their timeout."""
    exe, path = run.exe, run.t.paths[s]
    for cid in [c for c, ref in exe.children.items() if ref.kind == "task" and ref.path == path]:
        del exe.children[cid]
    disarm(run, path)


def disarm(run: Run, path: str) -> None:
    """Disarm the timeout of the task of the state at ``path`` (answered, or left)."""
    key = TASK_TIMEOUT_PREFIX + path
    if run.exe.timers.pop(key, None) is not None:
        run._timer(TimerOp("cancel", key))


def timed_out(run: Run, path: str, ev: Event) -> bool:
    """The timeout of the task of ``path`` fired first: the running task counts as failed (``TaskTimeout``)
    and goes where a failed answer goes (a retry, else ``on_error``)."""
    running = [(cid, ref) for cid, ref in run.exe.children.items()
               if ref.kind == "task" and ref.path == path and ref.status == "running"]
    if not running:
        return False
    tid, _ = running[-1]
    s = run.t.index.get(path, -1)
    task = run.t.task[s] if s >= 0 else None
    error = timeout_error(tid, task.timeout if task is not None else None)
    return run.on_finished(Event.model_construct(
        id=ev.id, name=FINISHED,
        data={"child_id": tid, "status": "failed", "outcome": None, "output": None, "error": error,
              "task_id": tid}))
