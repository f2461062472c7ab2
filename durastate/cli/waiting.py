"""What waits for an execution, as ``durastate show`` lists it: timers (its own and those of its region
and invoked children, recursively), events queued for it in the store's inbox, events its own or others'
commits emitted to it that the relay has not moved yet (the outbox), and its dead letters.

Each source is read as cheaply as it can be: the inbox by target (``messages(target_id)`` of the SQLite
and PostgreSQL queues), the outbox and the dead letters by a bounded scan (:data:`SCAN_MAX` entries),
since neither is indexed by target. A queue that cannot be listed by target (an SQS queue: messages can
only be received, not looked at) is reported as such, never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.table import Table
from rich.text import Text

from durastate.cli.output import compact, console
from durastate.cli.session import Session
from durastate.cli.timeline import local_when
from durastate.engine.ids import describe_timer_key
from durastate.engine.model import Event, Execution
from durastate.engine.progress import ChildTimer, descendant_timers
from durastate.errors import DurastateError
from durastate.store.base import OutboxEntry
from durastate.transport.base import DeadLetter

__all__ = ["SCAN_MAX", "ChildTimer", "Waiting", "gather", "show_waiting"]

SCAN_MAX = 1000
"""The outbox and the dead letters are scanned up to this many entries for the execution's."""
@dataclass(slots=True)
class Waiting:
    timers: list[ChildTimer] = field(default_factory=list)
    queued: list[Event] | None = None
    """Events waiting in the inbox for it, in delivery order; ``None`` when the queue cannot be listed."""
    queued_note: str = ""
    outbox: list[OutboxEntry] = field(default_factory=list)
    dead_letters: list[DeadLetter] | None = None
    """``None``: this store keeps no dead letters."""
    descendants: list[Execution] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "timers": [{"execution_id": t.execution_id, "path": t.path, "fire_at": t.fire_at, "kind": t.kind}
                       for t in self.timers],
            "queued": None if self.queued is None else [e.model_dump(mode="json") for e in self.queued],
            **({"queued_note": self.queued_note} if self.queued_note else {}),
            "outbox": [{"seq": o.seq, "event": o.event.model_dump(mode="json")} for o in self.outbox],
            "dead_letters": None if self.dead_letters is None else [d.as_dict() for d in self.dead_letters],
        }


def gather(sess: Session, exe: Execution) -> Waiting:
    """Everything that waits for ``exe`` (see the module docstring)."""
    out = Waiting()
    out.timers, out.descendants = descendant_timers(exe, sess.store.load)
    try:
        inbox = sess.inbox
    except DurastateError as exc:  # e.g. a SQLite file this user may only read: its queue cannot be opened
        out.queued_note = f"the inbox cannot be opened ({exc})"
    else:
        _read_inbox(out, inbox, exe.id, sess.scheme)
    out.outbox = [o for o in sess.store.pending_outbox(SCAN_MAX) if o.target_id == exe.id]
    return out


def _read_inbox(out: Waiting, inbox: Any, execution_id: str, scheme: str) -> None:
    if inbox is None:
        out.queued_note = f"{scheme}:// has no durable inbox: events are applied as they are sent"
        return
    peek = getattr(inbox, "messages", None)
    if callable(peek):
        out.queued = [event for target, event in peek(execution_id) if target == execution_id]
    else:
        out.queued_note = "this queue cannot be listed by execution (an SQS queue can only be received from)"
    box = getattr(inbox, "dead_letter_box", None)
    if box is not None:
        out.dead_letters = _dead_letters(box, execution_id)


def _dead_letters(box: Any, target_id: str) -> list[DeadLetter]:
    found: list[DeadLetter] = []
    cursor: str | None = None
    seen = 0
    while seen < SCAN_MAX:
        page = box.list(limit=100, cursor=cursor)
        seen += len(page.items)
        found += [d for d in page.items if d.target_id == target_id]
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


def show_waiting(w: Waiting, now: float | None = None) -> None:
    """Print what :func:`gather` found, after ``show``'s own grid (only the parts that hold something,
    plus one line for a queue that cannot be listed)."""
    if any(t.kind != "own" for t in w.timers):
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for col in ("timer (with children)", "execution", "kind", "fires"):
            table.add_column(col)
        for t in w.timers:
            table.add_row(Text(describe_timer_key(t.path)), Text(t.execution_id), Text(t.kind),
                          Text(local_when(t.fire_at, now)))
        console.print(table)
    if w.queued:
        console.print(Text(f"queued   {len(w.queued)} event(s) in the inbox, next first:", style="bold"))
        for e in w.queued[:20]:
            console.print(Text(f"  {e.name}  ({e.id})  {compact(e.data, 60) if e.data else ''}".rstrip()))
        if len(w.queued) > 20:
            console.print(Text(f"  … {len(w.queued) - 20} more", style="dim"))
    elif w.queued is None and w.queued_note:
        console.print(Text.assemble(("queued", "bold"), f"   not listed: {w.queued_note}"))
    if w.outbox:
        console.print(Text(f"outbox   {len(w.outbox)} event(s) emitted to it, not yet relayed:", style="bold"))
        for o in w.outbox[:20]:
            console.print(Text(f"  {o.event.name}  ({o.event.id})"))
    if w.dead_letters:
        console.print(Text(f"dead letters   {len(w.dead_letters)}:", style="bold red"))
        for d in w.dead_letters[:20]:
            console.print(Text(f"  {d.id}  {d.event.name or '(unreadable)'}  {d.error}: {d.reason}"))
