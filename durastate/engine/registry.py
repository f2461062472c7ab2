"""``DefinitionRegistry``: the definitions a worker can run, by id.

Workers look a definition up on every event, so the registry is a plain dict of already-validated
(and compiled) definitions. ``from_dir`` loads a folder of YAML/JSON files and reports the issues of
every file at once (two files with the same id included), so a broken deployment fails with the whole
list instead of one problem per try. ``durastate validate`` applies the same rules.

Files written for another tool (an SCXML document, an XState machine config) are turned into definitions
outside the engine, which never imports a converter: ``from_dir`` takes a table of *loaders*, one per file
name ending, that the layer reading the folder supplies (:mod:`durastate.runtime.definitions`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from durastate.engine.definition import Definition, load_definition
from durastate.engine.model import Execution
from durastate.engine.schedules import is_schedule_file
from durastate.engine.versions import definition_version
from durastate.errors import DefinitionError, UnknownDefinition, UnknownDefinitionVersion

__all__ = ["DEFINITION_SUFFIXES", "DefinitionLoader", "DefinitionRegistry", "definition_files", "duplicate_ids",
           "load_definition_file", "load_definition_files"]

DEFINITION_SUFFIXES = (".yaml", ".yml", ".json")

DefinitionLoader = Callable[[Path], "Definition | Mapping[str, Any] | Sequence[Definition | Mapping[str, Any]]"]
"""Reads one file of a definitions folder into a definition (or a document ``load_definition`` accepts), or
into several: the file's own definition first, then the ones it brings along (the charts an imported
SCXML chart invokes), loaded with it; raises :class:`~durastate.errors.DefinitionError` saying where the
file is wrong."""


class DefinitionRegistry:
    """Definitions by id. ``get`` raises :class:`~durastate.errors.UnknownDefinition` for an unknown id.

    Besides the newest definition of each id (the file's: what new executions start on) it keeps older
    versions that running executions are pinned to (``add_version``; the runtime loads them from the
    store's archive), so :meth:`for_execution` gives each execution the version it started on.
    """

    def __init__(self, definitions: Iterable[Definition | Mapping[str, Any] | str | Path] = ()) -> None:
        self._by_id: dict[str, Definition] = {}
        self._versions: dict[tuple[str, str], Definition] = {}
        for d in definitions:
            self.register(d)

    @classmethod
    def from_dir(cls, folder: str | Path, loaders: Mapping[str, DefinitionLoader] | None = None) -> DefinitionRegistry:
        """Every ``*.yaml``/``*.yml``/``*.json`` file of ``folder`` (not recursive), validated together.

        ``loaders`` maps more file name endings (``".scxml"``) to the function that reads such a file; an
        ending it names wins over a shorter one (``".xstate.json"`` over ``".json"``).

        Raises :class:`~durastate.errors.DefinitionError` with the issues of every file at once, each
        prefixed by the file name; two files defining the same id are an issue of both.
        """
        reg, broken = cls.from_dir_partly(folder, loaders)
        if broken:
            raise DefinitionError([issue for issues in broken.values() for issue in issues], str(Path(folder)))
        return reg

    @classmethod
    def from_dir_partly(cls, folder: str | Path, loaders: Mapping[str, DefinitionLoader] | None = None
                        ) -> tuple[DefinitionRegistry, dict[str, list[str]]]:
        """As :meth:`from_dir`, but a file that does not load leaves the others usable: the registry of the
        files that load, and the issues (each prefixed by the file name) of each file that does not, by file
        name. The console shows a folder so, saying what is wrong with the broken files."""
        root = Path(folder)
        if not root.is_dir():
            raise DefinitionError([f"(folder): {root} is not a directory of definition files"], str(root))
        reg = cls()
        broken: dict[str, list[str]] = {}
        loaded: list[tuple[str, Definition]] = []
        for path in definition_files(root, loaders):
            if _loader_of(path, loaders) is None and is_schedule_file(path):
                continue  # a `schedules:` file: loaded by durastate.engine.schedules.load_schedules
            try:
                loaded.extend((path.name, defn) for defn in load_definition_files(path, loaders))
            except DefinitionError as exc:
                broken[path.name] = [f"{path.name}: {issue}" for issue in exc.issues]
        clashes = duplicate_ids([(name, defn.id) for name, defn in loaded])
        for name, defn in loaded:
            if name in clashes:
                broken[name] = [f"{name}: {clashes[name]}"]
            else:
                reg._by_id[defn.id] = defn
        return reg, broken

    def register(self, definition: Definition | Mapping[str, Any] | str | Path) -> Definition:
        """Add (or replace) a definition; anything ``load_definition`` accepts. Returns it."""
        defn = load_definition(definition)
        previous = self._by_id.get(defn.id)
        if previous is not None:  # an execution started on it keeps running on it
            self._versions[(defn.id, definition_version(previous))] = previous
        self._by_id[defn.id] = defn
        return defn

    def add_version(self, definition: Definition) -> None:
        """Keep ``definition`` as an older version of its id (the newest stays what ``get`` returns)."""
        self._versions[(definition.id, definition_version(definition))] = definition

    def get_version(self, definition_id: str, version: str) -> Definition | None:
        """Version ``version`` of ``definition_id`` if this registry holds it (the newest included)."""
        newest = self._by_id.get(definition_id)
        if newest is not None and definition_version(newest) == version:
            return newest
        return self._versions.get((definition_id, version))

    def get(self, definition_id: str) -> Definition:
        try:
            return self._by_id[definition_id]
        except KeyError:
            raise UnknownDefinition(definition_id, list(self._by_id)) from None

    def for_execution(self, exe: Execution) -> Definition:
        """The definition ``exe`` runs on: the version it records (the newest if it records none); a
        Python-built one is imported from ``exe.definition_fqn`` if needed.

        Raises :class:`~durastate.errors.UnknownDefinitionVersion` when the recorded version is not held
        here (the runtime then looks in the store's archive, see ``add_version``).
        """
        defn = self._by_id.get(exe.definition_id)
        if defn is None and exe.definition_fqn:
            imported = import_definition(exe.definition_fqn)
            if imported.id == exe.definition_id:
                self._by_id[imported.id] = defn = imported
        version = exe.definition_version
        if defn is not None and (version is None or definition_version(defn) == version):
            return defn
        older = None if version is None else self._versions.get((exe.definition_id, version))
        if older is not None:
            return older
        if defn is None:
            raise UnknownDefinition(exe.definition_id, list(self._by_id))
        assert version is not None
        raise UnknownDefinitionVersion(exe.definition_id, version, exe.id)

    def unknown_references(self) -> list[str]:
        """Issues for ``invoke`` of definition ids this registry does not hold (checked across files)."""
        out: list[str] = []
        for defn in self._by_id.values():
            for i, inv in enumerate(defn.tables.invoke):
                if inv is not None and inv[0] not in self._by_id:
                    out.append(
                        f"{defn.id}: {defn.tables.sites[i]}.invoke.definition: no definition {inv[0]!r} "
                        f"(known: {', '.join(sorted(self._by_id))})"
                    )
        return out

    def __contains__(self, definition_id: object) -> bool:
        return definition_id in self._by_id

    def __iter__(self) -> Iterator[Definition]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def ids(self) -> list[str]:
        return sorted(self._by_id)


def definition_files(folder: Path, loaders: Mapping[str, DefinitionLoader] | None = None) -> list[Path]:
    """The definition files of ``folder`` that :meth:`DefinitionRegistry.from_dir` loads (with the same
    ``loaders``), sorted by name."""
    endings = (*DEFINITION_SUFFIXES, *(loaders or ()))
    return sorted(p for p in folder.iterdir() if p.name.endswith(endings) and p.is_file())


def load_definition_file(path: Path, loaders: Mapping[str, DefinitionLoader] | None = None) -> Definition:
    """The definition in file ``path``: read by the loader of the longest ending of ``loaders`` its name has,
    else as YAML/JSON by :func:`~durastate.engine.definition.load_definition`."""
    return load_definition_files(path, loaders)[0]


def load_definition_files(path: Path, loaders: Mapping[str, DefinitionLoader] | None = None) -> list[Definition]:
    """As :func:`load_definition_file`, with the definitions the file brings along after its own (the
    charts an imported chart invokes)."""
    loader = _loader_of(path, loaders)
    if loader is None:
        return [load_definition(path)]
    loaded = loader(path)
    if isinstance(loaded, Definition | Mapping):
        return [load_definition(loaded)]
    return [load_definition(one) for one in loaded]


def _loader_of(path: Path, loaders: Mapping[str, DefinitionLoader] | None) -> DefinitionLoader | None:
    endings = sorted((e for e in loaders or () if path.name.endswith(e)), key=len, reverse=True)
    return loaders[endings[0]] if loaders and endings else None


def duplicate_ids(files: Iterable[tuple[str, str]]) -> dict[str, str]:
    """For the (file, definition id) pairs of one folder: the issue of each file whose id another file
    defines too, naming the others (every file of a clash gets one, so each is reported)."""
    by_id: dict[str, list[str]] = {}
    for name, definition_id in files:
        by_id.setdefault(definition_id, []).append(name)
    out: dict[str, str] = {}
    for definition_id, names in by_id.items():
        if len(names) < 2:
            continue
        for name in names:
            others = ", ".join(n for n in names if n != name)
            out[name] = (
                f"id: {definition_id!r} is also defined by {others}; a definitions folder holds one file per "
                "id (the registry could not tell which one to run)"
            )
    return out


def import_definition(fqn: str) -> Definition:
    """Import a Python-built definition named ``"package.module:attribute"``."""
    mod_name, _, attr = fqn.partition(":")
    if not mod_name or not attr:
        raise DefinitionError([f"(fqn): {fqn!r} is not 'package.module:attribute'"], fqn)
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise DefinitionError([f"(fqn): cannot import {fqn!r}: {exc}"], fqn) from None
    if callable(obj) and not isinstance(obj, Definition):
        obj = obj()
    return load_definition(obj)
