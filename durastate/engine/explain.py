"""Why an event would do what it does, and what it would do, without changing anything.

:func:`explain` lists the transitions that may handle an event in the active configuration of an execution,
in the order the interpreter tries them (innermost active state outward, document order within a state:
:meth:`~durastate.engine.tables.Tables.candidates`, the lookup ``Run.dispatch`` uses), each with its guard's
value, and says which one is taken — or why none is. :func:`preview` steps a detached copy of the execution
with the real :func:`~durastate.engine.interpreter.step` (``detail=True`` records the transitions it takes):
the same code that will apply the event, so what a dry run shows is what will happen, at that time and
with that context (a later event or timer can change both).

Pure like the rest of the engine: the caller passes the time; guards are evaluated on a copy of the context.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from durastate.engine.definition import After, Definition, State, Transition
from durastate.engine.expressions import ACTIVE
from durastate.engine.interpreter import StepResult, step
from durastate.engine.model import CANCEL, RESERVED_PREFIX, Event, Execution
from durastate.engine.tables import Tables

__all__ = ["Candidate", "Explanation", "Preview", "explain", "preview", "transition_specs"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One transition that may handle the event, as the definition writes it."""

    source: str
    """The state that declares it."""
    event: str
    """Its ``on`` key as written (``submit``, ``error.*``, ``*``)."""
    target: str | None
    """The state it goes to (``None``: targetless, it only runs its actions)."""
    guard: Any
    """The guard as written (``None``: no guard, it always holds)."""
    value: bool | None
    """The guard's value (``None`` when it has no guard or the guard failed)."""
    error: str | None
    """Why evaluating the guard failed (the step would fail there)."""
    taken: bool
    reached: bool
    """Whether the interpreter gets to it: not after the taken one or a failed guard (its value is still
    shown, as what it would be)."""
    site: str


@dataclass(slots=True)
class Explanation:
    event: str
    active: str | None
    status: str
    candidates: list[Candidate] = field(default_factory=list)
    outcome: str = ""
    """One line: what happens to the event (taken, ignored, forwarded, held, fails)."""
    forwarded: bool = False
    """Nothing here handles it and the execution sits in a parallel state: it goes to the running regions
    (explain each region child for what they do with it)."""

    @property
    def taken(self) -> Candidate | None:
        return next((c for c in self.candidates if c.taken), None)


def transition_specs(defn: Definition) -> dict[str, tuple[str, Transition | After]]:
    """Every transition of ``defn`` by its site (as in the compiled tables), with its ``on`` key as written
    (``always``, ``done``, ``error`` or ``after`` for the others)."""
    out: dict[str, tuple[str, Transition | After]] = {}

    def walk(states: dict[str, State], prefix: str) -> None:
        for name, state in states.items():
            site = f"{prefix}states.{name}"
            for key, transitions in state.on.items():
                for k, tr in enumerate(transitions):
                    out[f"{site}.on.{key}[{k}]"] = (key, tr)
            for label, group in (("always", state.always), ("on_done", state.on_done),
                                 ("on_error", state.on_error)):
                for k, tr in enumerate(group):
                    out[f"{site}.{label}[{k}]"] = (label.removeprefix("on_"), tr)
            for k, after in enumerate(state.after):
                out[f"{site}.after[{k}]"] = ("after", after)
            walk(state.states, site + ".")

    walk(defn.states, "")
    return out


