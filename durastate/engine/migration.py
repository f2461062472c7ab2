"""Moving a running execution from one version of its definition to another (``durastate migrate``).

An execution names states by their dotted paths in its active path, its history memory, its armed timers
(keyed by state path), its children's references and, for a region, its root path. A new version that
renamed or moved a state has no such path, so the execution would fail on its next event. A migration
rewrites every path through a mapping ``{old path: new path}``: a mapped compound state takes its
descendants along (``pay=billing.pay`` maps ``pay.card`` to ``billing.pay.card``), the longest mapped
prefix wins, and a path the mapping does not name maps to itself. A path whose image is not a state of
the new version is *unmapped*: the plan lists it and nothing may be changed.

Pure: :func:`plan_migration` computes what would change (for a dry run too); :func:`apply_migration`
changes the execution and returns the timer operations to commit with it (the store side, one
compare-and-swap commit per execution, is :mod:`durastate.store.migration`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from durastate.engine.definition import Definition
from durastate.engine.ids import retarget_timer_key, timer_key_state
from durastate.engine.inline_rules import HISTORY_SEPARATOR, configuration_problem
from durastate.engine.model import ChildRef, Execution, TimerOp
from durastate.engine.search import SearchValue, search_values
from durastate.engine.versions import definition_version

__all__ = ["MigrationPlan", "apply_migration", "map_path", "mapping_issues", "parse_mapping", "plan_migration",
           "state_paths"]


@dataclass
class MigrationPlan:
    """What migrating one execution changes; ``unmapped`` non-empty: it cannot be migrated as asked."""

    execution_id: str
    to_version: str
    active_path: str | None
    root_path: str | None
    history: dict[str, str]
    timers: dict[str, float]
    children: dict[str, str]
    """Child id -> the new path of its reference (only the children whose path changes)."""
    timer_moves: list[tuple[str, str, float]] = field(default_factory=list)
    """(old key, new key, fire_at) of each armed timer whose key changes."""
    changes: list[str] = field(default_factory=list)
    """One line per changed path, ``where: old -> new`` (what a dry run shows)."""
    unmapped: list[str] = field(default_factory=list)
    """The paths the execution sits in that are not states of the new version once mapped."""
    maps: dict[str, str] = field(default_factory=dict)
    """The path of an active ``map`` state -> its new path (only those that change)."""
    leaves: list[str] = field(default_factory=list)
    """The active leaves inside an inline parallel state (``Execution.leaves``), mapped."""
    search: dict[str, SearchValue | None] = field(default_factory=dict)
    """Its search values under the new version's ``search:`` fields (what the migration's commit indexes)."""


def parse_mapping(pairs: list[str]) -> dict[str, str]:
    """``["old.path=new.path", ...]`` -> ``{old: new}``; raises ``ValueError`` saying which pair is bad."""
    out: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise ValueError(f"--map {pair!r} is not old.path=new.path")
        if old in out and out[old] != new:
            raise ValueError(f"--map {old} is given twice ({out[old]} and {new})")
        out[old] = new
    return out


def mapping_issues(mapping: Mapping[str, str], old: Definition | None, new: Definition) -> list[str]:
    """What is wrong with the mapping itself: a source that is not a state of the old version (a typo),
    a target that is not a state of the new one."""
    issues: list[str] = []
    for source, target in mapping.items():
        if old is not None and source not in old.tables.index:
            issues.append(f"--map {source}={target}: {source!r} is not a state of the old version")
        if target not in new.tables.index:
            issues.append(f"--map {source}={target}: {target!r} is not a state of the new version")
    return issues


def map_path(path: str, mapping: Mapping[str, str]) -> str:
    """``path`` through ``mapping``: the longest mapped prefix (the path itself, or an ancestor) wins."""
    probe = path
    while True:
        target = mapping.get(probe)
        if target is not None:
            return target + path[len(probe):]
        dot = probe.rfind(".")
        if dot < 0:
            return path
        probe = probe[:dot]


def state_paths(exe: Execution) -> list[str]:
    """Every state path ``exe`` names (active, region root, history, armed timers, children), once each."""
    seen: dict[str, None] = {}
    for path in (exe.active_path, exe.root_path):
        if path:
            seen[path] = None
    for path in exe.leaves:
        seen[path] = None
    for key, leaf in exe.history.items():
        seen[key] = None
        for one in leaf.split(HISTORY_SEPARATOR):  # several leaves: the history of an inline parallel state
            seen[one] = None
    for key in exe.timers:
        state = timer_key_state(key)
        if state:
            seen[state] = None
    for ref in exe.children.values():
        seen[ref.path] = None
    for path in exe.maps:
        seen[path] = None
    return list(seen)


def plan_migration(exe: Execution, old: Definition | None, new: Definition,
                   mapping: Mapping[str, str]) -> MigrationPlan:
    """What moving ``exe`` from ``old`` (``None``: not at hand) to ``new`` through ``mapping`` changes."""
    index = new.tables.index
    kinds = new.tables.kind
    unmapped: dict[str, None] = {}
    changes: list[str] = []

    def image(path: str, where: str) -> str:
        mapped = map_path(path, mapping)
        if mapped not in index:
            unmapped[path] = None
        elif mapped != path:
            changes.append(f"{where}: {path} -> {mapped}")
        return mapped

    current = exe.active_path
    active = image(current, "active") if current else current
    if current and active in index:  # an execution rests in a leaf (or waits in a parallel state)
        now = kinds[index[active]]
        was = old.tables.kind[old.tables.index[current]] if old is not None and current in old.tables.index \
            else None
        if now in ("compound", "history") or (was is not None and was != now):
            unmapped[current] = None
            changes.append(f"active: {current} is {was or 'where it rests'} but {active} is {now} in the new "
                           "version")
        elif now == "parallel" and (was is not None and old is not None and
                                    old.tables.inline[old.tables.index[current]] != new.tables.inline[index[active]]):
            unmapped[current] = None
            changes.append(f"active: {current} runs its regions differently in the new version (children "
                           "or inline); finish or cancel the execution instead of migrating it")
    leaves = [image(leaf, "active leaf") for leaf in exe.leaves]
    if leaves and all(leaf in index for leaf in leaves):
        problem = configuration_problem(new.tables, [index[leaf] for leaf in leaves])
        if problem is not None:
            unmapped.update(dict.fromkeys(exe.leaves))
            changes.append(f"active leaves: {', '.join(leaves)}: {problem} in the new version")
    root = image(exe.root_path, "region") if exe.root_path else exe.root_path
    history = {image(k, "history"): HISTORY_SEPARATOR.join(image(one, f"history of {k}")
                                                           for one in v.split(HISTORY_SEPARATOR))
               for k, v in exe.history.items()}
    timers: dict[str, float] = {}
    moves: list[tuple[str, str, float]] = []
    for key, fire_at in exe.timers.items():
        state = timer_key_state(key)
        new_key = retarget_timer_key(key, image(state, f"timer {key}")) if state else key
        timers[new_key] = fire_at
        if new_key != key:
            moves.append((key, new_key, fire_at))
    children: dict[str, str] = {}
    for child_id, ref in exe.children.items():
        mapped = image(ref.path, f"child {child_id}")
        if mapped != ref.path:
            children[child_id] = mapped
    maps = {path: mapped for path in exe.maps if (mapped := image(path, "map")) != path}
    return MigrationPlan(exe.id, definition_version(new), active, root, history, timers, children,
                         timer_moves=moves, changes=changes, unmapped=list(unmapped), maps=maps, leaves=leaves,
                         search=search_values(new.search, exe.context) if exe.root_path is None else {})


def apply_migration(exe: Execution, plan: MigrationPlan) -> list[TimerOp]:
    """Move ``exe`` as ``plan`` says (it must have no unmapped path); returns the timer operations that
    move its armed timers in the store (cancel the old key, schedule the new one at the same time)."""
    if plan.unmapped:
        raise ValueError(f"execution {exe.id}: unmapped states {', '.join(plan.unmapped)}")
    # One operation per key (a store may write each timer once per commit): a key that is both left and
    # taken (two states swapped names) is only scheduled.
    ops = [TimerOp("cancel", key) for key, _, _ in plan.timer_moves if key not in plan.timers]
    ops += [TimerOp("schedule", new_key, plan.timers[new_key]) for _, new_key, _ in plan.timer_moves]
    exe.active_path = plan.active_path
    exe.leaves = list(plan.leaves)
    exe.root_path = plan.root_path
    exe.history = dict(plan.history)
    exe.timers = dict(plan.timers)
    exe.children = {cid: (ChildRef(**{**ref.model_dump(), "path": plan.children[cid]})
                          if cid in plan.children else ref) for cid, ref in exe.children.items()}
    exe.maps = {plan.maps.get(path, path): progress for path, progress in exe.maps.items()}
    exe.definition_version = plan.to_version
    # Values of fields the new version dropped become None: the store takes them out of its index.
    exe.search = {**dict.fromkeys(exe.search), **plan.search}
    return ops
