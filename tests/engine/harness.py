"""A tiny in-memory router for engine tests: it delivers what ``step`` emits, creates spawned regions
and invoked children, and fires timers on an injected clock, without any store or runtime.

After every step it checks invariants: the execution JSON round trip is exact, a running execution has
an active path, and armed timers exist only for active states.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from durastate.engine import (
    START,
    TIMEOUT,
    Definition,
    DefinitionRegistry,
    Event,
    Execution,
    StepResult,
    load_definition,
    step,
    timeout_event_id,
)
from durastate.engine.ids import timer_key_state


def check_invariants(defn: Definition, exe: Execution) -> None:
    again = Execution.model_validate_json(exe.model_dump_json())
    assert again == exe
    assert again.model_dump() == exe.model_dump()
    if exe.status == "running":
        assert exe.active_path is not None
        actives = exe.leaves or [exe.active_path]  # several leaves inside an inline parallel state
        for key in exe.timers:
            path = timer_key_state(key)  # the state a timer belongs to (a state may have several)
            assert any(a == path or a.startswith(path + ".") for a in actives), (key, actives)
    assert exe.active_path is None or exe.active_path in defn.tables.index
    assert len(exe.leaves) != 1 and all(leaf in defn.tables.index for leaf in exe.leaves)


class Harness:
    def __init__(self, *definitions: Any, now: float = 1000.0) -> None:
        self.reg = DefinitionRegistry([load_definition(d) for d in definitions])
        self.exes: dict[str, Execution] = {}
        self.timers: dict[tuple[str, str], float] = {}
        self.queue: deque[tuple[str, Event]] = deque()
        self.notifications: list[Event] = []
        self.processed: set[tuple[str, str]] = set()
        self.results: list[tuple[str, Event, StepResult]] = []
        self.now = now

    # -- driving ---------------------------------------------------------------------------------------
    def start(self, definition_id: str, eid: str = "e", context: dict[str, Any] | None = None) -> Execution:
        self.queue.append(
            (
                eid,
                Event(
                    id=f"{eid}:start",
                    name=START,
                    data={"definition_id": definition_id, "context": context or {}},
                ),
            )
        )
        self.drain()
        return self.exes[eid]

    def send(self, eid: str, name: str, data: dict[str, Any] | None = None, id: str | None = None) -> None:
        ev = Event(name=name, data=data or {}) if id is None else Event(id=id, name=name, data=data or {})
        self.queue.append((eid, ev))
        self.drain()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for (eid, path), fire_at in sorted(self.timers.items(), key=lambda kv: kv[1]):
            if fire_at <= self.now:
                del self.timers[(eid, path)]
                self.queue.append(
                    (
                        eid,
                        Event(
                            id=timeout_event_id(eid, path, fire_at),
                            name=TIMEOUT,
                            data={"path": path, "fire_at": fire_at},
                        ),
                    )
                )
        self.drain()

    def drain(self, limit: int = 1000) -> None:
        for _ in range(limit):
            if not self.queue:
                return
            eid, ev = self.queue.popleft()
            self.apply(eid, ev)
        raise AssertionError("event loop did not drain")

    def apply(self, eid: str, ev: Event) -> StepResult | None:
        if (eid, ev.id) in self.processed:
            return None
        exe = self.exes.get(eid)
        if exe is None:
            assert ev.name == START, f"event {ev.name} for unknown execution {eid}"
            defn = self.reg.get(ev.data["definition_id"])
            exe = Execution(
                id=eid,
                definition_id=defn.id,
                context=defn.initial_context(ev.data.get("context")),
                parent_id=ev.data.get("parent_id"),
                child_id=ev.data.get("child_id"),
                root_path=ev.data.get("root_path"),
            )
            self.exes[eid] = exe
        defn = self.reg.get(exe.definition_id)
        res = step(defn, exe, ev, self.now)
        exe.version += 1
        self.processed.add((eid, ev.id))
        self.results.append((eid, ev, res))
        check_invariants(defn, exe)
        for op in res.timers:
            if op.action == "schedule":
                self.timers[(eid, op.path)] = op.fire_at
            else:
                self.timers.pop((eid, op.path), None)
        for cid, root_path, ctx in res.spawns:
            self.queue.append(
                (
                    cid,
                    Event(
                        id=f"{cid}:start",
                        name=START,
                        data={
                            "definition_id": exe.definition_id,
                            "context": ctx,
                            "parent_id": exe.id,
                            "child_id": cid,
                            "root_path": root_path,
                        },
                    ),
                )
            )
        for target, out in res.emits:
            if target is None:
                self.notifications.append(out)
            elif target in self.exes or out.name == START:
                self.queue.append((target, out))
        return res

    # -- reading ---------------------------------------------------------------------------------------
    def __getitem__(self, eid: str) -> Execution:
        return self.exes[eid]

    def logs(self, eid: str | None = None) -> list[str]:
        return [line for e, _, r in self.results if eid is None or e == eid for line in r.logs]
