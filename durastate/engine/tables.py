"""Semantic validation of a definition and the lookup tables the interpreter runs on.

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
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from durastate.engine.expressions import (
    VALUE_OPS,
    Action,
    Guard,
    Issues,
    Value,
    action_state_refs,
    compile_actions,
    compile_guard,
    compile_value,
    declarative_actions,
    declarative_guard,
    did_you_mean,
    state_refs,
)
from durastate.engine.fanout import CompiledMap, compile_map
from durastate.engine.ids import AFTER_SEPARATOR, after_timer_key
from durastate.engine.inline_rules import inline_rules
from durastate.engine.model import RESERVED_PREFIX, Event
from durastate.engine.retry import RetryPolicy, parse_retry
from durastate.engine.run_timeout import run_timeout_of
from durastate.engine.tasks import CompiledTask, compile_task, task_only
from durastate.engine.timers import MAX_FIRE_AT, BadTimerValue, deadline_of, delay_of, show_value

if TYPE_CHECKING:
    from durastate.engine.definition import After, Definition, State, Transition

__all__ = [
    "DONE_PREFIX",
    "ERROR_PREFIX",
    "CompiledAfter",
    "CompiledTransition",
    "Tables",
    "build_tables",
    "descriptor_matches",
    "descriptor_problem",
]

DONE_PREFIX = "durastate.done."
"""Synthetic event ``durastate.done.<path>``: a compound reached a final child, a parallel state joined, or
an invoked child finished. It selects the ``on_done`` transitions of ``<path>``."""
ERROR_PREFIX = "durastate.error."
"""Synthetic event ``durastate.error.<path>``: an invoked child or a region of ``<path>`` failed (on_error)."""

_NAME_RE = re.compile(r"^[^.\s$~]+$")
"""A state name: no '.' (paths), '$' (references), '~' (timer keys such as ``wait~after:1``), no spaces."""

ANY = "*"
"""The descriptor that matches every event (but the reserved ``durastate.*`` ones)."""


def descriptor_problem(key: str) -> str | None:
    """Why ``key`` cannot be an ``on`` key (``None`` if it can).

    An event descriptor is ``*`` (any event), or dot-separated tokens (``order.paid``) that match the
    event of that name and every event it is a token prefix of (``error`` matches ``error.send.failed``
    but not ``errors``), optionally written with a trailing ``.*`` (``error.*`` is ``error``), as in SCXML.
    """
    if not key:
        return "empty event name"
    if key == RESERVED_PREFIX[:-1] or key.startswith(RESERVED_PREFIX):
        return "event names starting with 'durastate.' are reserved (the runtime's own events)"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in key):
        return (
            f"{key!r} is not a valid event descriptor: no spaces or control characters (one key per "
            "descriptor: a space-separated list is not supported)"
        )
    if key == ANY:
        return None
    tokens = key.split(".")
    if tokens[-1] == ANY:
        tokens.pop()
    if any(not tok for tok in tokens):
        return (
            f"{key!r} is not a valid event descriptor: an empty token (a leading, trailing or doubled "
            "'.'); write dot-separated names like 'error.send', or 'error' / 'error.*' for a prefix"
        )
    if any(ANY in tok for tok in tokens):
        return (
            f"{key!r} is not a valid event descriptor: '*' stands alone (any event) or as the last token "
            "('error.*', the same as 'error'); it cannot be part of a name"
        )
    return None


def _normal(key: str) -> str:
    """The descriptor a valid key stands for: ``error.*`` is ``error``."""
    return key[:-2] if key.endswith(".*") else key


def descriptor_matches(descriptor: str, name: str) -> bool:
    """SCXML event matching for a valid ``on`` key: ``*`` matches any event but the reserved ones; a
    descriptor matches the name itself and any name it is a whole-token prefix of."""
    if name.startswith(RESERVED_PREFIX):
        return False
    if descriptor == ANY:
        return True
    d = _normal(descriptor)
    return name == d or name.startswith(d + ".")


@dataclass(slots=True, eq=False)
class CompiledTransition:
    source: int
    target: int
    """Target state index, or -1 for a targetless transition (actions only, no exit/entry)."""
    guard: Guard | None
    actions: tuple[Action, ...]
    domain: int
    """The transition's domain: states strictly below it are exited; it is not."""
    enter: tuple[int, ...]
    """States entered below the domain, outermost first, ending at the target (or a history's parent)."""
    history: int
    """The targeted history pseudo-state, or -1."""
    site: str
    """Where it is written in the document (for error messages)."""
    source_depth: int
    guard_site: str = ""
    actions_site: str = ""
    defer: bool = False
    """Taken for an event only when no state below its source takes one (XState's selection)."""

    def __post_init__(self) -> None:
        self.guard_site = self.site + ".guard"
        self.actions_site = self.site + ".actions"


