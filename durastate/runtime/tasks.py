"""The task runner: calls what ``invoke: {task: ...}`` names, outside any commit, and turns the answer
into the event the execution routes (:mod:`durastate.engine.tasks` holds the pure side).

The relay reads a task request from the outbox (committed with the state entry that asked for it), calls
:meth:`TaskRunner.run`, sends the answer it returns to the execution through the transport, and only
then acks the request. A crash anywhere before the ack runs the task again on the next pass: a task runs
*at least once*. Its answer has an id derived from the task id, so a second answer is a duplicate the
worker drops; a callee that is idempotent on ``task_id`` (it is in every call) therefore runs once in
effect.

Every kind receives the same JSON document (:meth:`~durastate.engine.tasks.TaskRequest.payload`):
``{"task_id", "execution_id", "state", "attempt", "input"}``.

- ``python: "package.module:function"`` — the function is imported (in this process) and called with the
  document; what it returns is the output, what it raises the error (``"<ExceptionType>: <message>"``).
  With a ``timeout`` it runs in a thread of its own and the runner waits for it that long at most (wall
  time, as for an HTTP task): then the answer is ``TaskTimeout`` — the error the task's durable timer gives
  — and what the call returns later is never sent. So the timeout wins over a late answer, and a call that
  hangs holds up the relay (and ``serve``) for its timeout, not for ever; the thread itself cannot be
  stopped and ends when the call does. Without a ``timeout`` the call is not bounded.
- ``lambda: "<function name or ARN>"`` — invoked synchronously (``RequestResponse``) with boto3; the
  function's JSON answer is the output, a function error (``errorType``, ``errorMessage``) the error.
- ``http: "https://..."`` — POSTed as JSON (with an ``Idempotency-Key: <task id>`` header) with the
  standard library; a 2xx JSON (or empty) body is the output, any other status the error ``TaskError``.

**Heartbeats and cancellation.** A task with a ``heartbeat_timeout`` must report at least that often that it
is alive, or it fails with ``TaskTimeout``: the callee's document then holds ``heartbeat_timeout`` (seconds).

- A Python task calls :func:`current_task` (inside the call) for its :class:`TaskHandle`:
  ``current_task().heartbeat({"done": 40})`` sends a heartbeat with those details (the execution keeps the
  last one), and ``current_task().cancelled`` turns true when the execution stops waiting for it (it left
  the state, ended, or the task timed out) — poll it and return early. The function's signature stays
  ``fn(doc)``. With a ``heartbeat_timeout`` the call runs in a thread of its own, like one with a
  ``timeout``, and the runner stops waiting once a heartbeat is overdue (wall time): ``TaskTimeout``.
- An HTTP or Lambda task heartbeats with ``DurastateClient.heartbeat(task_id, details)`` (or ``durastate
  heartbeat TASK_ID``), from wherever it does the work; the durable ``~heartbeat:`` timer enforces it.
- Cancelling: the execution records a cancel request that the relay passes on with :meth:`TaskRunner.cancel`
  — a Python task's flag (when it runs in this process), a POST of ``{"task_id", "execution_id",
  "state", "reason"}`` to an HTTP task's ``cancel_url`` (best effort: once, its failure logged). When the
  runner itself stops waiting (a deadline passed) it cancels the same way. A Lambda invocation cannot be
  stopped: its late answer is ignored, and the execution's trace says so.

Whatever comes back must pass the entry rules of event data (:func:`durastate.engine.values.check_json`)
and fit :data:`MAX_RESULT_BYTES` as JSON; otherwise the answer is the error ``TaskResultInvalid`` saying
why — never a crash of the relay and never a silent drop.
"""

from __future__ import annotations

import contextvars
import importlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from durastate.engine.ids import TASK_CANCEL
from durastate.engine.model import Event
from durastate.engine.tasks import (
    TaskCancel,
    TaskRequest,
    heartbeat_error,
    heartbeat_message,
    task_result,
    timeout_error,
)
from durastate.engine.values import check_json
from durastate.errors import InvalidValue
from durastate.store.base import OutboxEntry
from durastate.transport.base import Transport

