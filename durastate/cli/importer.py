"""``durastate import scxml FILE`` and ``durastate import xstate FILE``: another tool's chart as a definition.

The conversion itself is :mod:`durastate.importers` (pure); this module reads the file, prints or writes
the YAML and lists on stderr, with its location, every construct that could not be mapped. By default an
import that left something out writes nothing and exits 1: a chart that silently lost a transition would
run, and be wrong. ``--allow-partial`` writes it anyway, the issues heading the file as comments.

A chart that invokes other charts (SCXML's ``<invoke>``) gives one definition more per invoked chart: each
is written beside the chart's file, as ``<its id>.yaml`` (printed after the chart's YAML, each as a YAML
document of its own, without ``--output``), so that the folder holds everything the chart runs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from durastate.cli import output
from durastate.importers import ImportResult, to_yaml
from durastate.importers import scxml as scxml_importer
from durastate.importers import xstate as xstate_importer
from durastate.importers.files import beside, read_source

import_app = typer.Typer(
    name="import", no_args_is_help=True, rich_markup_mode="rich",
    help="Turn a W3C SCXML document or an XState v5 machine config (JSON) into a durastate definition.")

FileArgument = Annotated[Path, typer.Argument(metavar="FILE", help="The file to import.")]
OutOption = Annotated[Path | None, typer.Option(
    "--output", "-o", metavar="OUT.yaml", help="Write the definition here (default: print it).")]
PartialOption = Annotated[bool, typer.Option(
    "--allow-partial", help="Write the definition even if some constructs could not be mapped (they are "
                            "listed as comments at the top); without it, such an import writes nothing "
                            "and exits 1.")]


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")


@import_app.command("scxml")
def import_scxml(file: FileArgument, out: OutOption = None, allow_partial: PartialOption = False) -> None:
    """Import a W3C SCXML document (the ecmascript datamodel's simple expressions, no scripts)."""
    def convert(text: str, source: str | None) -> ImportResult:
        return scxml_importer.convert(text, source, resolve=beside(file))  # <invoke src> beside the chart

    _run(convert, file, out, allow_partial)


@import_app.command("xstate")
def import_xstate(file: FileArgument, out: OutOption = None, allow_partial: PartialOption = False) -> None:
    """Import an XState v5 machine config written as JSON (actions and guards as data, not code)."""
    _run(xstate_importer.convert, file, out, allow_partial)


def _run(convert: Callable[[str, str | None], ImportResult], file: Path, out: Path | None,
         allow_partial: bool) -> None:
    result = convert(read_source(file), str(file))
    for issue in result.issues:
        output.warn(f"{file}: {issue}")
    if result.issues and not allow_partial:
        output.error(f"{len(result.issues)} construct(s) of {file} could not be mapped (listed above); nothing "
                     "written. Change the source, or pass --allow-partial to write what could be mapped")
        raise typer.Exit(1)
    yaml_text = to_yaml(result, file.name)
    invoked = [(_file_name(doc), to_yaml(ImportResult(doc))) for doc in result.invoked]
    if out is None:
        sys.stdout.write("---\n".join([yaml_text, *(text for _, text in invoked)]))
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml_text, encoding="utf-8")
    partial = f", {len(result.issues)} construct(s) left out" if result.issues else ""
    output.note(f"wrote {out} (definition {result.document.get('id')!r}{partial})")
    for (name, text), doc in zip(invoked, result.invoked, strict=True):
        path = out.parent / name
        path.write_text(text, encoding="utf-8")
        output.note(f"wrote {path} (definition {doc.get('id')!r}, invoked by {result.document.get('id')!r})")


def _file_name(document: dict[str, object]) -> str:
    """The file an invoked chart's definition is written to: its id (characters a file name cannot safely
    hold replaced by ``_``), ``.yaml``."""
    return re.sub(r"[^\w.~-]", "_", str(document.get("id"))) + ".yaml"
