"""Bounded exhaustive exploration of a definition: every run, up to a number of configurations.

``durastate validate --explore N`` steps the real interpreter (the pure :func:`~durastate.engine.step`,
the same code a worker runs) from the start over every event the definition names, breadth first, so the
first path found to a problem is a shortest one. It reports:

* **deadlocks**: a running configuration no event, timer or child can move any more (every event of the
  alphabet is ignored, no timer is armed and no child is running) — an execution that waits forever;
* **loops**: a step that never settles (``always`` transitions and raised events past the microstep
  limit), and any other step that fails the execution;

each with the sequence of events that reaches it. What the explorer feeds in:

* the events: every name a state has a transition on (``*`` becomes an event named ``any``), with the
  data variants of the ``event.KEY`` domains;
* the timers: each armed timer fires as its ``durastate.timeout`` (the clock moves to its time);
* the children: each running region, invoked child or map child may finish (with each outcome a final state of a
  region can give) or fail;
* the start contexts: the definition's own, with every combination of the ``context.KEY`` domains.

Guards see the context the run computed and the data of the event, so a chart whose guards read values
the user can give (``--domain context.amount=0,150``) is explored over them. Configurations are told
apart by active states (every leaf of an inline parallel state), history, context, armed timer keys and
children's states; the bound is on how many are explored, so a chart whose context grows without bound
(a counter) is explored to the bound and says so. Pure: no I/O, no clock (time is the timers' own).
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from durastate.engine.definition import Definition
from durastate.engine.ids import (
    FINISHED,
    RESERVED_PREFIX,
    START,
    finished_event_id,
    start_event_id,
    timeout_event_id,
)
from durastate.engine.interpreter import MAX_MICROSTEPS, step
from durastate.engine.model import Event, Execution
from durastate.engine.tables import ANY, Tables

__all__ = ["MAX_VARIANTS", "Exploration", "Finding", "explore"]

MAX_VARIANTS = 64
"""At most this many start contexts, and data variants per event: domains multiply."""

_ID = "explore"


@dataclass(frozen=True, slots=True)
class Finding:
    """A problem the exploration reached, and how."""

    kind: Literal["deadlock", "loop", "failure"]
    active_path: str | None
    events: tuple[str, ...]
    """The events from the start that reach it, each as ``name`` or ``name {data}``."""
    detail: str

    def describe(self) -> str:
        steps = " → ".join(self.events)
        return f"{self.kind} in {self.active_path!r} after {steps}: {self.detail}"


@dataclass(slots=True)
class Exploration:
    """What :func:`explore` found: the problems, how many configurations it saw, and whether it saw all."""

    configurations: int = 0
    complete: bool = True
    """Every reachable configuration was explored (the bound was not hit)."""
    findings: list[Finding] = field(default_factory=list)


def explore(defn: Definition, limit: int = 1000, domains: Mapping[str, Sequence[Any]] | None = None) -> Exploration:
    """Explore ``defn`` breadth first over at most ``limit`` configurations.

    ``domains`` maps ``context.KEY`` (or a bare ``KEY``) to the values a start context may hold there,
    and ``event.KEY`` to the values events may carry in their data there.
    """
    t = defn.tables
    context_domains, event_domains = _split(domains or {})
    alphabet = _alphabet(t, event_domains)
    out = Exploration()
    seen: set[str] = set()
    queue: deque[tuple[Execution, float, tuple[str, ...]]] = deque()
    for ctx in _combinations(context_domains):
        exe = Execution(id=_ID, definition_id=defn.id, context={**json.loads(json.dumps(defn.context)), **ctx})
        shown = (f"start {json.dumps(ctx, sort_keys=True)}",) if ctx else ("start",)
        start = Event(id=start_event_id(_ID), name=START, data={"context": ctx})
        if not _advance(defn, exe, start, 0.0, shown, out):
            continue
        key = _key(exe)
        if key not in seen:
            seen.add(key)
            queue.append((exe, 0.0, shown))
    while queue:
        if out.configurations >= limit:
            out.complete = False
            break
        exe, now, path = queue.popleft()
        out.configurations += 1
        moved = False
        for event, at, label in _moves(t, exe, now, alphabet):
            nxt = exe.model_copy(deep=True)
            res_path = (*path, label)
            if not _advance(defn, nxt, event, at, res_path, out):
                moved = True  # it did something: it failed, which is reported
                continue
            key = _key(nxt)
            if key == _key(exe) and nxt.status == exe.status:
                continue  # ignored, or changed nothing that tells configurations apart
            moved = True
            if nxt.status != "running" or key in seen:
                continue
            seen.add(key)
            queue.append((nxt, at, res_path))
        if not moved and exe.status == "running":
            out.findings.append(Finding("deadlock", where(exe), path,
                                        "no event, timer or child moves it any more (every event is ignored, "
                                        "no timer is armed, no child runs)"))
    return out


def _advance(defn: Definition, exe: Execution, event: Event, now: float, path: tuple[str, ...],
             out: Exploration) -> bool:
    """Step ``exe``; a step that fails it is a finding (``False``)."""
    step(defn, exe, event, now)
    if exe.status != "failed":
        return True
    error = exe.error or ""
    kind: Literal["loop", "failure"] = "loop" if f"after {MAX_MICROSTEPS}" in error else "failure"
    out.findings.append(Finding(kind, where(exe), path, error))
    return False


def _moves(t: Tables, exe: Execution, now: float,
           alphabet: list[tuple[str, dict[str, Any]]]) -> Iterator[tuple[Event, float, str]]:
    """Every event that may come next: the alphabet, the armed timers, each running child's end."""
    for i, (name, data) in enumerate(alphabet):
        label = f"{name} {json.dumps(data, sort_keys=True)}" if data else name
        yield Event(id=f"e{i}", name=name, data=data), now, label
    for key, fire_at in sorted(exe.timers.items()):
        yield (Event(id=timeout_event_id(exe.id, key, fire_at), name=f"{RESERVED_PREFIX}timeout",
                     data={"path": key, "fire_at": fire_at}),
               max(now, fire_at), f"timer {key}")
    for cid, ref in sorted(exe.children.items()):
        if ref.status != "running":
            continue
        for status, outcome in _child_ends(t, ref.path, ref.kind):
            data = {"child_id": cid, "status": status, "outcome": outcome, "output": {}}
            if status == "failed":
                data["error"] = "child failed"
            label = f"child {ref.path} {status}" + (f" ({outcome})" if outcome else "")
            yield Event(id=finished_event_id(cid), name=FINISHED, data=data), now, label


