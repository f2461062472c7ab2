"""``durastate.engine.explain``: the candidates of an event in selection order, and a dry-run step.

The order must be the interpreter's (innermost active state first, document order within a state), the
taken candidate the one ``step`` takes, a guard that raises reported as the step's failure, and a region
child must not list the transitions of states above its region (they belong to its parent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.explain import explain, preview

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def boom(context: dict[str, Any], event: Event) -> bool:
    raise ValueError("no rates today")


NESTED = {
    "id": "nested",
    "initial": "p",
    "context": {"x": 3},
    "states": {
        "p": {
            "initial": "a",
            "on": {"go": [{"target": "q", "guard": {"gt": ["$context.x", 1]}}, {"target": "r"}]},
            "states": {
                "a": {"on": {"go": {"target": "b", "guard": {"gt": ["$context.x", 5]}},
                             "fail": {"target": "b", "guard": f"{__name__}:boom"}}},
                "b": {},
            },
        },
        "q": {"after": {"seconds": 60, "target": "p"}},
        "r": {},
    },
}


def started(defn: Any) -> Execution:
    exe = Execution(id="e", definition_id=defn.id, context=dict(defn.context))
    step(defn, exe, Event(name="durastate.start", data={"definition_id": defn.id}), 100.0)
    return exe


def test_candidates_come_innermost_first_with_their_guard_values() -> None:
    defn = load_definition(NESTED)
    exe = started(defn)
    found = explain(defn, exe, Event(name="go"))
    assert [(c.source, c.target, c.value, c.taken, c.reached) for c in found.candidates] == [
        ("p.a", "p.b", False, False, True),
        ("p", "q", True, True, True),
        ("p", "r", None, False, False),
    ]
    assert found.outcome == "taken: p on go → q"
    # the dry run is the real step, on a copy: it goes where explain says, and the execution is untouched
    before = exe.model_dump()
    seen = preview(defn, exe, Event(name="go"), 200.0)
    assert seen.after.active_path == "q" and exe.model_dump() == before
    assert seen.transitions == [{"source": "p", "target": "q", "event": "go"}]
    assert [(op.action, op.path, op.fire_at) for op in seen.result.timers] == [("schedule", "q", 260.0)]


def test_a_guard_that_raises_is_the_step_failing() -> None:
    defn = load_definition(NESTED)
    exe = started(defn)
    found = explain(defn, exe, Event(name="fail"))
    (only,) = found.candidates
    assert only.error == "ValueError: no rates today" and not only.taken
    assert found.outcome.startswith("fails: the guard of states.p.states.a.on.fail[0] raised ValueError")
    assert preview(defn, exe, Event(name="fail"), 200.0).after.status == "failed"


def test_a_region_child_lists_only_its_region() -> None:
    defn = load_definition(EXAMPLES / "order.yaml")
    region = Execution(id="o~2", definition_id="order", root_path="processing.fulfilment.packing",
                       active_path="processing.fulfilment.packing.picking", parent_id="o")
    held = explain(defn, region, Event(name="hold"))  # `hold` is on `processing`, above the region
    assert held.candidates == [] and held.outcome.startswith("ignored: no transition handles it")
    picked = explain(defn, region, Event(name="picked"))
    assert picked.taken is not None and picked.taken.target == "processing.fulfilment.packing.packed"


def test_ended_and_unstarted_executions_say_so() -> None:
    defn = load_definition(NESTED)
    assert explain(defn, Execution(id="e", definition_id="nested"), Event(name="go")).outcome.startswith(
        "the execution has not started yet")
    done = Execution(id="e", definition_id="nested", status="finished", active_path="r")
    assert explain(defn, done, Event(name="go")).outcome == "ignored: the execution has finished"
