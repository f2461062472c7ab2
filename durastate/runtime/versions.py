"""Which version of its definition an execution runs on, for the worker and the relay.

New executions start on the newest version (the definitions folder's) and record it; the first start of
each version this process sees archives that version in the store (one read per version per cold start,
one write per version ever), so that the executions started on it keep running on it after the file
changes. An execution pinned to a version the registry does not hold is run on the archived copy, which
is loaded once and kept in the registry.
"""

from __future__ import annotations

import logging
import time

from durastate.engine.definition import Definition
from durastate.engine.model import Execution
from durastate.engine.registry import DefinitionRegistry
from durastate.engine.versions import definition_version
from durastate.errors import ExecutionTooLarge, UnknownDefinition, UnknownDefinitionVersion
from durastate.runtime.clock import Clock
from durastate.store.base import ExecutionStore
from durastate.store.definitions import archive_version, load_version

__all__ = ["Versions"]

log = logging.getLogger("durastate.runtime")


class Versions:
    """The registry's definitions by version, completed from (and archived in) ``store``."""

    def __init__(self, store: ExecutionStore, registry: DefinitionRegistry, clock: Clock = time.time) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self._archived: set[tuple[str, str]] = set()

    def newest(self, definition_id: str) -> tuple[Definition, str]:
        """The definition a new execution of ``definition_id`` starts on, and its version (archived)."""
        defn = self.registry.get(definition_id)
        version = definition_version(defn)
        key = (definition_id, version)
        if key not in self._archived:
            try:
                archive_version(self.store, defn, self.clock())
            except ExecutionTooLarge as err:  # runs anyway: only a later edit of the file could strand it
                log.warning("version %s of %s not archived: %s", version, definition_id, err)
            self._archived.add(key)
        return defn, version

    def of(self, exe: Execution) -> Definition:
        """The definition ``exe`` runs on: its recorded version, from the registry or the store's archive.

        Raises :class:`~durastate.errors.UnknownDefinitionVersion` when neither holds it (the event is
        not applied; the execution is unchanged).
        """
        try:
            return self.registry.for_execution(exe)
        except UnknownDefinition:
            version = exe.definition_version
            if version is None:
                raise
        defn = load_version(self.store, exe.definition_id, version)
        if defn is None:
            raise UnknownDefinitionVersion(exe.definition_id, version, exe.id) from None
        self.registry.add_version(defn)
        return defn
