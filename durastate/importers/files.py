"""Importing a chart from its file: read as UTF-8, converted, and either every construct mapped or a
:class:`~durastate.errors.DefinitionError` listing each one that was not, with its location.

``durastate import`` reads files through :func:`read_source`; a definitions folder that holds ``.scxml``
and ``.xstate.json`` files loads them through :func:`load_scxml` and :func:`load_xstate`, where a partial
import is refused like an invalid YAML definition: a chart that silently lost a transition would run, and
be wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from durastate.errors import DefinitionError
from durastate.importers import scxml, xstate
from durastate.importers.result import ImportResult

__all__ = ["beside", "load_scxml", "load_xstate", "read_source"]


def read_source(path: Path) -> str:
    """The text of ``path`` (UTF-8, a byte-order mark allowed); a DefinitionError saying what to do if it
    cannot be read or is not UTF-8."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise DefinitionError([f"(document): cannot read {path}: {exc.strerror or exc}"], str(path)) from None
    except UnicodeDecodeError as exc:
        raise DefinitionError([f"(document): not UTF-8 text (byte offset {exc.start}); save it as UTF-8"],
                              str(path)) from None


def beside(chart: Path) -> Callable[[str], tuple[str, str]]:
    """How an ``<invoke src>`` of the chart file ``chart`` is read: a file in the chart's folder (or below
    it), named by a relative path with or without ``file:``; any other address (an absolute path, ``..``,
    another scheme) is refused with a :class:`ValueError` saying so, and nothing is fetched."""
    folder = chart.parent

    def resolve(src: str) -> tuple[str, str]:
        name = src.removeprefix("file:")
        parts = PurePosixPath(name).parts
        if not name or name.startswith("/") or "\\" in name or ":" in name or ".." in parts:
            raise ValueError("only a file beside the chart (a relative path, 'file:' allowed) is read; "
                             "nothing is fetched")
        path = folder.joinpath(*parts)
        try:
            return read_source(path), path.name
        except DefinitionError as exc:
            raise ValueError("; ".join(exc.issues)) from None

    return resolve


def load_scxml(path: Path) -> list[dict[str, Any]]:
    """The definition document of the SCXML file ``path`` and those of the charts it invokes, every construct
    of them mapped."""
    result = scxml.convert(read_source(path), path.name, resolve=beside(path))
    _refuse_partial(result, path)
    return result.documents


def load_xstate(path: Path) -> dict[str, Any]:
    """The definition document of the XState machine config (JSON) ``path``, every construct of it mapped."""
    return _complete(xstate.convert, path)


def _complete(convert: Callable[[str, str | None], ImportResult], path: Path) -> dict[str, Any]:
    result = convert(read_source(path), path.name)
    _refuse_partial(result, path)
    return result.document


def _refuse_partial(result: ImportResult, path: Path) -> None:
    if result.issues:
        raise DefinitionError([str(issue) for issue in result.issues], str(path))
