"""Questions the CLI asks of a definition: which events it handles, which states are active."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from durastate.engine.definition import Definition, State
from durastate.engine.model import Execution


def handled_events(defn: Definition) -> set[str]:
    """Every event name some state of ``defn`` has a transition on (regions included)."""
    names: set[str] = set()

    def walk(states: dict[str, State]) -> None:
        for state in states.values():
            names.update(state.on)
            walk(state.states)

    walk(defn.states)
    return names


def active_paths(exe: Execution, load: Callable[[str], Execution | None], depth: int = 8) -> list[str]:
    """The active leaves of ``exe``: its own, or — while it sits in a parallel state — each region's.

    Regions run as child executions of the same definition, so their leaves belong in the same
    diagram; invoked children run other definitions and are left out.
    """
    leaves: list[str] = []
    regions = [cid for cid, ref in exe.children.items() if ref.kind == "region"]
    found_region_leaf = False
    if depth > 0:
        for cid in regions:
            child = load(cid)
            if child is None or child.definition_id != exe.definition_id:
                continue
            sub = active_paths(child, load, depth - 1)
            if child.status == "running" or _within(sub, exe.active_path):
                leaves.extend(sub)
                found_region_leaf = found_region_leaf or bool(sub)
    if exe.active_path and not (found_region_leaf and _is_prefix(exe.active_path, leaves)):
        leaves.insert(0, exe.active_path)
    return leaves


def _within(paths: Iterable[str], scope: str | None) -> bool:
    return scope is not None and any(p.startswith(scope + ".") for p in paths)


def _is_prefix(path: str, leaves: Iterable[str]) -> bool:
    return any(leaf.startswith(path + ".") for leaf in leaves)
