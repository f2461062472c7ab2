"""Rich rendering for the ``durastate`` command: what a person reads at a glance.

Results go to stdout, diagnostics (errors, warnings, progress notes) to stderr, so a script can pipe
the result of a command and still see why it failed. Long lines are never wrapped: an error stays one
line however narrow the terminal. Every command that prints a table also has a ``--json`` form.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from durastate.cli import clock
from durastate.engine.durations import format_duration
from durastate.engine.ids import RESET, RESUME, RUN_TIMEOUT_PATH, SUSPEND, TERMINATE, describe_timer_key
from durastate.engine.model import CANCEL, ENDED, FINISHED, START, TIMEOUT, Event, Execution
from durastate.engine.progress import map_progress
from durastate.store import ExecutionSummary

_WIDTH = None if sys.stdout.isatty() else 160
"""Piped output (scripts, the demo, CI logs) is not squeezed into rich's 80-column default."""
console = Console(highlight=False, soft_wrap=True, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, width=_WIDTH)

STATUS_STYLE = {"running": "cyan", "suspended": "blue", "finished": "green", "failed": "red",
                "cancelled": "yellow", "terminated": "magenta", "purged": "dim"}


def error(message: str) -> None:
    err_console.print(Text.assemble(("error: ", "bold red"), message))


def warn(message: str) -> None:
    err_console.print(Text.assemble(("warning: ", "bold yellow"), message))


def note(message: str) -> None:
    err_console.print(Text(message, style="dim"))


def say(message: str | Text) -> None:
    """Print a result line. Plain strings are taken literally (ids and data may contain "[...]")."""
    console.print(Text(message) if isinstance(message, str) else message)


def _cells(*values: str | Text) -> list[Text]:
    """Table cells taken literally: rich would read "[...]" in a user's id as markup."""
    return [v if isinstance(v, Text) else Text(v) for v in values]


