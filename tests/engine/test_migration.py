"""Planning a migration (pure): every state path an execution names is rewritten through the mapping —
a mapped compound state takes its descendants along — and any path that is not a state of the new version
once mapped is reported, so nothing is half-moved."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import ChildRef, Execution, load_definition
from durastate.engine.ids import REINVOKE_PREFIX, RETRY_PATH, after_timer_key
from durastate.engine.migration import (
    apply_migration,
    map_path,
    mapping_issues,
    parse_mapping,
    plan_migration,
    state_paths,
)
from durastate.engine.model import TimerOp
from durastate.engine.versions import definition_version


def chart(work: str, step: str) -> Any:
    """A chart whose compound state is called ``work`` and its second child ``step``."""
    return load_definition({"id": "job", "initial": work, "states": {
        work: {"initial": "start", "states": {
            "start": {"on": {"next": step}},
            step: {"after": {"seconds": 10, "target": "start"}, "on": {"back": "start"}},
            "hist": {"type": "history", "history": "deep"}},
            "on": {"pause": "paused"}},
        "paused": {"on": {"resume": f"{work}.hist"}},
        "fan": {"type": "parallel", "states": {region: {"initial": "x", "states": {"x": {}}}
                                                for region in ("a", "b")}},
        "done": {"type": "final"}}})


OLD, NEW = chart("work", "step"), chart("labour", "stage")


def running(**fields: Any) -> Execution:
    return Execution(id="j-1", definition_id="job", definition_version=definition_version(OLD), **fields)


def test_a_mapped_compound_state_takes_its_descendants_and_the_longest_prefix_wins() -> None:
    mapping = {"work": "labour", "work.step": "labour.stage"}
    assert map_path("work.step", mapping) == "labour.stage"
    assert map_path("work.start", mapping) == "labour.start"
    assert map_path("workshop", mapping) == "workshop"  # a prefix is a whole path segment
    assert map_path("paused", mapping) == "paused"


def test_active_path_history_timers_and_children_are_remapped() -> None:
    exe = running(active_path="work.step", history={"work": "work.start"},
                  timers={"work.step": 100.0, after_timer_key("work.step", 1): 200.0, RETRY_PATH: 50.0,
                          REINVOKE_PREFIX + "work.start": 70.0},
                  children={"j-1~1": ChildRef(path="work.start", kind="invoke")})
    plan = plan_migration(exe, OLD, NEW, {"work": "labour", "work.step": "labour.stage"})
    assert plan.unmapped == []
    assert plan.active_path == "labour.stage"
    assert plan.history == {"labour": "labour.start"}
    assert plan.timers == {"labour.stage": 100.0, after_timer_key("labour.stage", 1): 200.0, RETRY_PATH: 50.0,
                           REINVOKE_PREFIX + "labour.start": 70.0}
    assert plan.children == {"j-1~1": "labour.start"}
    assert "active: work.step -> labour.stage" in plan.changes

    ops = apply_migration(exe, plan)
    assert exe.active_path == "labour.stage" and exe.definition_version == definition_version(NEW)
    assert exe.children["j-1~1"].path == "labour.start" and exe.children["j-1~1"].kind == "invoke"
    assert TimerOp("cancel", "work.step") in ops and TimerOp("schedule", "labour.stage", 100.0) in ops
    assert all(op.path != RETRY_PATH for op in ops)  # the execution-wide timer keeps its key


def test_a_region_child_has_its_root_path_remapped() -> None:
    exe = running(active_path="fan.a.x", root_path="fan.a", parent_id="p", child_id="p~1")
    doc = NEW.to_dict()
    doc["states"]["fan"]["states"] = {"left": doc["states"]["fan"]["states"]["a"],
                                      "b": doc["states"]["fan"]["states"]["b"]}
    plan = plan_migration(exe, OLD, load_definition(doc), {"fan.a": "fan.left"})
    assert (plan.root_path, plan.active_path, plan.unmapped) == ("fan.left", "fan.left.x", [])


def test_unmapped_paths_are_listed_and_nothing_is_applied() -> None:
    exe = running(active_path="work.step", history={"work": "work.start"})
    plan = plan_migration(exe, OLD, NEW, {})
    assert plan.unmapped == ["work.step", "work", "work.start"]
    assert set(state_paths(exe)) == {"work.step", "work", "work.start"}
    with pytest.raises(ValueError, match="unmapped"):
        apply_migration(exe, plan)
    assert exe.active_path == "work.step" and exe.definition_version == definition_version(OLD)


def test_an_active_state_mapped_to_a_state_of_another_kind_is_unmapped() -> None:
    exe = running(active_path="work.step")
    plan = plan_migration(exe, OLD, NEW, {"work.step": "labour"})  # an atomic state onto a compound one
    assert plan.unmapped == ["work.step"]
    assert any("is atomic but labour is compound" in line for line in plan.changes)
    # Without the old version at hand (an unversioned execution) a compound state is still refused.
    assert plan_migration(exe, None, NEW, {"work.step": "labour"}).unmapped == ["work.step"]


def test_unchanged_paths_map_to_themselves() -> None:
    exe = running(active_path="paused")
    plan = plan_migration(exe, OLD, NEW, {})
    assert (plan.unmapped, plan.changes, plan.active_path) == ([], [], "paused")


def test_mapping_text_and_mapping_mistakes_are_reported() -> None:
    assert parse_mapping(["work=labour", " work.step = labour.stage "]) == {"work": "labour",
                                                                          "work.step": "labour.stage"}
    for bad in (["work"], ["=labour"], ["work="], ["work=a", "work=b"]):
        with pytest.raises(ValueError, match="--map"):
            parse_mapping(bad)
    assert mapping_issues({"wrok": "labour", "work": "labor"}, OLD, NEW) == [
        "--map wrok=labour: 'wrok' is not a state of the old version",
        "--map work=labor: 'labor' is not a state of the new version",
    ]
