"""Semantic validation of a definition and the lookup tables the interpreter runs on (their form is
:mod:`durastate.engine.compiled`; this module builds them).

Both happen in one walk of the state tree at load time. States get integer indexes in document order
(index 0 is the implicit root); everything ``step`` needs is a list indexed by state or a dict keyed by
event name, so a transition costs a few list reads and no pydantic work:

- ``handlers[i]``: event name -> the transitions that may handle it while ``i`` is the active leaf,
  innermost state first, document order within a state (the selection order of SCXML). The keys are the
  event descriptors written in the chain of states from ``i`` up, and each key's tuple already holds
  every transition whose descriptor matches that name (``error`` and ``*`` under ``error.send``), so an
  event named like a key is one dict hit;
- ``star[i]``: the ``*`` transitions of the same chain, for an event that neither is a key nor has a key as
  token prefix (:meth:`Tables.fallback`);
- ``always[i]``: the same for eventless transitions;
- per transition, its *domain* (the state it does not leave) and the states it enters down to its
  target, computed from the static source and target once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from durastate.engine.compiled import (
    _NAME_RE,
    ANY,
    DONE_PREFIX,
    ERROR_PREFIX,
    SCXML_DONE_PREFIX,
    CompiledAfter,
    CompiledTransition,
    Tables,
    _normal,
    descriptor_matches,
    descriptor_problem,
)
from durastate.engine.expressions import (
    VALUE_OPS,
    Issues,
    action_state_refs,
    compile_actions,
    compile_guard,
    compile_value,
    declarative_actions,
    declarative_guard,
    did_you_mean,
    state_refs,
)
from durastate.engine.fanout import compile_map
from durastate.engine.ids import after_timer_key
from durastate.engine.inline_rules import inline_rules
from durastate.engine.retry import parse_retry
from durastate.engine.run_timeout import run_timeout_of
from durastate.engine.tasks import compile_task, task_only
from durastate.engine.timers import BadTimerValue, deadline_of, delay_of, show_value

if TYPE_CHECKING:
    from durastate.engine.states import After, Chart, State, Transition

__all__ = [
    "ANY",
    "DONE_PREFIX",
    "ERROR_PREFIX",
    "CompiledAfter",
    "CompiledTransition",
    "Tables",
    "build_tables",
    "descriptor_matches",
    "descriptor_problem",
]

def build_tables(defn: Chart, issues: Issues, unsure: Collection[str] = ()) -> Tables:
    """Validate ``defn`` semantically (appending every issue) and compile its tables.

    ``unsure`` names the sites of states whose kind is not known (their ``type`` was unreadable and was
    dropped): the checks that depend on the kind of those states are skipped, the rest still run.
    """
    b = _Builder(defn, issues, unsure)
    b.run()
    return b.t


def _is_expression(spec: Any) -> bool:
    """A timer value computed on entry: a ``$`` reference (not a ``$$`` literal) or ``{op: [args]}``."""
    if isinstance(spec, str):
        return spec.startswith("$") and not spec.startswith("$$")
    return isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in VALUE_OPS


def _discard(ct: CompiledTransition) -> None:
    """Where the transitions of an invalid ``on`` key go: checked, never taken."""


class _Builder:
    def __init__(self, defn: Chart, issues: Issues, unsure: Collection[str] = ()) -> None:
        self.defn = defn
        self.issues = issues
        self.unsure = frozenset(unsure)
        self.t = Tables()
        self.nodes: list[State | None] = []
        self.scxml_done: dict[str, str] = {}  # done.state.<name> -> the site of the state that raises it
        # (source index, spec, site, bucket) compiled after every state has its index
        self.pending: list[tuple[int, Transition | After, str, Callable[[CompiledTransition], None]]] = []

    # -- pass 1: index the tree ------------------------------------------------------------------------
    def _done_event(self, node: State | None, path: str, site: str) -> str:
        """The done event of the state at ``path``: ``durastate.done.<path>``, or with ``done_events: scxml``
        (for a compound or parallel state that neither invokes nor maps) SCXML's ``done.state.<name>``,
        which must then name one state only."""
        if node is None or self.defn.done_events != "scxml" or node.kind not in ("compound", "parallel") \
                or node.invoke is not None or node.map is not None:
            return DONE_PREFIX + path
        name = SCXML_DONE_PREFIX + path.rpartition(".")[2]
        other = self.scxml_done.setdefault(name, site)
        if other != site:
            self.issues.append(f"{site}: with done_events: scxml, its done event {name!r} would also be that of "
                               f"{other}; rename one of them")
        return name

    def _add(self, node: State | None, path: str, site: str, parent: int) -> int:
        t = self.t
        i = len(t.paths)
        t.paths.append(path)
        t.sites.append(site)
        t.index[path] = i
        t.parent.append(parent)
        t.depth.append(0 if parent < 0 else t.depth[parent] + 1)
        t.kind.append("compound" if node is None else node.kind)
        t.children.append(())
        t.initial.append(-1)
        t.entry.append(())
        t.exit.append(())
        t.after.append(())
        t.invoke.append(None)
        t.invoke_retry.append(None)
        t.task.append(None)
        t.history_deep.append(False)
        t.history_default.append(-1)
        t.has_history.append(False)
        t.outcome.append(None)
        t.region_of.append(0)
        t.own.append({})
        t.own_on.append([])
        t.own_always.append([])
        t.done_event.append(self._done_event(node, path, site))
        t.error_event.append(ERROR_PREFIX + path)
        t.inline.append(node is not None and node.regions == "inline" and node.kind == "parallel")
        self.nodes.append(node)
        states = self.defn.states if node is None else node.states
        kids: list[int] = []
        for name, child in states.items():
            csite = f"{site}.states.{name}" if site else f"states.{name}"
            if not _NAME_RE.match(name):
                self.issues.append(f"{csite}: state names cannot be empty or contain '.', '$', '~' or spaces")
            cpath = f"{path}.{name}" if path else name
            kids.append(self._add(child, cpath, csite, i))
        t.children[i] = tuple(kids)
        return i

    def run(self) -> None:
        t, issues = self.t, self.issues
        self._add(None, "", "", -1)
        if not self.defn.states:
            issues.append("states: a definition needs at least one state")
        t.has_inline = any(t.inline)
        for i in range(len(t.paths)):
            p = t.parent[i]
            if p >= 0 and t.kind[p] == "parallel" and not t.inline[p]:
                t.region_of[i] = i
            elif p >= 0:
                t.region_of[i] = t.region_of[p]
        for i in range(len(t.paths)):
            self._check_state(i)
        for source, spec, site, put in self.pending:
            ct = self._transition(source, spec, site)
            if ct is not None:
                put(ct)
        t.has_tasks = any(c is not None for c in t.task)
        t.run_timeout = run_timeout_of(self.defn.timeout, "timeout", issues)
        t.on_timeout = self.defn.on_timeout
        t.raise_errors = self.defn.action_errors == "raise"
        self._chains()

    # -- per-state rules -----------------------------------------------------------------------------
    def _check_state(self, i: int) -> None:
        t, issues = self.t, self.issues
        node = self.nodes[i]
        site = t.sites[i]
        kind = t.kind[i]
        kids = t.children[i]
        kid_names = [t.paths[k].rsplit(".", 1)[-1] for k in kids]

        def at(key: str) -> str:
            return f"{site}.{key}" if site else key

        if node is None:  # the root
            self._initial(i, self.defn.initial, at("initial"), kid_names, issues)
            return
        parent_kind = t.kind[t.parent[i]]
        # The rules of a kind go to a scratch list when the kind is a guess (see build_tables).
        checks: Issues = [] if site in self.unsure else issues
        if node.regions is not None and kind != "parallel":
            checks.append(f"{at('regions')}: only a parallel state has regions (children or inline)")
        if t.has_inline:
            inline_rules(t, i, node, at, checks)

        def forbid(*keys: str, why: str) -> None:
            for key in keys:
                value = getattr(node, key)
                if value:
                    checks.append(f"{at(key)}: not allowed on a {why}")

        if kind == "compound":
            if not kids:
                checks.append(f"{at('states')}: a compound state needs child states")
            else:
                self._initial(i, node.initial, at("initial"), kid_names, checks)
            forbid("outcome", "history", "target", why="compound state")
            if node.on_done and not any(t.kind[k] == "final" for k in kids):
                checks.append(f"{at('on_done')}: never taken, {site} has no final child state")
        elif kind == "atomic":
            if kids:
                checks.append(f"{at('states')}: an atomic state has no child states (drop `type: atomic`)")
            forbid("initial", "outcome", "history", "target", why="atomic state")
            if node.invoke is None and node.map is None:
                # on_error stays allowed: it catches a failure whose retries ran out (engine.retry)
                forbid("on_done", why="state without `invoke` or `map` (or a final child)")
        elif kind == "parallel":
            if not kids:
                checks.append(f"{at('states')}: a parallel state needs at least one region")
            forbid("initial", why="parallel state: every region starts at once")
            forbid("invoke", "outcome", "history", "target", why="parallel state")
            for k in kids:
                # inline regions may also be inline parallel states (SCXML's <parallel> in a <parallel>)
                if t.kind[k] != "compound" and not (t.inline[i] and t.kind[k] == "parallel" and t.inline[k]):
                    checks.append(
                        f"{t.sites[k]}: a region of a parallel state must be a compound state "
                        f"(with `states` and `initial`), not {t.kind[k]}"
                        + (" (or, in an inline parallel state, an inline parallel one)" if t.inline[i] else "")
                    )
        elif kind == "final":
            forbid(
                "states",
                "initial",
                "on",
                "always",
                "after",
                "invoke",
                "on_done",
                "on_error",
                "history",
                "target",
                why="final state (nothing leaves it)",
            )
            t.outcome[i] = node.outcome if node.outcome is not None else t.paths[i].rsplit(".", 1)[-1]
        elif kind == "history":
            forbid(
                "states",
                "initial",
                "entry",
                "exit",
                "on",
                "always",
                "after",
                "invoke",
                "on_done",
                "on_error",
                "outcome",
                why="history state (a pseudo-state)",
            )
            if (parent_kind != "compound" or t.parent[i] == 0) and t.sites[t.parent[i]] not in self.unsure:
                where_now = "the top level, which is never exited" if t.parent[i] == 0 else parent_kind
                checks.append(
                    f"{site}: a history state must be a child of a compound state "
                    f"(its parent here is {where_now})"
                )
            t.history_deep[i] = node.history == "deep"
            t.has_history[t.parent[i]] = True
            p = t.parent[i]
            if node.target is not None:
                tgt = self._resolve(i, node.target, at("target"))
                if tgt >= 0 and not t.is_proper_ancestor(p, tgt):
                    checks.append(f"{at('target')}: a history default must be inside {t.paths[p]!r}")
                elif tgt >= 0 and t.kind[tgt] == "history":
                    checks.append(f"{at('target')}: a history default cannot be a history state")
                else:
                    t.history_default[i] = tgt
            elif t.initial[p] == i:
                checks.append(
                    f"{at('target')}: required: {t.paths[p]!r} starts in this history state, "
                    "so it needs a default target"
                )
        if kind == "history":
            return
        # actions, transitions, timers, invoke
        t.entry[i] = compile_actions(node.entry, at("entry"), issues)
        t.exit[i] = compile_actions(node.exit, at("exit"), issues)
        self._action_refs(node.entry, at("entry"))
        self._action_refs(node.exit, at("exit"))
        if not (declarative_actions(node.entry) and declarative_actions(node.exit)):
            t.runs_user_code = True
        for event, trans in node.on.items():
            problem = descriptor_problem(event)
            put: Callable[[CompiledTransition], None] = _discard
            if problem is not None:
                issues.append(f"{at('on')}.{event}: {problem}" if event else f"{at('on')}: {problem}")
            else:
                put = self._put_on(i, _normal(event))
            # An invalid key's transitions are still checked: their issues come in the same report.
            for k, tr in enumerate(trans):
                self._later(i, tr, f"{at('on')}.{event}[{k}]", put)
        for k, tr in enumerate(node.always):
            self._later(i, tr, f"{at('always')}[{k}]", t.own_always[i].append)
        for k, tr in enumerate(node.on_done):
            self._later(i, tr, f"{at('on_done')}[{k}]", t.own[i].setdefault(t.done_event[i], []).append)
        for k, tr in enumerate(node.on_error):
            self._later(i, tr, f"{at('on_error')}[{k}]", t.own[i].setdefault(t.error_event[i], []).append)
        for k, spec in enumerate(node.after):
            self._after(i, k, spec, f"{at('after')}[{k}]")
        if node.invoke is not None:
            if kind == "compound" and (node.invoke.task is not None or node.invoke.definition is None):
                # a task answers the one state that waits for it; a child execution may run beside the states
                checks.append(f"{at('invoke')}: a compound state invokes a child definition only; run a task "
                              "from an atomic state")
            elif kind not in ("atomic", "compound"):
                checks.append(f"{at('invoke')}: only an atomic or a compound state can invoke")
            if node.invoke.task is not None or node.invoke.definition is None:
                t.task[i] = compile_task(node.invoke, at("invoke"), issues)
            else:
                ctx = compile_value(node.invoke.context, f"{at('invoke')}.context", issues)
                t.invoke[i] = (node.invoke.definition, ctx)
                if task_only(node.invoke):
                    checks.append(f"{at('invoke')}: `{task_only(node.invoke)}` is for tasks; a child execution "
                                  "gets `context` (and ends when it finishes)")
                if node.invoke.parent_close not in (None, "cancel"):
                    t.parent_close[i] = node.invoke.parent_close
                if node.invoke.id_key is not None:
                    t.invoke_id_key[i] = node.invoke.id_key
                if node.invoke.forward:
                    t.invoke_forward.add(i)
            if node.invoke.retry is not None:
                t.invoke_retry[i] = parse_retry(node.invoke.retry, f"{at('invoke')}.retry", issues)
        if node.map is not None:
            compiled = compile_map(node, kind, at, issues, checks)
            if compiled is not None:
                t.maps[i] = compiled

    def _after(self, i: int, k: int, spec: After, site: str) -> None:
        """Check the ``k``-th timer of state ``i`` (exactly one of ``seconds``/``at``; a constant must be a
        delay/deadline, an expression compiles) and compile it once its transition is."""
        t, issues = self.t, self.issues
        is_at = spec.at is not None
        if is_at and spec.seconds is not None:
            issues.append(f"{site}: both `seconds` and `at`; a timer has one: a delay (`seconds`) or a deadline "
                          "(`at`); write two timers for both")
        elif not is_at and spec.seconds is None:
            issues.append(f"{site}.seconds: required: a delay (seconds: 90, '15m' or $context.delay), or instead "
                          "a deadline (at: '2026-01-31T17:00:00Z' or $context.deadline)")
            return
        raw = spec.at if is_at else spec.seconds
        where = f"{site}.{'at' if is_at else 'seconds'}"
        constant, value, written = 0.0, None, ""
        if _is_expression(raw):
            value = compile_value(raw, where, issues)
            written = raw if isinstance(raw, str) else show_value(raw)
        elif is_at:
            try:
                constant = deadline_of(raw)
            except BadTimerValue as exc:
                issues.append(f"{where}: {exc}")
        elif isinstance(raw, int | float) and not isinstance(raw, bool) and not raw > 0:
            issues.append(f"{where}: must be a positive number of seconds, got {float(raw)!r}")
        else:
            try:
                constant = delay_of(raw)
            except BadTimerValue as exc:
                issues.append(f"{where}: {exc}")
            else:
                if constant <= 0:
                    issues.append(f"{where}: must be a positive number of seconds, got {raw!r}")
        key = after_timer_key(t.paths[i], k)

        def put(ct: CompiledTransition) -> None:
            timer = CompiledAfter(i, k, key, ct, is_at, constant, value, written)
            t.after[i] = (*t.after[i], timer)
            t.after_keys[key] = timer

        self._later(i, spec, site, put)

    def _put_on(self, i: int, descriptor: str) -> Callable[[CompiledTransition], None]:
        own_on = self.t.own_on[i]

        def put(ct: CompiledTransition) -> None:
            own_on.append((descriptor, ct))

        return put

    def _initial(self, i: int, initial: str | None, where: str, names: list[str], issues: Issues) -> None:
        t = self.t
        if not names:
            return
        if initial is None:
            issues.append(
                f"{where}: required: name the child state to start in (one of: {', '.join(names)})"
            )
            return
        if initial not in names:
            issues.append(
                f"{where}: no child state {initial!r}{did_you_mean(initial, names)}; "
                f"one of: {', '.join(names)}"
            )
            return
        t.initial[i] = t.children[i][names.index(initial)]

    def _later(
        self, source: int, spec: Transition | After, site: str, put: Callable[[CompiledTransition], None]
    ) -> None:
        self.pending.append((source, spec, site, put))

    # -- targets and transitions ---------------------------------------------------------------------
    def _resolve(self, source: int, target: str, where: str) -> int:
        """Relative to the source's parent (a sibling or ``sibling.child``), then absolute."""
        t = self.t
        parent = t.parent[source]
        base = t.paths[parent] if parent > 0 else ""
        rel = f"{base}.{target}" if base else target
        if rel in t.index and rel:
            return t.index[rel]
        if target in t.index and target:
            return t.index[target]
        relative = [p[len(base) + 1 :] for p in t.paths[1:] if base and p.startswith(base + ".")]
        hint = did_you_mean(target, relative) or did_you_mean(target, t.paths[1:])
        if not hint:  # a typo in the last segment of a path written differently
            by_name = {p.rsplit(".", 1)[-1]: p for p in t.paths[1:]}
            close = difflib.get_close_matches(target.rsplit(".", 1)[-1], sorted(by_name), n=1, cutoff=0.6)
            hint = f" (did you mean {by_name[close[0]]!r}?)" if close else ""
        self.issues.append(f"{where}: no state {target!r}{hint}")
        return -1

    def _action_refs(self, actions: list[Any], site: str) -> None:
        """The ``in_state`` guards of ``choose`` actions: checked, and the step then tracks what is active."""
        t = self.t
        for ref in action_state_refs(actions):
            t.in_state = True
            if ref not in t.index:
                self.issues.append(f"{site}: choose: in_state: no state {ref!r}{did_you_mean(ref, t.paths[1:])} "
                                   "(write the state's full dotted path)")

    def _transition(self, source: int, spec: Transition | After, site: str) -> CompiledTransition | None:
        t, issues = self.t, self.issues
        n0 = len(issues)
        guard = compile_guard(spec.guard, f"{site}.guard", issues) if spec.guard is not None else None
        for ref in state_refs(spec.guard):
            t.in_state = True
            if ref not in t.index:
                issues.append(f"{site}.guard.in_state: no state {ref!r}{did_you_mean(ref, t.paths[1:])} "
                              "(write the state's full dotted path)")
        actions = compile_actions(spec.actions, f"{site}.actions", issues)
        self._action_refs(spec.actions, f"{site}.actions")
        if not ((spec.guard is None or declarative_guard(spec.guard)) and declarative_actions(spec.actions)):
            t.runs_user_code = True
        target = -1
        if spec.target is not None:
            target = self._resolve(source, spec.target, f"{site}.target")
            if target < 0:
                return None
            rs, rt = t.region_of[source], t.region_of[target]
            if rs != rt:
                if rt and not (source == rt or t.is_proper_ancestor(rt, source)):
                    par = t.paths[t.parent[rt]]
                    issues.append(
                        f"{site}.target: {t.paths[target]!r} is inside a region of the parallel state "
                        f"{par!r}; "
                        f"target {par!r} itself (each region starts at its initial state)"
                    )
                else:
                    issues.append(
                        f"{site}.target: {t.paths[target]!r} is outside the parallel region "
                        f"{t.paths[rs]!r}; regions run as separate executions: reach a final state in the "
                        "region and let the parallel state's on_done (or on_error) move on"
                    )
                return None
        if len(issues) > n0:
            return None
        if target < 0:
            return CompiledTransition(source, -1, guard, actions, -1, (), -1, site, t.depth[source],
                                      defer=spec.defer)
        history = -1
        dest = target
        if t.kind[target] == "history":
            history, dest = target, t.parent[target]
        keep = spec.parallel_domain  # (XState: the domain may be an inline parallel state)
        if (
            spec.internal
            and target != source
            and t.is_proper_ancestor(source, target)
            and (t.kind[source] == "compound" or (keep and t.inline[source]))
        ):
            domain = source
        else:
            domain = t.parent[source]
            while not (t.is_proper_ancestor(domain, target)) or (t.inline[domain] and not keep):
                domain = t.parent[domain]  # (SCXML: the domain is a compound state, never a parallel one)
        chain: list[int] = []
        s = dest
        while s != domain:
            chain.append(s)
            s = t.parent[s]
        chain.reverse()
        return CompiledTransition(
            source, target, guard, actions, domain, tuple(chain), history, site, t.depth[source], defer=spec.defer
        )

    def _chains(self) -> None:
        t = self.t
        n = len(t.paths)
        for i in range(n):
            t.enter_work.append(bool(t.entry[i] or t.after[i] or t.invoke[i] is not None or i in t.maps
                                     or t.task[i] is not None))
            t.exit_work.append(
                bool(
                    t.exit[i]
                    or t.after[i]
                    or t.invoke[i] is not None
                    or i in t.maps
                    or t.task[i] is not None
                    or t.has_history[i]
                    or t.kind[i] == "parallel"
                )
            )
        heads: set[str] = set()
        for i in range(n):
            chain: list[int] = []
            s = i
            while s >= 0:
                chain.append(s)
                s = t.parent[s]
            handlers: dict[str, tuple[CompiledTransition, ...]] = {}
            # Every descriptor of the chain is a key; its tuple holds, innermost state first and in
            # document order within a state, each transition whose descriptor matches that name.
            names = dict.fromkeys(d for s in chain for d, _ in t.own_on[s] if d != ANY)
            for name in names:
                handlers[name] = tuple(
                    ct for s in chain for d, ct in t.own_on[s] if d == ANY or descriptor_matches(d, name)
                )
                heads.add(name.partition(".")[0])
            synthetic: dict[str, list[CompiledTransition]] = {}
            for s in chain:
                for event, cts in t.own[s].items():
                    synthetic.setdefault(event, []).extend(cts)
            handlers.update((k, tuple(v)) for k, v in synthetic.items())
            t.handlers.append(handlers)
            t.star.append(tuple(ct for s in chain for d, ct in t.own_on[s] if d == ANY))
            t.always.append(tuple(ct for s in chain for ct in t.own_always[s]))
        t.prefix_heads = frozenset(heads)
        if t.has_inline:
            everything = [ct for i in range(n) for ct in (*t.handlers[i].values(), t.always[i])]
            t.crossing = frozenset(ct.site for cts in everything for ct in cts
                                   if any(t.inline[s] for s in ct.enter[:-1]))
            t.crossing |= {a.transition.site for a in t.after_keys.values()
                           if any(t.inline[s] for s in a.transition.enter[:-1])}
        t.has_star = any(d == ANY for own in t.own_on for d, _ in own)
