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
  it is not suspended or terminated with it, and it is asked to stop only as below (**cancel**);
- **timeout**: a durable timer (``~task:<path>``, like ``after``): when it fires first, the task counts as
  failed with ``TaskTimeout: ...`` (its late answer is then ignored);
- **retry**: the invoke's retry policy (:mod:`durastate.engine.retry`): a failed try (an error, a
  ``TaskTimeout``) starts a new task, with a new task id, after the backoff;
- **heartbeat**: a ``durastate.heartbeat`` naming the task id (:func:`durastate.engine.task_runs.heartbeat`)
  records its details in the task's :class:`~durastate.engine.model.ChildRef` and, with a
  ``heartbeat_timeout``, re-arms the durable timer ``~heartbeat:<path>`` at ``now + heartbeat_timeout``;
  when it fires first the task counts as failed with ``TaskTimeout`` (as for ``timeout``). A heartbeat for
  a task the execution no longer waits for is ignored (traced);
- **cancel**: when the execution stops waiting for a task that may still run (it leaves the state, ends,
  or the task timed out), the step records a cancel request (``durastate.task_cancel``) in the outbox for
  a Python task and for an HTTP task with a ``cancel_url``: the relay passes it on (the step calls nothing).
  A Lambda task cannot be stopped: its late answer is ignored, and the trace says so.

This module holds the pure parts: the spec and its checks and the request's wire form, which the runtime
reads back (:class:`TaskRequest`); what entering, leaving, answering and timing out do to the execution is
:mod:`durastate.engine.task_runs`, which the interpreter calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from durastate.engine.durations import positive_seconds
from durastate.engine.expressions import Issues, Value, compile_value
from durastate.engine.ids import (
    FINISHED,
    HEARTBEAT,
    TASK,
    TASK_CANCEL,
    finished_event_id,
    heartbeat_event_id,
    task_execution_id,
)
from durastate.engine.model import Event, new_id
from durastate.engine.values import check_json
from durastate.errors import InvalidValue

if TYPE_CHECKING:
    from durastate.engine.states import Invoke

__all__ = [
    "MAX_HEARTBEAT_BYTES",
    "TASK_KINDS",
    "CompiledTask",
    "TaskCancel",
    "TaskKind",
    "TaskRequest",
    "compile_task",
    "heartbeat_error",
    "heartbeat_event",
    "heartbeat_message",
    "heartbeat_problem",
    "invoked",
    "task_only",
    "task_result",
    "timeout_error",
]

MAX_HEARTBEAT_BYTES = 8 * 1024
"""The largest heartbeat details (as JSON): they are kept in the execution (the task's last heartbeat) and
in its trace; progress and a checkpoint key fit, a partial result belongs elsewhere."""

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
    heartbeat_timeout: float | None = None
    cancel_url: str | None = None

    @property
    def cancellable(self) -> bool:
        """Whether the relay can ask a running task of this kind to stop (a Python task's flag, an HTTP
        task's ``cancel_url``); a Lambda invocation cannot be stopped."""
        return self.kind == "python" or self.cancel_url is not None


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
        issues.append(f"{where}.parent_close: for child executions (`definition`); a task still running "
                      "when its state is left is asked to stop (`cancel_url`, a Python task's flag)")
        ok = False
    for name in ("id_key", "forward"):
        if getattr(invoke, name):
            issues.append(f"{where}.{name}: for child executions (`definition`); a task is no execution to send "
                          "to")
            ok = False
    timeout = positive_seconds(invoke.timeout, f"{where}.timeout", issues)
    heartbeat_timeout = positive_seconds(invoke.heartbeat_timeout, f"{where}.heartbeat_timeout", issues)
    ok = ok and (timeout is not False) and (heartbeat_timeout is not False)
    if timeout and heartbeat_timeout and heartbeat_timeout >= timeout:
        issues.append(f"{where}.heartbeat_timeout: shorter than `timeout` ({invoke.timeout!r}), got "
                      f"{invoke.heartbeat_timeout!r}; a heartbeat timeout as long as the timeout never fires first")
        ok = False
    cancel_url = invoke.cancel_url
    if cancel_url is not None:
        if kind != "http":
            issues.append(f"{where}.cancel_url: only for an `http` task (a Python task gets a cancellation flag, "
                          "a Lambda invocation cannot be stopped)")
            ok = False
        elif not cancel_url.startswith(("http://", "https://")):
            issues.append(f"{where}.cancel_url: an http:// or https:// URL, got {cancel_url!r}")
            ok = False
    value = compile_value({} if invoke.input is None else invoke.input, f"{where}.input", issues)
    if not ok:
        return None
    assert timeout is not False and heartbeat_timeout is not False
    return CompiledTask(kind, target, value, timeout, heartbeat_timeout, cancel_url)


