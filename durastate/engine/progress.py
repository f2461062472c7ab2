"""How far an execution has come, as ``durastate show`` and the console both say it: a map state's items
(started, done, failed of the total) and the timers armed by the execution and its descendants.

Pure reads of :class:`~durastate.engine.model.Execution` records (the descendants through the ``load`` the
caller passes, as :func:`durastate.engine.introspect.active_paths` does), kept here so the CLI and the
console print the same words from the same walk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from durastate.engine.model import Execution, MapProgress

__all__ = ["CHILDREN_MAX", "ChildTimer", "descendant_timers", "map_progress"]

CHILDREN_MAX = 200
"""At most this many descendant executions are read for their timers."""


@dataclass(frozen=True, slots=True)
class ChildTimer:
    execution_id: str
    path: str
    fire_at: float
    kind: str
    """``own``, or the kind of child whose timer it is (``region``, ``invoke``, ``map``)."""


def map_progress(path: str, progress: MapProgress, *, ended: bool = False) -> str:
    """One line of a map state's progress: ``charging: 40 started, 35 done, 2 failed of 100 (3 running)``
    (``…, 1 waiting to be retried``: failed items whose retry's backoff runs); ``ended``: the execution
    ended in the map state, which cancelled the children still running."""
    waiting = len(progress.retries)
    running = "the execution ended: none running" if ended else f"{progress.running - waiting} running" + (
        f", {waiting} waiting to be retried" if waiting else "")
    line = (f"{path}: {progress.started} started, {progress.done} done, {progress.failed} failed of "
            f"{progress.total} ({running})")
    if progress.cancelled:
        line += f"; stopped after a failure, {progress.cancelled} cancelled"
    return line


def descendant_timers(exe: Execution, load: Callable[[str], Execution | None],
                      cap: int = CHILDREN_MAX) -> tuple[list[ChildTimer], list[Execution]]:
    """The timers of ``exe`` and of its descendants (breadth first, at most ``cap`` of them read), soonest
    first; and the descendants read."""
    timers = [ChildTimer(exe.id, path, fire_at, "own") for path, fire_at in exe.timers.items()]
    descendants: list[Execution] = []
    todo = [(exe, cid) for cid in exe.children]
    while todo and len(descendants) < cap:
        parent, cid = todo.pop(0)
        child = load(cid)
        if child is None:
            continue
        descendants.append(child)
        kind = parent.children[cid].kind
        timers += [ChildTimer(child.id, path, at, kind) for path, at in child.timers.items()]
        todo += [(child, grandchild) for grandchild in child.children]
    timers.sort(key=lambda t: t.fire_at)
    return timers, descendants
