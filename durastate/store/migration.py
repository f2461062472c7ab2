"""``durastate migrate`` against a store: move running executions to another version of their definition.

The public entry is :func:`migrate_executions` (what the CLI and ``DurastateClient.migrate`` call): it
selects the executions — every running and suspended one on ``from_version``, or only ``ids``, or only
those in ``statuses`` — plans each, refuses the whole migration if any would be stranded, and moves the
rest one by one with :func:`migrate_execution`. Each execution moves in one compare-and-swap commit (its
paths remapped, its armed timers moved in the timers table, a trace step saying so), with the
load-change-commit loop of :mod:`durastate.store.control`: a worker that commits an event meanwhile wins,
and the migration reloads and plans again on the fresh state. Nothing is committed for any execution
unless every execution selected can be moved: a refused migration names the executions it would strand
and the states that need a ``--map``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field

from durastate.engine.definition import Definition
from durastate.engine.migration import MigrationPlan, apply_migration, mapping_issues, plan_migration
from durastate.engine.model import Execution
from durastate.engine.versions import definition_version
from durastate.errors import MigrationRefused, StoreConflict, UnknownExecution
from durastate.store.base import ExecutionStore
from durastate.store.definitions import archive_version, list_versions, load_version

__all__ = ["LIVE", "UNVERSIONED", "Candidate", "DeployCheck", "Migration", "candidates", "check_statuses",
           "deploy_check", "migrate_execution", "migrate_executions", "pinned_executions", "stranded_refusal"]

LIVE = ("running", "suspended")
"""The statuses a migration moves: an ended execution never steps again, so it keeps its version."""

UNVERSIONED = "unversioned"
"""What ``--from`` says to select the executions started before durastate recorded versions."""


@dataclass(frozen=True)
class Candidate:
    """One execution a migration would move, and its plan."""

    execution: Execution
    plan: MigrationPlan


def pinned_executions(store: ExecutionStore, definition_id: str,
                      statuses: Collection[str] = LIVE) -> Iterator[Execution]:
    """Every running or suspended execution of ``definition_id`` (region children included), or only those
    in ``statuses``."""
    cursor: str | None = None
    wanted = [s for s in LIVE if s in statuses]
    while True:
        page = store.list_executions(definition_id=definition_id, status=wanted, limit=100, cursor=cursor)
        for summary in page.items:
            exe = store.load(summary.id)
            if exe is not None and exe.status in wanted and exe.definition_id == definition_id:
                yield exe
        if page.next_cursor is None or not page.items:
            return
        cursor = page.next_cursor


def _selected(exe: Execution, from_version: str) -> bool:
    return exe.definition_version == (None if from_version == UNVERSIONED else from_version)


def check_statuses(statuses: Collection[str] | None) -> tuple[str, ...]:
    """The statuses a migration selects (``None``: both live ones); :class:`~durastate.errors.MigrationRefused`
    for a status that is not ``running`` or ``suspended``, saying why."""
    if statuses is None:
        return LIVE
    for status in statuses:
        if status in LIVE:
            continue
        if status == "failed":
            raise MigrationRefused("--status failed: a failed execution cannot be migrated (its redrive restores "
                                   "the state before the failed step, on its own version); redrive it "
                                   "(`durastate redrive ID`), then migrate it while it runs")
        raise MigrationRefused(f"--status {status}: only running or suspended executions can be migrated "
                               "(an ended one never steps again); choose running and/or suspended")
    if not statuses:
        raise MigrationRefused("no --status given to select: choose running and/or suspended")
    return tuple(s for s in LIVE if s in statuses)


def candidates(store: ExecutionStore, definition_id: str, from_version: str, old: Definition | None,
               new: Definition, mapping: Mapping[str, str], *, ids: Collection[str] | None = None,
               statuses: Collection[str] | None = None) -> list[Candidate]:
    """The executions on ``from_version`` (``unversioned``: those recording none) and their plans: every
    running and suspended one, only those in ``statuses``, or only ``ids`` (in that order).

    An id that names no execution is :class:`~durastate.errors.UnknownExecution`; one of another definition,
    on another version or in a status not selected is :class:`~durastate.errors.MigrationRefused`, every such
    id in one message: a selection is what was asked, or nothing."""
    selected = check_statuses(statuses)
    if ids is None:
        return [Candidate(exe, plan_migration(exe, old, new, mapping))
                for exe in pinned_executions(store, definition_id, selected) if _selected(exe, from_version)]
    out: list[Candidate] = []
    problems: list[str] = []
    for execution_id in dict.fromkeys(ids):
        exe = store.load(execution_id)
        if exe is None:
            raise UnknownExecution(execution_id)
        if exe.definition_id != definition_id:
            problems.append(f"{execution_id} is an execution of {exe.definition_id}, not {definition_id}")
        elif not _selected(exe, from_version):
            problems.append(f"{execution_id} is on version {exe.definition_version or UNVERSIONED}, not "
                            f"{from_version}")
        elif exe.status not in selected:
            problems.append(f"{execution_id} is {exe.status}, not {' or '.join(selected)}")
        else:
            out.append(Candidate(exe, plan_migration(exe, old, new, mapping)))
    if problems:
        raise MigrationRefused("; ".join(problems) + "; nothing was migrated")
    return out


def stranded_refusal(definition_id: str, from_version: str, to_version: str,
                     stranded: list[Candidate]) -> MigrationRefused:
    """The refusal of a migration some of whose executions sit in states ``to_version`` lacks."""
    states: dict[str, None] = {}
    for c in stranded:
        states.update(dict.fromkeys(c.plan.unmapped))
    maps = " ".join(f"--map {s}=<new path>" for s in states)
    return MigrationRefused(
        f"{len(stranded)} execution(s) of {definition_id} on {from_version} sit in states that version "
        f"{to_version} does not have: {', '.join(states)}; nothing was migrated. Say where they went: {maps}",
        {c.execution.id: c.plan.unmapped for c in stranded})


@dataclass(frozen=True)
class Migration:
    """What :func:`migrate_executions` did (or, for a dry run, would do)."""

    from_version: str
    to_version: str
    planned: list[Candidate]
    """Every execution selected, with its plan (what changes: ``plan.changes``)."""
    moved: list[str] = field(default_factory=list)
    """The executions moved (none for a dry run)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Executions selected but not moved, and why: one ended, was migrated by someone else or moved on
    to a state the mapping does not cover between the plan and its commit."""


def migrate_executions(store: ExecutionStore, definition_id: str, from_version: str, new: Definition,
                       mapping: Mapping[str, str] | None = None, *, old: Definition | None = None,
                       ids: Collection[str] | None = None, statuses: Collection[str] | None = None,
                       clock: Callable[[], float] = time.time, dry_run: bool = False) -> Migration:
    """Move the running and suspended executions of ``definition_id`` on ``from_version`` (``unversioned``:
    those recording none) to ``new``'s version — only ``ids``, or only those in ``statuses``, when given.

    ``mapping`` says where renamed states went (``{"waiting": "ready"}``; descendants follow). ``old`` is
    the source version's definition (default: the store's archived copy; without one the mapping is
    checked against ``new`` only). Nothing moves if any selected execution would be stranded
    (:class:`~durastate.errors.MigrationRefused`, whose ``stranded`` names them), if the selection is not
    what exists (see :func:`candidates`) or if the mapping is invalid. Otherwise ``new`` is archived (the
    executions moved need it) and each execution moves in one commit of its own. ``clock`` stamps the
    commits: pass the runtime's (a ``ManualClock``) when there is one.
    """
    mapping = dict(mapping or {})
    to_version = definition_version(new)
    if from_version == to_version:
        raise MigrationRefused(f"--from and --to are both {to_version}: nothing to migrate")
    if old is None and from_version != UNVERSIONED:
        old = load_version(store, definition_id, from_version)
    issues = mapping_issues(mapping, old, new)
    if issues:
        raise MigrationRefused("; ".join(issues))
    found = candidates(store, definition_id, from_version, old, new, mapping, ids=ids, statuses=statuses)
    stranded = [c for c in found if c.plan.unmapped]
    if stranded:
        raise stranded_refusal(definition_id, from_version, to_version, stranded)
    result = Migration(from_version, to_version, found)
    if dry_run or not found:
        return result
    archive_version(store, new, clock())
    for c in found:
        try:
            done = migrate_execution(store, c.execution.id, from_version, old, new, mapping, clock)
        except ValueError as err:  # it moved on since it was planned, to a state the mapping does not cover
            result.skipped[c.execution.id] = str(err)
            continue
        if done is None:
            result.skipped[c.execution.id] = "no longer running on that version (it ended, or was migrated)"
        else:
            result.moved.append(c.execution.id)
    return result


def migrate_execution(store: ExecutionStore, execution_id: str, from_version: str, old: Definition | None,
                      new: Definition, mapping: Mapping[str, str], clock: Callable[[], float],
                      attempts: int = 8) -> MigrationPlan | None:
    """Move one execution in one compare-and-swap commit: its active state, history and armed timers
    renamed through ``mapping``, its version set to ``new``'s, a ``migrate`` trace step. A worker committing
    meanwhile wins and the move is planned again on what it committed (up to ``attempts`` times).

    ``None`` if it is no longer on ``from_version`` or no longer running (it ended, or someone else migrated
    it). Raises ``ValueError`` if it now sits in a state the mapping does not cover (it moved on since it
    was planned). It does not archive ``new``: :func:`migrate_executions` does, and checks the whole
    selection first — call this directly only to move one execution you planned yourself."""
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
