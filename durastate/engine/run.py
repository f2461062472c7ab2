"""The mutable state of one step (:class:`Run`): what a transition, an entry, an exit, a timeout and a
child's answer do to the execution. :func:`durastate.engine.interpreter.step` makes one per step and
drives it; :class:`durastate.engine.inline.InlineRun` extends it for ``regions: inline`` parallel states.
"""

from __future__ import annotations

import copy
from typing import Any

from durastate.engine import fanout, map_runs, task_runs
from durastate.engine.ids import (
    HEARTBEAT_TIMEOUT_PREFIX,
    REINVOKE_PREFIX,
    RUN_TIMEOUT_PATH,
    SEND_PREFIX,
    TASK_TIMEOUT_PREFIX,
    TERMINATE,
    cancel_event_id,
    child_execution_id,
    emit_event_id,
    finished_event_id,
    forwarded_event_id,
    terminate_event_id,
)
from durastate.engine.model import (
    CANCEL,
    FINISHED,
    START,
    ChildRef,
    Event,
    Execution,
    TimerOp,
)
from durastate.engine.retry import RetryableFailure
from durastate.engine.run_context import (
    EXECUTION_ERROR,
    MAX_MICROSTEPS,
    ActionFailed,
    ExecutionFailed,
    StepResult,
    unsettled,
)
from durastate.engine.run_timeout import timed_out_reason
from durastate.engine.tables import CompiledTransition, Tables
from durastate.engine.timers import BadTimerValue
from durastate.engine.values import check_event_id

__all__ = ["Run"]

_new = object.__new__
_set = object.__setattr__


def _event(eid: str, name: str, data: dict[str, Any], kind: str = "external", send_id: str | None = None,
           origin: str | None = None) -> Event:
    """An :class:`Event` from parts the engine already knows are valid, without pydantic validation.

    (Twice as fast as ``Event(...)`` and four times ``Event.model_construct``: steps emit many events.)
    """
    ev = _new(Event)
    _set(ev, "__dict__", {"id": eid, "name": name, "data": data, "traceparent": None, "kind": kind,
                          "send_id": send_id, "origin": origin})
    _set(ev, "__pydantic_fields_set__", {"id", "name", "data"} if origin is None and send_id is None
         and kind == "external" else {"id", "name", "data", "kind", "send_id", "origin"})
    _set(ev, "__pydantic_extra__", None)
    _set(ev, "__pydantic_private__", None)
    return ev


