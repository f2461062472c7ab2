"""A store written outside durastate: every execution, outbox entry, mark, timer, spawn and trace step in
one JSON file, rewritten (atomically, via a temporary file and ``os.replace``) after every change.

It is an example of the :class:`durastate.store.ExecutionStore` protocol implemented from the public
building blocks only (the listing filter, the cursor codec, the retention rules), and of proving it with
``durastate.testing``: see ``test_json_file_store.py`` next to it and docs/testing-kit.md. One process at a
time: the lock serialises its threads, nothing serialises two processes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from durastate.engine.model import Event, Execution
from durastate.engine.search import Condition, check_conditions, values_match
from durastate.errors import InvalidCursor, StoreConflict
from durastate.store.base import (
    DEFAULT_TRACE_MAX,
    Emit,
    ExecutionPage,
    ExecutionSummary,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
    decode_cursor,
    encode_cursor,
    normalize_status,
    summary_matches,
)
from durastate.store.retention import (
    DEFAULT_PURGE_LIMIT,
    DEFAULT_TOMBSTONE_TTL,
    PURGEABLE,
    PURGED,
    PurgeResult,
    check_purge,
    is_purgeable,
    stamp_ended,
    tombstone,
)


def _empty() -> dict[str, Any]:
    return {"executions": {}, "outbox": [], "spawns": [], "processed": {}, "timers": {}, "trace": {},
            "trace_idx": {}, "seq": 0}


class JsonFileStore:
    """An :class:`~durastate.store.ExecutionStore` in one JSON file (created if missing, reloaded if not)."""

    def __init__(self, path: str | Path, trace_max: int | None = DEFAULT_TRACE_MAX) -> None:
        self.path = Path(path)
        self.trace_max = trace_max
        self.history = False  # True: keep every trace step (read_history), the ring is not trimmed
        self._lock = threading.RLock()
        self._data: dict[str, Any] = json.loads(self.path.read_text()) if self.path.exists() else _empty()

    def _flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._data))
        os.replace(tmp, self.path)

    # -- executions -------------------------------------------------------------------------------
    def load(self, execution_id: str) -> Execution | None:
        with self._lock:
            raw = self._data["executions"].get(execution_id)
            return None if raw is None else Execution.model_validate_json(raw)

    def save(self, exe: Execution) -> None:
        self.commit(exe, [])

    def commit(self, exe: Execution, emits: Sequence[Emit], processed_event_id: str | None = None,
               timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
               trace: dict[str, Any] | None = None) -> None:
        with self._lock:
            d = self._data
            stored = d["executions"].get(exe.id)
            found = None if stored is None else Execution.model_validate_json(stored).version
            if (found or 0) != exe.version:  # the compare-and-swap: before anything is written
                raise StoreConflict(exe.id, expected=exe.version, found=found)
            stamp_ended(exe)
            exe.version += 1
            d["executions"][exe.id] = exe.model_dump_json()
            for target_id, event in emits:
                d["seq"] += 1
                d["outbox"].append([d["seq"], target_id, event.model_dump(mode="json")])
            if processed_event_id is not None:
                marks = d["processed"].setdefault(exe.id, [])
                if processed_event_id not in marks:
                    marks.append(processed_event_id)
            for op in timers:
                armed = d["timers"].setdefault(exe.id, {})
                if op.action == "schedule":
                    armed[op.path] = op.fire_at
                else:
                    armed.pop(op.path, None)
            for child_id, root_path, context in spawns:
                d["seq"] += 1
                d["spawns"].append([d["seq"], exe.id, child_id, root_path, json.loads(json.dumps(context))])
            if trace is not None:
                self._trace(exe.id, trace)
            self._flush()

    # -- dedupe -----------------------------------------------------------------------------------
    def is_processed(self, execution_id: str, event_id: str) -> bool:
        with self._lock:
            return event_id in self._data["processed"].get(execution_id, [])

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        with self._lock:
            return self.load(execution_id), self.is_processed(execution_id, event_id)

    # -- outbox and spawns --------------------------------------------------------------------------
    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        with self._lock:
            rows = self._data["outbox"][:limit]
            return [OutboxEntry(seq, target, Event.model_validate(event)) for seq, target, event in rows]

    def ack_outbox(self, seq: int) -> None:
        with self._lock:
            self._data["outbox"] = [row for row in self._data["outbox"] if row[0] != seq]
            self._flush()

    def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        with self._lock:
            return [SpawnEntry(*row) for row in self._data["spawns"][:limit]]

    def ack_spawn(self, seq: int) -> None:
        with self._lock:
            self._data["spawns"] = [row for row in self._data["spawns"] if row[0] != seq]
            self._flush()

    # -- timers -----------------------------------------------------------------------------------
    def due_timers(self, now: float, since: float | None = None) -> list[tuple[str, str, float]]:
        with self._lock:
            due = [(eid, path, at) for eid, armed in self._data["timers"].items()
                   for path, at in armed.items() if at <= now and (since is None or at >= since)]
            return sorted(due, key=lambda t: t[2])

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        with self._lock:
            armed = self._data["timers"].get(execution_id, {})
            if armed.get(path) == fire_at:  # guarded: a timer re-armed since it was read survives
                del armed[path]
                self._flush()

    # -- listing ----------------------------------------------------------------------------------
    def list_executions(self, definition_id: str | None = None, status: str | Sequence[str] | None = None,
                        roots_only: bool = False, limit: int = 100, cursor: str | None = None, *,
                        parent_id: str | None = None, updated_after: float | None = None,
                        updated_before: float | None = None,
                        where: Sequence[Condition] = ()) -> ExecutionPage:
        conditions = check_conditions(where)  # search fields: checked on each execution, in id order
        after = decode_cursor(cursor) if cursor else ""
        if not isinstance(after, str):
            raise InvalidCursor(str(cursor))
        statuses = normalize_status(status)
        items: list[ExecutionSummary] = []
        with self._lock:
            for eid in sorted(i for i in self._data["executions"] if i > after):
                exe = Execution.model_validate_json(self._data["executions"][eid])
                if conditions and not values_match(exe.search, conditions):
                    continue
                s = ExecutionSummary.of(exe)
                if not summary_matches(s, definition_id, statuses, roots_only, parent_id=parent_id,
                                       updated_after=updated_after, updated_before=updated_before):
                    continue
                if len(items) == limit:
                    return ExecutionPage(items, encode_cursor(items[-1].id))
                items.append(s)
        return ExecutionPage(items, None)

    # -- trace ring -------------------------------------------------------------------------------
    def _trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        idx = self._data["trace_idx"].get(execution_id, 0)
        self._data["trace_idx"][execution_id] = idx + 1
        steps = self._data["trace"].setdefault(execution_id, [])
        steps.append({**entry, "index": entry.get("index", idx)})
        if self.trace_max and not self.history:
            del steps[: -self.trace_max]

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        steps = self.read_history(execution_id)
        return steps[-self.trace_max:] if self.trace_max else steps

    def read_history(self, execution_id: str) -> list[dict[str, Any]]:
        with self._lock:
            steps: list[dict[str, Any]] = json.loads(json.dumps(self._data["trace"].get(execution_id, [])))
            return steps  # a copy: the caller cannot change the stored ring

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        with self._lock:
            self._trace(execution_id, entry)
            self._flush()

    # -- retention --------------------------------------------------------------------------------
    def purge(self, ended_before: float, statuses: Sequence[str] = PURGEABLE, definition_id: str | None = None,
              limit: int = DEFAULT_PURGE_LIMIT, now: float | None = None,
              tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL, *, dry_run: bool = False) -> PurgeResult:
        wanted = check_purge(statuses, limit, tombstone_ttl)
        now = time.time() if now is None else now
        with self._lock:
            d = self._data
            exes = {eid: Execution.model_validate_json(raw) for eid, raw in d["executions"].items()}
            expired = [e.id for e in exes.values()
                       if e.status == PURGED and e.expires_at is not None and e.expires_at <= now]
            ended = sorted((e for e in exes.values() if is_purgeable(e, ended_before, wanted, definition_id)),
                           key=lambda e: e.ended_at or 0.0)
            picked, gone = ended[:limit], expired[:limit]
            result = PurgeResult(len(picked), len(gone), len(ended) > limit or len(expired) > limit,
                                 tuple(e.id for e in picked))
            if dry_run:
                return result
            for exe in picked:
                d["executions"][exe.id] = tombstone(exe, now + tombstone_ttl, now).model_dump_json()
                d["trace"].pop(exe.id, None)
            for eid in gone:
                for table in ("executions", "processed", "timers", "trace", "trace_idx"):
                    d[table].pop(eid, None)
            self._flush()
            return result

    def close(self) -> None:
        """Nothing to release: every change is already in the file."""
