"""The console's read side: what each page shows, read from the store (and the inbox, where there is one).

Every query here is bounded, whatever the size of the store:

* the executions page is one keyset page of ``list_executions`` (``id > cursor ORDER BY id LIMIT n``);
* the counts per status are one bounded listing per status (at most :data:`COUNT_CAP` + 1 rows each, served
  by the store's ``(status, id)`` index) — past the cap the page says "1,000+", never a full count scan;
* the counts per state of a definition page through its running executions up to :data:`STATE_SCAN_CAP`
  and say when they stopped there.

Nothing here writes: the console is read-only unless it was started with ``--allow-control``
(:mod:`durastate.ui.control`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from durastate.engine.definition import Definition
from durastate.engine.durations import format_duration, parse_duration
from durastate.engine.ids import describe_timer_key
from durastate.engine.model import ENDED, STATUSES, Event, Execution
from durastate.engine.progress import descendant_timers, map_progress
from durastate.engine.search import typed_where
from durastate.store.base import (
    ExecutionPage,
    ExecutionStore,
    ExecutionSummary,
    normalize_status,
    summary_matches,
)
from durastate.transport.base import DeadLetter, DeadLetterBox

COUNT_CAP = 1000
"""Counts per status stop here ("1,000+"): one indexed listing of at most this many rows per status."""
STATE_SCAN_CAP = 10_000
"""A definition page counts active states over at most this many running executions (and says so)."""
ID_SCAN_CAP = 10_000
"""An id search looks through at most this many executions (in id order, with the page's filters) for ids
that start with what was typed: the store lists by id but cannot seek to a prefix, so it says when it stopped."""
LETTER_SCAN_CAP = 1000
"""Dead letters looked through for one execution's page (the box lists them oldest first, not by target)."""
CHILD_CAP = 200
"""Children listed on an execution's page."""
PAGE_SIZES = (25, 50, 100, 200)
ENDED_LIKE = ENDED
"""Statuses drawn as ended (the timeline's dot), ``purged`` among them."""


def all_statuses() -> tuple[str, ...]:
    """The statuses a filter offers and the counts show, in the engine's order."""
    return tuple(STATUSES)


@dataclass(frozen=True)
class ListFilter:
    """The executions page's filters, as given in its query string (empty: not filtered)."""

    status: tuple[str, ...] = ()
    definition: str = ""
    parent: str = ""
    since: str = ""
    """A duration ("15m", "2d 3h"): only executions updated that recently (when the store can filter so)."""
    id: str = ""
    """An execution id, or the start of some: the executions with that id or an id starting so."""
    cursor: str = ""
    limit: int = 50
    where: str = ""
    """The search box: filters on search fields separated by spaces (``customer=c-17 total>100``)."""

    def query(self, **changes: Any) -> str:
        """This filter as a query string, with ``changes`` applied (for paging and filter links)."""
        values = {"status": list(self.status), "definition": self.definition, "parent": self.parent,
                  "since": self.since, "id": self.id, "cursor": self.cursor,
                  "limit": self.limit if self.limit != 50 else "", "where": self.where}
        values.update(changes)
        from urllib.parse import urlencode

        pairs: list[tuple[str, str]] = []
        for key, value in values.items():
            if isinstance(value, list | tuple):
                pairs.extend((key, str(v)) for v in value)
            elif value not in ("", None):
                pairs.append((key, str(value)))
        return urlencode(pairs)


def list_page(store: ExecutionStore, filt: ListFilter, now: float,
              definitions: Iterable[Definition] = ()) -> ExecutionPage:
    """One keyset page of executions for the filters (system records are left out by the store); the
    search box's filters are typed by the search fields of ``definitions`` (``filt.definition``'s only,
    when it names one) and refused with :class:`~durastate.errors.InvalidSearch` as ``list --where`` is."""
    since = parse_duration(filt.since, "since") if filt.since else None
    declared = {d.id: d.search for d in definitions if not filt.definition or d.id == filt.definition}
    where = typed_where(filt.where.split(), declared) if filt.where.strip() else ()
    return store.list_executions(definition_id=filt.definition or None, status=list(filt.status) or None,
                                 limit=filt.limit, cursor=filt.cursor or None, parent_id=filt.parent or None,
                                 updated_after=None if since is None else now - since, where=where)


@dataclass(frozen=True)
class IdSearch:
    """The executions whose id is, or starts with, what was searched: over at most ``cap`` scanned."""

    items: list[ExecutionSummary]
    scanned: int
    capped: bool


def search_ids(store: ExecutionStore, filt: ListFilter, now: float, cap: int = ID_SCAN_CAP) -> IdSearch:
    """The execution with id ``filt.id`` (one read) and those whose id starts with it, with the page's other
    filters: the listing runs in id order, so it stops at the first id past the prefix, or at ``cap``."""
    wanted = filt.id
    since = parse_duration(filt.since, "since") if filt.since else None
    filters: dict[str, Any] = {"definition_id": filt.definition or None, "parent_id": filt.parent or None,
                               "updated_after": None if since is None else now - since}
    found: dict[str, ExecutionSummary] = {}
    exact = store.load(wanted)
    if exact is not None:  # the one read that finds it wherever it is in the id order
        summary = ExecutionSummary.of(exact)
        if summary_matches(summary, filters["definition_id"], normalize_status(list(filt.status) or None),
                           False, parent_id=filters["parent_id"], updated_after=filters["updated_after"]):
            found[summary.id] = summary
    scanned, cursor, capped = 0, None, True
    while scanned < cap and len(found) < filt.limit:
        page = store.list_executions(status=list(filt.status) or None, limit=min(1000, cap - scanned),
                                     cursor=cursor, **filters)
        scanned += len(page.items)
        past = False
        for item in page.items:
            if item.id.startswith(wanted):
                found.setdefault(item.id, item)
            elif item.id > wanted:  # in id order: every later id is past the prefix too
                past = True
                break
        if past or page.next_cursor is None or not page.items:
            capped = False
            break
        cursor = page.next_cursor
    items = sorted(found.values(), key=lambda s: s.id)[: filt.limit]
    return IdSearch(items, scanned, capped)


@dataclass(frozen=True)
class Count:
    """How many executions have one status: exact up to the cap, else "at least ``cap``"."""

    status: str
    n: int
    capped: bool

    @property
    def label(self) -> str:
        return f"{self.n:,}+" if self.capped else f"{self.n:,}"


def status_counts(store: ExecutionStore, definition_id: str | None = None, cap: int = COUNT_CAP) -> list[Count]:
    """Executions per status, each counted with one indexed listing of at most ``cap`` + 1 rows."""
    counts = []
    for status in all_statuses():
        page = store.list_executions(definition_id=definition_id, status=status, limit=cap + 1)
        counts.append(Count(status, min(len(page.items), cap), len(page.items) > cap))
    return counts


# -- one execution ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timer:
    key: str
    due: float
    due_text: str
    relative: str
    execution_id: str = ""
    kind: str = "own"
    """``own``, or the kind of child (``region``, ``invoke``, ``map``) whose timer it is: one of its descendants
    (as ``durastate show`` lists them)."""


@dataclass
class ExecutionView:
    """Everything the execution page shows, read in one go."""

    exe: Execution
    parent: ExecutionSummary | None
    children: list[tuple[str, str, str, ExecutionSummary | None]]
    """(child id, kind, path in the parent, the child's summary if it exists yet)."""
    timers: list[Timer]
    queued: list[Event] | None
    """Events waiting in the inbox for this execution (``None``: this store's queue cannot be looked into)."""
    dead_letters: list[DeadLetter] | None
    trace: list[dict[str, Any]]
    context_json: str = ""
    held: list[Event] = field(default_factory=list)
    maps: list[str] = field(default_factory=list)
    """Each map state's progress, one line each, as ``durastate show`` prints it."""


def stamp(epoch: float | None) -> str:
    """An absolute UTC time as people read it in logs."""
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(epoch))


