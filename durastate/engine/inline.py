"""Inline regions: a ``regions: inline`` parallel state runs its regions inside its own execution.

The default interpreter (:class:`durastate.engine.run.Run`) keeps one active leaf, because a
parallel state's regions are child executions. :class:`InlineRun` is the run of a definition that has an
inline parallel state: its *configuration* is a set of active states with several leaves, and it follows
the SCXML algorithm (the W3C recommendation's ``selectTransitions`` / ``microstep``):

- selection: each active leaf, in document order, selects its own transition (the leaf's first, then its
  ancestors', document order within a state, as one leaf does); the same transition selected by two leaves
  is taken once; of two whose exit sets intersect, one from a descendant state preempts the other, else the
  earlier one wins;
- a microstep exits the union of the exit sets (descendants of each transition's domain) in reverse
  document order, recording history first (every leaf below the state: history of an inline parallel state
  remembers each region's leaf), then runs the transitions' actions in document order, then enters the
  targets; entering an inline parallel state enters each region (by its initial state, unless a target
  or a recorded deep history is in it);
- a final state of a region raises ``durastate.done.<region>``; when every region of an inline parallel
  state is in a final state, ``durastate.done.<parallel>`` follows (its ``on_done``);
- ``always`` transitions and raised events settle to a fixed point as in a single-leaf step.

Entry and exit actions, timers and history bookkeeping are the base run's (``enter_state``/``exit_state``),
so a state behaves the same wherever it sits. The step stores the configuration as ``active_path`` (the one
leaf, or the leaves' deepest common ancestor) plus :attr:`~durastate.engine.model.Execution.leaves` when
more than one leaf is active: a definition without inline parallel states never reaches this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from durastate.engine.inline_rules import HISTORY_SEPARATOR
from durastate.engine.model import Event, Execution
from durastate.engine.run import Run
from durastate.engine.run_context import MAX_MICROSTEPS, ExecutionFailed, unsettled
from durastate.engine.tables import CompiledTransition, Tables

__all__ = ["InlineRun", "configuration", "leaves_of", "summary"]



def leaves_of(t: Tables, cfg: Iterable[int]) -> list[int]:
    """The active leaves of a configuration, in document order (a state none of whose children is active)."""
    states = set(cfg)
    parents = {t.parent[s] for s in states}
    return sorted(s for s in states if s not in parents)


def summary(t: Tables, leaves: list[int]) -> int:
    """What ``active_path`` holds: the one leaf, or the deepest common ancestor of several."""
    first = leaves[0]
    if len(leaves) == 1:
        return first
    chain: list[int] = []  # the first leaf's proper ancestors, innermost first
    s = t.parent[first]
    while s >= 0:
        chain.append(s)
        s = t.parent[s]
    on_chain = set(chain)
    lowest = 0  # the innermost ancestor of the first leaf that is an ancestor of every leaf
    for x in leaves[1:]:
        x = t.parent[x]
        while x not in on_chain:
            x = t.parent[x]
        lowest = max(lowest, chain.index(x))
    return chain[lowest]


def configuration(t: Tables, exe: Execution) -> set[int]:
    """Every active state of ``exe`` (its leaves and all their ancestors, the implicit root 0 included)."""
    cfg: set[int] = {0}
    paths = exe.leaves or ([exe.active_path] if exe.active_path else [])
    for path in paths:
        s = t.index.get(path, -1)
        if s < 0:
            raise ExecutionFailed(f"active state {path!r} is not a state of the definition "
                                  "(was the definition changed under a running execution?)")
        while s > 0 and s not in cfg:
            cfg.add(s)
            s = t.parent[s]
    return cfg


class InlineRun(Run):
    """A step over a configuration of several active states (see the module docstring).

    While one leaf is active (outside every inline parallel state) the base run's single-leaf code runs:
    :attr:`cfg` stays ``None`` and ``leaf`` says it all. The set is built (from ``leaf``, which the base code
    keeps exact) the first time the step enters an inline parallel state or starts inside one, and from
    then on this class's configuration code runs for the rest of the step.
    """

    cfg: set[int] | None = None
    known_leaves: list[int] | None = None
    """The leaves of :attr:`cfg` while it has not changed since they were computed (``None``: compute)."""

    def leaves(self) -> list[int]:
        got = self.known_leaves
        if got is None:
            got = self.known_leaves = leaves_of(self.t, self.conf())
        return got

    def single(self) -> bool:
        """One leaf is active, and ``leaf`` is it: the base run's code applies."""
        return self.cfg is None and not self.exe.leaves

    def conf(self) -> set[int]:
        """The configuration, read from the execution on first use (the step has set ``leaf`` by then)."""
        cfg = self.cfg
        if cfg is None:
            exe = self.exe
            if exe.leaves:
                cfg = configuration(self.t, exe)
            else:
                cfg = {0}
                s = self.leaf
                while s > 0:
                    cfg.add(s)
                    s = self.t.parent[s]
            self.cfg = cfg
        return cfg

    def is_active(self, path: str) -> bool:
        if self.single():
            return super().is_active(path)
        s = self.t.index.get(path, -1)
        return s >= 0 and s in self.conf()

    def _resummarise(self) -> None:
        leaves = self.leaves()
        if leaves:
            self.leaf = summary(self.t, leaves)

    def save_leaves(self) -> None:
        """Write the configuration back: ``active_path`` (already the summary) and ``leaves``."""
        t = self.t
        fields = self.exe.__dict__
        if self.cfg is None:
            return  # the step did not touch the configuration beyond ``leaf``: the leaves are as they were
        leaves = self.leaves()
        fields["leaves"] = [t.paths[s] for s in leaves] if len(leaves) > 1 else []
        self.exe.__pydantic_fields_set__.add("leaves")

    # -- entering ------------------------------------------------------------------------------------
    def enter_state(self, s: int) -> None:
        if self.cfg is not None:
            self.cfg.add(s)
            self.known_leaves = None
        super().enter_state(s)

    def complete(self, s: int) -> None:
        t = self.t
        kind = t.kind[s]
        if kind == "compound":
            c = self.enter_initial(s)
            if c >= 0:
                self.complete(c)
        elif t.inline[s]:
            cfg = self.conf()
            for r in t.children[s]:
                if r not in cfg:
                    self.enter_state(r)
                    self.complete(r)
        else:
            super().complete(s)  # atomic, final (done events) or a parallel state of child executions

    def descend(self, s: int, targets: list[int], reach: Callable[[int], None]) -> None:
        """Enter ``s`` and the states down to each of ``targets`` (``reach`` is called on arriving at one);
        regions of an inline parallel state on the way that hold no target start at their initial state."""
        t = self.t
        cfg = self.conf()
        if s not in cfg:
            self.enter_state(s)
        if s in targets:
            reach(s)
            return
        if t.inline[s]:
            for r in t.children[s]:
                sub = [x for x in targets if x == r or t.is_proper_ancestor(r, x)]
                if sub:
                    self.descend(r, sub, reach)
                elif r not in cfg:
                    self.enter_state(r)
                    self.complete(r)
            return
        for c in t.children[s]:
            sub = [x for x in targets if x == c or t.is_proper_ancestor(c, x)]
            if sub:
                self.descend(c, sub, reach)
                return

    def restore(self, h: int) -> None:
        t, exe = self.t, self.exe
        p = t.parent[h]
        self.leaf = p
        recorded = exe.history.get(t.paths[p])
        recs = [t.index.get(x, -1) for x in recorded.split(HISTORY_SEPARATOR)] if recorded else []
        if recs and all(r > 0 and t.is_proper_ancestor(p, r) for r in recs):
            if t.history_deep[h]:
                targets = recs
            else:
                c = recs[0]
                while t.parent[c] != p:
                    c = t.parent[c]
                targets = [c]
        else:
            default = t.history_default[h]
            targets = [default if default >= 0 else t.initial[p]]
        top = targets[0]
        while t.parent[top] != p:
            top = t.parent[top]
        self.descend(top, targets, self.complete)

    def on_final(self, s: int) -> None:
        super().on_final(s)
        t = self.t
        g = t.parent[t.parent[s]]
        if g > 0 and t.inline[g] and self.exe.status == "running" and self._in_final(g):
            self.raise_platform(t.done_event[g], {})

    def _in_final(self, s: int) -> bool:
        t, cfg = self.t, self.conf()
        if t.kind[s] == "parallel":
            return all(self._in_final(r) for r in t.children[s])
        for c in t.children[s]:
            if c in cfg:
                return t.kind[c] == "final"
        return False

    # -- selection and microsteps ------------------------------------------------------------------
    def select(self, ev: Event | None) -> list[CompiledTransition]:
        """The transitions one microstep takes for ``ev`` (``None``: the eventless ones), SCXML's way."""
        t = self.t
        seen = self.event if ev is None else ev
        chosen: list[CompiledTransition] = []
        single = self.single()
        for leaf in [self.leaf] if single else self.leaves():
            if ev is None:
                cands: tuple[CompiledTransition, ...] = t.always[leaf]
            else:
                cands = t.handlers[leaf].get(ev.name) or t.fallback(leaf, ev.name)
            ct = self.enabled(cands, seen)
            if ct is not None and ct not in chosen:
                chosen.append(ct)
        if len(chosen) < 2:
            return chosen
        if ev is not None and any(ct.defer for ct in chosen):
            # XState's selection: a state's own transitions only when nothing below it took the event
            chosen = [c for c in chosen if not (c.defer and any(t.is_proper_ancestor(c.source, o.source)
                                                                for o in chosen))]
        cfg = self.conf()
        kept: list[CompiledTransition] = []
        for c1 in chosen:
            x1 = self._exit_set(c1, cfg)
            beaten: list[CompiledTransition] = []
            preempted = False
            for c2 in kept:
                if x1 & self._exit_set(c2, cfg):
                    if t.is_proper_ancestor(c2.source, c1.source):
                        beaten.append(c2)
                    else:
                        preempted = True
                        break
            if not preempted:
                kept = [c for c in kept if c not in beaten]
                kept.append(c1)
        return kept

    def _exit_set(self, ct: CompiledTransition, cfg: set[int]) -> set[int]:
        if ct.target < 0:
            return set()
        d, t = ct.domain, self.t
        return {s for s in cfg if s != d and t.is_proper_ancestor(d, s)}

    def dispatch(self, ev: Event) -> bool:
        if self.single():
            return super().dispatch(ev)
        cts = self.select(ev)
        if not cts:
            return False
        self.event = ev
        self.microstep(cts)
        return True

    def fire(self, ct: CompiledTransition) -> None:
        if self.single() and ct.site not in self.t.crossing:
            super().fire(ct)  # may enter an inline parallel state at its end (``complete``)
            if self.cfg is not None:
                self._resummarise()
            return
        self.microstep([ct])

    def microstep(self, cts: list[CompiledTransition]) -> None:
        """Exit the union of the exit sets (history first), run the actions, enter the targets."""
        t = self.t
        cfg = self.conf()
        if self.fired is not None:
            self.fired.extend((ct, self.event.name) for ct in cts)
        exits: set[int] = set()
        for ct in cts:
            exits |= self._exit_set(ct, cfg)
        self.exit_states(exits)
        for ct in cts:
            if ct.actions:
                self._actions(ct.actions, ct.actions_site)
        for ct in cts:
            if ct.target < 0:
                continue
            h = ct.history
            if not ct.enter:  # a history child of the domain itself (an internal transition)
                self.restore(h)
                continue
            reach = self.complete if h < 0 else partial(self._reach_history, h)
            if t.inline[ct.domain]:
                # an inline parallel domain (``parallel_domain``) is kept, its regions were left: each
                # region without the target starts again at its initial state, in document order
                self.descend(ct.domain, [ct.enter[-1]], reach)
            else:
                self.descend(ct.enter[0], [ct.enter[-1]], reach)
        self._resummarise()

    def exit_states(self, exits: set[int]) -> None:
        """Exit ``exits`` (active states) in reverse document order, recording history first (every leaf
        below the state); they leave the configuration."""
        if not exits:
            return
        t, exe, cfg = self.t, self.exe, self.conf()
        leaves = self.leaves()
        self.known_leaves = None
        memory = {s: [x for x in leaves if t.is_proper_ancestor(s, x)] for s in exits if t.has_history[s]}
        for s in sorted(exits, reverse=True):
            if t.exit_work[s]:
                below = memory.get(s)
                self.exit_state(s, below[0] if below else s)
                if below:
                    exe.history[t.paths[s]] = HISTORY_SEPARATOR.join(t.paths[x] for x in below)
            cfg.discard(s)

    def _reach_history(self, h: int, _dest: int) -> None:
        self.restore(h)

    def settle(self) -> None:
        if self.single() and not self.internal and not self.t.always[self.leaf]:
            return
        micro = 0
        while self.exe.status == "running":
            cts = self.select(None)
            if cts:
                if len(cts) == 1:
                    self.fire(cts[0])  # from a single leaf, the base run's transition
                else:
                    self.microstep(cts)
                last = cts[0].site
            elif self.internal:
                ev = self.internal.pop(0)
                self.dispatch(ev)
                last = f"raised event {ev.name!r}"
            else:
                break
            micro += 1
            if micro >= MAX_MICROSTEPS:
                raise unsettled(last)
        self._resummarise()

    def on_catch(self, ev: Event) -> bool:
        """A failure whose retries ran out: the ``on_error`` of the nearest active state that has one, from
        each leaf up (leaves in document order; a state shared by several leaves is asked once)."""
        if self.single():
            return super().on_catch(ev)
        t = self.t
        floor = t.depth[self.root]
        asked: set[int] = set()
        for leaf in list(self.leaves()):
            s = leaf
            while s >= 0 and t.depth[s] >= floor and s not in asked:
                asked.add(s)
                if self.dispatch(Event.model_construct(id=ev.id, name=t.error_event[s], data=ev.data)):
                    return True
                s = t.parent[s]
        raise ExecutionFailed(f"{ev.data.get('error')} (after {ev.data.get('attempts')} attempt(s); no "
                              f"on_error on {t.paths[self.leaf]} or inside it)")

    def exit_all(self) -> None:
        """The exit actions of every active state at or below this execution's root, leaf first."""
        if self.single():
            super().exit_all()
            return
        t, root = self.t, self.root
        for s in sorted(self.conf(), reverse=True):
            if s > 0 and t.exit[s] and (s == root or not root or t.is_proper_ancestor(root, s)):
                self._actions(t.exit[s], t.sites[s] + ".exit")
