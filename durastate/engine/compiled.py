"""The compiled form of a definition (:class:`Tables`), and the event-descriptor rules its lookups follow.

A data module below :mod:`durastate.engine.tables` (which builds the tables): the inline-region rules and
the interpreter read the tables without importing the builder, which imports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from durastate.engine.expressions import (
    Action,
    Guard,
    Value,
)
from durastate.engine.fanout import CompiledMap
from durastate.engine.ids import AFTER_SEPARATOR
from durastate.engine.model import RESERVED_PREFIX, Event
from durastate.engine.retry import RetryPolicy
from durastate.engine.tasks import CompiledTask
from durastate.engine.timers import MAX_FIRE_AT, BadTimerValue, deadline_of, delay_of

__all__ = [
    "ANY",
    "DONE_PREFIX",
    "ERROR_PREFIX",
    "SCXML_DONE_PREFIX",
    "CompiledAfter",
    "CompiledTransition",
    "Tables",
    "descriptor_matches",
    "descriptor_problem",
]

DONE_PREFIX = "durastate.done."
"""Synthetic event ``durastate.done.<path>``: a compound reached a final child, a parallel state joined, or
an invoked child finished. It selects the ``on_done`` transitions of ``<path>``."""
SCXML_DONE_PREFIX = "done.state."
"""With ``done_events: scxml``: ``done.state.<name>`` is a compound or parallel state's done event instead."""
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
    invoke_id_key: dict[int, str] = field(default_factory=dict)
    """The invoking states with an ``id_key``, by index: where the child's execution id is assigned."""
    invoke_forward: set[int] = field(default_factory=set)
    """The invoking states with ``forward: true``, by index: their child gets each event from outside."""
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
    raise_errors: bool = False
    """``action_errors: raise``: a failing guard or action raises ``error.execution`` instead of failing the
    execution (:meth:`durastate.engine.run.Run.failed_action`)."""
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
