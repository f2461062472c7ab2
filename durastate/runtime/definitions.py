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
from pathlib import Path
from typing import Any

from durastate.engine.definition import Definition
from durastate.engine.registry import DefinitionLoader, DefinitionRegistry, definition_files, load_definition_file

__all__ = ["IMPORTED_SUFFIXES", "LOADERS", "folder_files", "load_file", "load_folder"]


def _scxml(path: Path) -> dict[str, Any]:
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


def folder_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that :func:`load_folder` reads, sorted by name."""
    return definition_files(folder, LOADERS)


def load_file(path: Path) -> Definition:
    """The definition in one file (YAML, JSON, SCXML or an XState config, by its name)."""
    return load_definition_file(path, LOADERS)
