"""The archive of definition versions, kept in the executions table beside the executions.

An execution keeps running on the version of its definition it started on after the file changes, so
the versions running executions may still need must outlive the file. Each is one *system record*: an
ordinary execution row with id ``~definition~<definition id>~<version>``, definition id ``~definition``
and the canonical document in its context. Keeping them in the executions table means no new table on
any backend (on AWS the stack keeps its seven), the same backups, and the same commit path.

A version is written once, when the first execution starts on it (put-if-absent: the record is saved at
version 0, and a store refuses a second first write with :class:`~durastate.errors.StoreConflict` —
someone else archived it, which is as good). Records are immutable afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durastate.engine.definition import Definition, load_definition
from durastate.engine.ids import DEFINITION_RECORD, definition_record_id
from durastate.engine.model import Execution
from durastate.engine.versions import canonical_form, definition_version
from durastate.errors import DefinitionError, StoreConflict
from durastate.store.base import AsyncExecutionStore, ExecutionStore

__all__ = [
    "ArchivedVersion",
    "archive_version",
    "archive_version_async",
    "list_versions",
    "list_versions_async",
    "load_version",
    "load_version_async",
    "version_record",
]


@dataclass(frozen=True)
class ArchivedVersion:
    """One archived version of a definition."""

    definition_id: str
    version: str
    archived_at: float | None
    source: dict[str, Any]

    def definition(self) -> Definition:
        """The archived definition, validated again (a callable it names must still import)."""
        return load_definition(self.source)


def version_record(defn: Definition, now: float) -> Execution:
    """The system record that archives ``defn``'s version."""
    version = definition_version(defn)
    return Execution(id=definition_record_id(defn.id, version), definition_id=DEFINITION_RECORD,
                     status="running", created_at=now, updated_at=now,
                     context={"definition_id": defn.id, "version": version, "source": canonical_form(defn),
                              "archived_at": now})


def _archived(record: Execution | None) -> ArchivedVersion | None:
    if record is None or record.definition_id != DEFINITION_RECORD:
        return None
    ctx = record.context
    source, definition_id, version = ctx.get("source"), ctx.get("definition_id"), ctx.get("version")
    if not (isinstance(source, dict) and isinstance(definition_id, str) and isinstance(version, str)):
        return None
    at = ctx.get("archived_at")
    return ArchivedVersion(definition_id, version, float(at) if isinstance(at, int | float) else None, source)


def _load(record: Execution | None, definition_id: str, version: str) -> Definition | None:
    found = _archived(record)
    if found is None or found.definition_id != definition_id or found.version != version:
        return None
    try:
        return found.definition()
    except DefinitionError:
        return None  # (a callable it names no longer imports): as if not archived


def archive_version(store: ExecutionStore, defn: Definition, now: float) -> bool:
    """Archive ``defn``'s version unless it is already; ``True`` if this call wrote it."""
    record = version_record(defn, now)
    if store.load(record.id) is not None:
        return False
    try:
        store.save(record)
    except StoreConflict:
        return False  # archived meanwhile by another process
    return True


def load_version(store: ExecutionStore, definition_id: str, version: str) -> Definition | None:
    """Version ``version`` of ``definition_id`` from the archive, or ``None`` if it is not there."""
    return _load(store.load(definition_record_id(definition_id, version)), definition_id, version)


def list_versions(store: ExecutionStore, definition_id: str | None = None) -> list[ArchivedVersion]:
    """The archived versions (of ``definition_id``, else of every definition), oldest first."""
    found: list[ArchivedVersion] = []
    cursor: str | None = None
    while True:
        page = store.list_executions(definition_id=DEFINITION_RECORD, limit=100, cursor=cursor)
        for summary in page.items:
            item = _archived(store.load(summary.id))
            if item is not None and definition_id in (None, item.definition_id):
                found.append(item)
        if page.next_cursor is None or not page.items:
            break
        cursor = page.next_cursor
    return sorted(found, key=lambda v: (v.definition_id, v.archived_at or 0.0, v.version))


async def archive_version_async(store: AsyncExecutionStore, defn: Definition, now: float) -> bool:
    """:func:`archive_version` on an async store."""
    record = version_record(defn, now)
    if await store.load(record.id) is not None:
        return False
    try:
        await store.save(record)
    except StoreConflict:
        return False
    return True


async def load_version_async(store: AsyncExecutionStore, definition_id: str, version: str) -> Definition | None:
    """:func:`load_version` on an async store."""
    return _load(await store.load(definition_record_id(definition_id, version)), definition_id, version)


async def list_versions_async(store: AsyncExecutionStore, definition_id: str | None = None) -> list[ArchivedVersion]:
    """:func:`list_versions` on an async store."""
    found: list[ArchivedVersion] = []
    cursor: str | None = None
    while True:
        page = await store.list_executions(definition_id=DEFINITION_RECORD, limit=100, cursor=cursor)
        for summary in page.items:
            item = _archived(await store.load(summary.id))
            if item is not None and definition_id in (None, item.definition_id):
                found.append(item)
        if page.next_cursor is None or not page.items:
            break
        cursor = page.next_cursor
    return sorted(found, key=lambda v: (v.definition_id, v.archived_at or 0.0, v.version))
