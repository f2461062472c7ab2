"""The worker: creation on durastate.start, dedupe of redelivered ids, conflict retries, typed errors."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, control, load_definition
from durastate.engine.ids import RESUME, SUSPEND, emit_event_id, finished_event_id
from durastate.engine.model import FINISHED, START, Event, Execution
from durastate.engine.versions import definition_version
from durastate.errors import (
    ExecutionTooLarge,
    MalformedEvent,
    StoreConflict,
    UnknownDefinition,
    UnknownExecution,
)
from durastate.runtime import HandleResult, ManualClock, Worker
from durastate.runtime.worker import DEFAULT_KEEP_BYTES, detached_copy, kept_size, returns_live_objects
from durastate.store import DictStore
from durastate.store.base import ExecutionStore
from durastate.store.migration import migrate_execution
from tests.store.conformance.backends import BACKENDS, BackendRequest, open_backend

from .conftest import COUNTER, INC, HookedStore, ev


def start_event(eid: str, definition_id: str = "counter", **data: object) -> Event:
    return Event(id=f"{eid}:start", name=START, data={"definition_id": definition_id, **data})


def test_start_creates_the_execution_with_the_default_context_merged(
        dict_store: DictStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    w = Worker(dict_store, registry, clock)
    assert w.handle("c1", start_event("c1", context={"peer": "c2", "extra": [1]})) == "applied"
    exe = dict_store.load("c1")
    assert exe is not None
    assert exe.definition_id == "counter" and exe.status == "running" and exe.active_path == "idle"
    assert exe.context == {"count": 0, "peer": "c2", "extra": [1]}
    assert exe.version == 1 and exe.created_at == clock()
    assert dict_store.is_processed("c1", "c1:start")


def test_start_is_idempotent(dict_store: DictStore, registry: DefinitionRegistry) -> None:
    w = Worker(dict_store, registry)
    w.handle("c1", start_event("c1"))
    w.handle("c1", ev("inc"))
    assert w.handle("c1", start_event("c1")) == HandleResult.DUPLICATE
    # a second start with another event id for an execution that already started: consumed, no change
    assert w.handle("c1", Event(id="other-start", name=START, data={"definition_id": "counter"})) == "ignored"
    exe = dict_store.load("c1")
    assert exe is not None and exe.context["count"] == 1 and exe.active_path == "idle"


def test_the_same_event_id_twice_changes_nothing_the_second_time(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    w = Worker(dict_store, registry)
    w.handle("c1", start_event("c1", context={"peer": "c2"}))
    assert w.handle("c1", ev("poke", "p1")) == "applied"
    before = dict_store.load("c1")
    assert before is not None
    snapshot = before.model_dump()
    outbox = dict_store.pending_outbox()
    trace = dict_store.read_trace("c1")
    assert w.handle("c1", ev("poke", "p1")) == "duplicate"
    after = dict_store.load("c1")
    assert after is not None and after.model_dump() == snapshot
    assert dict_store.pending_outbox() == outbox and dict_store.read_trace("c1") == trace


def test_an_unhandled_event_is_consumed_so_a_later_redelivery_cannot_apply_it(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    w = Worker(dict_store, registry)
    w.handle("c1", start_event("c1"))
    w.handle("c1", ev("wait"))
    assert w.handle("c1", ev("stop", "s1")) == "ignored"  # not handled in 'waiting'
    assert dict_store.is_processed("c1", "s1")
    w.handle("c1", ev("rearm"))
    assert w.handle("c1", ev("stop", "s1")) == "duplicate"


def test_an_event_for_a_missing_execution_is_a_typed_error(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    with pytest.raises(UnknownExecution, match="no execution 'ghost'"):
        Worker(dict_store, registry).handle("ghost", ev("inc"))
    assert dict_store.load("ghost") is None


def test_a_start_of_an_unknown_definition_is_a_typed_error(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    with pytest.raises(UnknownDefinition, match="unknown definition 'nope'"):
        Worker(dict_store, registry).handle("x", start_event("x", "nope"))
    assert dict_store.load("x") is None


@pytest.mark.parametrize(("data", "reason"), [
    ({}, "needs data.definition_id"),
    ({"definition_id": 3}, "needs data.definition_id"),
    ({"definition_id": "counter", "context": [1]}, "data.context must be a JSON object"),
    ({"definition_id": "counter", "parent_id": 5}, "data.parent_id must be a string"),
])
def test_a_start_with_unusable_data_is_malformed(dict_store: DictStore, registry: DefinitionRegistry,
                                                 data: dict[str, object], reason: str) -> None:
    with pytest.raises(MalformedEvent, match=reason):
        Worker(dict_store, registry).handle("x", Event(id="s", name=START, data=data))


def test_an_invoked_child_of_an_unknown_definition_fails_and_tells_its_parent(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    w = Worker(dict_store, registry)
    dict_store.save(Execution(id="p", definition_id="counter", active_path="idle", invoke_seq=1))
    start = Event(id="p~1:start", name=START, data={"definition_id": "nope", "context": {"a": 1},
                                                   "parent_id": "p", "child_id": "p~1"})
    assert w.handle("p~1", start) == "applied"
    child = dict_store.load("p~1")
    assert child is not None and child.status == "failed"
    assert "unknown definition 'nope'" in (child.error or "")
    assert child.parent_id == "p" and child.child_id == "p~1"
    (entry,) = dict_store.pending_outbox()
    assert entry.target_id == "p" and entry.event.name == FINISHED and entry.event.id == finished_event_id("p~1")
    assert entry.event.data["status"] == "failed" and entry.event.data["child_id"] == "p~1"


def test_events_for_an_ended_execution_are_consumed_and_ignored(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    w = Worker(dict_store, registry)
    w.handle("c1", start_event("c1"))
    w.handle("c1", ev("stop"))
    exe = dict_store.load("c1")
    assert exe is not None and exe.status == "finished" and exe.outcome == "ok"
    assert w.handle("c1", ev("inc", "late")) == "ignored"
    assert dict_store.is_processed("c1", "late")
    again = dict_store.load("c1")
    assert again is not None and again.context["count"] == 0 and again.status == "finished"


def test_a_step_rerun_after_a_lost_race_derives_its_emitted_ids_from_the_stored_secret(
        any_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    """An execution stored before secrets gets one at its next step. When that step loses the commit's
    compare-and-swap to another worker (which gave it one first), the re-run steps the reloaded execution:
    the events it emits carry ids derived from the secret stored with it, so a later re-run of the same
    step (after a crash) would derive the very same ids."""
    store = HookedStore(any_store)
    w1 = Worker(store, registry, clock)  # type: ignore[arg-type]
    w2 = Worker(store, registry, clock)  # type: ignore[arg-type]
    w1.handle("c1", start_event("c1", context={"peer": "c2"}))
    legacy = store.load("c1")
    assert legacy is not None
    legacy.secret = None
    store.commit(legacy, [], processed_event_id="stored-before-secrets")
    store.before_commit = lambda _exe: w2.handle("c1", ev("inc", "i1"))
    assert w1.handle("c1", ev("poke", "p1")) == "applied"
    assert w1.conflicts == 1
    stored = store.load("c1")
    assert stored is not None and stored.secret
    (entry,) = [e for e in store.pending_outbox() if e.target_id == "c2"]
    assert entry.event.id == emit_event_id("c1", stored.version - 1, 1, stored.secret)


def test_a_conflict_is_retried_and_the_result_equals_serial_application(
        any_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = HookedStore(any_store)
    w1 = Worker(store, registry, clock)  # type: ignore[arg-type]
    w2 = Worker(store, registry, clock)  # type: ignore[arg-type]
    w1.handle("c1", start_event("c1"))
    # While w1 is between load and commit of "wait", w2 applies two "inc"s: w1's commit must lose the CAS,
    # reload, and apply "wait" on top of them.
    store.before_commit = lambda _exe: (w2.handle("c1", ev("inc", "i1")), w2.handle("c1", ev("inc", "i2")))
    assert w1.handle("c1", ev("wait", "w")) == "applied"
    assert w1.conflicts == 1
    concurrent = store.load("c1")

    serial_store = DictStore()
    s = Worker(serial_store, registry, clock)
    for e in (start_event("c1"), ev("inc", "i1"), ev("inc", "i2"), ev("wait", "w")):
        s.handle("c1", e)
    serial = serial_store.load("c1")
    assert concurrent is not None and serial is not None
    assert concurrent.secret and serial.secret  # every execution has one; random, so compared on being there
    assert concurrent.model_dump(exclude={"secret"}) == serial.model_dump(exclude={"secret"})
    assert store.read_trace("c1") == serial_store.read_trace("c1")
    assert store.due_timers(clock() + 60) == serial_store.due_timers(clock() + 60)


def test_conflicts_past_the_bound_raise_and_leave_nothing_half_applied(
        any_store: ExecutionStore, registry: DefinitionRegistry) -> None:
    store = HookedStore(any_store)
    w = Worker(store, registry, max_conflict_retries=2, sleep=lambda _s: None)  # type: ignore[arg-type]
    other = Worker(store, registry)  # type: ignore[arg-type]
    w.handle("c1", start_event("c1"))
    n = iter(range(100))

    def interfere(_exe: Execution) -> None:
        other.handle("c1", ev("inc", f"x{next(n)}"))
        store.before_commit = interfere

    store.before_commit = interfere
    with pytest.raises(StoreConflict):
        w.handle("c1", ev("wait", "w"))
    store.before_commit = None
    exe = store.load("c1")
    assert exe is not None and exe.active_path == "idle" and exe.context["count"] == 3
    assert not store.is_processed("c1", "w") and exe.timers == {}


def test_a_failed_commit_leaves_the_live_object_of_an_in_memory_store_untouched(
        registry: DefinitionRegistry) -> None:
    store = HookedStore(DictStore())
    w = Worker(store, registry)  # type: ignore[arg-type]
    w.handle("c1", start_event("c1"))
    live = store.load("c1")
    assert live is not None
    before = live.model_dump()

    def too_large(_exe: Execution) -> None:
        raise ExecutionTooLarge("execution item", 500_000, 400_000)

    store.before_commit = too_large
    with pytest.raises(ExecutionTooLarge):
        w.handle("c1", ev("wait"))
    assert live.model_dump() == before and store.load("c1") is live


def test_copy_on_load_is_automatic_for_live_stores_only(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    assert returns_live_objects(dict_store)
    assert Worker(dict_store, registry).copy_on_load

    class Fresh:
        returns_live_objects = False

    assert not returns_live_objects(Fresh())
    assert Worker(dict_store, registry, copy_on_load=False).copy_on_load is False


def test_detached_copy_is_deep_and_equal() -> None:
    exe = Execution(id="a", definition_id="d", context={"l": [{"x": 1}]}, history={"s": "s.a"},
                    timers={"s": 1.0}, sends={"~send:l": Event(id="e", name="later")})
    cp = detached_copy(exe)
    assert cp == exe and cp is not exe
    cp.context["l"][0]["x"] = 2
    cp.timers["t"] = 2.0
    cp.sends.clear()
    assert exe.context == {"l": [{"x": 1}]} and exe.timers == {"s": 1.0} and list(exe.sends) == ["~send:l"]


def test_a_definition_missing_from_the_registry_for_an_existing_execution_is_typed(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    dict_store.save(Execution(id="z", definition_id="gone", active_path="idle"))
    with pytest.raises(UnknownDefinition):
        Worker(dict_store, registry).handle("z", ev("inc"))


def test_a_pre_saved_unstarted_execution_is_started_by_durastate_start(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    dict_store.save(Execution(id="pre", definition_id="counter", context={"count": 5}))
    assert Worker(dict_store, registry).handle("pre", start_event("pre")) == "applied"
    exe = dict_store.load("pre")
    assert exe is not None and exe.active_path == "idle" and exe.context["count"] == 5


def test_load_definition_is_real() -> None:
    # guard against this module silently running on a stub engine
    assert load_definition({"id": "t", "initial": "a", "states": {"a": {}}}).id == "t"


# -- keep_committed: applying the next event without reading the execution back -------------------------


class CountingStore(HookedStore):
    """Counts the worker's reads: loads (``load_for_event``) and version reads (``version_for_event``)."""

    def __init__(self, inner: ExecutionStore) -> None:
        super().__init__(inner)
        self.reads = 0
        self.version_reads: list[str] = []

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        self.reads += 1
        return self.inner.load_for_event(execution_id, event_id)

    def version_for_event(self, execution_id: str, event_id: str) -> tuple[int | None, bool]:
        self.version_reads.append(event_id)
        result: tuple[int | None, bool] = self.inner.version_for_event(  # type: ignore[attr-defined]
            execution_id, event_id)
        return result


