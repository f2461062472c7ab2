"""The interpreter: ``step(definition, execution, event, now) -> StepResult``.

``step`` is pure with respect to the outside world: it mutates the execution it is given and returns
what must be committed *with* it (emitted events, timer operations, child-spawn intents, a trace entry).
It never reads a clock, a store or a queue, so a worker can retry it after a lost compare-and-swap and
get the same result, and tests can drive it event by event.

Semantics (SCXML where it applies; see the definitions reference):

- selection: the active leaf's transitions first, then its ancestors'; document order within a state;
  the first whose guard holds wins. An ``on`` key is an SCXML event descriptor: ``error`` matches
  ``error`` and ``error.send.failed`` (whole tokens), ``*`` matches any event but the reserved
  ``durastate.*`` ones (see :mod:`durastate.engine.tables` for how this stays one dict hit);
- a transition exits the active states below its domain leaf first, runs its actions, enters the states
  from the domain down to its target (outermost first), then the initial/history defaults below it;
  external by default, so a target equal to or inside the source exits and re-enters the source;
- ``always`` transitions are taken to a fixed point after every transition, and events ``raise``d by
  actions are processed (each followed by its own fixed point) before the step ends; past
  :data:`MAX_MICROSTEPS` the execution fails;
- an event nobody handles while the execution sits in a parallel state is forwarded to every running
  region child; otherwise it is ignored (``StepResult.ignored``); a definition with ``regions: inline``
  parallel states steps on :class:`durastate.engine.inline.InlineRun`, whose configuration may hold
  several leaves (SCXML's multi-transition microsteps);
- an execution that ends by reaching a final child of its root, or by ``durastate.cancel``, first exits
  its active states as SCXML does (exit actions, leaf first, up to its root: a region child's root is
  its region); a failure runs nothing more (:meth:`Run.end` is the seam: ``exits=False`` ends without).
"""

from __future__ import annotations

from typing import Any

from durastate.engine import task_runs
from durastate.engine.definition import Definition
from durastate.engine.expressions import ACTIVE
from durastate.engine.ids import (
    CATCH,
    HEARTBEAT,
)
from durastate.engine.inline import InlineRun
from durastate.engine.model import (
    CANCEL,
    FINISHED,
    RESERVED_PREFIX,
    START,
    TIMEOUT,
    Event,
    Execution,
)
from durastate.engine.retry import RetryableFailure
from durastate.engine.run import Run
from durastate.engine.run_context import MAX_MICROSTEPS, ExecutionFailed, StepResult
from durastate.engine.search import search_values
from durastate.engine.tracing import describe_transitions

__all__ = ["MAX_MICROSTEPS", "ExecutionFailed", "Run", "StepResult", "step"]

_STEP_FIELDS = ("active_path", "updated_at")

_STARTED_FIELDS = (
    "active_path",
    "history",
    "context",
    "children",
    "maps",
    "invoke_seq",
    "timers",
    "created_at",
    "updated_at",
    "search",
    "status",
    "outcome",
    "error",
)