__all__ = ["DEFAULT_HTTP_TIMEOUT", "DEFAULT_PARALLEL", "MAX_ERROR_CHARS", "MAX_RESULT_BYTES", "LambdaInvoker",
           "TaskHandle", "TaskRunner", "current_task", "run_cancels", "run_tasks"]

log = logging.getLogger("durastate.runtime.tasks")

MAX_RESULT_BYTES = 128 * 1024
"""The largest output (as JSON) a task may answer with: it travels in one queue message (SQS: 256 KiB with
the envelope) and is stored in the execution's trace; a bigger result belongs in S3 or a database, with
its key in the answer."""

MAX_ERROR_CHARS = 2000
"""A task's error text is cut to this many characters (an exception can carry a whole response body)."""

DEFAULT_PARALLEL = 4
"""Tasks of one relay pass that run at once, by default (a Python task may thus run in a thread)."""

DEFAULT_HTTP_TIMEOUT = 30.0
"""Seconds an HTTP or Lambda task may take when its ``invoke`` sets no ``timeout``."""

LambdaInvoker = Callable[[str, bytes], tuple[bytes, str | None]]
"""``invoke(function, payload) -> (response payload, function error or None)``: how a Lambda task is
called (boto3 by default; the local stack calls handlers directly)."""


Send = Callable[[Sequence[tuple[str, Event]]], None]
"""How a heartbeat leaves a running Python task: the relay's transport's ``send``."""

CANCEL_TIMEOUT = 10.0
"""Seconds the POST of a cancel request to an HTTP task's ``cancel_url`` may take (it is sent once)."""


