"""``durastate schedules list | pause | resume | trigger | backfill | delete``: the schedules stored in a store.

Schedules are written in a ``schedules:`` file of the definitions folder; ``durastate serve`` stores them
when it starts (:func:`sync_definitions_schedules`) and its sweeps start their executions. These commands
read and change the stored ones, like the other commands over ``--store`` and ``--definitions``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from durastate.cli import clock, output
from durastate.cli.common import DefinitionsOption, JsonOption, StoreOption, session
from durastate.cli.session import Session, UsageError
from durastate.engine.definition import Definition, load_definition
from durastate.engine.durations import format_duration
from durastate.engine.registry import definition_files
from durastate.engine.schedules import ScheduleSpec, is_schedule_file, load_schedules
from durastate.errors import DefinitionError
from durastate.runtime.schedules import SyncReport, sync_schedules
from durastate.store.schedules import (
    ScheduleState,
    backfill_schedule,
    delete_schedule,
    get_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    trigger_schedule,
)

schedules_app = typer.Typer(
    name="schedules", no_args_is_help=True, rich_markup_mode="rich",
    help="Schedules that start executions (from a `schedules:` file in the definitions folder): list, pause, "
         "resume, trigger, backfill or delete them.")

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The schedule's name (its key under "
                                                                  "`schedules:`).")]


def register(app: typer.Typer) -> None:
    app.add_typer(schedules_app, name="schedules")


def definitions_schedules(sess: Session) -> dict[str, ScheduleSpec]:
    """The schedules of the session's definitions folder, checked against its definitions (``{}`` if the
    folder holds none); a :class:`~durastate.errors.ScheduleError` lists every issue."""
    folder = sess.definitions_dir
    if folder is None:
        return {}
    return load_schedules(definition_files(folder), sess.registry.ids())


def sync_definitions_schedules(sess: Session, now: float) -> SyncReport:
    """Store the definitions folder's schedules (what ``durastate serve`` does when it starts) and say what
    changed, one line."""
    report = sync_schedules(sess.store, definitions_schedules(sess), now)
    parts = [f"{label} {', '.join(names)}" for label, names in (
        ("added", report.created), ("updated", report.updated), ("removed", report.removed)) if names]
    if parts:
        output.note("schedules: " + "; ".join(parts))
    return report


@schedules_app.command("list")
def list_(
    ctx: typer.Context,
    show_all: Annotated[bool, typer.Option("--all", "-a", help="Also the schedules removed from the "
                                                                "definitions folder.")] = False,
    as_json: JsonOption = False,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """The stored schedules: what they start, when next, paused or not, and their last run."""
    sess = session(ctx, store, definitions)
    now = clock.now()
    states = list_schedules(sess.store, include_removed=show_all)
    if as_json:
        output.print_json([_json(s) for s in states])
        return
    if not states:
        output.note("no schedules stored: write them in a `schedules:` file of the definitions folder; "
                    "`durastate serve` stores them when it starts")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("name", "definition", "when", "next", "state", "last run"):
        table.add_column(col)
    for s in states:
        spec = s.spec
        state = Text("deleted" if s.deleted else "removed", style="dim") if s.removed else (
            Text("paused", style="yellow") if s.paused else Text("active", style="green"))
        table.add_row(Text(s.name), Text(spec.definition if spec else "?"),
                      Text(spec.expression() if spec else "(invalid spec)"), Text(_next(s, now)), state,
                      Text(s.last_execution_id or "-"))
    output.console.print(table)


@schedules_app.command("pause")
def pause(ctx: typer.Context, name: NameArgument, store: StoreOption = None,
          definitions: DefinitionsOption = None) -> None:
    """Start nothing more until resumed (the ticks meanwhile are missed)."""
    sess = session(ctx, store, definitions)
    pause_schedule(sess.store, name, clock.now())
    output.say(f"paused {name}: no executions start until `durastate schedules resume {name}`")


@schedules_app.command("resume")
def resume(ctx: typer.Context, name: NameArgument, store: StoreOption = None,
           definitions: DefinitionsOption = None) -> None:
    """Start executions again (catch_up: skip drops the ticks missed while paused; once runs one for them)."""
    sess = session(ctx, store, definitions)
    now = clock.now()
    state = resume_schedule(sess.store, name, now)
    output.say(f"resumed {name}: next {_next(state, now)}")


@schedules_app.command("trigger")
def trigger(ctx: typer.Context, name: NameArgument, store: StoreOption = None,
            definitions: DefinitionsOption = None) -> None:
    """Start one execution of the schedule now (besides its ticks; also while paused)."""
    sess = session(ctx, store, definitions)
    execution_id = trigger_schedule(sess.store, name, clock.now())
    output.say(f"triggered {name}: started {execution_id}, `durastate serve` applies it")


@schedules_app.command("backfill")
def backfill(
    ctx: typer.Context,
    name: NameArgument,
    from_: Annotated[str, typer.Option("--from", metavar="TIME", help="The first tick to start (ISO 8601, e.g. "
                                       "2026-03-01T00:00; read in the schedule's timezone unless it has an "
                                       "offset).")],
    to: Annotated[str, typer.Option("--to", metavar="TIME", help="The last tick to start (at most now).")],
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Start the schedule's ticks from --from to --to (both included) that have no execution yet: each
    once, as the execution the tick would have started. Ticks already run are skipped; running it again
    starts nothing more."""
    sess = session(ctx, store, definitions)
    state = get_schedule(sess.store, name)
    if state.spec is None:
        raise UsageError(f"schedule {name}'s stored spec does not validate: sync it from the definitions folder "
                         "(`durastate serve`) first")
    start, end = (_instant(state.spec, option, text) for option, text in (("--from", from_), ("--to", to)))
    done = backfill_schedule(sess.store, name, start, end, clock.now())
    skipped = f"; {len(done.existing)} already ran" if done.existing else ""
    output.say(f"backfilled {name}: started {len(done.started)} tick(s){skipped}"
               + (", `durastate serve` applies them" if done.started else ""))
    for eid in done.started:
        output.say(f"    {eid}")