def explain(defn: Definition, exe: Execution, event: Event) -> Explanation:
    """The candidates for ``event`` in ``exe``'s active configuration, in selection order, with their guards'
    values; which one is taken, or what happens instead."""
    out = Explanation(event.name, exe.active_path, exe.status)
    if exe.status not in ("running", "suspended"):
        out.outcome = f"ignored: the execution has {exe.status}"
        return out
    if exe.active_path is None:
        out.outcome = "the execution has not started yet: the event waits behind its start"
        return out
    if event.name == CANCEL:
        out.outcome = "cancels the execution: its active states' exit actions run, its children are cancelled"
        return out
    if event.name.startswith(RESERVED_PREFIX):
        out.outcome = f"{event.name!r} is an event of the runtime, not selected by transitions"
        return out
    t = defn.tables
    leaf = t.index.get(exe.active_path, -1)
    if leaf < 0:
        out.outcome = f"fails: the active state {exe.active_path!r} is not a state of {defn.id!r}"
        return out
    floor = t.depth[t.index.get(exe.root_path, 0)] if exe.root_path else 0
    specs = transition_specs(defn)
    context = copy.deepcopy(exe.context)
    decided = False
    failure: str | None = None
    # Inside an inline parallel state every active leaf selects its own transition, in document order.
    leaves = [t.index.get(p, -1) for p in exe.leaves] or [leaf]
    if t.in_state:
        cfg = {s for x in leaves for s in _ancestors(t, x)}
        ACTIVE.set(lambda path: t.index.get(path, -1) in cfg)
    listed: set[str] = set()
    for ct, first in ((ct, k == 0) for x in leaves for k, ct in enumerate(t.candidates(x, event.name))):
        if first:
            decided = False
        if ct.source_depth < floor:
            decided = True  # a state above this region's root: not part of this execution (as dispatch stops)
            continue
        if ct.site in listed:
            continue  # the same transition, selected from another leaf: taken once
        listed.add(ct.site)
        key, spec = specs.get(ct.site, (event.name, None))
        value: bool | None = None
        error: str | None = None
        if ct.guard is not None:
            try:
                value = bool(ct.guard(context, event))
            except Exception as exc:  # what the step would record as its failure
                error = f"{type(exc).__name__}: {exc}"
        reached = not decided
        taken = reached and error is None and value is not False
        if reached and error is not None:
            failure = f"fails: the guard of {ct.site} raised {error}"
        decided = decided or taken or error is not None
        out.candidates.append(Candidate(
            source=t.paths[ct.source], event=key, target=t.paths[ct.target] if ct.target >= 0 else None,
            guard=spec.guard if spec is not None else None, value=value, error=error, taken=taken,
            reached=reached, site=ct.site))
    chosen = out.taken
    more = [c for c in out.candidates if c.taken and c is not chosen]
    held = " (held while the execution is suspended; this is what happens once it resumes)" \
        if exe.status == "suspended" else ""
    if failure is not None and chosen is None:
        out.outcome = failure + held
    elif chosen is not None:
        where = f"→ {chosen.target}" if chosen.target is not None else "(targetless: actions only)"
        also = "".join(f"; and {c.source} on {c.event} → {c.target or '(targetless)'}" for c in more)
        out.outcome = f"taken: {chosen.source} on {chosen.event} {where}{also}{held}"
    elif t.kind[leaf] == "parallel" and any(r.kind == "region" and r.status == "running"
                                            for r in exe.children.values()):
        out.forwarded = True
        out.outcome = f"not handled by {exe.active_path} or above: forwarded to the running regions{held}"
    else:
        why = "no guard holds" if out.candidates else "no transition handles it"
        where = f"{', '.join(exe.leaves)} or the states above them" if exe.leaves else \
            f"{exe.active_path} or the states above it"
        out.outcome = f"ignored: {why} in {where}{held}"
    return out


@dataclass(slots=True)
class Preview:
    """What applying an event would do: the stepped copy and the step's result (nothing is committed)."""

    before: Execution
    after: Execution
    result: StepResult

    @property
    def transitions(self) -> list[dict[str, Any]]:
        """The transitions taken, in order (``source``, ``target`` and ``event`` / ``always`` / ``after``)."""
        out: list[dict[str, Any]] = self.result.trace.get("transitions", [])
        return out


def preview(defn: Definition, exe: Execution, event: Event, now: float) -> Preview:
    """Step a deep copy of ``exe`` with ``event`` at ``now``; ``exe`` itself is left as it was.

    A suspended execution is stepped as if it had been resumed (the runtime holds the event until then).
    """
    copy_ = exe.model_copy(deep=True)
    if copy_.status == "suspended":
        copy_.status = "running"
    res = step(defn, copy_, event, now, detail=True)
    return Preview(before=exe, after=copy_, result=res)


def _ancestors(t: Tables, s: int) -> list[int]:
    out = []
    while s >= 0:
        out.append(s)
        s = t.parent[s]
    return out
