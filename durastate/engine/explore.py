"""Bounded exhaustive exploration of a definition: every run, up to a number of configurations.

``durastate validate --explore N`` steps the real interpreter (the pure :func:`~durastate.engine.step`,
the same code a worker runs) from the start over every event the definition names, breadth first, so the
first path found to a problem is a shortest one. It reports:

* **deadlocks**: a running configuration no event, timer or child can move any more (every event of the
  alphabet is ignored, no timer is armed and no child is running) — an execution that waits forever;
* **loops**: a step that never settles (``always`` transitions and raised events past the microstep
  limit), and any other step that fails the execution;

each with the sequence of events that reaches it. What the explorer feeds in:

* the events: every name a state has a transition on (``*`` becomes an event named ``any``), without data
  and with the values the guards on that event compare ``$event.KEY`` with — each constant and its
  neighbours on either side (``gt: [$event.price, 0]`` tries ``-1``, ``0`` and ``1``), the members of an
  ``in`` list — or, for a key a ``--domain event.KEY`` names, the values given there;
* the timers: each armed timer fires as its ``durastate.timeout`` (the clock moves to its time), a task's
  timeout among them;
* the children: each running region, invoked child, task or map child may finish (with each outcome a final
  state of a region can give, or that an ``on_done`` guard compares ``$event.outcome`` with) or fail;
* the start contexts: the definition's own, with every combination of the ``context.KEY`` domains.

It also says how much of the chart the runs reached (:class:`Coverage`): the states entered and the
transitions taken, and the ones never taken with their guards, so "no problem found" is not mistaken for
"everything was tried". States inside the regions of a parallel state run as child executions of their
own, which the exploration stands in for by their endings, so they are not counted.

Guards see the context the run computed and the data of the event, so a chart whose guards read values
the user can give (``--domain context.amount=0,150``) is explored over them. Configurations are told
apart by active states (every leaf of an inline parallel state), history, context, armed timer keys and
children's states; the bound is on how many are explored, so a chart whose context grows without bound
(a counter) is explored to the bound and says so. Pure: no I/O, no clock (time is the timers' own).
"""

from __future__ import annotations

import itertools
import json
import re
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from durastate.engine.definition import Definition
from durastate.engine.ids import (
    FINISHED,
    RESERVED_PREFIX,
    START,
    TASK_TIMEOUT_PREFIX,
    finished_event_id,
    start_event_id,
    timeout_event_id,
)
from durastate.engine.interpreter import MAX_MICROSTEPS, step
from durastate.engine.model import Event, Execution
from durastate.engine.tables import ANY, CompiledTransition, Tables
from durastate.engine.versions import canonical_form

__all__ = ["MAX_VARIANTS", "Coverage", "Exploration", "Finding", "explore"]

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
class Coverage:
    """How much of the chart the exploration reached: states entered, transitions taken (by document site).

    Counted are the states the execution itself can be in (not history pseudo-states, not the states inside
    the regions of a parallel state, which run as child executions) and the transitions out of them."""

    states: tuple[str, ...] = ()
    reached: set[str] = field(default_factory=set)
    transitions: dict[str, str] = field(default_factory=dict)
    """Every counted transition's site, in document order, with how it reads (``a -> b on go [guard …]``)."""
    taken: set[str] = field(default_factory=set)
    in_regions: int = 0
    """How many states were left out because they run in the regions' child executions."""

    @property
    def never_reached(self) -> list[str]:
        return [path for path in self.states if path not in self.reached]

    @property
    def never_taken(self) -> list[str]:
        return [text for site, text in self.transitions.items() if site not in self.taken]

    def describe(self) -> str:
        """One line: ``reached 9/9 states, 11/12 transitions; never taken: a -> b on x [guard …]``."""
        line = (f"reached {len(self.reached & set(self.states))}/{len(self.states)} states, "
                f"{len(self.taken & set(self.transitions))}/{len(self.transitions)} transitions")
        if self.in_regions:
            line += f" (not counted: {self.in_regions} states inside parallel regions, which run as child executions)"
        missed = [*(f"state {p}" for p in self.never_reached), *self.never_taken]
        return line + (f"; never taken: {'; '.join(missed)}" if missed else "")


@dataclass(slots=True)
class Exploration:
    """What :func:`explore` found: the problems, how many configurations it saw, and whether it saw all."""

    configurations: int = 0
    complete: bool = True
    """Every reachable configuration was explored (the bound was not hit)."""
    findings: list[Finding] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    unvalued_event_keys: list[str] = field(default_factory=list)
    """``$event.KEY`` names guards read that neither a domain nor a constant they are compared with gives
    values for (``gt: [$event.a, $event.b]``): the transitions behind them may not have been tried."""