@dataclass(slots=True, eq=False)
class CompiledAfter:
    """One ``after`` timer of a state: when it fires (a constant, or an expression evaluated on entry) and
    the transition it takes then."""

    state: int
    """The index of the state it belongs to."""
    index: int
    """Its place in the state's ``after`` list (0 for the only one of a mapping)."""
    key: str
    """Its timer key (:func:`~durastate.engine.ids.after_timer_key`: the state's path for the first)."""
    transition: CompiledTransition
    is_at: bool
    """``at`` (a deadline) rather than ``seconds`` (a delay)."""
    constant: float
    """The delay in seconds, or the deadline in epoch seconds, when it is a constant."""
    value: Value | None = None
    """The expression to evaluate on entry (``None``: :attr:`constant` holds)."""
    written: str = ""
    """The expression as written (``$context.backoff``), for error messages."""

    def fire_at(self, context: dict[str, Any], event: Event, now: float) -> float:
        """When the timer fires if its state is entered at ``now`` by ``event``: ``now`` plus the delay, or
        the deadline (``now`` if that has passed: it fires at the next sweep).

        A computed value that is not a delay (for ``at``: not a time) raises :class:`BadTimerValue` naming
        the state, the timer and the value."""
        value = self.value
        if value is None:
            return max(now, self.constant) if self.is_at else now + self.constant
        got = value(context, event)
        try:
            if self.is_at:
                return max(now, deadline_of(got))
            fire_at = now + delay_of(got)
            if fire_at > MAX_FIRE_AT:
                raise BadTimerValue(f"{got!r}: that many seconds from now is after the year 9999")
        except BadTimerValue as exc:
            state = self.key.split(AFTER_SEPARATOR, 1)[0]
            raise BadTimerValue(
                f"state {state!r}, after[{self.index}]: {'at' if self.is_at else 'seconds'} {self.written} = {exc}"
            ) from None
        return fire_at


