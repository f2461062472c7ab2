"""How ``durastate trace`` prints an execution's steps: a timeline a person reads top to bottom.

One line per step — local time (``HH:MM:SS.mmm``; the date on a line of its own whenever it changes),
the step's index, the event's name and id, ``from → to``, and the status when it is not ``running`` —
then one indented line for each of what the step did: the context keys it changed (``old → new``), the
events it emitted, the timers it armed or disarmed, the children it spawned, the transitions it took.
The step format is described in ``docs/trace.md``; steps recorded before a field existed simply lack it,
and print without it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from rich.text import Text

from durastate.cli import clock as cli_clock
from durastate.cli.output import STATUS_STYLE, compact
from durastate.engine.durations import format_duration

__all__ = ["TraceView", "local_stamp", "local_when"]

_RESERVED_NAMES = {"durastate.start": "start", "durastate.timeout": "timeout", "durastate.finished": "child finished",
                   "durastate.cancel": "cancel", "durastate.suspend": "suspend", "durastate.resume": "resume",
                   "durastate.terminate": "terminate", "durastate.catch": "catch",
                   "durastate.heartbeat": "task heartbeat"}

_SHOWN = {"index", "event", "event_id", "from", "to", "ignored", "status", "outcome", "error", "log", "at",
          "data", "data_cut", "context", "context_cut", "emits", "emits_cut", "timers", "timers_cut", "spawns",
          "spawns_cut", "transitions", "steps",
          # What a kept history adds for the replay check (durastate.engine.tracing): not for reading.
          "data_full", "context_full", "emits_digest", "seed"}
"""Fields the timeline prints in their own way; any other field (a control record's ``reason``, a retry's
``attempt``) is printed as ``key=value`` at the end of the step's line."""


def local_stamp(epoch: float) -> str:
    """``2026-01-31 17:00:00`` in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def local_when(epoch: float | None, now: float | None = None) -> str:
    """A local time and how far away it is: ``2026-01-31 17:00:00 (in 2d 3h)`` / ``(… 15m ago)``."""
    if epoch is None:
        return "-"
    now = cli_clock.now() if now is None else now
    delta = epoch - now
    span = format_duration(round(abs(delta))) if abs(delta) >= 1 else "now"
    rel = span if span == "now" else (f"in {span}" if delta >= 0 else f"{span} ago")
    return f"{local_stamp(epoch)} ({rel})"


class TraceView:
    """Renders steps one after another, remembering the date last printed (``--follow`` keeps one)."""

    def __init__(self, show_ids: bool = True, now: float | None = None) -> None:
        self.show_ids = show_ids
        self.now = now
        self._date: str | None = None

    def render(self, step: Mapping[str, Any]) -> list[Text]:
        """The lines of one step (a date line first when the day changed since the last step)."""
        lines: list[Text] = []
        at = step.get("at")
        clock = " " * 12
        if isinstance(at, int | float):
            local = time.localtime(at)
            date = time.strftime("%Y-%m-%d", local)
            if date != self._date:
                self._date = date
                lines.append(Text(f"── {date} ──", style="dim"))
            clock = time.strftime("%H:%M:%S", local) + f".{int(at * 1000) % 1000:03d}"
        lines.append(self._headline(step, clock))
        lines.extend(self._details(step))
        for inner in step.get("steps") or []:  # a resume (or a retry that went through) and what it released
            if isinstance(inner, Mapping):
                lines.append(Text(" " * 14 + "then ", style="dim") + self._headline(inner, ""))
                lines.extend(self._details(inner))
        return lines

    def _headline(self, step: Mapping[str, Any], clock: str) -> Text:
        line = Text()
        if clock:
            line.append(clock + "  ", style="dim")
        index = step.get("index")
        if clock or index is not None:
            line.append(f"#{index:<3} " if isinstance(index, int) else "#?   ", style="dim")
        name = step.get("event")
        if isinstance(name, Mapping):  # tolerate an event written as an object
            name = name.get("name")
        line.append(f"{_RESERVED_NAMES.get(str(name), str(name or '?')):<16}", style="bold")
        if self.show_ids and step.get("event_id"):
            line.append(f" ({step['event_id']})", style="dim")
        before, after = step.get("from"), step.get("to")
        if step.get("ignored"):
            line.append(f" {before or '-'}  (ignored: nothing handles it here)", style="dim")
        else:
            line.append(f" {before or '∅'} → ")
            line.append(str(after or "∅"), style="magenta")
        status = step.get("status")
        if status and status != "running":
            label = f"{status} ({step['outcome']})" if step.get("outcome") else str(status)
            line.append("  ")
            line.append(label, style=STATUS_STYLE.get(str(status), ""))
        if step.get("error"):
            line.append(f"  error: {step['error']}", style="red")
        for message in step.get("log") or []:
            line.append(f"  log: {message}", style="cyan")
        extras = {k: v for k, v in step.items() if k not in _SHOWN and v not in (None, [], {}, "", False)}
        if extras:
            line.append("  " + " ".join(f"{k}={compact(v, 60)}" for k, v in extras.items()), style="dim")
        return line

    def _details(self, step: Mapping[str, Any]) -> list[Text]:
        pad = " " * 14
        out: list[Text] = []
        if "data" in step:
            data = step["data"]
            if step.get("data_cut") and isinstance(data, str):  # the JSON text, cut where the step cut it
                shown = (data[:99] + "…") if len(data) > 100 else data
                out.append(Text(f"{pad}data: {shown} (cut: {len(data)}+ characters)", style="dim"))
            else:
                out.append(Text(f"{pad}data: {compact(data, 100)}", style="dim"))
        for key, change in (step.get("context") or {}).items():
            old, new = change if isinstance(change, list) and len(change) == 2 else (None, change)
            out.append(Text(f"{pad}context.{key}: {compact(old, 50)} → {compact(new, 50)}"))
        if step.get("context_cut"):
            out.append(Text(f"{pad}context: (more changes, or values cut)", style="dim"))
        for e in step.get("emits") or []:
            target = e.get("target") or "(notification)"
            eid = f" ({e.get('id')})" if self.show_ids else ""
            out.append(Text(f"{pad}emit {e.get('name')} → {target}{eid}", style="cyan"))
        for tm in step.get("timers") or []:
            if tm.get("action") == "schedule":
                fires = local_when(tm.get("fire_at"), self._at(step))
                out.append(Text(f"{pad}timer {tm.get('path')} armed: fires {fires}", style="yellow"))
            else:
                out.append(Text(f"{pad}timer {tm.get('path')} disarmed", style="yellow"))
        for sp in step.get("spawns") or []:
            out.append(Text(f"{pad}spawn {sp.get('child_id')} (region {sp.get('path')})", style="cyan"))
        for name in ("emits", "timers", "spawns"):
            if step.get(f"{name}_cut"):
                out.append(Text(f"{pad}… {step[f'{name}_cut']} more {name}", style="dim"))
        for tr in step.get("transitions") or []:
            why = ("always" if tr.get("always") else f"after #{tr['after']}" if "after" in tr
                   else f"on {tr.get('event')}")
            target = tr.get("target")
            target = "(internal)" if target is None else target or "(root)"
            out.append(Text(f"{pad}transition {tr.get('source') or '(root)'} → {target} [{why}]", style="dim"))
        return out

    def _at(self, step: Mapping[str, Any]) -> float | None:
        """Timers are shown relative to the step's own time ("in 15m" after the step), not to now."""
        at = step.get("at")
        return float(at) if isinstance(at, int | float) else self.now
