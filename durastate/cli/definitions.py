"""Commands about definitions: ``validate`` and ``viz``. Neither needs a store (``viz --execution`` does)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from durastate.cli import output
from durastate.cli.common import DefinitionsOption, JsonOption, StoreOption, session
from durastate.cli.introspect import active_paths
from durastate.cli.schedules import check_schedule_files, print_schedule_files, schedule_file_json
from durastate.cli.session import Session, UsageError
from durastate.engine.checks import static_issues
from durastate.engine.definition import Definition, State
from durastate.engine.explore import Exploration, explore
from durastate.engine.model import Execution
from durastate.engine.registry import DEFINITION_SUFFIXES, duplicate_ids
from durastate.engine.schedules import is_schedule_file
from durastate.errors import DefinitionError, UnknownExecution
from durastate.runtime.definitions import IMPORTED_SUFFIXES, folder_files, load_file

SUFFIXES = (*DEFINITION_SUFFIXES, *IMPORTED_SUFFIXES)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("viz")(viz)


def _expand(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(folder_files(path))
        else:
            files.append(path)
    return files


def validate(
    ctx: typer.Context,
    files: Annotated[list[Path] | None, typer.Argument(
        metavar="FILE...", help="Definition files or folders. Default: the definitions folder.")] = None,
    as_json: JsonOption = False,
    definitions: DefinitionsOption = None,
    against: Annotated[str | None, typer.Option(
        "--against", metavar="STORE",
        help="Also check these definitions against the running executions in store STORE (a deploy gate): "
             "fail if the change would strand one.")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="With --against: also fail for executions pinned to an older version that could "
                         "not be migrated to this one without a --map.")] = False,
    explore_limit: Annotated[int | None, typer.Option(
        "--explore", metavar="N", min=1,
        help="Also run every definition through up to N configurations (all events, timers and child "
             "endings, breadth first) and fail on a deadlock or a step that never settles.")] = None,
    domain: Annotated[list[str] | None, typer.Option(
        "--domain", metavar="KEY=V1,V2",
        help="With --explore: values a start context (context.KEY) or event data (event.KEY) may hold; "
             "JSON values, repeatable.")] = None,
    replay_files: Annotated[list[Path] | None, typer.Option(
        "--replay", metavar="HISTORY",
        help="Also replay a recorded history (`durastate history ID --json > HISTORY`) through the definition "
             "and fail on the first step whose transition, actions or context would differ; repeatable.")] = None,
    from_store: Annotated[bool, typer.Option(
        "--from-store", help="Also replay the histories of executions of each definition in the store "
                             "(--against STORE, else --store / DURASTATE_STORE); see --replay.")] = False,
    replay_limit: Annotated[int, typer.Option(
        "--replay-limit", metavar="N", min=1,
        help="With --from-store: replay at most N executions per definition (default 100).")] = 100,
    store: StoreOption = None,
) -> None:
    """Check definition files and report every problem in each, with its path in the document.

    Files of one folder are checked together as the runtime loads them: two of them with the same id
    are both invalid. With --against STORE, also fail when a definition changed so that a running execution
    would be stranded (it would run on the new version and sits in a state it no longer has). With --replay
    HISTORY or --from-store, also fail when a recorded history would run differently on it.
    """
    if not files:
        folder = session(ctx, definitions=definitions).definitions_dir
        if folder is None:
            raise UsageError("nothing to validate: name FILE(s), or pass --definitions DIR")
        files = [folder]
    paths = list({p.resolve(): p for p in reversed(_expand(files))}.values())[::-1]  # each file once
    if not paths:
        raise UsageError(f"no *.yaml, *.yml, *.json or *.scxml files in {', '.join(str(f) for f in files)}")
    results: list[tuple[Path, Definition | None, list[str]]] = []
    schedule_paths: list[Path] = []
    for path in paths:
        if not path.exists():
            results.append((path, None, ["(document): no such file"]))
            continue
        if not path.name.endswith(IMPORTED_SUFFIXES) and is_schedule_file(path):
            schedule_paths.append(path)
            continue
        try:
            loaded = load_file(path)
        except DefinitionError as exc:
            results.append((path, None, exc.issues))
        else:
            results.append((path, loaded, static_issues(loaded)))
    clashes = _same_folder_clashes([(p, d) for p, d, _ in results if d is not None])
    results = [(p, d, [*issues, *clashes.get(p, [])]) for p, d, issues in results]
    warnings = _cross_check([(p, d) for p, d, _ in results if d is not None])
    failed = sum(1 for _, d, issues in results if d is None or issues)
    scheduled = check_schedule_files(schedule_paths, [(p, d) for p, d, _ in results if d is not None])
    failed += sum(1 for _, _, issues in scheduled if issues)
    if domain and explore_limit is None:
        raise UsageError("--domain is for --explore N")
    explored: dict[str, tuple[Exploration, list[str]]] = {}
    if explore_limit is not None and not failed:
        domains = _domains(domain or [])
        for _, valid, _ in results:
            if valid is not None:
                found = explore(valid, explore_limit, domains)
                explored[valid.id] = (found, found.unvalued_event_keys)
    if as_json:
        output.print_json([{"file": str(p), "id": d.id if d else None, "valid": d is not None and not issues,
                            "issues": issues, "warnings": warnings.get(p, []),
                            **({"exploration": _exploration_json(*explored[d.id])} if d and d.id in explored else {})}
                           for p, d, issues in results]
                          + [schedule_file_json(*row) for row in scheduled])
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
            if defn is not None and defn.id in explored:
                _print_exploration(*explored[defn.id], explore_limit or 0)
        print_schedule_files(scheduled)
    if failed:
        output.error(f"{failed} of {len(results) + len(scheduled)} definition file(s) invalid")
        raise typer.Exit(1)
    problems = sum(len(result.findings) for result, _ in explored.values())
    if problems:
        output.error(f"exploration found {problems} problem{'s' if problems != 1 else ''}")
        raise typer.Exit(1)
    validated = [d for _, d, _ in results if d is not None]
    if replay_files or from_store:
        from durastate.cli.replay import replay_files as replay_histories
        from durastate.cli.replay import replay_store, report_replays

        reports = replay_histories(replay_files or [], validated)
        if from_store:
            reports += replay_store(session(ctx, against or store, definitions).store, validated, replay_limit)
        if report_replays(reports, as_json):
            raise typer.Exit(1)
    if against is not None:
        from durastate.cli.versions import check_against

        check_against(session(ctx, against, definitions), validated, strict)


def _domains(specs: list[str]) -> dict[str, list[Any]]:
    """``--domain KEY=V1,V2`` options: each value read as JSON (``150``, ``true``, ``"x"``), else as text."""
    out: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not key or not values:
            raise UsageError(f"--domain {spec!r}: write KEY=V1,V2 (e.g. context.amount=0,150 or event.ok=true,false)")
        out.setdefault(key, []).extend(_json_or_text(v.strip()) for v in values.split(","))
    return out


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _print_exploration(result: Exploration, unseen: list[str], limit: int) -> None:
    bound = "all of them" if result.complete else f"the bound of {limit} reached: raise --explore to see more"
    plural = "s" if result.configurations != 1 else ""
    output.say(Text(f"    explored {result.configurations} configuration{plural} ({bound})",
                    style="red" if result.findings else "green"))
    cov = result.coverage
    whole = not cov.never_reached and not cov.never_taken
    output.say(Text(f"    {cov.describe()}", style="green" if whole else "yellow"))
    for finding in result.findings:
        output.say(Text(f"    {finding.describe()}", style="red"))
    if any(f.kind == "failure" for f in result.findings):
        output.say(Text("    hint: an execution that takes these steps fails the same way; fix the definition "
                        "(a default in its context, a guard that checks the value first), or give the values that "
                        "can really come with --domain context.KEY=… / event.KEY=…", style="yellow"))
    if unseen:
        hint = " ".join(f"--domain event.{k}=…" for k in unseen)
        output.say(Text(f"    note: guards compare $event.{', $event.'.join(unseen)} with no constant and no --domain "
                        f"gives values for it; transitions that need them may not have been tried ({hint})",
                        style="yellow"))


def _exploration_json(result: Exploration, unseen: list[str]) -> dict[str, Any]:
    return {"configurations": result.configurations, "complete": result.complete,
            "findings": [{"kind": f.kind, "active_path": f.active_path, "events": list(f.events),
                          "detail": f.detail} for f in result.findings],
            "coverage": {"states": len(result.coverage.states),
                         "states_reached": len(result.coverage.reached & set(result.coverage.states)),
                         "transitions": len(result.coverage.transitions),
                         "transitions_taken": len(result.coverage.taken & set(result.coverage.transitions)),
                         "never_reached": result.coverage.never_reached,
                         "never_taken": result.coverage.never_taken},
            "undomained_event_keys": unseen}


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
        if state.invoke is not None and state.invoke.definition is not None:  # (a task names no definition)
            found.append((where, state.invoke.definition))
        if state.map is not None and state.map.invoke.definition is not None:
            found.append((f"{where}.map", state.map.invoke.definition))
        found.extend(_invokes(state.states, f"{where}.states"))
    return found


VIZ_FORMATS = ("mermaid", "svg", "png")
_SUFFIX_FORMAT = {".svg": "svg", ".png": "png", ".mmd": "mermaid", ".mermaid": "mermaid", ".md": "mermaid"}


def viz(
    ctx: typer.Context,
    source: Annotated[str | None, typer.Argument(
        metavar="FILE", help="A definition file, or the id of a definition in the definitions folder. "
                             "Default with --execution: that execution's definition.")] = None,
    execution: Annotated[str | None, typer.Option(
        "--execution", "-e", metavar="ID", help="Mark the active state(s) of this execution, coloured by its "
                                                "status.")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", help="mermaid, svg or png. Default: from --output's suffix "
                                                 "(.svg, .png), else mermaid.")] = None,
    markdown: Annotated[bool, typer.Option(
        "--markdown", "-m", help="Mermaid only: wrap in a ```mermaid fence, ready to paste into GitHub.")] = False,
    out: Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE",
                                             help="Write to FILE instead of stdout (needed for png).")] = None,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Draw a definition: Mermaid stateDiagram-v2 text (renders on GitHub), or an SVG or PNG picture."""
    from durastate.viz import to_markdown, to_mermaid

    kind = _viz_format(fmt, out)
    if markdown and kind != "mermaid":
        raise UsageError(f"--markdown wraps Mermaid text; it does not apply to --format {kind}")
    if kind == "png" and out is None:
        raise UsageError("a PNG is binary: write it to a file with --output FILE.png (or use --format svg)")
    sess = session(ctx, store, definitions)
    active: list[str] = []
    exe: Execution | None = None
    child_status: dict[str, str] = {}
    if execution is not None:
        exe = sess.store.load(execution)
        if exe is None:
            raise UnknownExecution(execution)
        if source is not None:
            defn = _definition(sess, source)
        else:
            from durastate.cli.versions import definition_of

            defn = definition_of(sess, exe)  # the version it runs on
        if exe.definition_id != defn.id:
            raise UsageError(f"execution {execution} runs definition {exe.definition_id!r}, not {defn.id!r}")
        active = active_paths(exe, sess.store.load)
        for cid in exe.children:
            child = sess.store.load(cid)
            if child is not None:
                child_status[cid] = child.status
    elif source is not None:
        defn = _definition(sess, source)
    else:
        raise UsageError("name a definition FILE (or id), or an --execution ID")
    status = exe.status if exe is not None else "running"
    data: str | bytes
    if kind == "mermaid":
        data = (to_markdown if markdown else to_mermaid)(defn, active, status)
    elif kind == "svg":
        from durastate.render import statechart_svg

        data = statechart_svg(defn, exe, child_status, active=active)
    else:
        from durastate.render import statechart_png

        data = statechart_png(defn, exe, child_status, active=active)
    if out is not None:
        try:
            if isinstance(data, bytes):
                out.write_bytes(data)
            else:
                out.write_text(data, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc.strerror or exc} (does its folder exist, and may you "
                             "write there?)") from None
        output.note(f"wrote {out}")
    else:
        assert isinstance(data, str)
        output.console.file.write(data)


def _viz_format(fmt: str | None, out: Path | None) -> str:
    if fmt is not None:
        kind = fmt.strip().lower()
        if kind not in VIZ_FORMATS:
            raise UsageError(f"unknown --format {fmt!r}; use one of {', '.join(VIZ_FORMATS)}")
        return kind
    if out is not None:
        return _SUFFIX_FORMAT.get(out.suffix.lower(), "mermaid")
    return "mermaid"


def _definition(sess: Session, source: str) -> Definition:
    path = Path(source)
    if path.name.endswith(SUFFIXES) or path.exists():
        if not path.exists():
            raise UsageError(f"no such file: {source}")
        return load_file(path)
    defn: Definition = sess.registry.get(source)
    return defn
