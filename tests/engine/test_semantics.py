"""One test (or a few) per rule of the interpreter's semantics, on small definitions."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import MAX_MICROSTEPS, Event, Execution, load_definition, step
from durastate.engine.ids import finished_event_id

from .harness import Harness


def logged(name: str) -> dict[str, Any]:
    """entry/exit actions that log ``+name`` / ``-name``."""
    return {"entry": [{"log": f"+{name}"}], "exit": [{"log": f"-{name}"}]}


def st(name: str, **kw: Any) -> dict[str, Any]:
    return {**logged(name), **kw}


def run_one(
    doc: dict[str, Any], *events: str | Event, context: dict[str, Any] | None = None
) -> tuple[Execution, list[str]]:
    defn = load_definition(doc)
    exe = Execution(id="x", definition_id=defn.id, context=defn.initial_context(context))
    logs: list[str] = []
    logs += step(defn, exe, Event(name="durastate.start"), 0.0).logs
    for ev in events:
        e = ev if isinstance(ev, Event) else Event(name=ev)
        logs += step(defn, exe, e, 0.0).logs
    return exe, logs


# -- entry / exit order ------------------------------------------------------------------------------

NESTED = {
    "id": "nested",
    "initial": "a",
    "states": {
        "a": st(
            "a",
            initial="a1",
            states={
                "a1": st("a1", initial="a11", states={"a11": st("a11", on={"go": "b.b1.b11"})}),
            },
        ),
        "b": st(
            "b",
            initial="b1",
            states={
                "b1": st("b1", initial="b11", states={"b11": st("b11"), "b12": st("b12")}),
            },
        ),
    },
}


def test_initial_entry_is_outermost_first() -> None:
    exe, logs = run_one(NESTED)
    assert logs == ["+a", "+a1", "+a11"]
    assert exe.active_path == "a.a1.a11"


def test_exit_leaf_to_lcca_then_actions_then_entry_lcca_to_leaf() -> None:
    doc = {**NESTED}
    doc["states"] = dict(NESTED["states"])
    doc["states"]["a"] = st(
        "a",
        initial="a1",
        states={
            "a1": st(
                "a1",
                initial="a11",
                states={"a11": st("a11", on={"go": {"target": "b.b1.b11", "actions": [{"log": "t"}]}})},
            )
        },
    )
    exe, logs = run_one(doc, "go")
    assert logs[3:] == ["-a11", "-a1", "-a", "t", "+b", "+b1", "+b11"]
    assert exe.active_path == "b.b1.b11"


def test_transition_within_a_compound_keeps_the_common_ancestor() -> None:
    doc = {
        "id": "d",
        "initial": "p",
        "states": {
            "p": st(
                "p",
                initial="x",
                states={"x": st("x", on={"go": {"target": "y", "actions": [{"log": "t"}]}}), "y": st("y")},
            )
        },
    }
    _, logs = run_one(doc, "go")
    assert logs == ["+p", "+x", "-x", "t", "+y"]


def test_target_compound_enters_its_initial_descendants() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "states": {
            "a": st("a", on={"go": "b"}),
            "b": st("b", initial="b1", states={"b1": st("b1", initial="c", states={"c": st("c")})}),
        },
    }
    exe, logs = run_one(doc, "go")
    assert logs[1:] == ["-a", "+b", "+b1", "+c"]
    assert exe.active_path == "b.b1.c"


# -- selection order -----------------------------------------------------------------------------------


def test_innermost_state_wins_over_its_ancestors() -> None:
    doc = {
        "id": "d",
        "initial": "p",
        "states": {
            "p": {
                "initial": "c",
                "on": {"go": "outer"},
                "states": {"c": {"on": {"go": "inner"}}, "inner": {}},
            },
            "outer": {},
        },
    }
    exe, _ = run_one(doc, "go")
    assert exe.active_path == "p.inner"


def test_ancestor_handles_what_the_leaf_does_not() -> None:
    doc = {
        "id": "d",
        "initial": "p",
        "states": {
            "p": {
                "initial": "c",
                "on": {"go": "outer"},
                "states": {"c": {"on": {"other": "inner"}}, "inner": {}},
            },
            "outer": {},
        },
    }
    exe, _ = run_one(doc, "go")
    assert exe.active_path == "outer"


def test_first_transition_whose_guard_holds_wins_in_document_order() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "context": {"n": 5},
        "states": {
            "a": {
                "on": {
                    "go": [
                        {"target": "big", "guard": {"gt": ["$context.n", 10]}},
                        {"target": "mid", "guard": {"gt": ["$context.n", 1]}},
                        {"target": "any"},
                    ]
                }
            },
            "big": {},
            "mid": {},
            "any": {},
        },
    }
    assert run_one(doc, "go")[0].active_path == "mid"
    assert run_one(doc, "go", context={"n": 50})[0].active_path == "big"
    assert run_one(doc, "go", context={"n": 0})[0].active_path == "any"


def test_a_failing_inner_guard_falls_back_to_the_ancestor() -> None:
    doc = {
        "id": "d",
        "initial": "p",
        "states": {
            "p": {
                "initial": "c",
                "on": {"go": "outer"},
                "states": {"c": {"on": {"go": {"target": "inner", "guard": False}}}, "inner": {}},
            },
            "outer": {},
        },
    }
    assert run_one(doc, "go")[0].active_path == "outer"


# -- external vs internal ------------------------------------------------------------------------------

SELF = {
    "id": "d",
    "initial": "p",
    "states": {
        "p": st(
            "p",
            initial="a",
            states={"a": st("a", on={"to_b": "b"}), "b": st("b")},
            on={
                "ext_self": "p",
                "ext_child": "p.b",
                "int_child": {"target": "p.b", "internal": True},
                "noop": {"actions": [{"log": "noop"}]},
            },
        )
    },
}


def test_external_self_transition_exits_and_reenters_the_source() -> None:
    _, logs = run_one(SELF, "to_b", "ext_self")
    assert logs[4:] == ["-b", "-p", "+p", "+a"]


def test_external_transition_to_a_descendant_exits_and_reenters_the_source() -> None:
    _, logs = run_one(SELF, "ext_child")
    assert logs[2:] == ["-a", "-p", "+p", "+b"]


def test_internal_transition_to_a_descendant_keeps_the_source() -> None:
    exe, logs = run_one(SELF, "int_child")
    assert logs[2:] == ["-a", "+b"]
    assert exe.active_path == "p.b"


def test_targetless_transition_runs_actions_only() -> None:
    exe, logs = run_one(SELF, "noop")
    assert logs[2:] == ["noop"]
    assert exe.active_path == "p.a"


def test_transition_to_an_ancestor_exits_and_reenters_it() -> None:
    doc = {
        "id": "d",
        "initial": "p",
        "states": {
            "p": st("p", initial="a", states={"a": st("a", on={"go": "b"}), "b": st("b", on={"up": "p"})})
        },
    }
    exe, logs = run_one(doc, "go", "up")
    assert logs[4:] == ["-b", "-p", "+p", "+a"]
    assert exe.active_path == "p.a"


# -- history -----------------------------------------------------------------------------------------------

HIST = {
    "id": "h",
    "initial": "work",
    "states": {
        "work": {
            "initial": "one",
            "on": {"pause": "paused"},
            "states": {
                "one": {"on": {"next": "two"}},
                "two": {"initial": "x", "states": {"x": {"on": {"next": "y"}}, "y": {}}},
                "shallow": {"type": "history"},
                "deep": {"type": "history", "history": "deep"},
                "dflt": {"type": "history", "target": "two.y"},
            },
        },
        "paused": {
            "on": {
                "resume_shallow": "work.shallow",
                "resume_deep": "work.deep",
                "resume_default": "work.dflt",
            }
        },
    },
}


def test_shallow_history_restores_the_child_then_its_defaults() -> None:
    exe, _ = run_one(HIST, "next", "next", "pause", "resume_shallow")
    assert exe.active_path == "work.two.x"


def test_deep_history_restores_the_leaf() -> None:
    exe, _ = run_one(HIST, "next", "next", "pause", "resume_deep")
    assert exe.active_path == "work.two.y"
    assert exe.history == {"work": "work.two.y"}


def test_history_without_memory_takes_its_default_or_the_parent_initial() -> None:
    # never exited: nothing recorded
    doc = {**HIST, "initial": "paused"}
    assert run_one(doc, "resume_default")[0].active_path == "work.two.y"
    assert run_one(doc, "resume_shallow")[0].active_path == "work.one"
    assert run_one(doc, "resume_deep")[0].active_path == "work.one"


def test_history_entry_runs_entry_actions_outermost_first() -> None:
    doc = {
        "id": "h",
        "initial": "w",
        "states": {
            "w": st(
                "w",
                initial="a",
                on={"out": "o"},
                states={
                    "a": st("a", on={"go": "b"}),
                    "b": st("b", initial="b1", states={"b1": st("b1")}),
                    "h": {"type": "history", "history": "deep"},
                },
            ),
            "o": st("o", on={"back": "w.h"}),
        },
    }
    _, logs = run_one(doc, "go", "out", "back")
    assert logs[-4:] == ["-o", "+w", "+b", "+b1"]


# -- always and raise ------------------------------------------------------------------------------------


def test_always_runs_to_a_fixed_point() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "context": {"n": 0},
        "states": {
            "a": {"on": {"go": "count"}},
            "count": {
                "entry": [{"assign": {"n": {"add": ["$context.n", 1]}}}],
                "always": [{"target": "done", "guard": {"ge": ["$context.n", 3]}}, {"target": "count"}],
            },
            "done": {},
        },
    }
    exe, _ = run_one(doc, "go")
    assert exe.active_path == "done"
    assert exe.context["n"] == 3


def test_always_cycle_fails_the_execution_with_a_clear_error() -> None:
    doc = {"id": "d", "initial": "a", "states": {"a": {"always": "b"}, "b": {"always": "a"}}}
    exe, _ = run_one(doc)
    assert exe.status == "failed"
    assert f"did not settle after {MAX_MICROSTEPS}" in (exe.error or "")
    assert "always" in (exe.error or "")


def test_always_is_checked_on_start() -> None:
    doc = {"id": "d", "initial": "a", "states": {"a": {"always": "b"}, "b": {}}}
    assert run_one(doc)[0].active_path == "b"


def test_raised_events_are_processed_in_order_within_the_step() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "states": {
            "a": {"on": {"go": {"target": "b", "actions": [{"raise": {"event": "one"}}, {"raise": "two"}]}}},
            "b": {"on": {"one": {"target": "c", "actions": [{"log": "one"}]}}},
            "c": {"on": {"two": {"target": "d", "actions": [{"log": "two"}]}}},
            "d": {},
        },
    }
    exe, logs = run_one(doc, "go")
    assert exe.active_path == "d"
    assert logs == ["one", "two"]


def test_always_settles_before_the_next_raised_event() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "states": {
            "a": {"on": {"go": {"target": "b", "actions": [{"raise": "ping"}]}}},
            "b": {"always": "c"},
            "c": {"on": {"ping": "d"}},
            "d": {},
        },
    }
    assert run_one(doc, "go")[0].active_path == "d"


def test_raised_event_data_reaches_the_handler() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "states": {
            "a": {
                "on": {
                    "go": {"actions": [{"raise": {"event": "x", "data": {"v": "$event.v"}}}]},
                    "x": {"actions": [{"assign": {"got": "$event.v"}}]},
                }
            }
        },
    }
    exe, _ = run_one(doc, Event(name="go", data={"v": 7}))
    assert exe.context["got"] == 7


def test_compound_final_child_raises_done_for_its_parent() -> None:
    doc = {
        "id": "d",
        "initial": "p",
        "states": {
            "p": {
                "initial": "a",
                "on_done": "after",
                "states": {"a": {"on": {"go": "end"}}, "end": {"type": "final"}},
            },
            "after": {},
        },
    }
    exe, _ = run_one(doc, "go")
    assert exe.active_path == "after"
    assert exe.status == "running"


# -- ignoring, final, failure ----------------------------------------------------------------------------


def test_unhandled_event_is_ignored_but_consumed() -> None:
    defn = load_definition({"id": "d", "initial": "a", "states": {"a": {}}})
    exe = Execution(definition_id="d")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    res = step(defn, exe, Event(name="nobody"), 0.0)
    assert res.ignored and res.trace["ignored"] is True
    assert res.emits == [] and res.timers == [] and res.spawns == []


def test_repeated_start_is_ignored() -> None:
    defn = load_definition(
        {
            "id": "d",
            "initial": "a",
            "context": {"n": 0},
            "states": {"a": {"entry": [{"assign": {"n": {"add": ["$context.n", 1]}}}]}},
        }
    )
    exe = Execution(definition_id="d", context=defn.initial_context())
    step(defn, exe, Event(name="durastate.start"), 0.0)
    assert step(defn, exe, Event(name="durastate.start"), 0.0).ignored
    assert exe.context["n"] == 1


def test_final_state_finishes_and_notifies_parent() -> None:
    defn = load_definition(
        {
            "id": "d",
            "initial": "a",
            "states": {"a": {"on": {"go": "end"}}, "end": {"type": "final", "outcome": "ok"}},
        }
    )
    exe = Execution(id="kid", definition_id="d", parent_id="mom", child_id="kid", context={"k": 1})
    step(defn, exe, Event(name="durastate.start"), 0.0)
    res = step(defn, exe, Event(name="go"), 0.0)
    assert (exe.status, exe.outcome) == ("finished", "ok")
    [(target, ev)] = res.emits
    assert target == "mom" and ev.id == finished_event_id("kid") and ev.name == "durastate.finished"
    assert ev.data == {"child_id": "kid", "status": "finished", "outcome": "ok", "output": {"k": 1}}
    assert step(defn, exe, Event(name="go"), 0.0).ignored


def test_final_without_outcome_uses_its_name_and_root_notifies_the_sink() -> None:
    exe, _ = run_one(
        {"id": "d", "initial": "a", "states": {"a": {"on": {"go": "done"}}, "done": {"type": "final"}}}, "go"
    )
    assert exe.outcome == "done"


def boom(context: dict[str, Any], event: Event) -> None:
    raise RuntimeError("card reader on fire")


def test_action_failure_marks_failed_records_error_and_consumes_event() -> None:
    defn = load_definition(
        {
            "id": "d",
            "initial": "a",
            "states": {
                "a": {
                    "after": {"seconds": 5, "target": "b"},
                    "on": {
                        "go": {
                            "target": "b",
                            "actions": [
                                {"send": {"event": "x", "to": "other"}},
                                {"call": "tests.engine.test_semantics:boom"},
                            ],
                        }
                    },
                },
                "b": {},
            },
        }
    )
    exe = Execution(id="kid", definition_id="d", parent_id="mom", child_id="kid")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    res = step(defn, exe, Event(name="go"), 0.0)
    assert exe.status == "failed"
    assert exe.error is not None
    assert "RuntimeError: card reader on fire" in exe.error and "states.a.on.go[0].actions" in exe.error
    assert not res.ignored and res.trace["status"] == "failed" and res.trace["error"] == exe.error
    assert exe.timers == {} and [op.action for op in res.timers] == ["cancel"]
    targets = [(t, e.name) for t, e in res.emits]
    assert ("mom", "durastate.finished") in targets
    finished = next(e for t, e in res.emits if t == "mom")
    assert finished.data["status"] == "failed" and "card reader" in finished.data["error"]


def test_builtin_action_failure_names_the_site() -> None:
    exe, _ = run_one(
        {
            "id": "d",
            "initial": "a",
            "context": {"s": "x"},
            "states": {"a": {"on": {"go": {"actions": [{"assign": {"n": {"sub": ["$context.s", 1]}}}]}}}},
        },
        "go",
    )
    assert exe.status == "failed"
    assert "TypeError" in (exe.error or "") and "states.a.on.go[0].actions" in (exe.error or "")


def test_comparisons_of_unorderable_values_are_false_not_failures() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "states": {
            "a": {"on": {"go": [{"target": "b", "guard": {"gt": ["$event.amount", 100]}}, {"target": "c"}]}},
            "b": {},
            "c": {},
        },
    }
    exe, _ = run_one(doc, "go")
    assert exe.status == "running" and exe.active_path == "c"


def test_cancel_ends_the_execution_cancelled() -> None:
    defn = load_definition(
        {"id": "d", "initial": "a", "states": {"a": {"after": {"seconds": 1, "target": "a"}}}}
    )
    exe = Execution(id="c", definition_id="d", parent_id="p", child_id="c")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    res = step(defn, exe, Event(name="durastate.cancel"), 0.0)
    assert exe.status == "cancelled" and exe.timers == {}
    assert [op.action for op in res.timers] == ["cancel"]
    assert res.emits[-1][0] == "p" and res.emits[-1][1].data["status"] == "cancelled"


# -- actions and values ----------------------------------------------------------------------------------


def test_assign_send_log_values() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "context": {"n": 1, "peer": "other-exe", "obj": {"k": [1]}},
        "states": {
            "a": {
                "on": {
                    "go": {
                        "actions": [
                            {
                                "assign": {
                                    "n": {"add": ["$context.n", "$event.by"]},
                                    "who": "$event.name",
                                    "deep.er": {"mul": [2, 3]},
                                    "lit": "$$dollar",
                                    "copy": "$context.obj",
                                }
                            },
                            {"send": {"event": "hello", "to": "$context.peer", "data": {"n": "$context.n"}}},
                            {"send": {"event": "up", "to": "parent"}},
                            {"send": {"event": "me", "to": "self"}},
                            {"send": {"event": "note"}},
                            {"log": "$context.n"},
                        ]
                    }
                }
            }
        },
    }
    defn = load_definition(doc)
    exe = Execution(id="me-1", definition_id="d", context=defn.initial_context(), parent_id="pa")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    res = step(defn, exe, Event(name="go", data={"by": 4}), 0.0)
    assert exe.context["n"] == 5 and exe.context["who"] == "go" and exe.context["deep"] == {"er": 6}
    assert exe.context["lit"] == "$dollar" and exe.context["copy"] == {"k": [1]}
    assert [(t, e.name, e.data) for t, e in res.emits] == [
        ("other-exe", "hello", {"n": 5}),
        ("pa", "up", {}),
        ("me-1", "me", {}),
        (None, "note", {}),
    ]
    assert len({e.id for _, e in res.emits}) == 4
    assert res.logs == ["5"]
    # emitted ids are deterministic: the same step on the same execution gives the same ids
    exe2 = Execution(id="me-1", definition_id="d", context=defn.initial_context(), parent_id="pa")
    step(defn, exe2, Event(name="durastate.start"), 0.0)
    res2 = step(defn, exe2, Event(name="go", data={"by": 4}), 0.0)
    assert [e.id for _, e in res2.emits] == [e.id for _, e in res.emits]


def test_context_never_shares_objects_with_the_definition() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "states": {"a": {"on": {"go": {"actions": [{"assign": {"l": [1, 2]}}]}}}},
    }
    defn = load_definition(doc)
    exe = Execution(definition_id="d")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    step(defn, exe, Event(name="go"), 0.0)
    exe.context["l"].append(3)
    exe2 = Execution(definition_id="d")
    step(defn, exe2, Event(name="durastate.start"), 0.0)
    step(defn, exe2, Event(name="go"), 0.0)
    assert exe2.context["l"] == [1, 2]


def add_bonus(context: dict[str, Any], event: Event) -> dict[str, Any]:
    return {"bonus": context.get("n", 0) * 10}


def is_vip(context: dict[str, Any], event: Event) -> bool:
    return bool(event.data.get("vip"))


def test_python_callables_for_guards_and_actions() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "context": {"n": 2},
        "states": {
            "a": {
                "on": {
                    "go": [
                        {
                            "target": "vip",
                            "guard": "tests.engine.test_semantics:is_vip",
                            "actions": ["tests.engine.test_semantics:add_bonus"],
                        },
                        {"target": "plain"},
                    ]
                }
            },
            "vip": {},
            "plain": {},
        },
    }
    exe, _ = run_one(doc, Event(name="go", data={"vip": True}))
    assert exe.active_path == "vip" and exe.context["bonus"] == 20
    assert run_one(doc, "go")[0].active_path == "plain"


@pytest.mark.parametrize(
    ("guard", "expected"),
    [
        ({"eq": ["$context.s", "x"]}, True),
        ({"ne": ["$context.s", "x"]}, False),
        ({"lt": [1, 2]}, True),
        ({"le": [2, 2]}, True),
        ({"ge": [1, 2]}, False),
        ({"in": ["$context.s", ["x", "y"]]}, True),
        ({"in": ["z", "$context.l"]}, False),
        ({"exists": "$context.s"}, True),
        ({"exists": "$context.nope.deeper"}, False),
        ({"not": {"exists": "$event.q"}}, True),
        ({"and": [True, {"eq": [1, 1]}]}, True),
        ({"or": [False, {"eq": [1, 2]}]}, False),
        ({"eq": ["$context.l.0", "a"]}, True),
        ({"eq": [{"len": "$context.l"}, 2]}, True),
    ],
)
def test_guards(guard: Any, expected: bool) -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "context": {"s": "x", "l": ["a", "b"]},
        "states": {"a": {"on": {"go": {"target": "b", "guard": guard}}}, "b": {}},
    }
    assert (run_one(doc, "go")[0].active_path == "b") is expected


# -- timers ----------------------------------------------------------------------------------------------

TIMED = {
    "id": "t",
    "initial": "idle",
    "states": {
        "idle": {"on": {"go": "waiting"}},
        "waiting": {"after": {"seconds": 30, "target": "late"}, "on": {"done": "idle", "again": "waiting"}},
        "late": {},
    },
}


def test_after_arms_on_entry_and_cancels_on_exit() -> None:
    h = Harness(TIMED)
    exe = h.start("t", "t1")
    h.send("t1", "go")
    assert exe.timers == {"waiting": 1030.0}
    _, _, res = h.results[-1]
    assert [(op.action, op.path, op.fire_at) for op in res.timers] == [("schedule", "waiting", 1030.0)]
    h.send("t1", "done")
    assert exe.timers == {} and h.timers == {}
    _, _, res = h.results[-1]
    assert [(op.action, op.path) for op in res.timers] == [("cancel", "waiting")]


def test_timeout_fires_the_after_transition() -> None:
    h = Harness(TIMED)
    exe = h.start("t", "t1")
    h.send("t1", "go")
    h.advance(29)
    assert exe.active_path == "waiting"
    h.advance(1)
    assert exe.active_path == "late" and exe.timers == {}


def test_stale_timeout_is_ignored() -> None:
    h = Harness(TIMED)
    exe = h.start("t", "t1")
    h.send("t1", "go")
    old = exe.timers["waiting"]
    h.now += 10
    h.send("t1", "again")  # re-entered: re-armed to a later time
    assert exe.timers["waiting"] == old + 10
    defn = h.reg.get("t")
    res = step(defn, exe, Event(name="durastate.timeout", data={"path": "waiting", "fire_at": old}), h.now)
    assert res.ignored and exe.active_path == "waiting" and exe.timers["waiting"] == old + 10
    res = step(defn, exe, Event(name="durastate.timeout", data={"path": "nowhere", "fire_at": old}), h.now)
    assert res.ignored


def test_self_reentry_collapses_timer_ops_to_the_last_one() -> None:
    h = Harness(TIMED)
    h.start("t", "t1")
    h.send("t1", "go")
    h.send("t1", "again")
    _, _, res = h.results[-1]
    assert [op.action for op in res.timers] == ["schedule"]


def test_timer_in_an_ancestor_survives_moves_inside_it() -> None:
    doc = {
        "id": "t",
        "initial": "p",
        "states": {
            "p": {
                "initial": "a",
                "after": {"seconds": 5, "target": "out"},
                "states": {"a": {"on": {"go": "b"}}, "b": {}},
            },
            "out": {},
        },
    }
    h = Harness(doc)
    exe = h.start("t", "t1")
    h.send("t1", "go")
    assert exe.timers == {"p": 1005.0}
    h.advance(5)
    assert exe.active_path == "out"


def test_an_endless_raise_loop_fails_too() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "states": {
            "a": {"on": {"go": {"actions": [{"raise": "ping"}]}, "ping": {"actions": [{"raise": "ping"}]}}}
        },
    }
    exe, _ = run_one(doc, "go")
    assert exe.status == "failed" and "did not settle" in (exe.error or "")


def test_a_region_child_runs_only_its_subtree_and_finishes_with_the_final_outcome() -> None:
    doc = {
        "id": "p",
        "initial": "both",
        "states": {
            "both": {
                "type": "parallel",
                "on": {"go": "out"},
                "states": {
                    "r": {
                        "initial": "x",
                        "entry": [{"log": "+r"}],
                        "states": {
                            "x": {"on": {"go": "y", "up": "both.r"}},
                            "y": {"type": "final", "outcome": "r-done"},
                        },
                    }
                },
            },
            "out": {},
        },
    }
    defn = load_definition(doc)
    kid = Execution(id="p~1", definition_id="p", parent_id="p", child_id="p~1", root_path="both.r")
    res = step(defn, kid, Event(id="p~1:start", name="durastate.start"), 0.0)
    assert kid.active_path == "both.r.x" and res.logs == ["+r"]
    res = step(defn, kid, Event(name="up"), 0.0)  # re-entering the region root re-runs its entry
    assert kid.active_path == "both.r.x" and res.logs == ["+r"]
    res = step(
        defn, kid, Event(name="go"), 0.0
    )  # the region's own `go` wins; the parallel state's is not seen
    assert (kid.status, kid.outcome, kid.active_path) == ("finished", "r-done", "both.r.y")
    [(target, ev)] = res.emits
    assert (target, ev.id, ev.data["child_id"], ev.data["outcome"]) == ("p", finished_event_id("p~1"), "p~1", "r-done")


def test_a_region_child_with_an_unknown_root_fails_clearly() -> None:
    defn = load_definition({"id": "d", "initial": "a", "states": {"a": {}}})
    exe = Execution(definition_id="d", root_path="nope")
    step(defn, exe, Event(name="durastate.start"), 0.0)
    assert exe.status == "failed" and "root path 'nope'" in (exe.error or "")


def test_timer_of_an_internal_after_transition_rearms_nothing_when_targetless() -> None:
    doc = {
        "id": "d",
        "initial": "a",
        "context": {"n": 0},
        "states": {"a": {"after": {"seconds": 5, "actions": [{"assign": {"n": 1}}]}}},
    }
    defn = load_definition(doc)
    exe = Execution(definition_id="d", context=defn.initial_context())
    step(defn, exe, Event(name="durastate.start"), 0.0)
    res = step(defn, exe, Event(name="durastate.timeout", data={"path": "a", "fire_at": 5.0}), 5.0)
    assert exe.context["n"] == 1 and exe.timers == {} and [op.action for op in res.timers] == ["cancel"]
