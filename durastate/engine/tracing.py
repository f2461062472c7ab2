"""What a trace step records beyond the state change: the event's data, the transitions taken, the context
keys changed, the emitted events, timer operations and spawned children — each capped in size.

The trace is for people reading what an execution did (``durastate trace``, a console's timeline), so a
step keeps what explains it, but never so much that a step costs more to store than the execution: the
event's data and each context value are cut to a few KB with a marker saying so. The format is described
in ``docs/trace.md``; readers must accept steps without any of these fields (steps recorded before them,
and control records).

Pure: the worker passes the time and the context as it was before the step; nothing here reads a clock.
Built only when a trace step is recorded (``Worker(trace=True)``), so an untraced step pays nothing.

**What a kept history adds** (``archive=True``: the store keeps whole histories, so a step is also what
``durastate validate --replay`` checks a new definition version against, :mod:`durastate.engine.replay`).
The replay steps each recorded event through the new version in order, from the execution's start, and
compares what it does with what the step recorded; so a step must hold its event *exactly* and enough of
its outcome to compare, but not the execution's state — that is rebuilt by the replay itself. Hence,
only where the readable fields fall short:

- ``data_full``: the event's exact data, when ``data`` was cut (``data_cut``);
- ``context_full``: the exact changed keys ``{key: [old, new]}``, when ``context`` was cut;
- ``emits_digest``: a hash of every emitted event's target, name and data (the listed ``emits`` have no
  data and stop at 32), so a changed ``send`` is seen.

Each costs what the step changed or emitted, never the size of the context (DESIGN §6): storing the whole
context per step would be O(context) per event, and a hash of it would cost as much to compute.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from durastate.engine.ids import TASK
from durastate.engine.model import Emit, Event, Spawn, TimerOp
from durastate.engine.tables import CompiledTransition, Tables

__all__ = [
    "CONTEXT_KEYS_MAX",
    "DATA_MAX",
    "VALUE_MAX",
    "capped",
    "context_changes",
    "describe_transitions",
    "emits_digest",
    "step_details",
]

DATA_MAX = 2048
"""The event's ``data`` is kept up to this many characters of JSON; past it, the JSON text is cut there
and the step says ``"data_cut": true``."""
VALUE_MAX = 512
"""Each old and new value of a changed context key is kept up to this many characters of JSON."""
CONTEXT_KEYS_MAX = 32
"""At most this many changed context keys are listed (``"context_cut": true`` when there were more)."""
LIST_MAX = 32
"""At most this many emits, timer operations or spawns are listed (``"<name>_cut": n`` more when cut)."""

_MISSING = object()


def capped(value: Any, limit: int) -> tuple[Any, bool]:
    """``value`` (a copy of it) if its JSON is at most ``limit`` characters, else its JSON text cut to
    ``limit`` (a string); the flag says whether it was cut."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text) > limit:
        return text[:limit], True
    # A container is returned as a copy: the step keeps what it was then, not what it becomes.
    return (json.loads(text) if isinstance(value, dict | list) else value), False


def context_changes(before: Mapping[str, Any], after: Mapping[str, Any], *,
                    exact: bool = False) -> tuple[dict[str, list[Any]], bool]:
    """The top-level keys whose value changed, as ``{key: [old, new]}`` (``None`` stands for a key that
    was absent before or is gone after), each value capped; the flag says whether values or keys were
    cut or left out. ``exact``: nothing capped or left out (copies of the values, as JSON has them)."""
    changes: dict[str, list[Any]] = {}
    cut = False
    value_max = 1 << 62 if exact else VALUE_MAX
    keys_max = -1 if exact else CONTEXT_KEYS_MAX
    for key, new in after.items():
        old = before.get(key, _MISSING)
        if old is new or old == new:
            continue
        if len(changes) == keys_max:
            return changes, True
        old_c, old_cut = capped(None if old is _MISSING else old, value_max)
        new_c, new_cut = capped(new, value_max)
        changes[key] = [old_c, new_c]
        cut = cut or old_cut or new_cut
    for key in before:
        if key not in after:
            if len(changes) == keys_max:
                return changes, True
            old_c, old_cut = capped(before[key], value_max)
            changes[key] = [old_c, None]
            cut = cut or old_cut
    return changes, cut


