"""``durastate send --dry-run / --explain``, and the "did you mean" of ``send``: what an event would do.

The answers come from the engine (:mod:`durastate.engine.explain`): the candidates in the interpreter's own
selection order, and a step of a detached copy of the stored execution by the real ``step``. Nothing is
queued, committed or written. A dry run sees the execution as stored: events already queued for it and not
yet applied by ``durastate serve`` are not applied first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text

from durastate.cli import output
from durastate.engine.definition import Definition
from durastate.engine.durations import format_duration
from durastate.engine.explain import Explanation, explain, preview
from durastate.engine.expressions import did_you_mean
from durastate.engine.model import RESERVED_PREFIX, Event, Execution
from durastate.viz import guard_text

__all__ = ["active_event_names", "print_dry_run", "print_explanation", "warn_if_unhandled_now"]

Load = Callable[[str], Execution | None]


def _regions(exe: Execution, load: Load) -> list[Execution]:
    """The running region children of ``exe`` (where an event it does not handle goes)."""
    out = []
    for cid, ref in exe.children.items():
        if ref.kind == "region" and ref.status == "running":
            child = load(cid)
            if child is not None:
                out.append(child)
    return out


def explanations(defn: Definition, exe: Execution, event: Event, load: Load,
                 depth: int = 4) -> list[tuple[Execution, Explanation]]:
    """``exe``'s explanation, then (when it forwards the event) each running region's, depth first."""
    found = explain(defn, exe, event)
    out = [(exe, found)]
    if found.forwarded and depth > 0:
        for child in _regions(exe, load):
            out.extend(explanations(defn, child, event, load, depth - 1))
    return out


def active_event_names(defn: Definition, exe: Execution, load: Load) -> set[str]:
    """The event descriptors that some transition of the active configuration listens to (regions too)."""
    t = defn.tables
    names: set[str] = set()
    for path in exe.leaves or [exe.active_path or ""]:  # every leaf of an inline parallel state
        leaf = t.index.get(path, -1)
        if leaf > 0:
            names.update(k for k in t.handlers[leaf] if not k.startswith(RESERVED_PREFIX))
    leaf = t.index.get(exe.active_path or "", -1)
    if leaf > 0 and t.kind[leaf] == "parallel":
        for child in _regions(exe, load):
            names |= active_event_names(defn, child, load)
    return names


def warn_if_unhandled_now(defn: Definition, exe: Execution, event: Event, load: Load) -> None:
    """A warning (the event is still sent) when no transition of the active configuration matches it: it
    may be meant for a later state, or be a typo of one the active states do handle."""
    if exe.status != "running" or exe.active_path is None or event.name.startswith(RESERVED_PREFIX):
        return
    found = explanations(defn, exe, event, load)
    if any(e.candidates for _, e in found):
        return
    now = active_event_names(defn, exe, load)
    hint = did_you_mean(event.name, now)
    listed = ", ".join(sorted(now)) or "none"
    output.warn(f"no transition of the active state {exe.active_path} (or above it) handles {event.name!r} now"
                f"{hint}; it handles: {listed}. Sending anyway: a later state may take it")


def _guard_cell(value: bool | None, error: str | None, guard: Any) -> Text:
    if error is not None:
        return Text(f"error: {error}", style="red")
    if guard is None:
        return Text("(no guard)", style="dim")
    return Text(str(value).lower(), style="green" if value else "yellow")


def print_explanation(found: list[tuple[Execution, Explanation]]) -> None:
    """The candidates of each execution in selection order, each guard's value, and what happens."""
    from rich.table import Table

    for exe, e in found:
        output.say(Text.assemble(("explain ", "bold"), (e.event, "bold"), f" in {exe.id} (active: ",
                                 output.active_text(exe) if e.active else ("none", "magenta"), f", {e.status})"))
        if e.candidates:
            table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
            for col in ("#", "state", "on", "target", "guard", "value", ""):
                table.add_column(col)
            for k, c in enumerate(e.candidates, 1):
                mark = Text("← taken", style="bold green") if c.taken else (
                    Text("(not reached)", style="dim") if not c.reached else Text(""))
                table.add_row(str(k), Text(c.source), Text(c.event), Text(c.target or "(targetless)"),
                              Text(guard_text(c.guard) if c.guard is not None else "-"),
                              _guard_cell(c.value, c.error, c.guard), mark)
            output.console.print(table)
        output.say(Text.assemble(("→ ", "bold"), e.outcome))


def _when(fire_at: float, now: float) -> str:
    local = time.strftime("%H:%M:%S", time.localtime(fire_at))
    return f"fires in {format_duration(max(0.0, fire_at - now))} (at {local})"


def print_dry_run(defn: Definition, exe: Execution, event: Event, now: float, load: Load | None = None,
                  depth: int = 4) -> None:
    """Step a copy of ``exe`` with ``event`` now and print what the step would do (nothing is stored); an
    event it forwards to its running regions is dry-run there too (``load`` reads them)."""
    p = preview(defn, exe, event, now)
    res, after = p.result, p.after
    say = output.say
    say(Text.assemble(("dry run ", "bold"), (event.name, "bold"), f" → {exe.id} (nothing is sent or stored)"))
    if exe.status == "suspended":
        say("  suspended: serve holds the event until `durastate resume`; this is what it does then")
    if res.retry is not None:
        say(Text(f"  a call failed and would be retried: {res.retry}", style="yellow"))
        return
    if res.ignored:
        say(Text("  ignored: no transition takes it here (the event is consumed, nothing changes)", style="yellow"))
    for tr in p.transitions:
        by = "always" if tr.get("always") else (f"after[{tr['after']}]" if "after" in tr else tr.get("event", ""))
        target = tr["target"] if tr["target"] is not None else "(targetless: actions only)"
        say(Text.assemble("  transition  ", (tr["source"], "magenta"), " → ", (target, "magenta"), f"  ({by})"))
    for line in res.logs:
        say(Text(f"  log         {line}", style="cyan"))
    for target, ev in res.emits:
        say(f"  emit        {ev.name} → {target or 'the notification sink'}")
    for op in res.timers:
        if op.action == "schedule":
            say(f"  timer       arm {op.path}: {_when(op.fire_at, now)}")
        else:
            say(f"  timer       cancel {op.path}")
    for cid, root, _ in res.spawns:
        say(f"  spawn       {cid} (region {root})")
    moved = f"{exe.active_path or '∅'} → {after.active_path or '∅'}"
    say(Text.assemble("  active      ", (moved, "magenta")))
    if after.status != "running" or exe.status != after.status:
        say(Text.assemble("  status      ", output.status_text(after.status, after.outcome)))
    if after.error:
        say(Text(f"  error       {after.error}", style="red"))
    changed = [k for k in dict.fromkeys([*exe.context, *after.context])
               if exe.context.get(k, _MISSING) != after.context.get(k, _MISSING)]
    if changed:
        parts = [f"{k}: {output.compact(exe.context.get(k), 30)} → {output.compact(after.context.get(k), 30)}"
                 for k in changed]
        say("  context     " + ", ".join(parts))
    else:
        say(Text("  context     unchanged", style="dim"))
    if load is None or depth <= 0:
        return
    for target, ev in res.emits:
        ref = exe.children.get(target or "")
        if ref is not None and ref.kind == "region" and ev.name == event.name:
            child = load(target or "")
            if child is not None:
                print_dry_run(defn, child, ev, now, load, depth - 1)


_MISSING = object()
