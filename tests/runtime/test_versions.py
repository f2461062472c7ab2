"""Definition versions end to end, on every store: a running execution keeps running on the version it
started on after the definition changes; `migrate` moves running executions (paths, armed timers)
to another version in one commit each; a migration that would strand an execution is refused whole."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import DEFINITION_RECORD, child_execution_id
from durastate.engine.versions import definition_version
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import ExecutionStore
from durastate.store.definitions import list_versions, load_version
from durastate.store.migration import candidates, migrate_execution
from tests.runtime.conftest import ev

SHIPPING: dict[str, Any] = {
    "id": "shipping",
    "initial": "packing",
    "context": {"log": []},
    "states": {
        "packing": {"on": {"packed": "waiting"}},
        "waiting": {
            "after": {"seconds": 60, "target": "late"},
            "on": {"picked_up": "transit"},
        },
        "transit": {
            "initial": "road",
            "states": {"road": {"on": {"hub": "sorting"}}, "sorting": {"on": {"out": "road"}}},
            "on": {"delivered": "delivered"},
        },
        "late": {"type": "final", "outcome": "late"},
        "delivered": {"type": "final", "outcome": "delivered"},
    },
}


def renamed(doc: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``doc`` with top-level state ``old`` renamed ``new`` (and every target naming it)."""
    out = copy.deepcopy(doc)
    out["states"] = {(new if k == old else k): v for k, v in out["states"].items()}
    if out.get("initial") == old:
        out["initial"] = new

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (new if k == "target" and v == old else fix(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [fix(v) for v in node]
        return new if node == old else node

    for state in out["states"].values():
        for key in ("on", "after"):
            if key in state:
                state[key] = fix(state[key])
    return out


def runtime(store: ExecutionStore, doc: dict[str, Any], clock: ManualClock) -> LocalRuntime:
    """A runtime with only ``doc`` in its definitions folder: a fresh process after a deploy."""
    return LocalRuntime(store, DefinitionRegistry([load_definition(doc)]), clock=clock)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


def test_a_running_execution_finishes_on_its_version_after_the_definition_changes(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    v1 = load_definition(SHIPPING)
    rt = runtime(every_store, SHIPPING, clock)
    rt.start("shipping", execution_id="s-1")
    rt.send("s-1", ev("packed", "e1"))
    rt.run_until_idle()
    exe = every_store.load("s-1")
    assert exe is not None and exe.active_path == "waiting"
    assert exe.definition_version == definition_version(v1)
    assert [v.version for v in list_versions(every_store, "shipping")] == [definition_version(v1)]

    edited = renamed(SHIPPING, "waiting", "ready")  # the deploy: `waiting` is now `ready`
    rt2 = runtime(every_store, edited, clock)
    rt2.send("s-1", ev("picked_up", "e2"))
    rt2.send("s-1", ev("delivered", "e3"))
    rt2.run_until_idle()
    exe = every_store.load("s-1")
    assert exe is not None and (exe.status, exe.outcome) == ("finished", "delivered")
    assert exe.definition_version == definition_version(v1)
    assert not rt2.dead_letters

    # New executions start on the newest version, and it is archived too.
    rt2.start("shipping", execution_id="s-2")
    rt2.send("s-2", ev("packed", "e4"))
    rt2.run_until_idle()
    fresh = every_store.load("s-2")
    assert fresh is not None and fresh.active_path == "ready"
    assert fresh.definition_version == definition_version(load_definition(edited))
    assert {v.version for v in list_versions(every_store, "shipping")} == {
        definition_version(v1), definition_version(load_definition(edited))}
    # The archive records are not executions of `shipping`.
    listed = every_store.list_executions(definition_id="shipping").items
    assert {s.id for s in listed} == {"s-1", "s-2"}
    assert every_store.list_executions(definition_id=DEFINITION_RECORD).items


def test_an_armed_timer_fires_on_the_old_version(every_store: ExecutionStore, clock: ManualClock) -> None:
    rt = runtime(every_store, SHIPPING, clock)
    rt.start("shipping", execution_id="s-1")
    rt.send("s-1", ev("packed", "e1"))
    rt.run_until_idle()
    rt2 = runtime(every_store, renamed(SHIPPING, "late", "overdue"), clock)
    clock.advance(61)
    rt2.run_until_idle()
    exe = every_store.load("s-1")
    assert exe is not None and (exe.status, exe.outcome) == ("finished", "late")


def test_regions_run_on_their_parents_version(every_store: ExecutionStore, clock: ManualClock) -> None:
    fork = {"id": "fork", "initial": "both", "states": {
        "both": {"type": "parallel", "states": {
            "left": {"initial": "l1", "states": {"l1": {"on": {"go": "l2"}}, "l2": {"type": "final"}}},
            "right": {"initial": "r1", "states": {"r1": {"on": {"go": "r2"}}, "r2": {"type": "final"}}}},
            "on_done": "joined"},
        "joined": {"type": "final", "outcome": "joined"}}}
    rt = runtime(every_store, fork, clock)
    rt.start("fork", execution_id="f-1")
    rt.run_until_idle()
    edited = copy.deepcopy(fork)
    edited["states"]["both"]["states"]["right"]["states"] = {"r1": {"on": {"go": "done"}},
                                                             "done": {"type": "final"}}
    edited["states"]["both"]["on_done"] = "joined"
    rt2 = runtime(every_store, edited, clock)
    rt2.send("f-1", ev("go", "g1"))
    rt2.run_until_idle()
    parent = every_store.load("f-1")
    assert parent is not None and (parent.status, parent.outcome) == ("finished", "joined")
    children = [every_store.load(child_execution_id("f-1", n)) for n in (1, 2)]
    assert {c.definition_version for c in children if c is not None} == {parent.definition_version}
    assert {c.active_path for c in children if c is not None} == {"both.left.l2", "both.right.r2"}


def test_a_version_nowhere_to_be_found_is_not_applied_and_says_what_to_do(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    rt = runtime(every_store, SHIPPING, clock)
    rt.start("shipping", execution_id="s-1")
    rt.run_until_idle()
    exe = every_store.load("s-1")
    assert exe is not None
    exe.definition_version = "0123456789abcdef"  # a version nobody archived (a store restored elsewhere)
    every_store.save(exe)
    rt.send("s-1", ev("packed", "e1"))
    rt.run_until_idle()
    (letter,) = rt.dead_letters
    assert letter.error == "UnknownDefinitionVersion"
    assert "restore that definition file" in letter.reason and "durastate migrate" in letter.reason
    after = every_store.load("s-1")
    assert after is not None and (after.status, after.active_path) == ("running", "packing")

    # Moved to a version that is there, the execution takes the replayed event.
    v1 = load_definition(SHIPPING)
    assert migrate_execution(every_store, "s-1", "0123456789abcdef", None, v1, {}, clock) is not None
    rt.replay_dead_letters()
    rt.run_until_idle()
    moved = every_store.load("s-1")
    assert moved is not None and moved.active_path == "waiting"
    assert moved.definition_version == definition_version(v1)


def test_migrate_moves_paths_history_and_armed_timers(every_store: ExecutionStore, clock: ManualClock) -> None:
    v1 = load_definition(SHIPPING)
    rt = runtime(every_store, SHIPPING, clock)
    for eid in ("s-1", "s-2", "s-3"):
        rt.start("shipping", execution_id=eid)
    rt.send("s-1", ev("packed", "a1"))  # s-1 waits, its timer armed
    for name in ("packed", "picked_up", "hub"):
        rt.send("s-2", ev(name, f"b-{name}"))  # s-2 is in transit.sorting
    rt.send("s-3", ev("packed", "c1"))
    rt.send("s-3", ev("picked_up", "c2"))
    rt.send("s-3", ev("delivered", "c3"))  # s-3 has ended: not migrated
    rt.run_until_idle()

    edited = renamed(renamed(SHIPPING, "waiting", "ready"), "transit", "moving")
    v2 = load_definition(edited)
    rt2 = runtime(every_store, edited, clock)  # the new version is the newest, and gets archived
    rt2.start("shipping", execution_id="s-4")
    rt2.run_until_idle()

    old = load_version(every_store, "shipping", definition_version(v1))
    assert old == v1
    mapping = {"waiting": "ready", "transit": "moving"}
    planned = candidates(every_store, "shipping", definition_version(v1), old, v2, mapping)
    assert sorted(c.execution.id for c in planned) == ["s-1", "s-2"]
    assert all(not c.plan.unmapped for c in planned)
    for c in planned:
        assert migrate_execution(every_store, c.execution.id, definition_version(v1), old, v2, mapping,
                                 clock) is not None
    s1, s2 = every_store.load("s-1"), every_store.load("s-2")
    assert s1 is not None and s2 is not None
    assert (s1.active_path, list(s1.timers)) == ("ready", ["ready"])
    assert s2.active_path == "moving.sorting"
    assert s1.definition_version == s2.definition_version == definition_version(v2)
    assert every_store.read_trace("s-1")[-1]["migrated"] == {
        "from": definition_version(v1), "to": definition_version(v2), "map": mapping}

    # The moved timer fires under its new key; the other runs on the new version's states.
    clock.advance(61)
    rt2.send("s-2", ev("out", "b-out"))
    rt2.send("s-2", ev("delivered", "b-del"))
    rt2.run_until_idle()
    s1, s2 = every_store.load("s-1"), every_store.load("s-2")
    assert s1 is not None and (s1.status, s1.outcome) == ("finished", "late")
    assert s2 is not None and (s2.status, s2.outcome) == ("finished", "delivered")
    assert not rt2.dead_letters


def test_a_migration_without_a_mapping_for_a_renamed_state_strands_and_changes_nothing(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    v1 = load_definition(SHIPPING)
    rt = runtime(every_store, SHIPPING, clock)
    rt.start("shipping", execution_id="s-1")
    rt.send("s-1", ev("packed", "a1"))
    rt.run_until_idle()
    v2 = load_definition(renamed(SHIPPING, "waiting", "ready"))
    (c,) = candidates(every_store, "shipping", definition_version(v1), v1, v2, {})
    assert c.plan.unmapped == ["waiting"]
    with pytest.raises(ValueError, match="waiting"):
        migrate_execution(every_store, "s-1", definition_version(v1), v1, v2, {}, clock)
    exe = every_store.load("s-1")
    assert exe is not None and exe.active_path == "waiting" and exe.definition_version == definition_version(v1)


def test_the_archive_works_the_same_on_an_async_store() -> None:
    import asyncio

    from durastate.store import AsyncDictStore
    from durastate.store.definitions import archive_version_async, list_versions_async, load_version_async

    v1 = load_definition(SHIPPING)

    async def scenario() -> None:
        store = AsyncDictStore()
        assert await archive_version_async(store, v1, 1.0) is True
        assert await archive_version_async(store, v1, 2.0) is False  # put-if-absent: archived once
        assert await load_version_async(store, "shipping", definition_version(v1)) == v1
        assert await load_version_async(store, "shipping", "0" * 16) is None
        (only,) = await list_versions_async(store, "shipping")
        assert (only.version, only.archived_at) == (definition_version(v1), 1.0)

    asyncio.run(scenario())


def test_a_migration_that_races_a_worker_plans_again_on_what_the_worker_committed(
        any_store: ExecutionStore, clock: ManualClock) -> None:
    from tests.runtime.conftest import HookedStore

    store = HookedStore(any_store)
    v1 = load_definition(SHIPPING)
    rt = runtime(store, SHIPPING, clock)
    rt.start("shipping", execution_id="s-1")
    rt.send("s-1", ev("packed", "a1"))
    rt.run_until_idle()
    v2 = load_definition(renamed(renamed(SHIPPING, "waiting", "ready"), "transit", "moving"))
    mapping = {"waiting": "ready", "transit": "moving"}

    def worker_wins(_: object) -> None:  # between the migration's read and its commit, s-1 is picked up
        rt.send("s-1", ev("picked_up", "a2"))
        rt.run_until_idle()

    store.before_commit = worker_wins
    plan = migrate_execution(store, "s-1", definition_version(v1), v1, v2, mapping, clock)
    assert plan is not None and plan.active_path == "moving.road"
    exe = store.load("s-1")
    assert exe is not None and exe.active_path == "moving.road" and exe.timers == {}
    assert exe.definition_version == definition_version(v2)
    assert [s["event"] for s in store.read_trace("s-1")][-2:] == ["picked_up", "migrate"]


def test_migrate_executions_moves_only_the_ids_or_statuses_selected(
        every_store: ExecutionStore, clock: ManualClock) -> None:
    from durastate.client import DurastateClient
    from durastate.errors import MigrationRefused, UnknownExecution
    from durastate.store.migration import migrate_executions
    from durastate.transport import InMemoryTransport

    v1 = load_definition(SHIPPING)
    rt = runtime(every_store, SHIPPING, clock)
    for eid in ("s-1", "s-2", "s-3", "s-4"):
        rt.start("shipping", execution_id=eid)
        rt.send(eid, ev("packed", f"{eid}-packed"))
    rt.send("s-4", ev("picked_up", "s-4-up"))
    rt.send("s-4", ev("delivered", "s-4-done"))  # s-4 has ended
    rt.run_until_idle()
    rt.suspend("s-3")
    rt.run_until_idle()
    v2 = load_definition(renamed(SHIPPING, "waiting", "ready"))
    old, new = definition_version(v1), definition_version(v2)
    mapping = {"waiting": "ready"}

    def versions() -> dict[str, str | None]:
        return {eid: exe.definition_version for eid in ("s-1", "s-2", "s-3", "s-4")
                if (exe := every_store.load(eid)) is not None}

    before = versions()
    for bad, error, problem in [
        ({"ids": ["s-1", "nope"]}, UnknownExecution, "no execution 'nope'"),
        ({"ids": ["s-1", "s-4"]}, MigrationRefused, "s-4 is finished, not running or suspended"),
        ({"ids": ["s-3"], "statuses": ["running"]}, MigrationRefused, "s-3 is suspended, not running"),
        ({"statuses": ["failed"]}, MigrationRefused, "a failed execution cannot be migrated"),
        ({"statuses": ["sleeping"]}, MigrationRefused, "--status sleeping: only running or suspended"),
    ]:
        with pytest.raises(error, match=re.escape(problem)):
            migrate_executions(every_store, "shipping", old, v2, mapping, ids=bad.get("ids"),
                               statuses=bad.get("statuses"), clock=clock)
    with pytest.raises(MigrationRefused, match="sit in states that version"):  # no mapping: s-1 stranded
        migrate_executions(every_store, "shipping", old, v2, ids=["s-1"], clock=clock)
    assert versions() == before  # every refusal changed nothing

    dry = migrate_executions(every_store, "shipping", old, v2, mapping, ids=["s-1"], clock=clock, dry_run=True)
    assert [c.execution.id for c in dry.planned] == ["s-1"] and dry.moved == [] and versions() == before
    done = migrate_executions(every_store, "shipping", old, v2, mapping, ids=["s-1"], old=v1, clock=clock)
    assert done.moved == ["s-1"] and versions() == {**before, "s-1": new}
    suspended = migrate_executions(every_store, "shipping", old, v2, mapping, statuses=["suspended"], clock=clock)
    assert suspended.moved == ["s-3"] and versions() == {**before, "s-1": new, "s-3": new}

    client = DurastateClient(InMemoryTransport(), every_store, DefinitionRegistry([v2]), clock=clock)
    rest = client.migrate("shipping", old, mapping=mapping)  # the rest: s-2 (s-4 ended, keeps its version)
    assert rest.moved == ["s-2"] and versions() == {"s-1": new, "s-2": new, "s-3": new, "s-4": old}
    s2 = every_store.load("s-2")
    assert s2 is not None and s2.active_path == "ready" and s2.updated_at == clock()
