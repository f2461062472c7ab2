"""Reset: move an execution to a named configuration of its own version (``durastate reset``).

A redrive re-applies the one step that failed; a reset puts the execution where an operator says, the way
Temporal's reset or a Step Functions user's "start again from this state" does. Pure, like the interpreter:
:func:`reset` changes the execution it is given and returns what to commit with it (the timers of what it
leaves disarmed and of what it enters armed, the children of what it leaves cancelled and of what it enters
started); the worker applies it in one commit with the reset event (:mod:`durastate.runtime.worker`).

The configuration:

- it names states of the execution's own version of its definition (one leaf, or one per region of an
  inline parallel state); a compound state stands for its initial (or history) default, an inline
  parallel state for all its regions, and a region of an inline parallel state that no named state is in
  starts at its default too — so a partial configuration is completed as entering it would complete it;
- it is refused (:class:`ResetRefused`, nothing changed) if a named state does not exist, is a history
  pseudo-state, is outside the execution's region (a region child runs one subtree), lies inside a
  parallel state whose regions run as child executions (reset that region's execution, or name the
  parallel state itself), or if two named states are children of the same compound state (one
  configuration holds one of them).

How it moves: as one external transition from the active configuration to the named one. The active
states below the deepest compound state that holds both are exited (leaf first: history is recorded,
timers disarmed, children cancelled), then the named states are entered from there down (outermost first:
timers armed, invokes, regions and maps started), then ``always`` transitions settle. ``actions`` says
whether the exit and entry actions of those states run: ``none`` (the default: an operator's move has no
side effects) or ``transition`` (as a transition would run them). A failed execution has no active
states left (its failure disarmed its timers and cancelled its children), so it is entered from the top,
without exit actions; its run timeout, if it had one before the failed step, is armed again (unless
that timeout is what failed it). A context patch (RFC 7386 JSON merge patch: ``null`` deletes a key) is applied
before anything is entered, so entry actions and timers see it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from durastate.engine.control import ControlError
from durastate.engine.definition import Definition
from durastate.engine.expressions import ACTIVE
from durastate.engine.ids import RESERVED_PREFIX, RETRY_PATH, RUN_TIMEOUT_PATH, TIMEOUT
from durastate.engine.interpreter import Run, StepResult
from durastate.engine.model import Event, Execution, TimerOp
from durastate.engine.tables import Tables
from durastate.engine.values import check_json
from durastate.errors import InvalidValue

__all__ = ["RESETTABLE", "RESET_ACTIONS", "ResetRefused", "ResetRequest", "check_reset", "merge_patch", "reset",
           "resolve_configuration"]

ResetActions = Literal["none", "transition"]
RESET_ACTIONS: tuple[ResetActions, ...] = ("none", "transition")
RESETTABLE = ("running", "suspended", "failed")
"""The statuses a reset applies to; an execution that finished, was cancelled or terminated stays so."""


class ResetRefused(ControlError):
    """A reset that cannot apply as asked (the message says why); nothing was changed."""


class ResetRequest:
    """The data of a ``durastate.reset`` event, read and checked (:meth:`from_data`), or built (:meth:`data`)."""

    def __init__(self, to: Sequence[str], *, actions: str = "none", context_patch: dict[str, Any] | None = None,
                 send: tuple[str, dict[str, Any]] | None = None, reason: str | None = None,
                 by: str | None = None, request: str = "") -> None:
        if not to or not all(isinstance(p, str) and p for p in to):
            raise ResetRefused("name the configuration to reset to: one or more state paths (--to a.b,c)")
        if actions not in RESET_ACTIONS:
            raise ResetRefused(f"actions {actions!r}: choose {' or '.join(RESET_ACTIONS)} (whether the exit and "
                               "entry actions of the states left and entered run)")
        if context_patch is not None and not isinstance(context_patch, dict):
            raise ResetRefused(f"the context patch must be a JSON object, got {type(context_patch).__name__}")
        if send is not None and send[0].startswith(RESERVED_PREFIX):
            # Stepped in the reset's commit, past the checks the worker makes of what arrives (a timer's due
            # time, a child's end, a task's id): so it is a chart's event, never one of the runtime's.
            raise ResetRefused(f"{send[0]!r} is an event durastate sends itself: a reset sends an event of the "
                               "chart (to cancel, suspend or terminate, use that command)")
        self.to = [p.strip() for p in to]
        self.actions: ResetActions = actions
        self.context_patch = context_patch
        self.send = send
        self.reason = reason
        self.by = by
        self.request = request

    def data(self) -> dict[str, Any]:
        """The event data (its digest is the event's id: :func:`durastate.engine.ids.reset_event_id`)."""
        out: dict[str, Any] = {"to": list(self.to), "actions": self.actions, "request": self.request}
        if self.context_patch is not None:
            out["context_patch"] = self.context_patch
        if self.send is not None:
            out["send"] = {"name": self.send[0], "data": self.send[1]}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.by is not None:
            out["by"] = self.by
        return out

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ResetRequest:
        to = data.get("to")
        send = data.get("send")
        sent: tuple[str, dict[str, Any]] | None = None
        if send is not None:
            if not (isinstance(send, dict) and isinstance(send.get("name"), str)
                    and isinstance(send.get("data", {}), dict)):
                raise ResetRefused("a reset's send must be {\"name\": <event>, \"data\": {...}}")
            sent = (send["name"], dict(send.get("data") or {}))
        reason, by = data.get("reason"), data.get("by")
        return cls(to if isinstance(to, list) else [], actions=str(data.get("actions", "none")),
                   context_patch=data.get("context_patch"), send=sent,
                   reason=None if reason is None else str(reason), by=None if by is None else str(by),
                   request=str(data.get("request", "")))


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply the JSON merge patch ``patch`` to ``target`` in place (RFC 7386: ``null`` removes a key, an
    object merges into an object, anything else replaces). Only ``target`` itself changes in place: a nested
    object is merged into a copy that replaces it (copy-on-write, as ``assign`` does)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            inner = target.get(key)
            inner = target[key] = dict(inner) if isinstance(inner, dict) else {}
            merge_patch(inner, value)
        else:
            target[key] = value


def _root(t: Tables, exe: Execution) -> int:
    return t.index.get(exe.root_path, 0) if exe.root_path else 0


def resolve_configuration(defn: Definition, exe: Execution, to: Sequence[str]) -> list[int]:
    """The states ``to`` names, checked to make one configuration of ``exe`` (see the module docstring),
    without those that are ancestors of others; raises :class:`ResetRefused` saying what is wrong."""
    t = defn.tables
    root = _root(t, exe)
    floor = t.parent[root] if root else 0
    version = f" (version {exe.definition_version})" if exe.definition_version else ""
    named: list[int] = []
    for path in to:
        s = t.index.get(path, -1)
        if s <= 0:
            leaves = [p for i, p in enumerate(t.paths) if i > 0 and not t.children[i] and t.kind[i] != "history"]
            shown = ", ".join(leaves[:12]) + (", …" if len(leaves) > 12 else "")
            raise ResetRefused(f"{path!r} is not a state of {defn.id!r}{version}, the version execution {exe.id} "
                               f"runs on; its states include {shown}")
        if t.kind[s] == "history":
            raise ResetRefused(f"{path!r} is a history pseudo-state, not a state an execution can be in; name "
                               "the states to be in (or their compound parent, for its default)")
        if root and not (s == root or t.is_proper_ancestor(root, s)):
            raise ResetRefused(f"{path!r} is outside region {exe.root_path!r}, the part of the chart execution "
                               f"{exe.id} runs (a region's child execution); reset its parent {exe.parent_id} "
                               "instead")
        a = t.parent[s]
        while a > floor:
            if t.kind[a] == "parallel" and not t.inline[a]:
                raise ResetRefused(f"{path!r} is inside the parallel state {t.paths[a]!r}, whose regions run as "
                                   f"child executions: name {t.paths[a]!r} itself (its regions start at their "
                                   "defaults), or reset the region's own execution")
            a = t.parent[a]
        if s not in named:
            named.append(s)
    named = [s for s in named if not any(t.is_proper_ancestor(s, o) for o in named)]
    parts: set[int] = set()
    for s in named:
        while s > floor:
            parts.add(s)
            s = t.parent[s]
    for s in (*parts, floor):
        inside = [c for c in t.children[s] if c in parts]
        if len(inside) > 1 and not t.inline[s]:
            where = f"compound state {t.paths[s]!r}" if s else "the top level"
            raise ResetRefused(f"{t.paths[inside[0]]!r} and {t.paths[inside[1]]!r} are both children of {where}: "
                               "a configuration is in one of them")
    return sorted(named)


def check_reset(defn: Definition, exe: Execution, to: Sequence[str]) -> list[str]:
    """What a reset of ``exe`` to ``to`` would be refused for, checked before it is sent (changes nothing):
    raises :class:`ResetRefused`; returns the resolved state paths."""
    _check_status(exe)
    return [defn.tables.paths[s] for s in resolve_configuration(defn, exe, to)]


def _check_status(exe: Execution) -> None:
    if exe.status not in RESETTABLE:
        raise ResetRefused(f"execution {exe.id} is {exe.status}; only a {', '.join(RESETTABLE[:-1])} or "
                           f"{RESETTABLE[-1]} execution can be reset")


class _Quiet:
    """A run whose actions are skipped while ``quiet`` (a reset with ``actions: none``)."""

    quiet = False

    def _actions(self, actions: tuple[Any, ...], site: str) -> None:
        if self.quiet:
            return
        super()._actions(actions, site)  # type: ignore[misc]


@functools.cache
def _run_class(inline: bool) -> type[Run]:
    if inline:
        from durastate.engine.inline import InlineRun

        return type("ResetInlineRun", (_Quiet, InlineRun), {})
    return type("ResetRun", (_Quiet, Run), {})


def _deadline_before(exe: Execution) -> float | None:
    """The run timeout a failed execution had armed before its failed step (``None``: none, or it is the
    timeout that failed it)."""
    failure = exe.failure
    if failure is None or (failure.event.name == TIMEOUT and failure.event.data.get("path") == RUN_TIMEOUT_PATH):
        return None
    at = failure.before.get("timers", {}).get(RUN_TIMEOUT_PATH)
    return float(at) if isinstance(at, int | float) else None


def _domain(t: Tables, states: list[int], floor: int) -> int:
    """The deepest compound state (or ``floor``) that is a proper ancestor of every one of ``states``."""
    s = t.parent[states[0]]
    while s > floor:
        if t.kind[s] == "compound" and all(t.is_proper_ancestor(s, x) for x in states):
            return s
        s = t.parent[s]
    return floor


def reset(defn: Definition, exe: Execution, event: Event, request: ResetRequest, now: float) -> StepResult:
    """Move ``exe`` to the configuration ``request.to`` (see the module docstring); returns what to commit.

    Raises :class:`ResetRefused` when it cannot apply (a bad configuration, an ended execution, an action
    or a timer value that fails while entering): ``exe`` may then be half changed and must be thrown away,
    as a step's is after a failed callable.
    """
    _check_status(exe)
    t = defn.tables
    want = resolve_configuration(defn, exe, request.to)
    status, before, leaves_before = exe.status, exe.active_path, list(exe.leaves)
    run = cast(Any, _run_class(t.has_inline)(t, exe, event, now))
    root = run.root = _root(t, exe)
    floor = t.parent[root] if root else 0
    dropped_retry = exe.retry.event.id if exe.retry is not None else None
    if exe.retry is not None:
        exe.retry = None
        if exe.timers.pop(RETRY_PATH, None) is not None:
            run._timer(TimerOp("cancel", RETRY_PATH))
    if request.context_patch:
        merge_patch(exe.context, request.context_patch)
        try:
            check_json(exe.context, "the patched context")
        except InvalidValue as exc:
            raise ResetRefused(str(exc)) from None
    exe.status = "running"
    if t.in_state:
        ACTIVE.set(run.is_active)
    run.quiet = request.actions == "none"
    try:
        if status == "failed" or before is None:
            # Nothing is active any more: its failure disarmed the timers and cancelled the children (an
            # abandoned child is kept: its notice is still traced when it comes). The run timeout it had
            # before the failed step is armed again, unless that timeout is what failed it.
            deadline = _deadline_before(exe)
            for path in list(exe.timers):
                run._timer(TimerOp("cancel", path))
            exe.timers.clear()
            exe.sends.clear()
            if deadline is not None:
                exe.timers[RUN_TIMEOUT_PATH] = deadline
                run._timer(TimerOp("schedule", RUN_TIMEOUT_PATH, deadline))
            exe.children = {cid: ref for cid, ref in exe.children.items() if ref.abandoned}
            exe.maps.clear()
            exe.leaves = []
            exe.error = exe.outcome = None
            exe.failure = None
            domain = floor
            run.leaf = domain
            if t.has_inline:
                run.cfg = None
                run.conf()
        else:
            run.leaf = t.index[before]
            current = [t.index[p] for p in leaves_before] or [run.leaf]
            domain = _domain(t, current + want, floor)
            if t.has_inline:
                run.exit_states({s for s in run.conf() if s != domain and t.is_proper_ancestor(domain, s)})
            else:
                s = run.leaf
                leaf = s
                while s != domain:
                    if t.exit_work[s]:
                        run.exit_state(s, leaf)
                    s = t.parent[s]
                run.leaf = domain
        top = want[0]
        while t.parent[top] != domain:
            top = t.parent[top]
        if t.has_inline:
            run.descend(top, want, run.complete)
            run._resummarise()
        else:
            chain = []
            s = want[0]
            while s != domain:
                chain.append(s)
                s = t.parent[s]
            for s in reversed(chain):
                run.enter_state(s)
            run.complete(want[0])
        run.quiet = False
        if exe.status == "running":
            run.settle()
        if exe.status == "running" and (run.forks or run.invokes or run.fanouts):
            run.start_children()
    except Exception as exc:
        raise ResetRefused(f"the reset of {exe.id} failed at {run.site or 'entry'}: {type(exc).__name__}: {exc}; "
                           "nothing was changed") from None
    exe.active_path = t.paths[run.leaf]
    if t.has_inline:
        run.save_leaves()
    if run.timer_ops:
        run.timers = list(run.timer_ops.values())
    exe.updated_at = now
    if status == "suspended" and exe.status == "running":
        exe.status = "suspended"
    trace: dict[str, Any] = {"event": event.name, "event_id": event.id, "from": before, "to": exe.active_path,
                             "status": exe.status, "control": "reset", "configuration": list(request.to),
                             "actions": request.actions}
    if leaves_before:
        trace["from_leaves"] = leaves_before
    if exe.leaves:
        trace["leaves"] = list(exe.leaves)
    if request.by is not None:
        trace["by"] = request.by
    if request.reason is not None:
        trace["reason"] = request.reason
    if request.context_patch:
        trace["context_patch"] = request.context_patch
    if dropped_retry is not None:
        trace["dropped_retry"] = dropped_retry
    if status == "failed":
        trace["from_status"] = "failed"
    if run.logs:
        trace["log"] = list(run.logs)
    run.trace = trace
    return cast(StepResult, run)
