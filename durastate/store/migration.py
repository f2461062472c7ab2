"""``durastate migrate`` against a store: move running executions to another version of their definition.

Each execution moves in one compare-and-swap commit (its paths remapped, its armed timers moved in the
timers table, a trace step saying so), with the load-change-commit loop of :mod:`durastate.store.control`:
a worker that commits an event meanwhile wins, and the migration reloads and plans again on the fresh
state. Nothing is committed for any execution unless every execution selected can be moved: a refused
migration names the executions it would strand and the states that need a ``--map``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from durastate.engine.definition import Definition
from durastate.engine.migration import MigrationPlan, apply_migration, plan_migration
from durastate.engine.model import Execution
from durastate.engine.versions import definition_version
from durastate.errors import StoreConflict
from durastate.store.base import ExecutionStore
from durastate.store.definitions import list_versions

__all__ = ["LIVE", "UNVERSIONED", "Candidate", "DeployCheck", "candidates", "deploy_check", "migrate_execution",
           "pinned_executions"]

LIVE = ("running", "suspended")
"""The statuses a migration moves: an ended execution never steps again, so it keeps its version."""

UNVERSIONED = "unversioned"
"""What ``--from`` says to select the executions started before durastate recorded versions."""


@dataclass(frozen=True)
class Candidate:
    """One execution a migration would move, and its plan."""

    execution: Execution
    plan: MigrationPlan


def pinned_executions(store: ExecutionStore, definition_id: str) -> Iterator[Execution]:
    """Every running or suspended execution of ``definition_id`` (region children included)."""
    cursor: str | None = None
    while True:
        page = store.list_executions(definition_id=definition_id, status=list(LIVE), limit=100, cursor=cursor)
        for summary in page.items:
            exe = store.load(summary.id)
            if exe is not None and exe.status in LIVE and exe.definition_id == definition_id:
                yield exe
        if page.next_cursor is None or not page.items:
            return
        cursor = page.next_cursor


def _selected(exe: Execution, from_version: str) -> bool:
    return exe.definition_version == (None if from_version == UNVERSIONED else from_version)


def candidates(store: ExecutionStore, definition_id: str, from_version: str, old: Definition | None,
               new: Definition, mapping: Mapping[str, str]) -> list[Candidate]:
    """The executions on ``from_version`` (``unversioned``: those recording none) and their plans."""
    return [Candidate(exe, plan_migration(exe, old, new, mapping))
            for exe in pinned_executions(store, definition_id) if _selected(exe, from_version)]


def migrate_execution(store: ExecutionStore, execution_id: str, from_version: str, old: Definition | None,
                      new: Definition, mapping: Mapping[str, str], clock: Callable[[], float],
                      attempts: int = 8) -> MigrationPlan | None:
    """Move one execution in one CAS commit; ``None`` if it is no longer on ``from_version`` or no longer
    running (it ended, or someone else migrated it). Raises ``ValueError`` if it now sits in a state the
    mapping does not cover (it moved on since it was planned)."""
    version = definition_version(new)
    for _ in range(attempts):
        stored = store.load(execution_id)
        if stored is None or stored.status not in LIVE or not _selected(stored, from_version):
            return None
        exe = stored.model_copy(deep=True)  # an in-memory store hands out its own object: change a copy
        plan = plan_migration(exe, old, new, mapping)
        before = exe.active_path
        timers = apply_migration(exe, plan)
        exe.updated_at = now = clock()
        try:
            store.commit(exe, [], timers=timers,
                         trace={"event": "migrate", "from": before, "to": exe.active_path, "status": exe.status,
                                "at": now, "migrated": {"from": from_version, "to": version, "map": dict(mapping)}})
        except StoreConflict:
            continue
        return plan
    raise StoreConflict(execution_id, None, None)


@dataclass(frozen=True)
class DeployCheck:
    """A running execution of a definition that is not on the version about to be deployed."""

    execution: Execution
    plan: MigrationPlan
    """Moving it to the new version without a mapping: ``plan.unmapped`` are the states it would lack."""
    pinned: bool
    """Its version is archived: it keeps running on it after the deploy. ``False``: it would run on the
    new version (it records none, or one the archive lost), so an unmapped state strands it."""

    @property
    def stranded(self) -> bool:
        return not self.pinned and bool(self.plan.unmapped)


def deploy_check(store: ExecutionStore, new: Definition) -> list[DeployCheck]:
    """What deploying ``new`` means for the running and suspended executions of its id in ``store``."""
    version = definition_version(new)
    archived = {v.version for v in list_versions(store, new.id)}
    return [DeployCheck(exe, plan_migration(exe, None, new, {}), exe.definition_version in archived)
            for exe in pinned_executions(store, new.id) if exe.definition_version != version]
