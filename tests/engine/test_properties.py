"""Properties: random event sequences never crash the interpreter and keep its invariants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durastate.engine import DefinitionRegistry, Event, Execution, step

from .harness import Harness, check_invariants
from .test_children import CHILD, MOM, PAR
from .test_semantics import HIST

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REG = DefinitionRegistry.from_dir(EXAMPLES)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)

ORDER_EVENTS = [
    "add_item",
    "submit",
    "authorize",
    "decline",
    "picked",
    "label_printed",
    "hold",
    "resume",
    "cancel",
    "shipped_with",
    "nonsense",
    "durastate.cancel",
    "durastate.start",
    "durastate.timeout",
    "durastate.finished",
]

action = st.one_of(
    st.tuples(
        st.just("send"),
        st.integers(0, 5),
        st.sampled_from(ORDER_EVENTS),
        st.dictionaries(
            st.sampled_from(
                ["price", "receipt", "tracking", "reason", "path", "fire_at", "child_id", "status"]
            ),
            json_values,
            max_size=3,
        ),
    ),
    st.tuples(st.just("advance"), st.sampled_from([1.0, 60.0, 900.0, 3600.0, 86400.0])),
)


def finished_notifications(h: Harness, eid: str) -> int:
    return sum(1 for e, _, r in h.results if e == eid for t, ev in r.emits if ev.name == "durastate.finished")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, max_size=25))
def test_random_events_on_the_order_example_keep_invariants(actions: list[Any]) -> None:
    h = Harness(REG.get("order"), REG.get("payment"))
    h.start("order", "o")
    for act in actions:
        if act[0] == "advance":
            h.advance(act[1])
            continue
        _, k, name, data = act
        ids = sorted(h.exes)
        h.send(ids[k % len(ids)], name, data)  # the harness checks invariants after every step
    for eid, exe in h.exes.items():
        assert exe.status in ("running", "finished", "failed", "cancelled")
        if exe.status != "running":
            assert exe.timers == {}
            assert not any(c.status == "running" for c in exe.children.values())
            assert finished_notifications(h, eid) == 1, eid
        else:
            assert finished_notifications(h, eid) == 0
        if exe.parent_id is None:
            assert exe.status != "failed", exe.error  # only bogus data could fail it, and none does


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "go",
                    "step",
                    "abort",
                    "tell",
                    "stop",
                    "ok",
                    "bad",
                    "next",
                    "pause",
                    "resume_shallow",
                    "resume_deep",
                    "resume_default",
                    "durastate.cancel",
                ]
            ),
            st.integers(0, 3),
        ),
        max_size=20,
    )
)
def test_random_events_on_parallel_invoke_and_history_charts(events: list[tuple[str, int]]) -> None:
    for defs, start in (((PAR,), "par"), ((CHILD, MOM), "mom"), ((HIST,), "h")):
        h = Harness(*defs)
        h.start(start, "x")
        for name, k in events:
            ids = sorted(h.exes)
            h.send(ids[k % len(ids)], name, {"v": k})


@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=5),
    st.integers(0, 10**9),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["running", "finished", "failed"]),
)
def test_execution_json_round_trip_is_exact(
    context: dict[str, Any], version: int, fire_at: float, status: Any
) -> None:
    exe = Execution(
        id="x",
        definition_id="d",
        context=context,
        version=version,
        status=status,
        timers={"a.b": fire_at},
        history={"a": "a.b"},
        active_path="a.b",
        invoke_seq=3,
    )
    again = Execution.model_validate_json(exe.model_dump_json())
    assert again == exe and again.timers["a.b"] == fire_at


def test_a_stepped_execution_round_trips_and_steps_on_identically() -> None:
    defn = REG.get("order")
    a = Execution(id="o", definition_id="order", context=defn.initial_context())
    step(defn, a, Event(id="s", name="durastate.start"), 5.0)
    step(defn, a, Event(id="i", name="add_item", data={"price": 2.5}), 6.0)
    b = Execution.model_validate_json(a.model_dump_json())
    ra = step(defn, a, Event(id="go", name="submit"), 7.0)
    rb = step(defn, b, Event(id="go", name="submit"), 7.0)
    assert a == b
    assert ra.emits == rb.emits and ra.timers == rb.timers and ra.trace == rb.trace
    check_invariants(defn, a)