class Calls:
    """A ``call`` action that records every run: the event it ran for and the count it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def __call__(self, context: dict[str, Any], event: Event) -> None:
        self.seen.append((event.id, context["count"]))


@pytest.fixture
def calls(registry: DefinitionRegistry) -> Calls:
    """Registers ``counted``: the counter whose ``inc`` also calls Python (so it runs user code)."""
    recorder = Calls()
    doc = copy.deepcopy(COUNTER)
    doc["id"] = "counted"
    for state in ("idle", "waiting"):
        doc["states"][state]["on"]["inc"] = {"actions": [{"call": recorder}, INC]}
    registry.register(doc)
    return recorder


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[ExecutionStore]:
    from durastate.store import SqliteStore

    with SqliteStore(tmp_path / "keep.db") as store:
        yield store


def test_only_a_definition_with_python_in_its_guards_or_actions_runs_user_code(
        registry: DefinitionRegistry, calls: Calls) -> None:
    assert not registry.get("counter").tables.runs_user_code  # assign, send, timers
    assert registry.get("counted").tables.runs_user_code
    guarded = copy.deepcopy(COUNTER)
    guarded["states"]["idle"]["on"]["stop"] = {"target": "done", "guard": {"not": lambda ctx, ev: True}}
    assert load_definition(guarded).tables.runs_user_code
    on_exit = copy.deepcopy(COUNTER)
    on_exit["states"]["waiting"]["exit"] = ["tests.runtime.test_worker:start_event"]
    assert load_definition(on_exit).tables.runs_user_code
    task = {"id": "t", "initial": "a", "states": {
        "a": {"invoke": {"task": {"python": "tests.runtime.test_worker:start_event"}}, "on_done": "b"},
        "b": {"type": "final"}}}
    assert not load_definition(task).tables.runs_user_code  # a task is recorded, and run outside the step


def test_a_kept_execution_takes_its_next_events_without_a_read(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = CountingStore(sqlite_store)
    w = Worker(store, registry, clock, keep_committed=8)  # type: ignore[arg-type]
    w.handle("c1", start_event("c1"))
    for i in range(5):
        assert w.handle("c1", ev("inc", f"i{i}")) == "applied"
    assert store.reads == 1  # the start's dedupe check; every inc committed on the kept copy
    assert store.version_reads == []  # the counter runs no Python: nothing to protect from a stale copy
    exe = sqlite_store.load("c1")
    assert exe is not None and exe.context["count"] == 5 and exe.version == 6
    assert w.committed("c1") == exe


@pytest.mark.parametrize("definition", ["counter", "counted"])
def test_a_redelivered_event_on_a_kept_execution_is_still_a_duplicate(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock, calls: Calls,
        definition: str) -> None:
    w = Worker(sqlite_store, registry, clock, keep_committed=8)
    w.handle("c1", start_event("c1", definition))
    w.handle("c1", ev("inc", "i1"))
    w.handle("c1", ev("inc", "i2"))
    assert w.handle("c1", ev("inc", "i1")) == HandleResult.DUPLICATE  # the read (or the commit) says so
    assert w.handle("c1", start_event("c1", definition)) == HandleResult.DUPLICATE
    exe = sqlite_store.load("c1")
    assert exe is not None and exe.context["count"] == 2 and exe.version == 3
    assert w.handle("c1", ev("inc", "i3")) == "applied"  # and the worker goes on from the right state
    exe = sqlite_store.load("c1")
    assert exe is not None and exe.context["count"] == 3
    if definition == "counted":  # the redelivery was found before any step: the call ran once per event
        assert [eid for eid, _ in calls.seen] == ["i1", "i2", "i3"]


@pytest.mark.parametrize(("exclusive", "definition", "stale_conflicts"), [
    (False, "counted", (1, 0)),  # the version read finds the stale copy before it is stepped
    (False, "counter", (0, 1)),  # no Python to protect: stepped unchecked, the commit refuses it
    (True, "counted", (0, 1)),  # an exclusive worker trusts every kept copy
], ids=["default-calls", "default-declarative", "exclusive"])
def test_a_kept_copy_another_writer_moved_on_is_reloaded_and_the_result_is_serial(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock, calls: Calls,
        exclusive: bool, definition: str, stale_conflicts: tuple[int, int]) -> None:
    mine = Worker(sqlite_store, registry, clock, keep_committed=8, exclusive=exclusive)
    other = Worker(sqlite_store, registry, clock, keep_committed=0)
    mine.handle("c1", start_event("c1", definition))
    mine.handle("c1", ev("inc", "i1"))
    other.handle("c1", ev("inc", "i2"))  # mine's kept copy is now one version behind
    other.handle("c1", ev("wait", "w"))
    assert mine.handle("c1", ev("inc", "i3")) == "applied"
    assert (mine.stale, mine.conflicts) == stale_conflicts
    exe = sqlite_store.load("c1")  # on the stale copy it would be count 2 in idle
    assert exe is not None and exe.context["count"] == 3 and exe.active_path == "waiting"
    assert sqlite_store.is_processed("c1", "i3")
    if definition == "counted":  # by default the call never ran on the stale copy; exclusive: it did
        stale_run = [("i3", 1)] if exclusive else []
        assert calls.seen == [("i1", 0), ("i2", 1), *stale_run, ("i3", 2)]


def test_kept_copies_are_the_default_and_cost_one_version_read_only_where_python_runs(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock, calls: Calls) -> None:
    store = CountingStore(sqlite_store)
    w = Worker(store, registry, clock)  # type: ignore[arg-type]
    assert w.keep_bytes == DEFAULT_KEEP_BYTES and w.keep_committed is None and not w.exclusive
    w.handle("plain", start_event("plain"))
    w.handle("py", start_event("py", "counted"))
    for i in range(3):
        w.handle("plain", ev("inc", f"p{i}"))
        w.handle("py", ev("inc", f"i{i}"))
    assert store.reads == 2 and store.version_reads == ["i0", "i1", "i2"]
    assert w.handle("py", ev("inc", "i1")) == HandleResult.DUPLICATE  # the version read says it was applied
    assert store.version_reads[-1] == "i1" and store.reads == 2
    assert w.handle("plain", ev("inc", "p1")) == HandleResult.DUPLICATE  # the commit refused it; then a load
    assert store.reads == 3 and len(store.version_reads) == 4
    assert [eid for eid, _ in calls.seen] == ["i0", "i1", "i2"]


def test_an_error_met_on_an_unchecked_stale_copy_is_not_raised_the_stored_state_decides(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "MAX_HELD", 1)
    mine = Worker(sqlite_store, registry, clock)
    other = Worker(sqlite_store, registry, clock, keep_committed=0)
    mine.handle("c1", start_event("c1"))
    mine.handle("c1", Event(id="s", name=SUSPEND))
    assert mine.handle("c1", ev("inc", "i1")) == HandleResult.HELD  # mine keeps it suspended, holding one
    assert other.handle("c1", Event(id="r", name=RESUME)) == "applied"  # the held inc applies
    with pytest.raises(control.ControlError, match="holds"):  # what the stale copy alone would say
        control.hold(detached_copy(mine.committed("c1")), ev("inc", "i2"))  # type: ignore[arg-type]
    assert mine.handle("c1", ev("inc", "i2")) == "applied"  # the stored state: running, so it applies
    exe = sqlite_store.load("c1")
    assert exe is not None and (exe.status, exe.context["count"]) == ("running", 2)
    assert mine.stale == 1


def test_a_kept_copy_of_an_execution_migrated_meanwhile_is_stepped_on_its_new_version(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    v1 = registry.get("counter")
    doc = copy.deepcopy(COUNTER)
    doc["states"]["idle"]["on"]["inc"] = {"actions": [{"assign": {"count": {"add": ["$context.count", 10]}}}]}
    v2 = load_definition(doc)
    registry.add_version(v2)
    w = Worker(sqlite_store, registry, clock)
    w.handle("c1", start_event("c1"))
    w.handle("c1", ev("inc", "i1"))
    assert migrate_execution(sqlite_store, "c1", definition_version(v1), v1, v2, {}, clock) is not None
    assert w.handle("c1", ev("inc", "i2")) == "applied"  # the kept v1 copy's commit is refused: v2 steps
    exe = sqlite_store.load("c1")
    assert exe is not None and exe.context["count"] == 11 and exe.definition_version == definition_version(v2)
    assert w.conflicts == 1


@pytest.fixture(params=[pytest.param(n, marks=BACKENDS[n].marks) for n in ("sqlite", "postgres")])
def checking_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExecutionStore]:
    """A fresh store of each backend whose commit checks the event (the workers keep copies there)."""
    with open_backend(BACKENDS[request.param], BackendRequest(tmp_path, unique=f"h{uuid.uuid4().hex[:16]}")) as s:
        yield s


TURNS = "AABABBBAABABAAABBBAB"
"""Which of two workers takes each next event of one execution: runs of both lengths, so kept copies are
by turns current and stale."""


@pytest.mark.parametrize("definition", ["counter", "counted"])
def test_two_workers_taking_turns_on_one_execution_apply_every_event_once(
        checking_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock, calls: Calls,
        definition: str) -> None:
    stores = {name: CountingStore(checking_store) for name in "AB"}
    workers = {name: Worker(store, registry, clock) for name, store in stores.items()}  # type: ignore[arg-type]
    assert all(w.keeps for w in workers.values())
    workers["A"].handle("c1", start_event("c1", definition))
    events = [f"e{i}" for i in range(len(TURNS))]
    for eid, turn in zip(events, TURNS, strict=True):
        assert workers[turn].handle("c1", ev("inc", eid)) == "applied"
    for w in workers.values():  # a redelivery, to the worker that applied it and to the other
        assert w.handle("c1", ev("inc", events[-1])) == HandleResult.DUPLICATE
    exe = checking_store.load("c1")
    assert exe is not None and exe.context["count"] == len(events) and exe.version == len(events) + 1
    assert all(checking_store.is_processed("c1", eid) for eid in events)
    version_reads = sum(len(s.version_reads) for s in stores.values())
    conflicts = sum(w.conflicts for w in workers.values())
    if definition == "counter":  # declarative: never a version read; a stale copy lost its commit instead
        assert version_reads == 0 and conflicts > 0
    else:  # Python runs: every kept copy is checked first, the call ran once per event, in serial order
        assert version_reads > 0 and conflicts == 0
        assert calls.seen == [(eid, n) for n, eid in enumerate(events)]


def test_keep_committed_is_ignored_on_a_store_whose_commit_cannot_check_the_event(
        dict_store: DictStore, registry: DefinitionRegistry) -> None:
    w = Worker(dict_store, registry, keep_committed=8)
    assert w.keep_committed == 0 and w.keep_bytes == 0 and not w.keeps
    with pytest.raises(ValueError, match="keep_committed"):
        Worker(dict_store, registry, keep_committed=-1)
    with pytest.raises(ValueError, match="keep_bytes"):
        Worker(dict_store, registry, keep_bytes=-1)


def _round_robin(w: Worker, ids: list[str], rounds: int) -> None:
    for eid in ids:
        w.handle(eid, start_event(eid))
    for r in range(rounds):
        for eid in ids:
            assert w.handle(eid, ev("inc", f"{eid}:{r}")) == "applied"


def test_ten_thousand_executions_taking_turns_stay_kept_under_the_default_budget(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = CountingStore(sqlite_store)
    w = Worker(store, registry, clock)  # type: ignore[arg-type]
    ids = [f"x{i}" for i in range(10_000)]
    _round_robin(w, ids, 1)
    assert store.reads == len(ids)  # each start's dedupe check; no load for any later event
    assert w.kept_bytes <= w.keep_bytes
    exe = sqlite_store.load(ids[0])
    assert exe is not None and exe.context["count"] == 1


def test_a_small_budget_drops_the_least_recently_committed_and_loads_it_again(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = CountingStore(sqlite_store)
    w = Worker(store, registry, clock)  # type: ignore[arg-type]
    w.handle("probe", start_event("probe"))
    size = kept_size(w.committed("probe"))  # type: ignore[arg-type]
    w = Worker(store, registry, clock, keep_bytes=3 * size)  # type: ignore[arg-type]
    for eid in ("a", "b", "c"):
        w.handle(eid, start_event(eid))
    reads = store.reads
    w.handle("a", ev("inc", "a1"))  # a is now the most recent: b is the least recently committed
    w.handle("d", start_event("d"))  # one over the budget: b is dropped
    assert w.committed("b") is None and all(w.committed(eid) is not None for eid in "acd")
    assert w.kept_bytes <= w.keep_bytes
    assert store.reads == reads + 1  # only d's dedupe check
    assert w.handle("b", ev("inc", "b1")) == "applied"  # loaded again, and the result is right
    assert store.reads == reads + 2
    exe = sqlite_store.load("b")
    assert exe is not None and exe.context["count"] == 1


def test_keep_committed_still_caps_the_number_kept(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    store = CountingStore(sqlite_store)
    w = Worker(store, registry, clock, keep_committed=2)  # type: ignore[arg-type]
    _round_robin(w, ["a", "b", "c"], 1)  # three in turn, two kept: each next event is loaded
    assert store.reads == 6
    assert w.committed("a") is None and w.committed("c") is not None


def test_a_larger_execution_counts_for_more_of_the_budget(
        sqlite_store: ExecutionStore, registry: DefinitionRegistry, clock: ManualClock) -> None:
    w = Worker(sqlite_store, registry, clock)
    w.handle("small", start_event("small"))
    big = start_event("big")
    big.data["context"] = {"count": 0, "notes": ["x" * 1000] * 100}
    w.handle("big", big)
    small_size, big_size = kept_size(w.committed("small")), kept_size(w.committed("big"))  # type: ignore[arg-type]
    assert big_size > small_size + 100_000
    assert w.kept_bytes == small_size + big_size
    w.forget()
    assert w.kept_bytes == 0 and w.committed("small") is None
    w = Worker(sqlite_store, registry, clock, keep_bytes=big_size - 1)
    w.handle("small", ev("inc", "s1"))
    w.handle("big", ev("inc", "b1"))  # larger than the whole budget: not kept, and the others stay
    assert w.committed("big") is None and w.committed("small") is not None


# -- an event costs what it changes: context values shared between copies, changed by copy-on-write ----------
ALIASING = {
    "id": "aliasing", "initial": "a",
    "context": {"customer": {"name": "Ada", "city": "Paris"}, "lines": {f"l{i}": {"qty": i} for i in range(50)}},
    "states": {"a": {"on": {
        "save": {"actions": [{"assign": {"saved": "$context.customer"}}]},
        "rename": {"actions": [{"assign": {"customer.name": "Grace"}}]},
        "wait": "b",
    }}, "b": {}},
}


def test_a_nested_assign_changes_only_its_key_on_every_store(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    """A value copied from another key is a value, not a second name for the same object: the nested assign
    changes only ``customer``, whether the worker stepped a copy it kept or one it loaded (it was written
    into ``saved`` as well when the kept copy shared the object), and the trace says exactly that."""
    registry = DefinitionRegistry()
    registry.register(ALIASING)
    for eid in ("kept", "loaded"):
        w = Worker(every_store, registry, clock)
        w.handle(eid, start_event(eid, "aliasing"))
        w.handle(eid, ev("save", f"{eid}:1"))
        stepper = w if eid == "kept" else Worker(every_store, registry, clock)
        assert stepper.handle(eid, ev("rename", f"{eid}:2")) == "applied"
        exe = every_store.load(eid)
        assert exe is not None
        assert exe.context["customer"] == {"name": "Grace", "city": "Paris"}, eid
        assert exe.context["saved"] == {"name": "Ada", "city": "Paris"}, eid
        assert exe.context["lines"] == ALIASING["context"]["lines"]  # type: ignore[index]
        step = every_store.read_trace(eid)[-1]
        assert step["event"] == "rename"
        assert step["context"] == {"customer": [{"name": "Ada", "city": "Paris"}, {"name": "Grace", "city": "Paris"}]}


def test_a_failed_commit_after_a_nested_assign_leaves_the_live_object_untouched() -> None:
    registry = DefinitionRegistry()
    registry.register(ALIASING)
    store = HookedStore(DictStore())
    w = Worker(store, registry)  # type: ignore[arg-type]
    w.handle("c1", start_event("c1", "aliasing"))
    w.handle("c1", ev("save"))
    live = store.load("c1")
    assert live is not None
    before = copy.deepcopy(live.model_dump())

    def too_large(_exe: Execution) -> None:
        raise ExecutionTooLarge("execution item", 500_000, 400_000)

    store.before_commit = too_large
    with pytest.raises(ExecutionTooLarge):
        w.handle("c1", ev("rename"))
    assert live.model_dump() == before and store.load("c1") is live


def test_kept_size_counts_again_only_the_values_that_changed() -> None:
    exe = Execution(id="a", definition_id="d", context={"n": 1, "big": {f"k{i}": "v" * 10 for i in range(100)},
                                                        "l": ["x" * 50]})
    sizes: dict[str, tuple[Any, int]] = {}
    assert kept_size(exe, sizes) == kept_size(exe)
    assert set(sizes) == {"big", "l"}
    exe.context["l"] = ["y" * 500]  # a value replaced: counted again
    exe.context["n"] = 2
    assert kept_size(exe, sizes) == kept_size(exe)
    del exe.context["big"]
    assert kept_size(exe, sizes) == kept_size(exe) and set(sizes) == {"l"}