def explore(defn: Definition, limit: int = 1000, domains: Mapping[str, Sequence[Any]] | None = None) -> Exploration:
    """Explore ``defn`` breadth first over at most ``limit`` configurations.

    ``domains`` maps ``context.KEY`` (or a bare ``KEY``) to the values a start context may hold there,
    and ``event.KEY`` to the values events may carry in their data there.
    """
    t = defn.tables
    context_domains, event_domains = _split(domains or {})
    doc = canonical_form(defn)
    guarded = _guard_values(doc)
    alphabet = _alphabet(t, event_domains, guarded)
    out = Exploration(coverage=_universe(t, doc))
    out.unvalued_event_keys = sorted({key for name, per_event in guarded.items() if name not in (_CONTEXT, _DONE)
                                      for key, values in per_event.items() if not values and key not in event_domains})
    outcomes = guarded.get(_DONE, {}).get("outcome", [])
    seen: set[str] = set()
    queue: deque[tuple[Execution, float, tuple[str, ...]]] = deque()
    for ctx in _start_contexts(context_domains, guarded.get(_CONTEXT, {})):
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
        for event, at, label in _moves(t, exe, now, alphabet, outcomes):
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
            _found(out, Finding("deadlock", where(exe), path,
                                "no event, timer or child moves it any more (every event is ignored, "
                                "no timer is armed, no child runs)"))
    return out


_REDRIVE_HINT = re.compile(r"\s*\(fix the value, then `durastate redrive [^`]*`\)")
"""What a failed execution's error tells its operator; the exploration's reader fixes the definition."""


def _advance(defn: Definition, exe: Execution, event: Event, now: float, path: tuple[str, ...],
             out: Exploration) -> bool:
    """Step ``exe``, noting what it reached; a step that fails it is a finding (``False``)."""
    res = step(defn, exe, event, now, detail=True)
    cov = out.coverage
    for ct, _ in getattr(res, "fired", None) or ():
        cov.taken.add(ct.site)
    t = defn.tables
    for leaf in exe.leaves or ([exe.active_path] if exe.active_path else []):
        s = t.index.get(leaf, -1)
        while s > 0:
            cov.reached.add(t.paths[s])
            s = t.parent[s]
    if exe.status != "failed":
        return True
    error = _REDRIVE_HINT.sub("", exe.error or "")
    kind: Literal["loop", "failure"] = "loop" if f"after {MAX_MICROSTEPS}" in error else "failure"
    _found(out, Finding(kind, where(exe), path, error))
    return False


def _found(out: Exploration, finding: Finding) -> None:
    """Keep ``finding`` unless the same problem in the same place was found already (by a shorter path:
    the search is breadth first), so one deadlock reached from several start contexts is reported once."""
    if not any((f.kind, f.active_path, f.detail) == (finding.kind, finding.active_path, finding.detail)
               for f in out.findings):
        out.findings.append(finding)


def _moves(t: Tables, exe: Execution, now: float, alphabet: list[tuple[str, dict[str, Any]]],
           outcomes: Sequence[Any]) -> Iterator[tuple[Event, float, str]]:
    """Every event that may come next: the alphabet, the armed timers, each running child's end."""
    for i, (name, data) in enumerate(alphabet):
        label = f"{name} {json.dumps(data, sort_keys=True)}" if data else name
        yield Event(id=f"e{i}", name=name, data=data), now, label
    for key, fire_at in sorted(exe.timers.items()):
        label = f"task {key[len(TASK_TIMEOUT_PREFIX):]} timed out" if key.startswith(TASK_TIMEOUT_PREFIX) \
            else f"timer {key}"
        yield (Event(id=timeout_event_id(exe.id, key, fire_at), name=f"{RESERVED_PREFIX}timeout",
                     data={"path": key, "fire_at": fire_at}),
               max(now, fire_at), label)
    for cid, ref in sorted(exe.children.items()):
        if ref.status != "running":
            continue
        for status, outcome in _child_ends(t, ref.path, ref.kind, outcomes):
            data = {"child_id": cid, "status": status, "outcome": outcome, "output": {}}
            if ref.kind == "task":
                data["task_id"] = cid
            if status == "failed":
                data["error"] = "child failed" if ref.kind != "task" else "task failed"
            if ref.kind == "task":
                label = f"task {ref.path} {'answered' if status == 'finished' else 'failed'}"
            else:
                label = f"child {ref.path} {status}" + (f" ({outcome})" if outcome else "")
            yield Event(id=finished_event_id(cid), name=FINISHED, data=data), now, label


