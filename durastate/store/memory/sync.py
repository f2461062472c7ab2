"""``DictStore``: the in-memory store (tests, notebooks, single-process embedded runs).

Its defining property is identity: ``load`` returns the very object handed to ``save``/``commit`` —
no serialisation, no copy — so a caller holding an execution sees every change the engine makes.
Nothing survives the process. The logic lives in :class:`DictCore`, shared verbatim by the async twin.

Threads may share one store (``LocalRuntime`` workers, a test's thread pool): every operation holds the
store's lock, so the compare-and-swap check and the write after it, and the outbox and spawn sequence
numbers, are atomic. Without it, 32 threads applying 4,800 increments kept about half of them and let
versions win twice. The lock is uncontended in a single thread (about 0.1 µs an operation).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from durastate.engine.model import Execution
from durastate.engine.search import index_plan, values_match
from durastate.errors import InvalidCursor
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Condition,
    Emit,
    ExecutionPage,
    ExecutionSummary,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    StoreConflict,
    TimerOp,
    check_conditions,
    decode_cursor,
    encode_cursor,
    normalize_status,
    summary_matches,
)
from durastate.store.memory.search_index import SearchIndex
from durastate.store.retention import (
    DEFAULT_PURGE_LIMIT,
    DEFAULT_TOMBSTONE_TTL,
    PURGEABLE,
    PurgeResult,
    check_purge,
    ended_index_value,
    is_purgeable,
    stamp_ended,
    tombstone,
)


class DictCore:
    """The data structures and synchronous logic of the in-memory store."""

    def __init__(self, trace_max: int | None = DEFAULT_TRACE_MAX, *, history: bool = False) -> None:
        self._by_id: dict[str, Execution] = {}
        self._outbox: dict[int, OutboxEntry] = {}  # by seq; insertion order is seq order
        self._processed: set[tuple[str, str]] = set()
        self._timers: dict[tuple[str, str], float] = {}
        self._spawns: dict[int, SpawnEntry] = {}
        # One bounded deque per execution: appending to a full ring drops the oldest step in O(1)
        # (a list trimmed with ``del steps[:1]`` moves the whole ring on every step).
        self._trace: dict[str, deque[dict[str, Any]]] = {}
        self._trace_idx: dict[str, int] = {}
        self.trace_max: int | None = trace_max
        self.history = history
        """Keep every step (``read_history``); ``read_trace`` still answers the newest ``trace_max``."""
        self._seq = 0
        self._spawn_seq = 0
        self._lock = threading.RLock()
        # Retention's indexes: ended (purgeable) executions by end time, tombstones by expiry.
        self._ended: dict[str, float] = {}
        self._expiring: dict[str, float] = {}
        self._search = SearchIndex()

    # -- the CAS gate -------------------------------------------------------------------------------
    def _save(self, exe: Execution) -> None:
        prev = self._by_id.get(exe.id)
        # Only a *different* object at a *different* version is a concurrent writer. The same object
        # (the embedded case), a first write, or a replacement at the expected version all pass.
        if prev is not None and prev is not exe and prev.version != exe.version:
            raise StoreConflict(exe.id, expected=exe.version, found=prev.version)
        exe.__dict__["version"] = exe.version + 1  # a plain field write (no BaseModel.__setattr__ dispatch)
        exe.__pydantic_fields_set__.add("version")
        self._by_id[exe.id] = exe
        self._search.update(exe.id, exe.search)
        if exe.status != "running" or exe.ended_at is not None:
            self._index_ended(exe)

    def _index_ended(self, exe: Execution) -> None:
        stamp_ended(exe)
        end = ended_index_value(exe)
        if end is None:
            self._ended.pop(exe.id, None)
        else:
            self._ended[exe.id] = end
        if exe.expires_at is None:
            self._expiring.pop(exe.id, None)
        else:
            self._expiring[exe.id] = exe.expires_at

    def _purge(
        self,
        ended_before: float,
        statuses: Sequence[str],
        definition_id: str | None,
        limit: int,
        now: float | None,
        tombstone_ttl: float,
        dry_run: bool,
    ) -> PurgeResult:
        """See :mod:`durastate.store.retention`. The ended-executions dict is the index: the purge walks
        ended executions only, never running ones."""
        wanted = check_purge(statuses, limit, tombstone_ttl)
        now = time.time() if now is None else now
        with self._lock:
            gone = [eid for eid, at in self._expiring.items() if at <= now][: limit + 1]
            more = len(gone) > limit
            gone = gone[:limit]
            picked: list[str] = []
            for eid, end in self._ended.items():
                if end < ended_before and is_purgeable(self._by_id[eid], ended_before, wanted, definition_id):
                    if len(picked) == limit:
                        more = True
                        break
                    picked.append(eid)
            if dry_run:
                return PurgeResult(len(picked), len(gone), more, tuple(picked))
            for eid in picked:
                tomb = tombstone(self._by_id[eid], now + tombstone_ttl, now)
                tomb.__dict__["version"] -= 1  # _save bumps it
                self._by_id[eid] = tomb
                self._save(tomb)
                self._trace.pop(eid, None)
            if gone:
                dropped = set(gone)
                for eid in gone:
                    del self._by_id[eid]
                    self._search.drop(eid)
                    self._expiring.pop(eid, None)
                    self._trace.pop(eid, None)
                    self._trace_idx.pop(eid, None)
                self._processed = {mark for mark in self._processed if mark[0] not in dropped}
            return PurgeResult(len(picked), len(gone), more, tuple(picked))

    def _commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Iterable[TimerOp],
        spawns: Iterable[Spawn],
        trace: dict[str, Any] | None,
    ) -> None:
        with self._lock:
            self._save(exe)  # CAS first: a loser raises before anything is enqueued
            for target_id, event in emits:
                self._seq += 1
                self._outbox[self._seq] = OutboxEntry(self._seq, target_id, event)
            if processed_event_id is not None:
                self._processed.add((exe.id, processed_event_id))
            for op in timers:
                if op.action == "schedule":
                    self._timers[(exe.id, op.path)] = op.fire_at
                else:
                    self._timers.pop((exe.id, op.path), None)
            for child_id, root_path, context in spawns:
                self._spawn_seq += 1
                # dict(context): the intent is a snapshot, independent of later parent mutations.
                self._spawns[self._spawn_seq] = SpawnEntry(
                    self._spawn_seq, exe.id, child_id, root_path, dict(context)
                )
            if trace is not None:
                self._record_trace(exe.id, trace)

    # -- queues ---------------------------------------------------------------------------------------
    # Keyed by seq (the seed keeps lists): acking one entry is O(1), so draining a backlog is linear.
    def _ack_outbox(self, seq: int) -> None:
        with self._lock:
            self._outbox.pop(seq, None)

    def _ack_spawn(self, seq: int) -> None:
        with self._lock:
            self._spawns.pop(seq, None)

    def _due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        with self._lock:
            due = [(eid, path, fa) for (eid, path), fa in self._timers.items()
                   if fa <= now and (since is None or fa >= since)]
            due.sort(key=lambda t: t[2])
            return due

    def _delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        with self._lock:
            # Guarded: a timer re-armed to a new time since the sweep read it survives.
            if self._timers.get((execution_id, path)) == fire_at:
                del self._timers[(execution_id, path)]

    # -- listing --------------------------------------------------------------------------------------
    def _list(
        self,
        definition_id: str | None,
        status: str | Sequence[str] | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
        parent_id: str | None = None,
        updated_after: float | None = None,
        updated_before: float | None = None,
        where: Sequence[Condition] = (),
    ) -> ExecutionPage:
        conditions = check_conditions(where)
        plan = index_plan(conditions)
        with self._lock:
            statuses = normalize_status(status)
            after = decode_cursor(cursor) if cursor else None
            ranged = plan is not None and plan.ranged
            if cursor and not (_is_range_cursor(after) if ranged else isinstance(after, str)):
                raise InvalidCursor(cursor)
            # (cursor key, id) in the order read: ids from the index when a condition selects from it.
            order: Iterable[tuple[Any, str]]
            if plan is None:
                ids = sorted(self._by_id)
                start = bisect.bisect_right(ids, after) if after is not None else 0
                order = ((ids[pos], ids[pos]) for pos in range(start, len(ids)))
            elif ranged:
                order = (([n, eid], eid) for n, eid in self._search.within(plan, tuple(after) if after else None))
            else:
                order = ((eid, eid) for eid in self._search.equal(plan, after))
            items: list[ExecutionSummary] = []
            last: Any = None
            for key, eid in order:
                exe = self._by_id[eid]
                s = ExecutionSummary.of(exe)
                if not summary_matches(s, definition_id, statuses, roots_only, parent_id=parent_id,
                                       updated_after=updated_after, updated_before=updated_before):
                    continue
                if conditions and not values_match(exe.search, conditions):
                    continue
                if len(items) == limit:
                    return ExecutionPage(items, encode_cursor(last))
                items.append(s)
                last = key
            return ExecutionPage(items, None)

    # -- trace ring -----------------------------------------------------------------------------------
    def _record_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        with self._lock:
            idx = self._trace_idx.get(execution_id, 0)
            self._trace_idx[execution_id] = idx + 1  # climbs regardless of trimming
            bound = None if self.history else self.trace_max or None
            steps = self._trace.get(execution_id)
            if steps is None or steps.maxlen != bound:  # first step, or trace_max was changed since
                steps = self._trace[execution_id] = deque(steps or (), maxlen=bound)
            step = dict(entry)
            step.setdefault("index", idx)
            steps.append(step)

    def _read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        with self._lock:
            steps = self._trace.get(execution_id, ())
            n = self.trace_max
            return list(islice(steps, len(steps) - n, None) if n and len(steps) > n else steps)

    def _read_history(self, execution_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._trace.get(execution_id, ()))


def _is_range_cursor(value: Any) -> bool:
    """A range listing's cursor: ``[number, id]``, the (value, id) its last item was read at."""
    return (isinstance(value, list) and len(value) == 2 and isinstance(value[0], int | float)
            and not isinstance(value[0], bool) and isinstance(value[1], str))