def print_json(value: Any) -> None:
    """Plain JSON on stdout (no colour, no wrapping): for ``jq`` and scripts."""
    console.file.write(json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


def status_text(status: str, outcome: str | None = None) -> Text:
    label = status if not outcome else f"{status} ({outcome})"
    return Text(label, style=STATUS_STYLE.get(status, ""))


def compact(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def when(epoch: float | None, now: float | None = None) -> str:
    """An absolute UTC time plus how far away it is ("2026-01-01 10:00:00Z, in 29s")."""
    if epoch is None:
        return "-"
    now = clock.now() if now is None else now
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(epoch))
    delta = epoch - now
    rel = f"in {format_duration(delta)}" if delta >= 0 else f"{format_duration(-delta)} ago"
    return f"{stamp}, {rel}"


# -- show ---------------------------------------------------------------------------------------------
def execution_json(exe: Execution, children: Sequence[Execution] = ()) -> dict[str, Any]:
    """``show --json``: the execution as stored, without its secret (the key of its task ids)."""
    data = exe.model_dump(mode="json", exclude={"secret"})
    if children:
        data["child_executions"] = [c.model_dump(mode="json", exclude={"secret"}) for c in children]
    return data


def show_execution(exe: Execution, children: Sequence[Execution] = (), now: float | None = None) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("execution", Text(exe.id, style="bold"))
    grid.add_row("definition", Text(exe.definition_id + (f" (version {exe.definition_version})"
                                                          if exe.definition_version else "")))
    grid.add_row("status", status_text(exe.status, exe.outcome))
    if exe.status == "purged":
        grid.add_row("purged", Text(f"ended {when(exe.ended_at, now)}, purged {when(exe.updated_at, now)}; only "
                                    "this tombstone is left, so a repeated start or a late event is still "
                                    f"recognised until it expires {when(exe.expires_at, now)}"))
    elif exe.ended_at is not None:
        grid.add_row("ended", when(exe.ended_at, now))
    if exe.error:
        grid.add_row("error", Text(exe.error, style="red"))
    if exe.reason and exe.status != "terminated":
        grid.add_row("reason", Text(exe.reason))
    if exe.status == "failed" and exe.failure is not None:
        ev = exe.failure.event
        grid.add_row("failed on", Text(f"{ev.name} (event {ev.id}) in state "
                                       f"{exe.failure.before.get('active_path') or '(start)'}; after the fix: "
                                       f"durastate redrive {exe.id}"))
    if exe.failure is not None and exe.failure.redrives:
        grid.add_row("redriven", Text(f"{exe.failure.redrives} time(s)"))
    if exe.retry is not None and exe.retry.attempt == 0:
        grid.add_row("redriving", Text(f"{exe.retry.event.name} is on its way back through the outbox (event "
                                       f"{exe.retry.event.id}); later events wait for it"))
    elif exe.retry is not None:
        grid.add_row("retrying", Text(f"{exe.retry.event.name} (attempt {exe.retry.attempt} failed: "
                                      f"{exe.retry.error}); next attempt {when(exe.retry.fire_at, now)}"))
    if exe.held:
        names = ", ".join(e.name for e in exe.held[:5]) + (", …" if len(exe.held) > 5 else "")
        grid.add_row("held", Text(f"{len(exe.held)} event(s) waiting: {names}"))
    grid.add_row("active", active_text(exe, children))
    for path, progress in exe.maps.items():
        grid.add_row("map", Text(map_progress(path, progress, ended=exe.status in ENDED)))
    if exe.parent_id:
        grid.add_row("parent", Text(f"{exe.parent_id}" + (f" (as {exe.child_id})" if exe.child_id else "")))
    if exe.root_path:
        grid.add_row("region", Text(exe.root_path))
    grid.add_row("version", str(exe.version))
    if exe.updated_at:
        grid.add_row("updated", when(exe.updated_at, now))
    console.print(grid)
    console.print(Text("context", style="bold"))
    console.print(Text(json.dumps(exe.context, indent=2, default=str) if exe.context else "  {}"))
    if exe.timers:
        table = Table(title=None, show_edge=False, pad_edge=False, box=None, header_style="bold")
        table.add_column("armed timer")
        table.add_column("fires")
        for path, fire_at in sorted(exe.timers.items(), key=lambda kv: kv[1]):
            table.add_row(*_cells(describe_timer_key(path), when(fire_at, now)))
        console.print(table)
    else:
        console.print(Text.assemble(("timers", "bold"), "   none armed"))
    if exe.children:
        by_id = {c.id: c for c in children}
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        table.add_column("child")
        table.add_column("kind")
        table.add_column("state")
        table.add_column("status")
        table.add_column("active")
        for cid, ref in exe.children.items():
            child = by_id.get(cid)
            status = child.status if child else ref.status
            outcome = child.outcome if child else ref.outcome
            if ref.kind == "task" and ref.heartbeat_at is not None:  # a task's progress: its last heartbeat
                active = f"heartbeat {when(ref.heartbeat_at, now)}: {compact(ref.heartbeat, 60)}"
            elif child and child.active_path:
                active = relative(child.active_path, ref.path)
            else:
                active = "-"
            table.add_row(*_cells(cid, ref.kind, ref.path, status_text(status, outcome), active))
        console.print(table)


def active_text(exe: Execution, children: Sequence[Execution] = ()) -> Text:
    """The active configuration: the leaf, or for a parallel state each running region's leaf (the leaves
    of an inline parallel state are the execution's own)."""
    idle = "(purged: no state kept)" if exe.status == "purged" else "(not started)"
    text = Text(exe.active_path or idle, style="bold magenta")
    if exe.leaves:
        text.append("  { ")
        text.append(" | ".join(relative(leaf, exe.active_path) for leaf in exe.leaves), style="magenta")
        text.append(" }")
    running = [c for c in children if c.parent_id == exe.id and c.child_id in exe.children
               and exe.children[c.child_id].kind == "region"]
    if running:
        text.append("  { ")
        for i, child in enumerate(running):
            if i:
                text.append(" | ")
            text.append(relative(child.active_path or child.root_path or "?", exe.active_path),
                        style="magenta")
        text.append(" }")
    return text


def relative(path: str, scope: str | None) -> str:
    """``path`` without the ``scope.`` prefix (a region's leaf, shown under its region)."""
    if scope and path.startswith(scope + "."):
        return path[len(scope) + 1:]
    return path


# -- list ---------------------------------------------------------------------------------------------
def summary_json(s: ExecutionSummary) -> dict[str, Any]:
    return {"id": s.id, "definition_id": s.definition_id, "status": s.status, "outcome": s.outcome,
            "active_path": s.active_path, "parent_id": s.parent_id, "version": s.version,
            "created_at": s.created_at, "updated_at": s.updated_at}


def list_executions(items: Iterable[ExecutionSummary]) -> None:
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("id", "definition", "status", "active", "parent", "version", "created", "updated"):
        table.add_column(col, justify="right" if col == "version" else "left")
    count = 0
    for s in items:
        count += 1
        table.add_row(*_cells(s.id, s.definition_id, status_text(s.status, s.outcome), s.active_path or "-",
                              s.parent_id or "", str(s.version), _local(s.created_at), _local(s.updated_at)))
    if count:
        console.print(table)
    else:
        note("no executions match")


def _local(epoch: float | None) -> str:
    """A listing's time: local, to the second (``-`` when unknown)."""
    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def describe_event(event: Event) -> str:
    """A short, human name for an event, reserved ones included (``start (order)``, ``timeout (paying)``)."""
    data = event.data
    if event.name == START:
        return f"start ({data.get('definition_id', '?')})"
    if event.name == TIMEOUT:
        if data.get("path") == RUN_TIMEOUT_PATH:
            return "run timeout"
        return f"timeout ({data.get('path', '?')})"
    if event.name == FINISHED:
        what = "task" if "task_id" in data else "child"  # (a task's answer: durastate.engine.tasks)
        return f"{what} {data.get('child_id', '?')} {data.get('status', 'finished')}"
    if event.name in _CONTROL:
        reason = data.get("reason")
        return _CONTROL[event.name] + (f" ({reason})" if reason else "")
    return event.name


_CONTROL = {CANCEL: "cancel", SUSPEND: "suspend", RESUME: "resume", TERMINATE: "terminate", RESET: "reset"}