def _child_ends(t: Tables, path: str, kind: str, outcomes: Sequence[Any]) -> list[tuple[str, str | None]]:
    """How a child may end: a region with each outcome of its final states; an invoke finished (with no
    outcome, or each one an ``on_done`` guard compares ``$event.outcome`` with) or failed; a task answered
    or failed (its timeout is one of the armed timers)."""
    if kind == "task":
        return [("finished", None), ("failed", None)]
    if kind != "region":
        named = [o for o in dict.fromkeys(outcomes) if isinstance(o, str)]
        return [("finished", None), *(("finished", o) for o in named), ("failed", None)]
    root = t.index.get(path, -1)
    outcomes = sorted({t.outcome[s] or "" for s in range(len(t.paths))
                       if t.kind[s] == "final" and s != root and (t.is_proper_ancestor(root, s))})
    return [("finished", o or None) for o in outcomes] or [("finished", None)]


def _alphabet(t: Tables, event_domains: Mapping[str, Sequence[Any]],
              guarded: Mapping[str, Mapping[str, list[Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Every event to try: each name with no data, then with each combination of the values its guards'
    comparisons suggest (:func:`_guard_values`) and the ``event.KEY`` domains (which win for their key)."""
    names: set[str] = set()
    for s in range(len(t.paths)):
        for descriptor, _ in t.own_on[s]:
            names.add("any" if descriptor == ANY else descriptor)
    out: list[tuple[str, dict[str, Any]]] = []
    for name in sorted(names):
        options: dict[str, Sequence[Any]] = {key: [_ABSENT, *values]
                                             for key, values in guarded.get(name, {}).items() if values}
        options.update(event_domains)
        variants = [{k: v for k, v in d.items() if v is not _ABSENT} for d in _combinations(options)] or [{}]
        for data in dict.fromkeys(json.dumps(v, sort_keys=True) for v in variants):
            out.append((name, json.loads(data)))
    return out


_ABSENT = object()
"""An event data variant without the key (also in :func:`_combinations`' product; dropped from the data)."""
_CONTEXT = "~context"
"""Where :func:`_guard_values` keeps what guards compare ``$context`` keys with (tried as start contexts)."""
_DONE = "~on_done"
"""Where :func:`_guard_values` keeps what ``on_done`` guards compare (``outcome``: the child outcomes)."""
_COMPARISONS = ("eq", "ne", "gt", "ge", "lt", "le")


def _guard_values(doc: Mapping[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """For each event name (``any`` for ``*``; :data:`_DONE` for the children's endings), the ``$event``
    keys its guards read, each with the values worth trying: a constant it is compared with and, for a
    number, its neighbours below and above; an ``in`` list's members; ``true`` for ``exists``. An empty list:
    the guard reads the key but compares it with no constant (another reference)."""
    out: dict[str, dict[str, list[Any]]] = {}

    def note(event: str, spec: Any) -> None:
        for root, key, values in _guard_refs(spec):
            have = out.setdefault(event if root == "event" else _CONTEXT, {}).setdefault(key, [])
            have.extend(v for v in values if not any(v == h and type(v) is type(h) for h in have))  # 1 ≠ True

    def walk_transitions(event: str, specs: Any) -> None:
        for spec in specs if isinstance(specs, list) else [specs]:
            if isinstance(spec, dict):
                note(event, spec.get("guard"))
                note(event, _choose_guards(spec.get("actions")))

    def walk(states: Any) -> None:
        for state in (states or {}).values() if isinstance(states, dict) else ():
            if not isinstance(state, dict):
                continue
            for name, specs in (state.get("on") or {}).items():
                walk_transitions("any" if name == "*" else name, specs)
            walk_transitions(_DONE, state.get("on_done"))
            walk(state.get("states"))

    walk(doc.get("states"))
    return out


def _choose_guards(actions: Any) -> list[Any]:
    """The guards of the ``choose`` branches in an action list (they read the event too)."""
    found: list[Any] = []
    for action in actions if isinstance(actions, list) else []:
        if not isinstance(action, dict):
            continue
        for branch in action.get("choose") or [] if isinstance(action.get("choose"), list) else []:
            if isinstance(branch, dict):
                found.append(branch.get("guard"))
                found.extend(_choose_guards(branch.get("actions")))
        found.extend(_choose_guards(action.get("block")))  # a block's actions are the list's own
    return [{"and": found}] if found else []


def _guard_refs(spec: Any) -> Iterator[tuple[str, str, list[Any]]]:
    """``(root, key, values to try)`` for every comparison of an ``$event`` or ``$context`` reference in a
    guard (root ``event`` or ``context``)."""
    if isinstance(spec, list):
        for sub in spec:
            yield from _guard_refs(sub)
        return
    if not isinstance(spec, dict):
        return
    for op, args in spec.items():
        if op in ("not", "and", "or"):
            yield from _guard_refs(args)
        elif op == "exists" and (ref := _ref(args)) is not None:
            yield (*ref, [True])
        elif op == "in" and isinstance(args, list) and len(args) == 2 and (ref := _ref(args[0])) is not None:
            yield (*ref, list(args[1]) if isinstance(args[1], list) else [])
        elif op in _COMPARISONS and isinstance(args, list) and len(args) == 2:
            for one, other in ((args[0], args[1]), (args[1], args[0])):
                if (ref := _ref(one)) is not None:
                    yield (*ref, [] if _is_ref(other) else _around(other))


def _ref(value: Any) -> tuple[str, str] | None:
    """``("event", "a.b")`` for ``$event.a.b``, ``("context", "n")`` for ``$context.n``, else ``None``."""
    if isinstance(value, str):
        for root in ("event", "context"):
            if value.startswith(f"${root}."):
                return root, value[len(root) + 2:]
    return None


def _is_ref(value: Any) -> bool:
    return (isinstance(value, str) and value.startswith("$") and not value.startswith("$$")) or isinstance(value, dict)


def _around(value: Any) -> list[Any]:
    """A constant and, for a number, its neighbours on each side (a boundary is tried from both)."""
    if isinstance(value, bool):
        return [value, not value]
    if isinstance(value, int | float):
        return [value - 1, value, value + 1]
    return [value]


def _universe(t: Tables, doc: Mapping[str, Any]) -> Coverage:
    """The states and transitions the coverage counts, before any is reached."""
    counted = [s for s in range(1, len(t.paths)) if t.kind[s] != "history" and not _in_child_region(t, s)]
    keep = set(counted)
    transitions: dict[str, str] = {}
    for s in range(len(t.paths)):
        if s not in keep:
            continue
        cts: list[tuple[CompiledTransition, str]] = [(ct, f"on {d}") for d, ct in t.own_on[s]]
        for a in t.after[s]:
            timer = _at_site(doc, a.transition.site)
            when = timer.get("seconds", timer.get("at")) if isinstance(timer, dict) else a.written
            cts.append((a.transition, f"after {when}"))
        for name, group in t.own[s].items():
            cts.extend((ct, "on_done" if name.startswith("durastate.done") else "on_error") for ct in group)
        cts.extend((ct, "always") for ct in t.own_always[s])
        for ct, trigger in cts:
            target = t.paths[ct.target] if ct.target >= 0 else "(no target)"
            text = f"{t.paths[s]} -> {target} {trigger}"
            spec = _at_site(doc, ct.site)
            guard = spec.get("guard") if isinstance(spec, dict) else None
            if guard is not None:
                text += f" [guard {json.dumps(guard, separators=(', ', ': '))}]"
            transitions[ct.site] = text
    return Coverage(states=tuple(t.paths[s] for s in counted), transitions=transitions,
                    in_regions=sum(1 for s in range(1, len(t.paths)) if _in_child_region(t, s)))


def _in_child_region(t: Tables, s: int) -> bool:
    """Whether state ``s`` is a region of a parallel state run as child executions, or inside one."""
    p = t.parent[s]
    while p > 0:
        if t.kind[p] == "parallel" and not t.inline[p]:
            return True
        p = t.parent[p]
    return False


_SITE_PART = re.compile(r"[^.\[\]]+|\[\d+\]")


def _at_site(doc: Any, site: str) -> Any:
    """The part of the canonical document at ``site`` (``states.a.on.go[0]``; ``[0]`` of a single spec is
    the spec itself), or ``None``."""
    node = doc
    for part in _SITE_PART.findall(site):
        if part.startswith("["):
            i = int(part[1:-1])
            node = node[i] if isinstance(node, list) and i < len(node) else (node if i == 0 else None)
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def _start_contexts(domains: Mapping[str, Sequence[Any]], guarded: Mapping[str, list[Any]]
                    ) -> Iterator[dict[str, Any]]:
    """The start contexts: every combination of the ``context.KEY`` domains, then — for each key a guard
    compares with constants and no domain names — the definition's context with that one key set to each
    of those values, one key at a time (so they add up rather than multiply)."""
    yield from _combinations(domains)
    produced = 0
    for key, values in guarded.items():
        if key in domains:
            continue
        for value in values:
            if produced >= MAX_VARIANTS:
                return
            produced += 1
            yield from _combinations({key: [value]})


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
                       {path: m.model_dump() for path, m in exe.maps.items()},
                       {key: [e.name, e.data] for key, e in exe.sends.items()}],
                      sort_keys=True, default=str)
