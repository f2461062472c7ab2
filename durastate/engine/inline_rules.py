"""The definition rules of ``regions: inline`` parallel states (checked while the tables are built).

Kept apart from :mod:`durastate.engine.inline` (the semantics) so that :mod:`durastate.engine.tables`
can use it without importing the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from durastate.engine.expressions import Issues

if TYPE_CHECKING:
    from durastate.engine.definition import State
    from durastate.engine.tables import Tables

__all__ = ["inline_owner", "inline_rules"]


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
    (the region's events would have to be forwarded from inside this execution) or an invoking state (its
    child's ``durastate.finished`` is joined against one active leaf). Both stay available outside."""
    owner = inline_owner(t, i)
    if owner < 0:
        return
    where = f"inside the inline parallel state {t.paths[owner]!r}"
    if node.kind == "parallel" and node.regions != "inline":
        issues.append(f"{at('regions')}: a parallel state {where} runs its regions inline too: "
                      "write `regions: inline`")
    if node.invoke is not None:
        issues.append(f"{at('invoke')}: not supported {where}; invoke from a state outside it, or make "
                      "the parallel state `regions: children`")