def _child_ends(t: Tables, path: str, kind: str) -> list[tuple[str, str | None]]:
    """How a child may end: a region with each outcome of its final states; an invoke finished or failed."""
    if kind != "region":
        return [("finished", None), ("failed", None)]
    root = t.index.get(path, -1)
    outcomes = sorted({t.outcome[s] or "" for s in range(len(t.paths))
                       if t.kind[s] == "final" and s != root and (t.is_proper_ancestor(root, s))})
    return [("finished", o or None) for o in outcomes] or [("finished", None)]


def _alphabet(t: Tables, event_domains: Mapping[str, Sequence[Any]]) -> list[tuple[str, dict[str, Any]]]:
    names: set[str] = set()
    for s in range(len(t.paths)):
        for descriptor, _ in t.own_on[s]:
            names.add("any" if descriptor == ANY else descriptor)
    variants = list(_combinations(event_domains)) or [{}]
    return [(name, data) for name in sorted(names) for data in variants]


def _split(domains: Mapping[str, Sequence[Any]]) -> tuple[dict[str, Sequence[Any]], dict[str, Sequence[Any]]]:
    context: dict[str, Sequence[Any]] = {}
    event: dict[str, Sequence[Any]] = {}
    for key, values in domains.items():
        if key.startswith("event."):
            event[key[len("event."):]] = values
        else:
            context[key.removeprefix("context.")] = values
    return context, event


def _combinations(domains: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """Every assignment of the domains' values (dotted keys nest), at most :data:`MAX_VARIANTS`."""
    keys = sorted(domains)
    for values in itertools.islice(itertools.product(*(domains[k] for k in keys)), MAX_VARIANTS):
        out: dict[str, Any] = {}
        for key, value in zip(keys, values, strict=True):
            node = out
            *parents, last = key.split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[last] = value
        yield out


def where(exe: Execution) -> str | None:
    """Where a finding is: the active leaf, or the leaves of an inline parallel state (``a.x + a.y``)."""
    return " + ".join(exe.leaves) if exe.leaves else exe.active_path


def _key(exe: Execution) -> str:
    return json.dumps([exe.active_path, exe.leaves, exe.status, exe.history, exe.context, sorted(exe.timers),
                       sorted((cid, ref.status) for cid, ref in exe.children.items()),
                       {path: m.model_dump() for path, m in exe.maps.items()}],
                      sort_keys=True, default=str)