def relative(epoch: float, now: float) -> str:
    """"in 2d 3h" / "5m ago", with the durations users type (:func:`format_duration`)."""
    delta = epoch - now
    if abs(delta) < 1:
        return "now"
    span = format_duration(round(abs(delta)))
    return f"in {span}" if delta > 0 else f"{span} ago"


def execution_view(store: ExecutionStore, exe: Execution, now: float,
                   queued: Callable[[str], list[tuple[str, Event]]] | None,
                   box: DeadLetterBox | None) -> ExecutionView:
    parent = None
    if exe.parent_id:
        loaded = store.load(exe.parent_id)
        parent = ExecutionSummary.of(loaded) if loaded is not None else None
    children = child_rows(store, exe)
    armed, _descendants = descendant_timers(exe, store.load)
    timers = [Timer(describe_timer_key(t.path), t.fire_at, stamp(t.fire_at), relative(t.fire_at, now),
                    t.execution_id, t.kind) for t in armed]
    maps = [map_progress(path, progress, ended=exe.status in ENDED) for path, progress in exe.maps.items()]
    waiting = None if queued is None else [ev for target, ev in queued(exe.id) if target == exe.id]
    letters = None if box is None else letters_for(box, exe.id)
    trace = store.read_trace(exe.id)
    return ExecutionView(exe, parent, children, timers, waiting, letters, trace,
                         json.dumps(exe.context, indent=2, sort_keys=True, default=str), list(exe.held), maps)


def child_rows(store: ExecutionStore, exe: Execution,
               cap: int = CHILD_CAP) -> list[tuple[str, str, str, ExecutionSummary | None]]:
    """Its children, running and ended (the parent keeps refs only to the running ones), plus any it has
    asked for that do not exist yet: (id, "region" or "invoke", the parent's state, the summary)."""
    listed = {s.id: s for s in store.list_executions(parent_id=exe.id, limit=cap).items}
    rows: list[tuple[str, str, str, ExecutionSummary | None]] = []
    for child_id in sorted(set(listed) | set(exe.children), key=_child_order):
        ref, summary = exe.children.get(child_id), listed.get(child_id)
        if ref is not None:
            kind, path = ref.kind, ref.path
        else:
            kind, path = ("region" if summary and summary.definition_id == exe.definition_id else "invoke"), ""
        rows.append((child_id, kind, path, summary))
    return rows


