"""Static checks of a definition: what loads and runs, but cannot be what its author meant.

``load_definition`` refuses what cannot run (a bad target, a wrong key); these checks find charts that run
and are still wrong, the way a linter does: a state no transition can reach, a non-final state nothing
leaves, a transition an earlier unguarded one always wins over, an eventless loop with no guard to stop
it, a history state nobody targets, an event the chart raises or sends itself that no state handles.
``durastate validate`` reports them with every other issue, each with its path in the document.

Everything is read from the compiled tables, the same ones the interpreter steps on, so the checks see
the chart as it runs (shorthands expanded, targets resolved) and cannot disagree with it. Guards are not
evaluated: a guarded transition counts as *possibly* taken, so "unreachable" means unreachable whatever
the context holds. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from durastate.engine.definition import Definition, State
from durastate.engine.tables import ANY, CompiledTransition, Tables, descriptor_matches

__all__ = ["static_issues"]


def static_issues(defn: Definition) -> list[str]:
    """Every static issue of ``defn``, each ``"<site>: <what is wrong>; <what to do>"``, in document order."""
    t: Tables = defn.tables
    issues: list[str] = []
    reached = _reachable(t)
    for s in range(1, len(t.paths)):
        kind = t.kind[s]
        if kind == "history":
            if not _targeted(t, s) and t.initial[t.parent[s]] != s:
                issues.append(f"{t.sites[s]}: history state never targeted (no transition goes to "
                              f"{t.paths[s]!r}); target it to restore the last active state, or remove it")
            continue
        if s not in reached:
            issues.append(f"{t.sites[s]}: unreachable: no transition, initial state or history leads to "
                          f"{t.paths[s]!r}; target it from somewhere or remove it")
        elif kind == "atomic" and not _has_way_out(t, s):
            issues.append(f"{t.sites[s]}: no way out: {t.paths[s]!r} is not final and neither it nor a state "
                          "above it has a transition, timer or invoke; add one, or make it `type: final`")
    for s in range(len(t.paths)):
        issues.extend(_dead_transitions(t, s))
    issues.extend(_always_cycles(t))
    issues.extend(_unhandled_self_events(defn, t))
    return issues


# -- reachability -----------------------------------------------------------------------------------


def _transitions(t: Tables, s: int) -> Iterator[CompiledTransition]:
    """Every transition whose source is ``s``: ``on``, ``always``, ``after``, ``on_done``/``on_error``."""
    for _, ct in t.own_on[s]:
        yield ct
    yield from t.own_always[s]
    for cts in t.own[s].values():
        yield from cts
    yield from _afters(t, s)


def _afters(t: Tables, s: int) -> Iterator[CompiledTransition]:
    for timer in t.after[s]:
        yield timer.transition


def _enter(t: Tables, s: int, into: set[int]) -> None:
    """Mark ``s`` entered and what entering it enters below: the initial child (through a history's
    default), every region of a parallel state."""
    stack = [s]
    while stack:
        x = stack.pop()
        if x in into:
            continue
        into.add(x)
        kind = t.kind[x]
        if kind == "compound" and t.initial[x] >= 0:
            stack.append(t.initial[x])
        elif kind == "parallel":
            stack.extend(t.children[x])
        elif kind == "history":
            default = t.history_default[x]
            stack.append(default if default >= 0 else t.initial[t.parent[x]])


def _entered(t: Tables, ct: CompiledTransition) -> set[int]:
    """The states taking ``ct`` enters: those between its domain and its target, and below the target."""
    into: set[int] = set()
    _enter(t, ct.target if ct.history < 0 else ct.history, into)
    for s in ct.enter:
        if t.inline[s]:  # a target inside one inline region enters the other regions by their defaults
            for r in t.children[s]:
                if r not in ct.enter:
                    _enter(t, r, into)
    return into | set(ct.enter)


def _reachable(t: Tables) -> set[int]:
    """The states some run can enter (guards taken as possibly true, history as restoring any state
    that was active below it — which is already reachable by another way)."""
    reached: set[int] = set()
    _enter(t, 0, reached)
    done: set[int] = set()
    while True:
        todo = [s for s in reached if s not in done]
        if not todo:
            return reached
        for s in todo:
            done.add(s)
            for ct in _transitions(t, s):
                if ct.target < 0:
                    continue
                reached |= _entered(t, ct)


def _targeted(t: Tables, h: int) -> bool:
    return any(ct.history == h or ct.target == h for s in range(len(t.paths)) for ct in _transitions(t, s))


def _has_way_out(t: Tables, s: int) -> bool:
    x = s
    while x >= 0:
        if t.invoke[x] is not None or next(_transitions(t, x), None) is not None:
            return True
        x = t.parent[x]
    return False


# -- transitions that never run ----------------------------------------------------------------------


def _covers(earlier: str, later: str) -> bool:
    """Whether descriptor ``earlier`` matches every event ``later`` matches."""
    if earlier == ANY:
        return True
    if later == ANY:
        return False
    return descriptor_matches(earlier, later)


def _dead_transitions(t: Tables, s: int) -> Iterator[str]:
    """Transitions of ``s`` an earlier unguarded one of ``s`` always wins over (SCXML: the first enabled
    transition in document order is taken, so nothing after an unguarded one on the same events runs)."""
    seen: list[tuple[str, CompiledTransition]] = []
    for descriptor, ct in t.own_on[s]:
        winner = next((site for d, w in seen if w.guard is None and _covers(d, descriptor)
                       for site in (w.site,)), None)
        if winner is not None:
            both = "two unguarded transitions on one event: " if ct.guard is None else ""
            yield (f"{ct.site}: never taken: {both}the earlier {winner} (no guard) always wins on "
                   f"{descriptor!r}; give the earlier one a guard, or remove this one")
        seen.append((descriptor, ct))
    unguarded: CompiledTransition | None = None
    for ct in t.own_always[s]:
        if unguarded is not None:
            yield (f"{ct.site}: never taken: the earlier {unguarded.site} (no guard) always wins; give the "
                   "earlier one a guard, or remove this one")
        elif ct.guard is None:
            unguarded = ct


# -- eventless loops ---------------------------------------------------------------------------------


def _always_cycles(t: Tables) -> Iterator[str]:
    """Unguarded ``always`` transitions that lead back to a state whose unguarded ``always`` fires again:
    the step never settles (the interpreter stops it at its microstep limit and fails the step).

    A state is *hot* when it has an unguarded ``always`` (its first one: later ones never run). Taking it
    leaves active the states above the transition's domain and enters the target's; each hot state among
    them can fire next. A cycle of such steps is a loop no guard can stop."""
    hot = {s: next(ct for ct in t.own_always[s] if ct.guard is None)
           for s in range(len(t.paths)) if any(ct.guard is None for ct in t.own_always[s])}
    edges: dict[int, list[int]] = {}
    for s, ct in hot.items():
        if ct.target < 0:
            edges[s] = [s]  # a targetless transition leaves everything active: it fires again
            continue
        after = _entered(t, ct)
        x = ct.domain
        while x >= 0:
            after.add(x)
            x = t.parent[x]
        edges[s] = sorted(x for x in after if x in hot)
    reported: set[frozenset[int]] = set()
    for start in sorted(edges):
        cycle = _cycle_through(start, edges)
        if cycle is None or frozenset(cycle) in reported:
            continue
        reported.add(frozenset(cycle))
        shown = " -> ".join(t.paths[x] or "(root)" for x in [*cycle, cycle[0]])
        yield (f"{hot[start].site}: `always` loop without a guard ({shown}): the step never settles; guard "
               "one of these transitions, or make one wait for an event")


def _cycle_through(start: int, edges: Mapping[int, list[int]]) -> list[int] | None:
    """The states of a cycle of ``edges`` through ``start`` (depth first), or ``None``."""
    stack: list[tuple[int, list[int]]] = [(start, [start])]
    seen: set[int] = set()
    while stack:
        x, path = stack.pop()
        for y in edges.get(x, ()):
            if y == start:
                return path
            if y not in seen:
                seen.add(y)
                stack.append((y, [*path, y]))
    return None


# -- events the chart gives itself -------------------------------------------------------------------


def _unhandled_self_events(defn: Definition, t: Tables) -> Iterator[str]:
    """``raise`` (and ``send`` to ``self``) of an event no state of the chart has a transition for: it is
    dropped when it arrives."""
    descriptors = {d for s in range(len(t.paths)) for d, _ in t.own_on[s]}
    for site, name in _self_events(defn.states, "states"):
        if not any(descriptor_matches(d, name) for d in descriptors):
            yield (f"{site}: the event {name!r} this chart gives itself is handled by no state (it is "
                   "dropped when it arrives); add a transition on it, or fix the name")


def _self_events(states: Mapping[str, State], site: str) -> Iterator[tuple[str, str]]:
    for name, node in states.items():
        at = f"{site}.{name}"
        yield from _actions_events(node.entry, f"{at}.entry")
        yield from _actions_events(node.exit, f"{at}.exit")
        for event, transitions in node.on.items():
            for k, tr in enumerate(transitions):
                yield from _actions_events(tr.actions, f"{at}.on.{event}[{k}].actions")
        for key in ("always", "on_done", "on_error"):
            for k, tr in enumerate(getattr(node, key)):
                yield from _actions_events(tr.actions, f"{at}.{key}[{k}].actions")
        after: Any = node.after
        for k, spec in enumerate(after if isinstance(after, list) else [after] if after is not None else []):
            yield from _actions_events(spec.actions, f"{at}.after[{k}].actions")
        yield from _self_events(node.states, f"{at}.states")


def _actions_events(actions: list[Any], site: str) -> Iterator[tuple[str, str]]:
    for k, action in enumerate(actions):
        if not isinstance(action, Mapping) or len(action) != 1:
            continue
        (kind, args), = action.items()
        if kind == "choose" and isinstance(args, list):
            for b, branch in enumerate(args):
                if isinstance(branch, Mapping) and isinstance(branch.get("actions"), list):
                    yield from _actions_events(branch["actions"], f"{site}[{k}].choose[{b}].actions")
            continue
        if kind == "foreach" and isinstance(args, Mapping) and isinstance(args.get("actions"), list):
            yield from _actions_events(args["actions"], f"{site}[{k}].foreach.actions")
            continue
        if kind == "block" and isinstance(args, list):
            yield from _actions_events(args, f"{site}[{k}].block")
            continue
        if kind == "raise":
            name = args if isinstance(args, str) else args.get("event") if isinstance(args, Mapping) else None
        elif kind == "send" and isinstance(args, Mapping) and args.get("to") == "self":
            name = args.get("event")
        else:
            continue
        if isinstance(name, str) and name:
            yield f"{site}[{k}].{kind}", name