class DictStore(DictCore):
    """The in-memory :class:`~durastate.store.ExecutionStore`."""

    def load(self, execution_id: str) -> Execution | None:
        return self._by_id.get(execution_id)

    def save(self, exe: Execution) -> None:
        self._commit(exe, [], None, (), (), None)

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Iterable[TimerOp] = (),
        spawns: Iterable[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        self._commit(exe, emits, processed_event_id, timers, spawns, trace)

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        return (execution_id, event_id) in self._processed

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        with self._lock:
            return self._by_id.get(execution_id), (execution_id, event_id) in self._processed

    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        with self._lock:
            return list(islice(self._outbox.values(), limit))

    def ack_outbox(self, seq: int) -> None:
        self._ack_outbox(seq)

    def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        with self._lock:
            return list(islice(self._spawns.values(), limit))

    def ack_spawn(self, seq: int) -> None:
        self._ack_spawn(seq)

    def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        return self._due_timers(now, since)

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        self._delete_timer(execution_id, path, fire_at)

    def list_executions(
        self,
        definition_id: str | None = None,
        status: str | Sequence[str] | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
        *,
        parent_id: str | None = None,
        updated_after: float | None = None,
        updated_before: float | None = None,
        where: Sequence[Condition] = (),
    ) -> ExecutionPage:
        return self._list(definition_id, status, roots_only, limit, cursor, parent_id, updated_after,
                          updated_before, where)

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return self._read_trace(execution_id)

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        self._record_trace(execution_id, entry)

    def read_history(self, execution_id: str) -> list[dict[str, Any]]:
        return self._read_history(execution_id)

    def purge(
        self,
        ended_before: float,
        statuses: Sequence[str] = PURGEABLE,
        definition_id: str | None = None,
        limit: int = DEFAULT_PURGE_LIMIT,
        now: float | None = None,
        tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL,
        *,
        dry_run: bool = False,
    ) -> PurgeResult:
        return self._purge(ended_before, statuses, definition_id, limit, now, tombstone_ttl, dry_run)

    def close(self) -> None:
        """Nothing to release: everything lives in this process."""