@dataclass(slots=True, eq=False)
class Tables:
    paths: list[str] = field(default_factory=list)
    sites: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    parent: list[int] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    children: list[tuple[int, ...]] = field(default_factory=list)
    initial: list[int] = field(default_factory=list)
    entry: list[tuple[Action, ...]] = field(default_factory=list)
    exit: list[tuple[Action, ...]] = field(default_factory=list)
    after: list[tuple[CompiledAfter, ...]] = field(default_factory=list)
    """The state's ``after`` timers, in document order (empty: none)."""
    after_keys: dict[str, CompiledAfter] = field(default_factory=dict)
    """Every ``after`` timer by its timer key (what a ``durastate.timeout`` names)."""
    invoke: list[tuple[str, Value] | None] = field(default_factory=list)
    invoke_retry: list[RetryPolicy | None] = field(default_factory=list)
    parent_close: dict[int, str] = field(default_factory=dict)
    """The invoking states whose ``parent_close`` is not ``cancel``, by index."""
    maps: dict[int, CompiledMap] = field(default_factory=dict)
    """The states with a ``map`` (:mod:`durastate.engine.fanout`), by index."""
    task: list[CompiledTask | None] = field(default_factory=list)
    """The state's ``invoke: {task: ...}`` (:mod:`durastate.engine.tasks`); its ``invoke`` is then ``None``."""
    history_deep: list[bool] = field(default_factory=list)
    history_default: list[int] = field(default_factory=list)
    has_history: list[bool] = field(default_factory=list)
    outcome: list[str | None] = field(default_factory=list)
    region_of: list[int] = field(default_factory=list)
    own: list[dict[str, list[CompiledTransition]]] = field(default_factory=list)
    """The state's transitions on the synthetic ``durastate.done.*``/``durastate.error.*`` events."""
    own_on: list[list[tuple[str, CompiledTransition]]] = field(default_factory=list)
    """The state's ``on`` transitions in document order, each with its (normalised) descriptor."""
    own_always: list[list[CompiledTransition]] = field(default_factory=list)
    handlers: list[dict[str, tuple[CompiledTransition, ...]]] = field(default_factory=list)
    star: list[tuple[CompiledTransition, ...]] = field(default_factory=list)
    has_star: bool = False
    """Some state has a ``*`` transition."""
    prefix_heads: frozenset[str] = frozenset()
    """The first token of every descriptor but ``*``: a dotted event name whose first token is not here
    cannot have a descriptor as a token prefix."""
    always: list[tuple[CompiledTransition, ...]] = field(default_factory=list)
    enter_work: list[bool] = field(default_factory=list)
    """True if entering the state does anything (entry actions, a timer, an invoke)."""
    exit_work: list[bool] = field(default_factory=list)
    done_event: list[str] = field(default_factory=list)
    error_event: list[str] = field(default_factory=list)
    inline: list[bool] = field(default_factory=list)
    """The state is a ``regions: inline`` parallel state (its regions run in this execution)."""
    has_inline: bool = False
    """Some state is an inline parallel state: steps run on :class:`durastate.engine.inline.InlineRun`."""
    has_tasks: bool = False
    """Some state runs a task: its executions need a secret (:func:`durastate.engine.ids.task_id`)."""
    runs_user_code: bool = False
    """Some guard or action is a Python callable (``call``, ``package.module:function``): a step may have
    effects outside its result, so it must run only on the stored state (:mod:`durastate.runtime.worker`
    checks the version before stepping a kept copy). ``False``: every guard and action is declarative
    (:func:`~durastate.engine.expressions.declarative_guard`); tasks, invokes and maps are recorded in
    the commit and run outside the step."""
    in_state: bool = False
    """Some guard is an ``in_state`` guard: steps publish their configuration to it."""
    run_timeout: float | None = None
    """The definition's run timeout in seconds (``timeout``), or ``None``; what it does is ``on_timeout``."""
    on_timeout: str = "fail"
    crossing: frozenset[str] = frozenset()
    """The sites of the transitions that enter an inline parallel state on the way to their target (the
    other regions start too: :mod:`durastate.engine.inline` takes them even from a single leaf)."""

    def fallback(self, leaf: int, name: str) -> tuple[CompiledTransition, ...]:
        """The candidates for an event that is not a key of ``handlers[leaf]``: those of its longest
        token prefix that is a key (which already include every shorter matching descriptor and ``*``),
        else the ``*`` transitions. Reserved events match nothing here: only their own exact entries."""
        if name.startswith(RESERVED_PREFIX):
            return ()
        if "." in name and name.partition(".")[0] in self.prefix_heads:
            h = self.handlers[leaf]
            p = name
            while True:
                p = p.rpartition(".")[0]
                if not p:
                    break
                c = h.get(p)
                if c:
                    return c
        return self.star[leaf]

    def candidates(self, leaf: int, name: str) -> tuple[CompiledTransition, ...]:
        """The transitions that may handle the event ``name`` while ``leaf`` is the active leaf, in the order
        ``Run.dispatch`` tries them (innermost state first, document order within a state). ``dispatch``
        inlines this lookup, and skips the call to :meth:`fallback` when no descriptor could match."""
        return self.handlers[leaf].get(name) or self.fallback(leaf, name)

    def is_proper_ancestor(self, a: int, s: int) -> bool:
        depth, parent = self.depth, self.parent
        da = depth[a]
        while depth[s] > da:
            s = parent[s]
            if s == a:
                return True
        return False


def build_tables(defn: Definition, issues: Issues, unsure: Collection[str] = ()) -> Tables:
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
    def __init__(self, defn: Definition, issues: Issues, unsure: Collection[str] = ()) -> None:
        self.defn = defn
        self.issues = issues
        self.unsure = frozenset(unsure)
        self.t = Tables()
        self.nodes: list[State | None] = []
        # (source index, spec, site, bucket) compiled after every state has its index
        self.pending: list[tuple[int, Transition | After, str, Callable[[CompiledTransition], None]]] = []

    # -- pass 1: index the tree ------------------------------------------------------------------------
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
        t.done_event.append(DONE_PREFIX + path)
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
            forbid("invoke", "outcome", "history", "target", why="compound state")
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
            if kind != "atomic":
                checks.append(f"{at('invoke')}: only an atomic state (without child states) can invoke")
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