def _child_order(child_id: str) -> tuple[int, str]:
    tail = child_id.rsplit("~", 1)[-1]
    return (int(tail), child_id) if tail.isdigit() else (1 << 30, child_id)


def letters_for(box: DeadLetterBox, execution_id: str, cap: int = LETTER_SCAN_CAP) -> list[DeadLetter]:
    """The dead letters of one execution, among the first ``cap`` the box holds."""
    found: list[DeadLetter] = []
    cursor: str | None = None
    seen = 0
    while seen < cap:
        page = box.list(min(200, cap - seen), cursor)
        found.extend(d for d in page.items if d.target_id == execution_id)
        seen += len(page.items)
        if page.next_cursor is None or not page.items:
            break
        cursor = page.next_cursor
    return found


# -- trace ------------------------------------------------------------------------------------------------
HEADLINE_KEYS = ("at", "event", "from", "to", "status")


@dataclass(frozen=True)
class Step:
    """One trace step as the timeline shows it: a headline and every other key it has, whatever they are."""

    index: int
    at: str
    event: str
    change: str
    status: str
    details: list[tuple[str, str]]


def trace_steps(trace: Sequence[dict[str, Any]]) -> list[Step]:
    steps = []
    for i, entry in enumerate(trace):
        at = entry.get("at")
        at_text = stamp(at) if isinstance(at, int | float) else str(at or "")
        event = entry.get("event")
        if isinstance(event, dict):
            event = event.get("name") or json.dumps(event, default=str)
        src, dst = entry.get("from"), entry.get("to")
        change = f"{src or '·'} → {dst or '·'}" if (src or dst) else ""
        details = [(k, _show(v, k)) for k, v in entry.items() if k not in HEADLINE_KEYS or (k == "event"
                   and isinstance(entry.get("event"), dict))]
        steps.append(Step(i + 1, at_text, str(event or ""), change, str(entry.get("status") or ""), details))
    return steps


def _show(value: Any, key: str = "") -> str:
    """A step's value as text: short JSON on one line, longer indented; a context change as ``key: old → new``
    lines (a step records each changed key as ``[old, new]``)."""
    if isinstance(value, str):
        return value
    if key == "context" and isinstance(value, dict) and all(
            isinstance(v, list) and len(v) == 2 for v in value.values()):
        return "\n".join(f"{k}: {_compact(v[0])} → {_compact(v[1])}" for k, v in value.items())
    text = _compact(value)
    return text if len(text) <= 100 else json.dumps(value, indent=2, sort_keys=True, default=str)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "), sort_keys=True, default=str)


# -- definitions ------------------------------------------------------------------------------------------
@dataclass
class StateCounts:
    """Running executions of a definition per active state, over at most ``cap`` of them."""

    counts: Counter[str]
    scanned: int
    capped: bool


def state_counts(store: ExecutionStore, definition_id: str, cap: int = STATE_SCAN_CAP) -> StateCounts:
    """How many running executions are in each state now (a state counts its active descendants too).

    A parallel state's regions run as child executions of the same definition; they count with their
    parent — an order in two regions is one order in ``fulfilment`` — so a running execution whose
    parent is among those listed adds its states to its parent's.
    """
    owner: dict[str, str] = {}  # execution id -> the execution it counts for (a region: its parent's)
    paths: dict[str, set[str]] = {}
    scanned = 0
    capped = True
    cursor: str | None = None
    while scanned < cap:
        page = store.list_executions(definition_id=definition_id, status="running",
                                     limit=min(1000, cap - scanned), cursor=cursor)
        for summary in page.items:  # in id order: a parent ("o") comes before its regions ("o~2")
            scanned += 1
            root = owner.get(summary.parent_id or "", summary.id)
            owner[summary.id] = root
            paths.setdefault(root, set()).update(ancestors(summary.active_path))
        if page.next_cursor is None or not page.items:
            capped = False
            break
        cursor = page.next_cursor
    counts: Counter[str] = Counter(path for found in paths.values() for path in found)
    return StateCounts(counts, scanned, capped)


def ancestors(path: str | None) -> Iterable[str]:
    """``a.b.c`` → ``a``, ``a.b``, ``a.b.c``."""
    if not path:
        return []
    parts = path.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def state_paths(defn: Definition) -> list[str]:
    """Every state path of ``defn``, parents before children, in document order."""
    out: list[str] = []

    def walk(states: dict[str, Any], prefix: str) -> None:
        for name, state in states.items():
            path = f"{prefix}{name}"
            out.append(path)
            walk(getattr(state, "states", None) or {}, path + ".")

    walk(defn.states, "")
    return out