def task_only(invoke: Invoke) -> str | None:
    """The first setting of ``invoke`` that only a task has (``None``: none is set), for the check that
    refuses it on a child execution's invoke or a map's."""
    for name in ("input", "timeout", "heartbeat_timeout", "cancel_url"):
        if getattr(invoke, name) is not None:
            return name
    return None


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
    heartbeat_timeout: float | None = None
    cancel_url: str | None = None
    traceparent: str | None = None
    """The W3C trace context of the span that started the task: sent to it (the HTTP ``traceparent``
    header) and carried back by its answer."""

    @classmethod
    def from_event(cls, target_id: str, event: Event) -> TaskRequest:
        """Read a ``durastate.task`` outbox event back; ``ValueError`` when it is not one."""
        d = event.data
        kind = d.get("kind")
        if event.name != TASK or kind not in TASK_KINDS or not isinstance(d.get("task_id"), str) \
                or not isinstance(d.get("target"), str):
            raise ValueError(f"event {event.id} ({event.name}) is not a task request")
        timeout, heartbeat_timeout, url = d.get("timeout"), d.get("heartbeat_timeout"), d.get("cancel_url")
        return cls(task_id=d["task_id"], execution_id=target_id, path=str(d.get("path", "")), kind=kind,
                   target=d["target"], input=d.get("input"),
                   timeout=float(timeout) if isinstance(timeout, int | float) else None,
                   attempt=int(d.get("attempt", 1)),
                   heartbeat_timeout=float(heartbeat_timeout) if isinstance(heartbeat_timeout, int | float)
                   else None, cancel_url=url if isinstance(url, str) else None,
                   traceparent=event.traceparent)

    def payload(self) -> dict[str, Any]:
        """What the callee receives (the Lambda event, the HTTP body): the input and the ids to be
        idempotent on; with a ``heartbeat_timeout``, also how often it must heartbeat at least."""
        doc = {"task_id": self.task_id, "execution_id": self.execution_id, "state": self.path,
               "attempt": self.attempt, "input": self.input}
        if self.heartbeat_timeout is not None:
            doc["heartbeat_timeout"] = self.heartbeat_timeout
        return doc


@dataclass(frozen=True, slots=True)
class TaskCancel:
    """A cancel request as the relay reads it from the outbox (the event :func:`leave` and the others
    record when the execution stops waiting for a running task)."""

    task_id: str
    execution_id: str
    path: str
    kind: TaskKind
    target: str
    cancel_url: str | None
    reason: str

    @classmethod
    def of(cls, request: TaskRequest, reason: str) -> TaskCancel:
        """The cancel of ``request`` the runner makes itself when it stops waiting for the task (its own
        deadline passed) while the task may still run."""
        return cls(task_id=request.task_id, execution_id=request.execution_id, path=request.path,
                   kind=request.kind, target=request.target, cancel_url=request.cancel_url, reason=reason)

    @classmethod
    def from_event(cls, target_id: str, event: Event) -> TaskCancel:
        """Read a ``durastate.task_cancel`` outbox event back; ``ValueError`` when it is not one."""
        d = event.data
        kind, url = d.get("kind"), d.get("cancel_url")
        if event.name != TASK_CANCEL or kind not in TASK_KINDS or not isinstance(d.get("task_id"), str):
            raise ValueError(f"event {event.id} ({event.name}) is not a task cancel request")
        return cls(task_id=d["task_id"], execution_id=target_id, path=str(d.get("path", "")), kind=kind,
                   target=str(d.get("target", "")), cancel_url=url if isinstance(url, str) else None,
                   reason=str(d.get("reason", "")))

    def payload(self) -> dict[str, Any]:
        """What an HTTP task's ``cancel_url`` receives."""
        return {"task_id": self.task_id, "execution_id": self.execution_id, "state": self.path,
                "reason": self.reason}


def heartbeat_event(task: str, details: Any, nonce: str) -> Event:
    """The heartbeat of task ``task`` with ``details`` (checked: :class:`InvalidValue` saying why they
    cannot be sent); ``nonce`` makes its id its own (:func:`~durastate.engine.ids.heartbeat_event_id`)."""
    problem = heartbeat_problem(details)
    if problem is not None:
        raise InvalidValue(problem)
    return Event(id=heartbeat_event_id(task, nonce), name=HEARTBEAT, data={"task_id": task, "details": details})


def heartbeat_message(task: str, details: Any = None, execution_id: str | None = None) -> tuple[str, Event]:
    """What a heartbeat of task ``task`` sends: ``(execution id, event)``. The execution is read from the
    task id (:func:`~durastate.engine.ids.task_execution_id`) unless given; a hashed (very long) task id does
    not hold it, and then ``execution_id`` is required (every task receives it as ``execution_id``)."""
    if not isinstance(task, str) or not task:
        raise InvalidValue(f"a task id is the task's `task_id` (a non-empty string), got {task!r}")
    target = execution_id or task_execution_id(task)
    if target is None:
        raise InvalidValue(f"{task!r} does not name its execution (a task id is `<execution id>~<n>~<mac>`, "
                           "or `~` and a hash when that is too long); pass the task's `execution_id` too")
    return target, heartbeat_event(task, details, new_id()[:16])


def heartbeat_problem(details: Any) -> str | None:
    """Why ``details`` cannot be a heartbeat's details (``None``: they can): plain JSON of at most
    :data:`MAX_HEARTBEAT_BYTES`. The client refuses such details up front; the engine ignores a heartbeat
    that carries them (traced), without failing anything."""
    try:
        check_json(details, "heartbeat details", 2)
    except InvalidValue as exc:
        return str(exc)
    size = len(json.dumps(details, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_HEARTBEAT_BYTES:
        return (f"heartbeat details are {size} bytes of JSON, over the {MAX_HEARTBEAT_BYTES} a heartbeat may "
                "carry; send progress and a key, keep the rest elsewhere")
    return None


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
    return Event(id=finished_event_id(request.task_id), name=FINISHED, data=data, traceparent=request.traceparent)


def heartbeat_error(task_id: str, heartbeat_timeout: float | None) -> str:
    """The error of a task that went silent: the same whether its durable heartbeat timer fired first or the
    runner stopped waiting for it (a Python task's heartbeat deadline)."""
    within = f" within {heartbeat_timeout:g}s" if heartbeat_timeout is not None else " in time"
    return f"TaskTimeout: task {task_id} sent no heartbeat{within}"