class TaskHandle:
    """What a running Python task knows of itself (:func:`current_task`): its ids, a way to heartbeat, and
    whether the execution still waits for it. Thread-safe: the task may heartbeat from threads of its own."""

    def __init__(self, request: TaskRequest, send: Send | None) -> None:
        self.task_id = request.task_id
        self.execution_id = request.execution_id
        self.heartbeat_timeout = request.heartbeat_timeout
        """Seconds within which the next heartbeat must come (``None``: heartbeats are optional)."""
        self._send = send
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self.cancel_reason: str | None = None
        """Why the task was asked to stop (``None`` while it was not)."""
        self.last_beat = time.monotonic()
        """When the task started or last heartbeat (``time.monotonic``: the runner's deadline counts from it)."""

    def heartbeat(self, details: Any = None) -> bool:
        """Report progress: the execution records ``details`` (JSON, up to 8 KiB) as the task's last heartbeat
        and, with a ``heartbeat_timeout``, waits that much longer. ``False`` once the task is cancelled (the
        heartbeat is not sent: nobody waits for it); a bad ``details`` raises ``InvalidValue``."""
        target, event = heartbeat_message(self.task_id, details, self.execution_id)
        with self._lock:
            if self._cancelled.is_set():
                return False
            self.last_beat = time.monotonic()
            if self._send is not None:
                self._send([(target, event)])
        return True

    @property
    def cancelled(self) -> bool:
        """Whether the execution stopped waiting for this task (poll it, and return early when it is)."""
        return self._cancelled.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block until the task is cancelled (``True``) or ``timeout`` seconds passed (``False``)."""
        return self._cancelled.wait(timeout)

    def cancel(self, reason: str) -> None:
        """Mark the task cancelled (the runner and the relay do; the task only reads it)."""
        with self._lock:
            if not self._cancelled.is_set():
                self.cancel_reason = reason
                self._cancelled.set()


_CURRENT: contextvars.ContextVar[TaskHandle | None] = contextvars.ContextVar("durastate_task", default=None)


def current_task() -> TaskHandle:
    """The :class:`TaskHandle` of the Python task running in this thread (call it inside the task function,
    or in a thread it started with ``contextvars.copy_context().run``)."""
    handle = _CURRENT.get()
    if handle is None:
        raise RuntimeError("current_task() is called outside a Python task: only a function the relay runs "
                           "for `invoke: {task: {python: ...}}` has one")
    return handle


class TaskRunner:
    """Runs task requests; one per relay (the clients it makes are reused)."""

    def __init__(self, *, lambda_invoker: LambdaInvoker | None = None, lambda_client: Any = None,
                 http_timeout: float = DEFAULT_HTTP_TIMEOUT, max_result_bytes: int = MAX_RESULT_BYTES,
                 max_parallel: int = DEFAULT_PARALLEL) -> None:
        self.max_parallel = max(1, max_parallel)
        """How many tasks of one relay pass run at once (in threads; 1: one after the other)."""
        self._lambda_invoker = lambda_invoker
        self._lambda_client = lambda_client
        self.http_timeout = http_timeout
        self.max_result_bytes = max_result_bytes
        self._functions: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._send: Send | None = None
        self._running: dict[str, TaskHandle] = {}
        """The Python tasks running in this process, by task id (what a cancel request can reach)."""
        self.cancels: list[TaskCancel] = []
        """The cancel requests this runner passed on (an HTTP POST or a Python task's flag), in order."""

    def attach(self, send: Send) -> None:
        """Where the heartbeats of the Python tasks this runner runs go (the relay's transport)."""
        self._send = send

    def cancel(self, request: TaskCancel) -> None:
        """Ask a task that may still run to stop: a Python task running in this process sees
        ``cancelled``; an HTTP task's ``cancel_url`` gets a POST (once; a failure is logged). Never raises."""
        if request.kind == "python":
            handle = self._running.get(request.task_id)
            if handle is None:
                log.info("task %s (python %s): cancel not passed on, it does not run in this process",
                         request.task_id, request.target)
                return
            handle.cancel(request.reason)
        elif request.kind == "http" and request.cancel_url:
            body = json.dumps(request.payload(), separators=(",", ":")).encode()
            req = urllib.request.Request(request.cancel_url, data=body, method="POST", headers={
                "Content-Type": "application/json", "Idempotency-Key": f"cancel:{request.task_id}"})
            try:
                with urllib.request.urlopen(req, timeout=min(CANCEL_TIMEOUT, self.http_timeout)):
                    pass
            except (urllib.error.URLError, OSError) as exc:
                log.warning("task %s: the cancel request to %s failed (%s); not retried", request.task_id,
                            request.cancel_url, exc)
                return
        else:
            return
        log.info("task %s (%s %s) asked to stop: %s", request.task_id, request.kind, request.target,
                 request.reason)
        self.cancels.append(request)

    def run(self, request: TaskRequest) -> Event:
        """Call the task once; its answer (output or error) as the event to send to the execution."""
        try:
            if request.kind == "python":
                output = self._python(request)
            elif request.kind == "http":
                output = self._http(request)
            else:
                output = self._lambda(request)
        except _TaskFailed as failed:
            return task_result(request, error=_short(str(failed)))
        except Exception as exc:
            log.info("task %s (%s %s) failed: %s: %s", request.task_id, request.kind, request.target,
                     type(exc).__name__, exc)
            return task_result(request, error=_short(f"{type(exc).__name__}: {exc}"))
        problem = self._problem(output)
        if problem is not None:
            log.warning("task %s (%s %s): %s", request.task_id, request.kind, request.target, problem)
            return task_result(request, error=f"TaskResultInvalid: {problem}")
        return task_result(request, output)

    def _problem(self, output: Any) -> str | None:
        try:
            check_json(output, "the result", 2)
        except InvalidValue as exc:
            return f"{exc} (return plain JSON: objects, arrays, strings, finite numbers, booleans, null)"
        size = len(json.dumps(output, separators=(",", ":"), ensure_ascii=False).encode())
        if size > self.max_result_bytes:
            return (f"the result is {size} bytes of JSON, over the {self.max_result_bytes} a task may answer "
                    "with; store it elsewhere (S3, a database) and answer with its key")
        return None

    # -- python ------------------------------------------------------------------------------------------
    def _function(self, target: str) -> Callable[[dict[str, Any]], Any]:
        fn = self._functions.get(target)
        if fn is None:
            module, sep, name = target.partition(":")
            if not sep:
                module, _, name = target.rpartition(".")
            try:
                obj: Any = importlib.import_module(module)
                for part in name.split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError) as exc:
                raise _TaskFailed(f"TaskNotFound: cannot import {target!r} ({exc}); the module must be "
                                  "importable by the process that runs the relay") from None
            if not callable(obj):
                raise _TaskFailed(f"TaskNotFound: {target!r} is not callable")
            fn = self._functions[target] = obj
        return fn

    def _python(self, request: TaskRequest) -> Any:
        function, payload = self._function(request.target), request.payload()
        handle = TaskHandle(request, self._send)
        self._running[request.task_id] = handle
        try:
            if request.timeout is None and request.heartbeat_timeout is None:
                token = _CURRENT.set(handle)
                try:
                    return function(payload)
                finally:
                    _CURRENT.reset(token)
            return _call_within(function, payload, request, handle)
        finally:
            self._running.pop(request.task_id, None)

    # -- http --------------------------------------------------------------------------------------------
    def _http(self, request: TaskRequest) -> Any:
        body = json.dumps(request.payload(), separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Idempotency-Key": request.task_id}
        if request.traceparent is not None:  # the task's own spans join the execution's trace
            headers["traceparent"] = request.traceparent
        req = urllib.request.Request(request.target, data=body, method="POST", headers=headers)
        timeout = request.timeout or self.http_timeout
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # (http/https checked at load)
                raw = resp.read(self.max_result_bytes + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(500).decode("utf-8", "replace").strip()
            raise _TaskFailed(f"TaskError: HTTP {exc.code} from {request.target}"
                              + (f": {detail}" if detail else "")) from None
        except TimeoutError:
            error = f"TaskTimeout: {request.target} did not answer within {timeout:g}s"
            self.cancel(TaskCancel.of(request, error))  # it may still be working on it
            raise _TaskFailed(error) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _TaskFailed(f"TaskError: cannot reach {request.target}: {reason}") from None
        if len(raw) > self.max_result_bytes:
            raise _TaskFailed(f"TaskResultInvalid: {request.target} answered with more than "
                              f"{self.max_result_bytes} bytes")
        return _json_body(raw, request.target)

    # -- lambda ------------------------------------------------------------------------------------------
    def _lambda(self, request: TaskRequest) -> Any:
        invoke = self._lambda_invoker or self._boto3_invoke
        payload, function_error = invoke(request.target, json.dumps(request.payload()).encode())
        if function_error is not None:
            try:
                info = json.loads(payload or b"{}")
            except ValueError:
                info = {}
            if not isinstance(info, dict):
                info = {}
            kind = info.get("errorType") or "TaskError"
            raise _TaskFailed(f"{kind}: {info.get('errorMessage') or function_error} (Lambda {request.target})")
        return _json_body(payload, f"Lambda {request.target}")

    def _boto3_invoke(self, function: str, payload: bytes) -> tuple[bytes, str | None]:
        if self._lambda_client is None:
            import boto3  # type: ignore[import-untyped]
            from botocore.config import Config  # type: ignore[import-untyped]

            self._lambda_client = boto3.client("lambda", config=Config(
                read_timeout=max(60, int(self.http_timeout) + 5), retries={"mode": "standard"}))
        resp = self._lambda_client.invoke(FunctionName=function, InvocationType="RequestResponse",
                                          Payload=payload)
        return resp["Payload"].read(), resp.get("FunctionError")


class _TaskFailed(Exception):
    """A task failed in a way the runner words itself (the message is the error the execution sees)."""


def _call_within(function: Callable[[dict[str, Any]], Any], payload: dict[str, Any], request: TaskRequest,
                 handle: TaskHandle) -> Any:
    """``function(payload)`` in a daemon thread, waited for ``request.timeout`` seconds at most, and with a
    ``heartbeat_timeout`` no longer than that past the task's start or its last heartbeat.

    A daemon thread, not a pool's: a call that never returns must not hold up the process's exit (a pool
    joins its threads then). Past a deadline the call is abandoned: ``TaskTimeout``, the task's handle is
    cancelled (so the function can see it and stop), and its late result or error is logged and dropped,
    never sent (the execution has its timeout already)."""
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []
    late = False
    context = contextvars.copy_context()
    context.run(_CURRENT.set, handle)

    def call() -> None:
        try:
            outcome.append((True, context.run(function, payload)))
        except BaseException as exc:  # handed to the waiting thread, which words it as the task's error
            outcome.append((False, exc))
        finally:
            done.set()
            if late:
                log.info("task %s (python %s) answered after its timeout; its answer is dropped",
                         request.task_id, request.target)

    threading.Thread(target=call, name=f"durastate-task-{request.task_id[:40]}", daemon=True).start()
    error = _wait(done, request, handle)
    if error is not None:
        late = True
        log.warning("task %s (python %s): %s", request.task_id, request.target, error)
        handle.cancel(error)
        raise _TaskFailed(error)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _wait(done: threading.Event, request: TaskRequest, handle: TaskHandle) -> str | None:
    """Wait for ``done`` until a deadline of ``request`` passes: ``None`` when it is set in time, else the
    ``TaskTimeout`` error (the timeout's, or the heartbeat timeout's: each heartbeat moves that deadline)."""
    timeout, every = request.timeout, request.heartbeat_timeout
    end = time.monotonic() + timeout if timeout is not None else None
    while True:
        now = time.monotonic()
        if end is not None and now >= end:
            return timeout_error(request.task_id, timeout)
        if every is not None and now >= handle.last_beat + every:
            return heartbeat_error(request.task_id, every)
        waits = [t - now for t in (end, handle.last_beat + every if every is not None else None) if t is not None]
        if done.wait(min(waits)):
            return None


def _short(error: str) -> str:
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"


def _json_body(raw: bytes, source: str) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise _TaskFailed(f"TaskResultInvalid: {source} answered with something that is not JSON ({exc})") \
            from None


def run_tasks(runner: TaskRunner, entries: Sequence[OutboxEntry], transport: Transport,
              ack: Callable[[int], None]) -> int:
    """The relay's part: run each task request of ``entries``, send its answer to its execution, then ack
    the request. Returns how many were acked. A failed send raises (the request stays, and runs again on
    the next pass: its answer then dedupes); a request that cannot be read is logged and acked."""
    requests: list[TaskRequest | None] = []
    for entry in entries:
        try:
            requests.append(TaskRequest.from_event(entry.target_id or "", entry.event))
        except ValueError as exc:
            log.error("outbox %s: %s; dropped", entry.seq, exc)
            requests.append(None)
    todo = [r for r in requests if r is not None]
    runner.attach(transport.send)
    if runner.max_parallel > 1 and len(todo) > 1:
        # The pass's tasks at once (a slow endpoint does not hold up the others); answers go out and
        # requests are acked in outbox order, after every call of the pass has returned.
        with ThreadPoolExecutor(max_workers=min(runner.max_parallel, len(todo)),
                                thread_name_prefix="durastate-task") as pool:
            # Each call runs in a copy of this invocation's context (its context variables: the logger's
            # keys, the local stack's IAM caller), as it would in a pass that runs them one by one.
            calls = [pool.submit(contextvars.copy_context().run, runner.run, r) for r in todo]
            answers = iter([c.result() for c in calls])
    else:
        answers = iter([runner.run(r) for r in todo])
    for entry, request in zip(entries, requests, strict=True):
        if request is not None:
            transport.send([(request.execution_id, next(answers))])
        ack(entry.seq)
    return len(entries)


def run_cancels(runner: TaskRunner, entries: Sequence[OutboxEntry], ack: Callable[[int], None]) -> int:
    """The relay's part for cancel requests: pass each on (:meth:`TaskRunner.cancel`: best effort, never
    raises), then ack it. Returns how many were acked."""
    for entry in entries:
        try:
            request = TaskCancel.from_event(entry.target_id or "", entry.event)
        except ValueError as exc:
            log.error("outbox %s: %s; dropped", entry.seq, exc)
        else:
            runner.cancel(request)
        ack(entry.seq)
    return len(entries)


def is_cancel(entry: OutboxEntry) -> bool:
    """Whether ``entry`` is a cancel request for a task (the relay's, never a queue's)."""
    return entry.event.name == TASK_CANCEL
