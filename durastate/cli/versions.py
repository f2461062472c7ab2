"""Commands about definition versions: ``versions list`` and ``migrate``.

A running execution keeps running on the version of its definition it started on; these commands show
which versions are still in use and move running executions from one version to another, renaming the
states they sit in (``--map old.path=new.path``). ``validate --against`` (in :mod:`durastate.cli.definitions`)
is the deploy gate that tells, before a deploy, which running executions a change would strand.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from durastate.cli import clock, output
from durastate.cli.common import DefinitionsOption, JsonOption, StoreOption, session
from durastate.cli.session import Session, UsageError
from durastate.engine.definition import Definition
from durastate.engine.migration import mapping_issues, parse_mapping
from durastate.engine.model import Execution
from durastate.engine.versions import definition_version
from durastate.store.definitions import list_versions, load_version
from durastate.store.migration import (
    UNVERSIONED,
    Candidate,
    DeployCheck,
    candidates,
    deploy_check,
    migrate_executions,
    pinned_executions,
    stranded_refusal,
)

versions_app = typer.Typer(
    name="versions", no_args_is_help=True, rich_markup_mode="rich",
    help="The versions of a definition that executions run on: list them (`durastate migrate` moves them).")


def register(app: typer.Typer) -> None:
    app.add_typer(versions_app, name="versions")
    app.command("migrate")(migrate)


def _newest(sess: Session, definition_id: str) -> Definition | None:
    """The definitions folder's version of ``definition_id`` (what new executions start on), if any."""
    if sess.definitions_dir is None:
        return None
    registry = sess.registry
    return registry.get(definition_id) if definition_id in registry else None


@versions_app.command("list")
def list_(
    ctx: typer.Context,
    definition: Annotated[str, typer.Argument(metavar="DEFINITION", help="The definition id.")],
    as_json: JsonOption = False,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """The versions of DEFINITION: archived in the store, the definitions folder's (newest), and how many
    running or suspended executions are on each."""
    sess = session(ctx, store, definitions)
    archived = list_versions(sess.store, definition)
    newest = _newest(sess, definition)
    newest_version = definition_version(newest) if newest is not None else None
    counts = Counter(exe.definition_version or UNVERSIONED for exe in pinned_executions(sess.store, definition))
    rows: list[dict[str, Any]] = [{"version": v.version, "archived_at": v.archived_at, "archived": True}
                                  for v in archived]
    if newest_version is not None and newest_version not in {r["version"] for r in rows}:
        rows.append({"version": newest_version, "archived_at": None, "archived": False})
    if counts.get(UNVERSIONED):
        rows.insert(0, {"version": UNVERSIONED, "archived_at": None, "archived": False})
    for row in rows:
        row["newest"] = row["version"] == newest_version
        row["running"] = counts.get(row["version"], 0)
    # Oldest first, the folder's newest last: also when it was archived in the same second as the one before.
    rows.sort(key=lambda row: row["newest"])
    if not rows:
        raise UsageError(f"no versions of {definition!r}: none archived in the store (no execution started on "
                         "it yet) and no such definition in the definitions folder")
    if as_json:
        output.print_json(rows)
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("version", "archived", "running", ""):
        table.add_column(col, justify="right" if col == "running" else "left")
    for row in rows:
        archived_at = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(row["archived_at"])) \
            if row["archived_at"] is not None else "-"
        mark = Text("newest (definitions folder)", style="green") if row["newest"] else Text(
            "started before versions were recorded" if row["version"] == UNVERSIONED else "")
        table.add_row(Text(row["version"]), Text(archived_at), Text(str(row["running"])), mark)
    output.console.print(table)


