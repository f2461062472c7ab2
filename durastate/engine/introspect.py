"""Questions asked of a definition, by the CLI and the console alike: which events it handles, which
states are active."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from durastate.engine.definition import Definition, State
from durastate.engine.expressions import did_you_mean
from durastate.engine.model import Execution
from durastate.engine.tables import descriptor_matches


class HandledEvents(set[str]):
    """The ``on`` keys of a definition. They are event descriptors, so ``name in events`` asks whether any
    of them matches ``name`` (``error`` matches ``error.send.failed``, ``*`` matches any event but the
    reserved ones); iterating lists the keys as written."""

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return super().__contains__(name) or any(descriptor_matches(d, name) for d in self)

    def handles(self, name: str) -> bool:
        return name in self


def handled_events(defn: Definition) -> HandledEvents:
    """Every ``on`` key (event descriptor) of some state of ``defn`` (regions included)."""
    names = HandledEvents()

    def walk(states: dict[str, State]) -> None:
        for state in states.values():
            names.update(state.on)
            walk(state.states)

    walk(defn.states)
    return names


def unhandled_event(defn: Definition, name: str) -> str | None:
    """Why ``defn`` would not take event ``name`` (no state has a transition on it), or ``None`` if some state
    does: the check ``durastate send`` and the console's send make before queueing, each then saying how to
    send anyway."""
    known = handled_events(defn)
    if name in known:
        return None
    listed = ", ".join(sorted(known)) or "none"
    return (f"definition {defn.id!r} has no transition on event {name!r}{did_you_mean(name, known)} "
            f"(known events: {listed})")


def active_paths(exe: Execution, load: Callable[[str], Execution | None], depth: int = 8) -> list[str]:
    """The active leaves of ``exe``: its own, or — while it sits in a parallel state — each region's.

    Regions run as child executions of the same definition, so their leaves belong in the same
    diagram; invoked children run other definitions and are left out.
    """
    if exe.leaves:  # inside an inline parallel state: every active leaf is this execution's own
        return list(exe.leaves)
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