def step(defn: Definition, exe: Execution, event: Event, now: float, *, detail: bool = False,
         emitted: int = 0) -> StepResult:
    """Apply ``event`` to ``exe`` (mutated in place) at time ``now``; return what to commit with it.

    ``detail``: the trace entry also lists the transitions taken (``"transitions"``, see
    :func:`durastate.engine.tracing.describe_transitions`); off, the step records none of them.
    ``emitted``: how many events earlier steps of the same commit emitted (a resume applying held events):
    this step's emitted ids count on from there, so no two events of one commit share an id
    (:func:`durastate.engine.ids.emit_event_id`)."""
    t = defn.tables
    # Hot path: read and write the execution's fields through its __dict__ (pydantic's __setattr__
    # costs a microsecond per write and validates nothing here anyway).
    fields = exe.__dict__
    before: str | None = fields["active_path"]
    if fields["status"] != "running":
        res = StepResult()
        res.ignored = True
        res.trace = {
            "event": event.name,
            "event_id": event.id,
            "from": before,
            "to": before,
            "status": fields["status"],
            "ignored": True,
        }
        return res
    run = res = (InlineRun if t.has_inline else Run)(t, exe, event, now)
    if emitted:
        run.emit_seq = emitted
    if t.in_state:
        ACTIVE.set(run.is_active)
    if detail:
        run.fired = []
    handled = True
    try:
        root_path = fields["root_path"]
        if root_path is not None:
            root = t.index.get(root_path, -1)
            if root < 0:
                raise ExecutionFailed(f"root path {root_path!r} is not a state of {defn.id!r}")
            run.root = root
        if before is None:
            # Everything the step may change counts as set (for anyone dumping with exclude_unset).
            exe.__pydantic_fields_set__.update(_STARTED_FIELDS)
            if fields["created_at"] is None:
                fields["created_at"] = now
            if root_path is None:
                run.arm_run_timeout(event)
            if run.root:
                run.enter_state(run.root)
            run.complete(run.root)
            if event.name != START:
                run.settle()
                if fields["status"] == "running":
                    run.dispatch(event)
        else:
            leaf = t.index.get(before, -1)
            if leaf < 0:
                raise ExecutionFailed(
                    f"active state {before!r} is not a state of {defn.id!r} "
                    "(was the definition changed under a running execution?)"
                )
            run.leaf = leaf
            name = event.name
            if name.startswith(RESERVED_PREFIX):
                if name == TIMEOUT:
                    handled = run.on_timeout(event)
                elif name == FINISHED:
                    handled = run.on_finished(event)
                elif name == CANCEL:
                    run.end("cancelled", None)
                elif name == CATCH:
                    handled = run.on_catch(event)
                elif name == HEARTBEAT:
                    handled = task_runs.heartbeat(run, event)
                else:
                    handled = False  # a repeated start, or an unknown reserved name
            else:
                forwarded = bool(t.invoke_forward) and run.autoforward(event)
                if not run.dispatch(event):
                    # a guard that failed under ``action_errors: raise`` raised error.execution: it is handled
                    handled = bool(run.internal)
                    if not handled and t.kind[leaf] == "parallel" and fields["children"]:
                        handled = run.forward(event)
                    handled = handled or forwarded
        if handled:
            if run.internal or t.always[run.leaf] or t.has_inline:
                run.settle()
            if run.forks or run.invokes or run.fanouts:
                run.start_children()
    except RetryableFailure as exc:
        res.retry = exc  # the caller throws this step away: what it did to the execution does not count
        res.emits, res.timers, res.spawns = [], [], []
        return res
    except Exception as exc:
        msg = str(exc) if isinstance(exc, ExecutionFailed) else f"{type(exc).__name__}: {exc} (at {run.site})"
        res.spawns.clear()
        run.finish("failed", None, msg)
        handled = True
    after = before
    if handled:
        after = t.paths[run.leaf] or before
        fields["active_path"] = after
        if t.has_inline:
            run.save_leaves()
    if run.timer_ops:
        res.timers = list(run.timer_ops.values())
    fields["updated_at"] = now
    if defn.search and fields["root_path"] is None:  # a region child is found through its parent
        fields["search"] = search_values(defn.search, fields["context"])
    status = fields["status"]
    trace: dict[str, Any] = {
        "event": event.name,
        "event_id": event.id,
        "from": before,
        "to": after,
        "status": status,
    }
    if not handled:
        res.ignored = True
        trace["ignored"] = True
        if run.note is not None:
            trace["reason"] = run.note
    elif status == "failed":
        trace["error"] = fields["error"]
    if res.logs:
        trace["log"] = list(res.logs)
    if t.has_inline and fields["leaves"]:
        trace["leaves"] = list(fields["leaves"])  # the configuration inside an inline parallel state
    if run.fired:
        trace["transitions"] = describe_transitions(t, run.fired)
    res.trace = trace
    return res