def migrate(
    ctx: typer.Context,
    definition: Annotated[str, typer.Option("--definition", metavar="DEFINITION", help="The definition id.")],
    from_version: Annotated[str, typer.Option(
        "--from", metavar="VERSION",
        help=f"Move the executions on this version (`{UNVERSIONED}`: those started before versions were "
             "recorded).")],
    to_version: Annotated[str | None, typer.Option(
        "--to", metavar="VERSION", help="The version to move them to. Default: the definitions folder's.")] = None,
    maps: Annotated[list[str] | None, typer.Option(
        "--map", metavar="OLD=NEW",
        help="Where a state went: old.path=new.path (its descendants follow). Repeat for each state.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Show the executions and what would change; change nothing.")] = False,
    ids: Annotated[list[str] | None, typer.Option(
        "--id", metavar="EXECUTION",
        help="Move only this execution (repeat for each); it must be on --from and running or suspended.")] = None,
    statuses: Annotated[list[str] | None, typer.Option(
        "--status", metavar="STATUS",
        help="Move only the executions in this status: running or suspended (repeat for both; default both).")
    ] = None,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Move the running (and suspended) executions of DEFINITION from one version to another (or only
    those --id names, or only those in a --status).

    Each execution moves in one commit: its active state, history and armed timers are renamed through
    --map (a state not mapped keeps its path), and its trace says so. If any execution sits in a state
    the target version lacks and no --map covers, nothing is moved and the executions are listed.
    """
    sess = session(ctx, store, definitions)
    try:
        mapping = parse_mapping(maps or [])
    except ValueError as err:
        raise UsageError(str(err)) from None
    new = _resolve(sess, definition, to_version)
    new_version = definition_version(new)
    if from_version == new_version:
        raise UsageError(f"--from and --to are both {new_version}: nothing to migrate")
    old = None if from_version == UNVERSIONED else _find(sess, definition, from_version)
    issues = mapping_issues(mapping, old, new)
    if issues:
        raise UsageError("; ".join(issues))
    found = candidates(sess.store, definition, from_version, old, new, mapping, ids=ids, statuses=statuses)
    if from_version != UNVERSIONED and old is None:
        if not found and not ids and not statuses:  # nothing runs on it, nothing records it: a typo
            raise UsageError(f"no execution of {definition!r} runs on version {from_version} and the store has "
                             f"not archived it: see `durastate versions list {definition}`")
        output.warn(f"version {from_version} of {definition!r} is not archived in the store: the mapping is "
                    "checked against the target version only")
    stranded = [c for c in found if c.plan.unmapped]
    _show(found, dry_run)
    if stranded:
        _refuse(definition, from_version, new_version, stranded)
    if dry_run:
        output.say(f"dry run: {len(found)} execution(s) of {definition} would move from {from_version} to "
                   f"{new_version}; nothing changed")
        return
    done = migrate_executions(sess.store, definition, from_version, new, mapping, old=old,
                              ids=[c.execution.id for c in found], statuses=statuses,
                              clock=clock.command_clock()) if found else None
    for execution_id, why in (done.skipped.items() if done else ()):
        output.warn(f"{execution_id} not migrated: {why}")
    moved = len(done.moved) if done else 0
    output.say(f"migrated {moved} execution(s) of {definition} from {from_version} to {new_version}")


def _resolve(sess: Session, definition_id: str, version: str | None) -> Definition:
    """The target version: the definitions folder's by default, else the folder's or the archive's."""
    if version is None:
        newest = _newest(sess, definition_id)
        if newest is None:
            raise UsageError(f"no definition {definition_id!r} in the definitions folder: pass --to VERSION "
                             f"(see `durastate versions list {definition_id}`) or --definitions DIR")
        return newest
    found = _find(sess, definition_id, version)
    if found is None:
        raise UsageError(f"version {version} of {definition_id!r} is neither the definitions folder's nor archived "
                         f"in the store (see `durastate versions list {definition_id}`)")
    return found


def _find(sess: Session, definition_id: str, version: str) -> Definition | None:
    newest = _newest(sess, definition_id)
    if newest is not None and definition_version(newest) == version:
        return newest
    return load_version(sess.store, definition_id, version)


def _show(found: list[Candidate], dry_run: bool) -> None:
    if not found:
        output.note("no running or suspended execution is on that version")
    for c in found:
        exe, plan = c.execution, c.plan
        if plan.unmapped:
            continue
        head = Text.assemble((exe.id, "bold"), f"  {exe.status} in {exe.active_path or '-'}")
        output.say(head)
        for line in plan.changes or (["no path changes (only its version)"] if dry_run else []):
            output.say(f"    {line}")


def _refuse(definition: str, from_version: str, to_version: str, stranded: list[Candidate]) -> None:
    for c in stranded:
        output.say(Text.assemble((c.execution.id, "bold red"),
                                 f"  {c.execution.status} in {c.execution.active_path or '-'}: would be stranded "
                                 f"(no {', '.join(c.plan.unmapped)} in {to_version})"))
    raise stranded_refusal(definition, from_version, to_version, stranded)


def check_against(sess: Session, defns: list[Definition], strict: bool) -> None:
    """``validate --against``: fail (exit 1) if deploying ``defns`` would strand a running execution.

    Stranded: it would run on the new version (it records no version, or one the store's archive does
    not hold) and sits in a state the new version lacks. Executions pinned to an archived older version
    keep running on it and are listed for information (``--strict``: they fail too when moving them to
    the new version would need a ``--map``).
    """
    failing: list[tuple[Definition, DeployCheck]] = []
    for defn in defns:
        version = definition_version(defn)
        checks = deploy_check(sess.store, defn)
        for check in checks:
            exe, plan = check.execution, check.plan
            on = exe.definition_version or UNVERSIONED
            if check.stranded or (strict and plan.unmapped):
                failing.append((defn, check))
                why = "would be stranded" if check.stranded else "is pinned to a version it cannot leave"
                output.say(Text.assemble(("✗ ", "red"), (exe.id, "bold"),
                                         f"  {defn.id} {on} -> {version}: {why}: in {', '.join(plan.unmapped)}, "
                                         "which the new version does not have"))
            elif check.pinned:
                note = "; migrating it needs --map " + ", ".join(plan.unmapped) if plan.unmapped else ""
                output.say(Text.assemble(("• ", "cyan"), (exe.id, "bold"),
                                         f"  {defn.id}: keeps running on version {on}{note}"))
        if not any(d is defn for d, _ in failing):
            output.say(Text.assemble(("✓ ", "green"), (defn.id, "bold"), f"  version {version}: no running "
                                     f"execution stranded ({len(checks)} on other versions)"))
    if failing:
        hints: dict[str, None] = {}
        for defn, check in failing:
            on = check.execution.definition_version or UNVERSIONED
            maps = " ".join(f"--map {s}=<new path>" for s in check.plan.unmapped)
            hints[f"durastate migrate --definition {defn.id} --from {on} --to {definition_version(defn)} {maps}"] = None
        stranded = sum(1 for _, check in failing if check.stranded)
        what = [f"{stranded} running execution(s) would be stranded by this deploy"] if stranded else []
        if len(failing) > stranded:
            what.append(f"{len(failing) - stranded} pinned to an older version could not move to this one "
                        "without a --map (--strict)")
        output.error(f"{' and '.join(what)}; keep the old states, or move them: {'; '.join(hints)}")
        raise typer.Exit(1)


def definition_of(sess: Session, exe: Execution) -> Definition:
    """The version of its definition ``exe`` runs on (the folder's, or the store's archived copy)."""
    from durastate.runtime.versions import Versions

    return Versions(sess.store, sess.registry, clock.command_clock()).of(exe)