def _snapshot(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` that later context mutations cannot reach (deep only when it must be)."""
    for v in data.values():
        if isinstance(v, dict | list):
            return copy.deepcopy(data)
    return dict(data)


class Run(StepResult):
    """The mutable state of one step. Actions receive it (``run.exe``, ``run.event``, ``run.emit``...).

    It *is* the step's result as well (one object instead of two on the hot path): ``step`` returns it,
    typed as :class:`StepResult`.
    """

    # No __slots__ here on purpose: the rarely used parts are class-level defaults (None until
    # needed), so a step that arms no timer and raises nothing allocates nothing for them.
    root = 0
    leaf = 0
    site = ""
    emit_seq = 0
    timer_ops: dict[str, TimerOp] | None = None
    internal: list[Event] | None = None
    invokes: list[int] | None = None
    forks: list[int] | None = None
    fanouts: list[int] | None = None
    """Map states entered in this step, whose first children start at its end (:mod:`durastate.engine.fanout`)."""
    invoke_attempt = 1
    note: str | None = None
    """Why the event changed nothing, when the step can say more than "not handled" (a late task answer or
    heartbeat); the trace records it as ``reason``."""
    fired: list[tuple[CompiledTransition, str]] | None = None
    """The transitions taken and the event in hand when each fired; a list only for ``step(detail=True)``."""

    def __init__(self, t: Tables, exe: Execution, event: Event, now: float) -> None:
        self.emits = []
        self.timers = []
        self.spawns = []
        self.logs = []
        self.ignored = False
        self.res: StepResult = self
        self.t = t
        self.exe = exe
        self.event = event
        self.now = now

    def _timer(self, op: TimerOp) -> None:
        if self.timer_ops is None:
            self.timer_ops = {}
        self.timer_ops[op.path] = op  # the last operation per path wins

    def _queue(self, ev: Event) -> None:
        if self.internal is None:
            self.internal = []
        self.internal.append(ev)

    # -- used by actions -----------------------------------------------------------------------------
    def emit(self, target: str | None, name: str, data: dict[str, Any], send_id: str | None = None) -> None:
        """Queue an event for another execution (``target``) or the notification sink (``None``), from this
        execution (its ``origin``), named ``send_id`` if the send has an id."""
        self.emit_seq += 1
        exe = self.exe
        eid = emit_event_id(exe.id, exe.version, self.emit_seq, exe.secret)
        self.res.emits.append((target, _event(eid, name, _snapshot(data), send_id=send_id, origin=exe.id)))

    def new_send_id(self) -> str:
        """A send id no other send of this execution gets (its version and the step's count of emitted
        events): what a send that stores its id (``id_location``) is named, when it names none itself."""
        self.emit_seq += 1
        return f"send.{self.exe.version}.{self.emit_seq}"

    def raise_internal(self, name: str, data: dict[str, Any]) -> None:
        """Queue an internal event, processed in this step before any later external event."""
        self._queue(_event(self.event.id, name, data, "internal"))

    def raise_platform(self, name: str, data: dict[str, Any], send_id: str | None = None) -> None:
        """Queue an internal event the engine itself raises (a done event, ``error.execution``)."""
        self._queue(_event(self.event.id, name, data, "platform", send_id))

    def send_later(self, send_id: str | None, seconds: float, name: str, data: dict[str, Any]) -> None:
        """Deliver event ``name`` to this execution ``seconds`` from now: a durable timer keyed by ``send_id``
        (a pending send with the same id is replaced; none: the event's own id), the event kept with the
        execution until it fires."""
        exe = self.exe
        self.emit_seq += 1
        eid = emit_event_id(exe.id, exe.version, self.emit_seq, exe.secret)
        key = SEND_PREFIX + (eid if send_id is None else send_id)
        check_event_id(key, "send id")
        fire_at = self.now + seconds
        exe.sends[key] = _event(eid, name, _snapshot(data), send_id=send_id, origin=exe.id)
        exe.timers[key] = fire_at
        exe.__pydantic_fields_set__.add("sends")
        self._timer(TimerOp("schedule", key, fire_at))

    def cancel_send(self, send_id: str) -> None:
        """Drop the pending delayed send ``send_id`` (nothing happens if there is none, or it was delivered)."""
        key = SEND_PREFIX + send_id
        if self.exe.sends.pop(key, None) is not None:
            self.exe.timers.pop(key, None)
            self._timer(TimerOp("cancel", key))

    # -- running compiled actions ---------------------------------------------------------------------
    def _actions(self, actions: tuple[Any, ...], site: str) -> None:
        self.site = site
        if self.t.raise_errors:
            try:
                for a in actions:
                    a(self)
            except Exception as exc:
                self.failed_action(exc)
            return
        for a in actions:
            a(self)

    def failed_action(self, exc: Exception) -> None:
        """Under ``action_errors: raise``: a guard or an action at :attr:`site` raised ``exc``. SCXML's
        answer: ``error.execution`` (data: ``error``, what failed and where) is raised, and the step goes on
        (the rest of the action list is skipped, a guard counts as false). What is no error of the chart
        (a retry to schedule, the engine's own failure), and any failure without ``action_errors: raise``, is
        raised again."""
        if not self.t.raise_errors or isinstance(exc, RetryableFailure) or (
                isinstance(exc, ExecutionFailed) and not isinstance(exc, ActionFailed)):
            raise exc
        error = str(exc) if isinstance(exc, ActionFailed) else f"{type(exc).__name__}: {exc} (at {self.site})"
        self.raise_platform(EXECUTION_ERROR, {"error": error}, exc.send_id if isinstance(exc, ActionFailed) else None)

    def holds(self, guard: Any, ctx: dict[str, Any], ev: Event) -> bool:
        """Whether ``guard`` holds; under ``action_errors: raise`` one that raises is false (and raises
        ``error.execution``: :meth:`failed_action`)."""
        if not self.t.raise_errors:
            return bool(guard(ctx, ev))
        try:
            return bool(guard(ctx, ev))
        except Exception as exc:
            self.failed_action(exc)
            return False

    def is_active(self, path: str) -> bool:
        """``path`` is in the active configuration (what an ``in_state`` guard asks)."""
        s = self.t.index.get(path, -1)
        return s >= 0 and (s == self.leaf or self.t.is_proper_ancestor(s, self.leaf))

    def save_leaves(self) -> None:
        """Store the configuration beyond ``active_path``: nothing here (see :mod:`durastate.engine.inline`)."""

    # -- selection -----------------------------------------------------------------------------------
    def dispatch(self, ev: Event) -> bool:
        """Select the transition for ``ev`` (innermost state first, document order) and take it."""
        t = self.t
        name = ev.name
        cands = t.handlers[self.leaf].get(name)
        if not cands:
            # Not a key. Only a `*`, or a descriptor that is a token prefix of a dotted name, can match:
            # without either in the definition, the event is ignored here, without a call.
            if not (t.has_star or ("." in name and name.partition(".")[0] in t.prefix_heads)):
                return False
            cands = t.fallback(self.leaf, name)
            if not cands:
                return False
        ct = self.enabled(cands, ev)
        if ct is None:
            return False
        self.event = ev
        self.fire(ct)
        return True

    def enabled(self, cands: tuple[CompiledTransition, ...], ev: Event) -> CompiledTransition | None:
        """The transition one leaf selects: the first of ``cands`` (its candidates in selection order) whose
        guard holds for ``ev``; none from a state above this execution's root (a region's parent is not
        part of the region child), nor past one."""
        min_depth = self.t.depth[self.root]
        ctx = self.exe.context
        for ct in cands:
            if ct.source_depth < min_depth:
                return None
            g = ct.guard
            if g is not None:
                self.site = ct.guard_site
                if not (self.holds(g, ctx, ev) if self.t.raise_errors else g(ctx, ev)):
                    continue
            return ct
        return None

    # -- one transition ------------------------------------------------------------------------------
    def fire(self, ct: CompiledTransition) -> None:
        if self.fired is not None:
            self.fired.append((ct, self.event.name))
        t = self.t
        if ct.target < 0:
            self._actions(ct.actions, ct.actions_site)
            return
        leaf = self.leaf
        domain = ct.domain
        exit_work, parent = t.exit_work, t.parent
        s = leaf
        while s != domain:
            if exit_work[s]:
                self.exit_state(s, leaf)
            s = parent[s]
            self.leaf = s
        if ct.actions:
            self._actions(ct.actions, ct.actions_site)
        enter_work = t.enter_work
        for s in ct.enter:
            if enter_work[s]:
                self.enter_state(s)
            else:
                self.leaf = s
        if ct.history >= 0:
            self.restore(ct.history)
        elif t.kind[ct.target] == "atomic":
            self.leaf = ct.target
        else:
            self.complete(ct.target)

    def exit_state(self, s: int, leaf: int) -> None:
        t, exe = self.t, self.exe
        if t.has_history[s]:
            exe.history[t.paths[s]] = t.paths[leaf]
        if t.exit[s]:
            self._actions(t.exit[s], t.sites[s] + ".exit")
        if t.after[s]:
            for timer in t.after[s]:
                if exe.timers.pop(timer.key, None) is not None:
                    self._timer(TimerOp("cancel", timer.key))
        if exe.children and (t.kind[s] == "parallel" or t.invoke[s] is not None):
            self._drop_children(s)
        if t.maps and s in t.maps:
            map_runs.leave(self, s)
        if t.task[s] is not None:
            task_runs.leave(self, s)
        if t.invoke_retry[s] is not None and exe.timers:
            again = REINVOKE_PREFIX + t.paths[s]
            if exe.timers.pop(again, None) is not None:
                self._timer(TimerOp("cancel", again))

    def _drop_children(self, s: int) -> None:
        """Close the running children the state owns as their ``parent_close`` says and forget them (late news
        is ignored); an abandoned one is kept, marked, so that its finished notice is traced as ignored."""
        t, exe = self.t, self.exe
        path = t.paths[s]
        prefix = path + "."
        for cid, ref in list(exe.children.items()):
            owned = (
                ref.path == path
                if ref.kind == "invoke"
                else (ref.path.startswith(prefix) and "." not in ref.path[len(prefix) :])
            )
            if owned and not ref.abandoned:
                if ref.status == "running" and self.close_child(cid, ref):
                    continue
                del exe.children[cid]

    def close_child(self, cid: str, ref: ChildRef) -> bool:
        """Cancel, terminate or abandon running child ``cid`` as its ``parent_close`` says; ``True``: it was
        abandoned (its reference stays, marked)."""
        if ref.parent_close == "abandon":
            ref.abandoned = True
            return True
        if ref.parent_close == "terminate":
            self.res.emits.append((cid, _event(terminate_event_id(cid), TERMINATE, {})))
        elif ref.kind != "task":  # a task is no execution: nothing to cancel (a late answer is ignored)
            self.res.emits.append((cid, _event(cancel_event_id(cid), CANCEL, {})))
        return False

    def enter_state(self, s: int) -> None:
        self.leaf = s
        t = self.t
        if not t.enter_work[s]:
            return
        if t.entry[s]:
            self._actions(t.entry[s], t.sites[s] + ".entry")
        if t.after[s]:
            self.arm_timers(s)
        if t.invoke[s] is not None or t.task[s] is not None:
            if self.invokes is None:
                self.invokes = []
            self.invokes.append(s)
        if t.maps and s in t.maps:
            map_runs.enter(self, s)

    def arm_timers(self, s: int) -> None:
        """Arm every ``after`` timer of the just-entered state ``s``; a computed delay or deadline that is
        not one fails the step (naming the state, the timer and the value)."""
        exe, now = self.exe, self.now
        for timer in self.t.after[s]:
            if timer.value is None:
                fire_at = timer.fire_at(exe.context, self.event, now)
            else:
                self.site = timer.transition.site + (".at" if timer.is_at else ".seconds")
                try:
                    fire_at = timer.fire_at(exe.context, self.event, now)
                except BadTimerValue as exc:
                    raise ExecutionFailed(f"{exc} (fix the value, then `durastate redrive {exe.id}`)") from None
            exe.timers[timer.key] = fire_at
            self._timer(TimerOp("schedule", timer.key, fire_at))

    def complete(self, s: int) -> None:
        """Below a just-entered state: its initial (or history) defaults down to a leaf."""
        t = self.t
        while True:
            kind = t.kind[s]
            if kind == "compound":
                s = self.enter_initial(s)
                if s < 0:
                    return
                continue
            self.leaf = s
            if kind == "parallel":
                if self.forks is None:
                    self.forks = []
                self.forks.append(s)
            elif kind == "final":
                self.on_final(s)
            return

    def enter_initial(self, s: int) -> int:
        """Enter the initial child of compound state ``s`` and return it (to complete); ``-1`` when that
        child is a history pseudo-state, whose restore has entered what it remembers (completed)."""
        c = self.t.initial[s]
        if self.t.kind[c] == "history":
            self.restore(c)
            return -1
        self.enter_state(c)
        return c

    def restore(self, h: int) -> None:
        """Enter what history pseudo-state ``h`` remembers (or its default)."""
        t, exe = self.t, self.exe
        p = t.parent[h]
        self.leaf = p
        recorded = exe.history.get(t.paths[p])
        rec = t.index.get(recorded, -1) if recorded is not None else -1
        if rec > 0 and t.is_proper_ancestor(p, rec):
            chain: list[int] = []
            s = rec
            while s != p:
                chain.append(s)
                s = t.parent[s]
            if not t.history_deep[h]:
                c = chain[-1]
                self.enter_state(c)
                self.complete(c)
                return
            for s in reversed(chain):
                self.enter_state(s)
            self.complete(rec)
            return
        default = t.history_default[h]
        if default < 0:
            default = t.initial[p]
        chain = []
        s = default
        while s != p:
            chain.append(s)
            s = t.parent[s]
        for s in reversed(chain):
            self.enter_state(s)
        self.complete(default)

    def on_final(self, s: int) -> None:
        t = self.t
        p = t.parent[s]
        if p == self.root or p == 0:
            self.end("finished", t.outcome[s])
        else:
            self.raise_platform(t.done_event[p], {})

    # -- ending ----------------------------------------------------------------------------------------
    def end(self, status: str, outcome: str | None, *, exits: bool = True) -> None:
        """End the execution normally (``finished``, ``cancelled``): with ``exits``, first exit every active
        state as SCXML does when a session ends, then :meth:`finish`.

        ``exits=False`` ends without running anything (what a ``terminate`` will do); a failure goes to
        :meth:`finish` directly, since the step that failed already stopped halfway.
        """
        if exits:
            self.exit_all()
        self.finish(status, outcome, None)

    def exit_all(self) -> None:
        """Run the exit actions of the active states, leaf first, up to this execution's root.

        For a region child the root is its region (the child entered it, so the child exits it). Only the
        actions: finish cancels the timers and the children that leaving the states would cancel, history
        is not recorded (nothing can come back), and events raised here are dropped with the rest of the
        queue. Region children and invoked children get ``durastate.cancel`` from finish and run their own.
        """
        t = self.t
        stop = t.parent[self.root] if self.root else 0
        s = self.leaf
        while s != stop and s > 0:
            if t.exit[s]:
                self._actions(t.exit[s], t.sites[s] + ".exit")
            s = t.parent[s]

    def finish(self, status: str, outcome: str | None, error: str | None) -> None:
        """End the execution now: drop its timers and children, notify its parent (or the sink).

        Runs no action: see :meth:`end` for the ending that exits the active states first."""
        exe = self.exe
        exe.__dict__.update(status=status, outcome=outcome, error=error)
        exe.__pydantic_fields_set__.update(("status", "outcome", "error"))
        for path in exe.timers:
            self._timer(TimerOp("cancel", path))
        exe.timers.clear()
        exe.sends.clear()
        for cid, ref in exe.children.items():
            if ref.status == "running" and not ref.abandoned:
                if ref.kind == "task":  # a task is no execution: asked to stop where it can be
                    task_runs.cancel(self, cid, ref, f"the execution {status}")
                elif self.close_child(cid, ref):
                    continue  # abandoned: it runs on, its reference stays (marked)
                ref.status = "cancelled"
        self.internal = self.invokes = self.forks = None
        data: dict[str, Any] = {
            "child_id": exe.child_id,
            "status": status,
            "outcome": outcome,
            "output": _snapshot(exe.context),
        }
        if error is not None:
            data["error"] = error
        self.res.emits.append((exe.parent_id, _event(finished_event_id(exe.id), FINISHED, data)))

    # -- the end of a step: fixed point, raised events, children ---------------------------------------
    def settle(self) -> None:
        t = self.t
        micro = 0
        while self.exe.status == "running":
            cands = t.always[self.leaf]
            ct = self.enabled(cands, self.event) if cands else None
            if ct is not None:
                self.fire(ct)
                last = ct.site
            elif self.internal:
                ev = self.internal.pop(0)
                self.dispatch(ev)
                last = f"raised event {ev.name!r}"
            else:
                return
            micro += 1
            if micro >= MAX_MICROSTEPS:
                raise unsettled(last)

    def start_children(self) -> None:
        """Fork regions / invoke definitions of the states still active at the end of the step.

        Deferred to the end (as SCXML starts invokes after the macrostep) so that a state entered and
        left again within one step starts nothing. Invoke contexts are evaluated before anything is
        changed: if one fails, no half-made child is left behind.
        """
        if self.fanouts and self.exe.status == "running":
            map_runs.start(self)
        if not (self.forks or self.invokes) or self.exe.status != "running":
            return
        t, exe = self.t, self.exe
        leaf = self.leaf
        forks = [s for s in dict.fromkeys(self.forks or ()) if s == leaf]
        starts: list[tuple[int, str, dict[str, Any]]] = []
        task_states: list[int] = []
        for s in dict.fromkeys(self.invokes or ()):
            if not self.is_active(t.paths[s]):  # (inside inline regions too: any of the active leaves)
                continue
            if t.task[s] is not None:
                task_states.append(s)
                continue
            inv = t.invoke[s]
            assert inv is not None
            definition_id, ctx_value = inv
            self.site = t.sites[s] + ".invoke.context"
            child_ctx = ctx_value(exe.context, self.event)
            if not isinstance(child_ctx, dict):
                raise TypeError(f"invoke context must evaluate to a mapping, got {type(child_ctx).__name__}")
            starts.append((s, definition_id, child_ctx))
        for s in forks:
            for r in t.children[s]:
                exe.invoke_seq += 1
                cid = child_execution_id(exe.id, exe.invoke_seq)
                exe.children[cid] = ChildRef(path=t.paths[r], kind="region")
                self.res.spawns.append((cid, t.paths[r], _snapshot(exe.context)))
        for s, definition_id, child_ctx in starts:
            exe.invoke_seq += 1
            cid = child_execution_id(exe.id, exe.invoke_seq)
            exe.children[cid] = ChildRef(path=t.paths[s], kind="invoke", attempt=self.invoke_attempt,
                                         parent_close=t.parent_close.get(s, "cancel"))
            if s in t.invoke_id_key:
                exe.context[t.invoke_id_key[s]] = cid  # where `send: {to: $context.<key>}` finds the child
            self.res.emits.append((cid, fanout.child_start(exe, cid, definition_id, _snapshot(child_ctx))))
        for s in task_states:
            task = t.task[s]
            assert task is not None
            task_runs.start(self, s, task)

    def autoforward(self, ev: Event) -> bool:
        """Send an event from outside to each running invoked child whose state has ``forward: true``
        (SCXML's autoforward), with derived ids; whether one was sent."""
        t, emits, secret = self.t, self.res.emits, self.exe.secret
        sent = False
        for cid, ref in self.exe.children.items():
            if (ref.kind == "invoke" and ref.status == "running" and not ref.abandoned
                    and t.index.get(ref.path, -1) in t.invoke_forward):
                emits.append((cid, _event(forwarded_event_id(ev.id, cid, secret), ev.name, ev.data)))
                sent = True
        return sent

    def forward(self, ev: Event) -> bool:
        """Send an event the parallel state does not handle to each running region, with derived ids."""
        emits, secret = self.res.emits, self.exe.secret
        for cid, ref in self.exe.children.items():
            if ref.kind == "region" and ref.status == "running":
                emits.append((cid, _event(forwarded_event_id(ev.id, cid, secret), ev.name, ev.data)))
        return bool(emits)

    # -- reserved events ------------------------------------------------------------------------------
    def on_timeout(self, ev: Event) -> bool:
        t, exe = self.t, self.exe
        path, fire_at = ev.data.get("path"), ev.data.get("fire_at")
        if not isinstance(path, str) or path not in exe.timers or exe.timers[path] != fire_at:
            return False  # stale (re-armed or cancelled since it was swept), or never armed (forged)
        del exe.timers[path]
        self._timer(TimerOp("cancel", path))
        if path.startswith(REINVOKE_PREFIX):
            return self.reinvoke(path[len(REINVOKE_PREFIX):])
        if path.startswith(TASK_TIMEOUT_PREFIX):
            return task_runs.timed_out(self, path[len(TASK_TIMEOUT_PREFIX):], ev)
        if path.startswith(SEND_PREFIX):
            sent = exe.sends.pop(path, None)
            if sent is None:
                return False
            forwarded = bool(t.invoke_forward) and self.autoforward(sent)  # a delayed send arrives from outside
            return self.dispatch(sent) or forwarded
        if path == RUN_TIMEOUT_PATH:
            self.run_timed_out(float(fire_at) - (exe.created_at or float(fire_at)))
            return True
        if path.startswith(HEARTBEAT_TIMEOUT_PREFIX):
            return task_runs.timed_out(self, path[len(HEARTBEAT_TIMEOUT_PREFIX):], ev, heartbeat=True)
        timer = t.after_keys.get(path)
        if timer is None:
            return True
        ct = timer.transition
        if ct.guard is not None:
            self.site = ct.guard_site
            if not self.holds(ct.guard, exe.context, ev):
                return True
        self.fire(ct)
        return True

    def arm_run_timeout(self, ev: Event) -> None:
        """At the start: arm the run timeout, the start's own (``data.timeout``, checked by the worker) or
        the definition's (:mod:`durastate.engine.run_timeout`)."""
        given = ev.data.get("timeout") if ev.name == START else None
        seconds = float(given) if isinstance(given, int | float) and not isinstance(given, bool) and given > 0 \
            else self.t.run_timeout
        if seconds is None:
            return
        fire_at = self.now + seconds
        self.exe.timers[RUN_TIMEOUT_PATH] = fire_at
        self._timer(TimerOp("schedule", RUN_TIMEOUT_PATH, fire_at))

    def run_timed_out(self, seconds: float) -> None:
        """The run timeout fired: fail the execution with the reason, or cancel it (``on_timeout``)."""
        reason = timed_out_reason(seconds)
        if self.t.on_timeout == "cancel":
            self.end("cancelled", None)
            self.exe.__dict__["reason"] = reason
            self.exe.__pydantic_fields_set__.add("reason")
            return
        raise ExecutionFailed(reason)

    def _retry_invoke(self, s: int, ref: ChildRef, ev: Event) -> bool:
        """A failed invoked child whose state has a retry policy with tries left: arm the timer that
        starts the next child (the state stays active; leaving it disarms the timer)."""
        policy = self.t.invoke_retry[s]
        if policy is None or ref.attempt >= policy.max_attempts:
            return False
        if not policy.covers(str(ev.data.get("error") or "")):
            return False
        path = REINVOKE_PREFIX + self.t.paths[s]
        fire_at = self.now + policy.delay(ref.attempt)
        self.exe.timers[path] = fire_at
        self._timer(TimerOp("schedule", path, fire_at))
        return True

    def reinvoke(self, path: str) -> bool:
        """The retry timer of a failed invoke fired: start the next try, if the state is still active."""
        t, exe = self.t, self.exe
        s = t.index.get(path, -1)
        if s < 0 or not (s == self.leaf or t.is_proper_ancestor(s, self.leaf)):
            return False
        if t.maps and s in t.maps:
            return map_runs.retry_due(self, s)
        tries = [ref.attempt for ref in exe.children.values()
                 if ref.kind != "region" and ref.path == path and not ref.abandoned]
        for cid in [c for c, ref in exe.children.items()
                    if ref.kind != "region" and ref.path == path and not ref.abandoned]:
            del exe.children[cid]
        self.invoke_attempt = max(tries, default=0) + 1
        self.invokes = [*(self.invokes or ()), s]
        return True

    def on_catch(self, ev: Event) -> bool:
        """A failure whose retries ran out: the ``on_error`` of the nearest active state that has one.

        ``ev.data`` (``error``, ``event``, ``attempts``) is what the transition sees as ``$event``.
        """
        t, s = self.t, self.leaf
        floor = t.depth[self.root]
        while s >= 0 and t.depth[s] >= floor:
            if self.dispatch(_event(ev.id, t.error_event[s], ev.data)):
                return True
            s = t.parent[s]
        raise ExecutionFailed(f"{ev.data.get('error')} (after {ev.data.get('attempts')} attempt(s); no "
                              f"on_error on {t.paths[self.leaf]} or above it)")

    def on_finished(self, ev: Event) -> bool:
        t, exe = self.t, self.exe
        cid = ev.data.get("child_id")
        ref = exe.children.get(cid) if isinstance(cid, str) else None
        if ref is None or ref.status != "running" or ref.abandoned:
            if ev.data.get("task_id") == cid:  # the answer of a task the execution no longer waits for
                self.note = (f"task {cid} answered after the execution stopped waiting for it (it left the "
                             "state, ended, or the task timed out); the answer is ignored")
            return False  # a child we already forgot (cancelled) or abandoned, or a duplicate
        if ref.kind == "map":
            assert isinstance(cid, str)
            return map_runs.on_finished(self, cid, ref, ev)
        status = ev.data.get("status", "finished")
        ref.status = status if status in ("finished", "failed", "cancelled") else "failed"
        ref.outcome = ev.data.get("outcome")
        if ref.kind == "task":
            task_runs.disarm(self, ref.path)
        s = t.index.get(ref.path, -1)
        if s < 0:
            return True
        owner = s if ref.kind != "region" else t.parent[s]
        what = f"{'task' if ref.kind == 'task' else 'invoked child'} {cid}" if ref.kind != "region" \
            else f"region {ref.path} ({cid})"
        if ref.status == "finished":
            if ref.kind == "invoke" and t.kind[owner] == "compound":
                return True  # a compound state's on_done is its final child's: its invoked child's end takes nothing
            if ref.kind == "region" and any(
                c.status != "finished" for c in exe.children.values() if c.kind == "region"
            ):
                return True  # wait for the other regions
            self.dispatch(_event(ev.id, t.done_event[owner], ev.data))
            return True
        if ref.kind != "region" and ref.status == "failed" and self._retry_invoke(s, ref, ev):
            return True
        if not self.dispatch(_event(ev.id, t.error_event[owner], ev.data)):
            err = ev.data.get("error") or ref.status
            raise ExecutionFailed(f"{what} {ref.status}: {err} (no on_error on {t.paths[owner]})")
        return True