@schedules_app.command("delete")
def delete(ctx: typer.Context, name: NameArgument, store: StoreOption = None,
           definitions: DefinitionsOption = None) -> None:
    """Stop the schedule for good: its timer is cancelled, no tick fires again (its record and the executions
    it started stay readable). Remove it from the `schedules:` file too, or the next `serve` stores it again."""
    sess = session(ctx, store, definitions)
    delete_schedule(sess.store, name, clock.now())
    try:
        still = name in definitions_schedules(sess)
    except DefinitionError:  # an invalid folder: `serve` would refuse it anyway
        still = False
    output.say(f"deleted {name}: its timer is cancelled, no tick starts again"
               + ("; it is still in the definitions folder's `schedules:` file, remove it there or the next "
                  "`durastate serve` stores it again" if still else ""))


def _instant(spec: ScheduleSpec, option: str, text: str) -> float:
    try:
        return spec.instant(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not an ISO 8601 time; write e.g. 2026-03-01T09:00 (in the "
                         "schedule's timezone) or 2026-03-01T09:00+01:00") from None


def check_schedule_files(paths: Sequence[Path], loaded: Sequence[tuple[Path, Definition]]
                         ) -> list[tuple[Path, list[str], list[str]]]:
    """``durastate validate`` of schedules files: (file, schedule names, issues) each. A schedule's definition
    must be among the definitions of its folder: those checked with it, else the folder's files."""
    out: list[tuple[Path, list[str], list[str]]] = []
    for path in paths:
        folder = path.resolve().parent
        known = {d.id for p, d in loaded if p.resolve().parent == folder} or _folder_ids(folder)
        try:
            names = sorted(load_schedules([path], known))
        except DefinitionError as exc:
            out.append((path, [], [i.removeprefix(f"{path.name}: ") for i in exc.issues]))
        else:
            out.append((path, names, []))
    return out


def _folder_ids(folder: Path) -> set[str]:
    ids: set[str] = set()
    for path in definition_files(folder):
        if not is_schedule_file(path):
            with contextlib.suppress(DefinitionError):
                ids.add(load_definition(path).id)
    return ids


def print_schedule_files(checked: Sequence[tuple[Path, list[str], list[str]]]) -> None:
    for path, names, issues in checked:
        if not issues:
            output.say(Text.assemble(("✓ ", "green"), (str(path), "bold"),
                                     f"  {len(names)} schedule{'s' if len(names) != 1 else ''} ({', '.join(names)})"))
            continue
        output.say(Text.assemble(("✗ ", "red"), (str(path), "bold"),
                                 f"  {len(issues)} issue{'s' if len(issues) != 1 else ''}"))
        for issue in issues:
            output.say(Text(f"    {issue}", style="red"))


def schedule_file_json(path: Path, names: list[str], issues: list[str]) -> dict[str, Any]:
    return {"file": str(path), "id": None, "schedules": names, "valid": not issues, "issues": issues,
            "warnings": []}


def _next(s: ScheduleState, now: float) -> str:
    """The next tick in the schedule's own time zone, and how far away it is."""
    if s.removed or s.paused or s.next_tick is None or s.spec is None:
        return "-"
    zone = s.spec.zone if s.spec.cron is not None else UTC
    stamp = datetime.fromtimestamp(s.next_tick, zone).strftime("%Y-%m-%d %H:%M %Z")
    delta = s.next_tick - now
    rel = f"in {format_duration(delta)}" if delta >= 0 else f"due {format_duration(-delta)} ago"
    return f"{stamp} ({rel})"


def _json(s: ScheduleState) -> dict[str, Any]:
    return {"name": s.name, "spec": s.spec.to_dict() if s.spec else s.record.context.get("spec"),
            "paused": s.paused, "removed": s.removed, "deleted": s.deleted, "next_tick": s.next_tick,
            "last_tick": s.last_tick,
            "last_execution_id": s.last_execution_id, "last_started_at": s.last_started_at}