def emits_digest(emits: Sequence[Emit]) -> str:
    """A short hash of the emitted events' targets, names and data, in order. Ids are left out, and so is
    a task request's ``task_id``: a task's id derives from a secret the trace never holds, so a replay
    (which has no secret) could never derive the same one."""
    text = json.dumps([[target, ev.name, {k: v for k, v in ev.data.items() if k != "task_id"}
                        if ev.name == TASK else ev.data] for target, ev in emits],
                      separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_transitions(t: Tables, fired: Sequence[tuple[CompiledTransition, str]]) -> list[dict[str, Any]]:
    """The transitions a step fired, in order: ``source`` and ``target`` state paths (``target`` is
    ``None`` for a targetless one) and what took it: ``"event": name``, ``"always": true`` or
    ``"after": k`` (the state's k-th timer)."""
    out: list[dict[str, Any]] = []
    for ct, event_name in fired:
        known = _DESCRIBED.get(ct)
        if known is None:
            known = _describe(t, ct)
        source, target, trigger, value = known
        out.append({"source": source, "target": target, trigger: event_name if value is None else value})
    return out


_DESCRIBED: dict[CompiledTransition, tuple[str, str | None, str, Any]] = {}
"""What :func:`describe_transitions` says of a transition, worked out once (the step is a hot path)."""


def _describe(t: Tables, ct: CompiledTransition) -> tuple[str, str | None, str, Any]:
    state_site = t.sites[ct.source]
    where = ct.site[len(state_site) + 1:] if state_site else ct.site
    trigger: str = "event"
    value: bool | int | None = None  # None: the name comes from the event in hand
    if where.startswith("always["):
        trigger, value = "always", True
    elif where.startswith("after["):
        trigger, value = "after", int(where[len("after["):].split("]", 1)[0])
    known = (t.paths[ct.source], t.paths[ct.target] if ct.target >= 0 else None, trigger, value)
    if len(_DESCRIBED) >= 10_000:  # definitions are reloaded rarely; never let the memo grow without bound
        _DESCRIBED.clear()
    _DESCRIBED[ct] = known
    return known


def step_details(
    trace: dict[str, Any],
    at: float,
    event: Event,
    emits: Sequence[Emit] = (),
    timers: Sequence[TimerOp] = (),
    spawns: Sequence[Spawn] = (),
    context: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
    *,
    archive: bool = False,
) -> dict[str, Any]:
    """Add to a step's ``trace`` record (in place, and returned) its time, the event's capped data, the
    changed context keys (``context``: before and after the step), and the emits, timers and spawns.
    ``archive``: the step goes into a kept history, add what a replay needs (the module docstring)."""
    trace["at"] = at
    if event.data:
        data, cut = capped(event.data, DATA_MAX)
        trace["data"] = data
        if cut:
            trace["data_cut"] = True
            if archive:
                trace["data_full"] = capped(event.data, 1 << 62)[0]
    if context is not None:
        changes, cut = context_changes(*context)
        if changes:
            trace["context"] = changes
        if cut:
            trace["context_cut"] = True
            if archive:
                trace["context_full"] = context_changes(*context, exact=True)[0]
    if emits:
        _listed(trace, "emits", [{"target": target, "name": ev.name, "id": ev.id} for target, ev in emits])
        if archive:
            trace["emits_digest"] = emits_digest(emits)
    if timers:
        _listed(trace, "timers", [{"action": op.action, "path": op.path, "fire_at": op.fire_at}
                                  if op.action == "schedule" else {"action": op.action, "path": op.path}
                                  for op in timers])
    if spawns:
        _listed(trace, "spawns", [{"child_id": cid, "path": root} for cid, root, _ in spawns])
    return trace


def _listed(trace: dict[str, Any], name: str, items: list[dict[str, Any]]) -> None:
    if not items:
        return
    trace[name] = items[:LIST_MAX]
    if len(items) > LIST_MAX:
        trace[f"{name}_cut"] = len(items) - LIST_MAX
