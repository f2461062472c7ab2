"""Commands about definitions: ``validate`` and ``viz``. Neither needs a store (``viz --execution`` does)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from durastate.cli import output
from durastate.cli.common import DefinitionsOption, JsonOption, StoreOption, session
from durastate.cli.introspect import active_paths
from durastate.cli.session import Session, UsageError
from durastate.engine.definition import Definition, State, load_definition
from durastate.engine.registry import DEFINITION_SUFFIXES, definition_files, duplicate_ids
from durastate.errors import DefinitionError, UnknownExecution

SUFFIXES = DEFINITION_SUFFIXES


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("viz")(viz)


def _expand(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(definition_files(path))
        else:
            files.append(path)
    return files


def validate(
    ctx: typer.Context,
    files: Annotated[list[Path] | None, typer.Argument(
        metavar="FILE...", help="Definition files or folders. Default: the definitions folder.")] = None,
    as_json: JsonOption = False,
    definitions: DefinitionsOption = None,
) -> None:
    """Check definition files and report every problem in each, with its path in the document.

    Files of one folder are checked together as the runtime loads them: two of them with the same id
    are both invalid.
    """
    if not files:
        folder = session(ctx, definitions=definitions).definitions_dir
        if folder is None:
            raise UsageError("nothing to validate: name FILE(s), or pass --definitions DIR")
        files = [folder]
    paths = list({p.resolve(): p for p in reversed(_expand(files))}.values())[::-1]  # each file once
    if not paths:
        raise UsageError(f"no *.yaml, *.yml or *.json files in {', '.join(str(f) for f in files)}")
    results: list[tuple[Path, Definition | None, list[str]]] = []
    for path in paths:
        if not path.exists():
            results.append((path, None, ["(document): no such file"]))
            continue
        try:
            results.append((path, load_definition(path), []))
        except DefinitionError as exc:
            results.append((path, None, exc.issues))
    clashes = _same_folder_clashes([(p, d) for p, d, _ in results if d is not None])
    results = [(p, d, [*issues, *clashes.get(p, [])]) for p, d, issues in results]
    warnings = _cross_check([(p, d) for p, d, _ in results if d is not None])
    failed = sum(1 for _, d, issues in results if d is None or issues)
    if as_json:
        output.print_json([{"file": str(p), "id": d.id if d else None, "valid": d is not None and not issues,
                            "issues": issues, "warnings": warnings.get(p, [])} for p, d, issues in results])
    else:
        for path, defn, issues in results:
            if defn is not None and not issues:
                count = len(defn.paths)
                output.say(Text.assemble(("✓ ", "green"), (str(path), "bold"),
                                         f"  {defn.id} ({count} state{'s' if count != 1 else ''})"))
            else:
                output.say(Text.assemble(("✗ ", "red"), (str(path), "bold"),
                                         f"  {len(issues)} issue{'s' if len(issues) != 1 else ''}"))
                for issue in issues:
                    output.say(Text(f"    {issue}", style="red"))
            for warning in warnings.get(path, []):
                output.say(Text(f"    warning: {warning}", style="yellow"))
    if failed:
        output.error(f"{failed} of {len(results)} definition file(s) invalid")
        raise typer.Exit(1)


def _same_folder_clashes(loaded: list[tuple[Path, Definition]]) -> dict[Path, list[str]]:
    """Issues for files of one folder that define the same id: the registry refuses that folder."""
    by_folder: dict[Path, list[tuple[Path, Definition]]] = {}
    for path, defn in loaded:
        by_folder.setdefault(path.resolve().parent, []).append((path, defn))
    out: dict[Path, list[str]] = {}
    for group in by_folder.values():
        names = {path.name: path for path, _ in group}
        for name, issue in duplicate_ids([(path.name, defn.id) for path, defn in group]).items():
            out.setdefault(names[name], []).append(issue)
    return out


def _cross_check(loaded: list[tuple[Path, Definition]]) -> dict[Path, list[str]]:
    """What no single file can see: the same id in different folders, invokes of definitions not among
    these files. (The same id twice in one folder is an issue: see _same_folder_clashes.)"""
    warnings: dict[Path, list[str]] = {}
    first: dict[str, Path] = {}
    for path, defn in loaded:
        if defn.id in first and first[defn.id].resolve().parent != path.resolve().parent:
            warnings.setdefault(path, []).append(f"id {defn.id!r} is also defined in {first[defn.id]}")
        first.setdefault(defn.id, path)
    if len(loaded) < 2:
        return warnings
    for path, defn in loaded:
        for where, target in _invokes(defn.states, "states"):
            if target not in first:
                warnings.setdefault(path, []).append(
                    f"{where}.invoke.definition: no definition {target!r} among the files checked")
    return warnings


def _invokes(states: dict[str, State], prefix: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, state in states.items():
        where = f"{prefix}.{name}"
        if state.invoke is not None:
            found.append((where, state.invoke.definition))
        found.extend(_invokes(state.states, f"{where}.states"))
    return found


def viz(
    ctx: typer.Context,
    source: Annotated[str | None, typer.Argument(
        metavar="FILE", help="A definition file, or the id of a definition in the definitions folder. "
                             "Default with --execution: that execution's definition.")] = None,
    execution: Annotated[str | None, typer.Option(
        "--execution", "-e", metavar="ID", help="Mark the active state(s) of this execution.")] = None,
    markdown: Annotated[bool, typer.Option(
        "--markdown", "-m", help="Wrap in a ```mermaid fence, ready to paste into GitHub.")] = False,
    out: Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE",
                                             help="Write to FILE instead of stdout.")] = None,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Print a Mermaid stateDiagram-v2 of a definition (renders on GitHub)."""
    from durastate.viz import to_markdown, to_mermaid

    sess = session(ctx, store, definitions)
    active: list[str] = []
    if execution is not None:
        exe = sess.store.load(execution)
        if exe is None:
            raise UnknownExecution(execution)
        defn = _definition(sess, source) if source is not None else sess.registry.get(exe.definition_id)
        if exe.definition_id != defn.id:
            raise UsageError(f"execution {execution} runs definition {exe.definition_id!r}, not {defn.id!r}")
        active = active_paths(exe, sess.store.load)
    elif source is not None:
        defn = _definition(sess, source)
    else:
        raise UsageError("name a definition FILE (or id), or an --execution ID")
    text = (to_markdown if markdown else to_mermaid)(defn, active)
    if out is not None:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc.strerror or exc} (does its folder exist, and may you "
                             "write there?)") from None
        output.note(f"wrote {out}")
    else:
        output.console.file.write(text)


def _definition(sess: Session, source: str) -> Definition:
    path = Path(source)
    if path.suffix in SUFFIXES or path.exists():
        if not path.exists():
            raise UsageError(f"no such file: {source}")
        return load_definition(path)
    defn: Definition = sess.registry.get(source)
    return defn
