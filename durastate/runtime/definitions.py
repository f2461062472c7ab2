"""The definitions folder as every process reads it — the CLI, the local runtime and the Lambda handlers:
YAML/JSON definitions, and charts written for another tool, converted when the folder is loaded.

A ``*.scxml`` file is a W3C SCXML document and a ``*.xstate.json`` file an XState v5 machine config (the
double ending tells it from a durastate definition written as JSON). Each is converted by
:mod:`durastate.importers` as ``durastate import`` would, and a construct that does not map makes the file
invalid, reported with its element and line (its JSON path for XState) like any definition issue. The
engine never imports a converter: it takes this module's table of loaders (:data:`LOADERS`), and the
converters are imported only when a folder holds such a file, so a folder of YAML costs a cold start
nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durastate.engine.definition import Definition
from durastate.engine.registry import DefinitionLoader, DefinitionRegistry, definition_files, load_definition_file

__all__ = ["IMPORTED_SUFFIXES", "LOADERS", "BrokenFile", "folder_files", "load_file", "load_folder",
           "load_folder_partly"]


def _scxml(path: Path) -> list[dict[str, Any]]:
    from durastate.importers.files import load_scxml

    return load_scxml(path)


def _xstate(path: Path) -> dict[str, Any]:
    from durastate.importers.files import load_xstate

    return load_xstate(path)


LOADERS: Mapping[str, DefinitionLoader] = {".scxml": _scxml, ".xstate.json": _xstate}
"""File name ending -> how a file of the definitions folder with it becomes a definition."""
IMPORTED_SUFFIXES = tuple(LOADERS)


def load_folder(folder: str | Path) -> DefinitionRegistry:
    """Every definition of ``folder``, imported charts included, validated together
    (:meth:`DefinitionRegistry.from_dir`: the issues of every file at once)."""
    return DefinitionRegistry.from_dir(folder, LOADERS)


@dataclass(frozen=True)
class BrokenFile:
    """A file of the definitions folder that does not load: its name, the ``id:`` it declares (when it can
    be read), and why it does not load."""

    file: str
    definition_id: str | None
    issues: list[str]


def load_folder_partly(folder: str | Path) -> tuple[DefinitionRegistry, list[BrokenFile]]:
    """The definitions of ``folder`` that load, and each file that does not (a module its Python actions
    name that does not import, an invalid chart): what the console shows instead of refusing to start."""
    registry, broken = DefinitionRegistry.from_dir_partly(folder, LOADERS)
    return registry, [BrokenFile(name, _declared_id(Path(folder) / name), issues)
                      for name, issues in sorted(broken.items())]


def _declared_id(path: Path) -> str | None:
    """The ``id:`` a YAML/JSON definition file declares, read without loading it (``None``: unreadable)."""
    if path.name.endswith(IMPORTED_SUFFIXES):
        return None
    import yaml

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    value = raw.get("id") if isinstance(raw, dict) else None
    return value if isinstance(value, str) else None


def folder_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that :func:`load_folder` reads, sorted by name."""
    return definition_files(folder, LOADERS)


def load_file(path: Path) -> Definition:
    """The definition in one file (YAML, JSON, SCXML or an XState config, by its name)."""
    return load_definition_file(path, LOADERS)
