"""The definition rules of ``regions: inline`` parallel states (checked while the tables are built).

Kept apart from :mod:`durastate.engine.inline` (the semantics) so that :mod:`durastate.engine.tables`
can use it without importing the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from durastate.engine.expressions import Issues

if TYPE_CHECKING:
    from durastate.engine.compiled import Tables
    from durastate.engine.states import State

__all__ = ["HISTORY_SEPARATOR", "configuration_problem", "inline_owner", "inline_rules"]

HISTORY_SEPARATOR = " "
"""Between the leaves a history memory holds when several were active (state names have no spaces)."""


def inline_owner(t: Tables, i: int) -> int:
    """The innermost inline parallel state above state ``i`` (-1: none)."""
    s = t.parent[i]
    while s > 0:
        if t.inline[s]:
            return s
        s = t.parent[s]
    return -1


def inline_rules(t: Tables, i: int, node: State, at: Callable[[str], str], issues: Issues) -> None:
    """What a state inside an inline region cannot be: a parallel state whose regions are child executions
    (the region's events would have to be forwarded from inside this execution), a state that runs a task or
    retries its invoke (the retry timer and the task's answer are joined against one active leaf) or a
    mapping one. All stay available outside; an invoke of a child definition works inside too."""
    owner = inline_owner(t, i)
    if owner < 0:
        return
    where = f"inside the inline parallel state {t.paths[owner]!r}"
    if node.kind == "parallel" and node.regions != "inline":
        issues.append(f"{at('regions')}: a parallel state {where} runs its regions inline too: "
                      "write `regions: inline`")
    if node.invoke is not None and (node.invoke.definition is None or node.invoke.retry is not None):
        issues.append(f"{at('invoke')}: a task or a retried invoke is not supported {where} (its answer is "
                      "joined against one active leaf); invoke from a state outside it, or make the parallel "
                      "state `regions: children`")
    if node.map is not None:
        issues.append(f"{at('map')}: not supported {where}; map from a state outside it, or make "
                      "the parallel state `regions: children`")


def configuration_problem(t: Tables, leaves: list[int]) -> str | None:
    """Why ``leaves`` (several active leaves) are not a configuration of the definition (``None``: they are):
    each leaf rests (no child states to be in), a compound state on the way has one active child, and an
    inline parallel state has each of its regions active, as the interpreter leaves them."""
    cfg: set[int] = set()
    for leaf in leaves:
        if t.kind[leaf] in ("compound", "history") or t.inline[leaf]:
            return f"{t.paths[leaf]} is a {t.kind[leaf]} state"
        s = leaf
        while s > 0:
            cfg.add(s)
            s = t.parent[s]
    for s in cfg | {0}:
        active = [c for c in t.children[s] if c in cfg]
        if t.inline[s] and len(active) != len(t.children[s]):
            return f"not every region of {t.paths[s]} has an active state"
        if not t.inline[s] and len(active) > 1:
            return f"{t.paths[s] or 'the top level'} would have {len(active)} active children"
    return None
