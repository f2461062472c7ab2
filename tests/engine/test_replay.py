"""The replay check on histories the engine records itself (as a worker would, with ``archive=True``): what
it compares, what it steps over, and where it stops without a verdict."""

from __future__ import annotations

import copy
from typing import Any

from durastate.engine import Event, Execution, load_definition, step
from durastate.engine.control import terminate
from durastate.engine.definition import Definition
from durastate.engine.replay import replay
from durastate.engine.tracing import DATA_MAX, VALUE_MAX, step_details

CHART: dict[str, Any] = {
    "id": "notes",
    "initial": "open",
    "context": {"text": "", "n": 0},
    "states": {
        "open": {
            "on": {
                "write": {"actions": [{"assign": {"text": "$event.text", "n": {"add": ["$context.n", 1]}}}]},
                "close": "closed",
            },
        },
        "closed": {"type": "final", "outcome": "ok"},
    },
}


def record(defn: Definition, events: list[Event], *, archive: bool = True) -> list[dict[str, Any]]:
    """The history a worker would keep for ``events`` (a start first), one step a second from t=100."""
    start = Event(id="x:start", name="durastate.start", data={"definition_id": defn.id, "context": {}})
    exe = Execution(id="x", definition_id=defn.id, context=defn.initial_context())
    steps = []
    for n, event in enumerate([start, *events]):
        before = dict(exe.context)
        res = step(defn, exe, event, 100.0 + n, detail=True)
        step_details(res.trace, 100.0 + n, event, res.emits, res.timers, res.spawns, (before, exe.context),
                     archive=archive)
        steps.append({**res.trace, "index": n})
    return steps


def edited(edit: Any) -> Definition:
    doc = copy.deepcopy(CHART)
    edit(doc)
    return load_definition(doc)


def write(text: str, eid: str = "w") -> Event:
    return Event(id=eid, name="write", data={"text": text})


def test_a_history_replays_clean_through_its_own_definition() -> None:
    defn = load_definition(CHART)
    history = record(defn, [write("a", "w1"), write("b", "w2"), Event(id="c", name="close")])
    report = replay(defn, history, "x")
    assert report.ok and report.checked == 4 and report.stopped is None
    assert report.describe() == "x: 4 steps replayed, no difference"


def test_the_first_differing_step_is_reported_with_each_field() -> None:
    history = record(load_definition(CHART), [write("a", "w1"), Event(id="c", name="close")])
    new = edited(lambda d: d["states"]["open"]["on"].update(close="open"))
    report = replay(new, history, "x")
    assert report.difference is not None
    assert report.difference.index == 2
    assert report.difference.fields["to"] == ("closed", "open")
    assert report.difference.fields["status"] == ("finished", "running")
    assert report.describe().splitlines()[0] == "x: step #2 close (c) would differ:"
    assert report.as_json()["difference"]["fields"]["to"] == {"recorded": "closed", "replayed": "open"}


def test_a_change_past_the_trace_cut_is_seen_in_the_exact_record() -> None:
    long = "x" * (VALUE_MAX + 100)
    history = record(load_definition(CHART), [write(long)])
    assert history[1]["context_cut"] and "context_full" in history[1]
    # The new version appends to the text: the capped values look alike, the exact ones do not.
    new = edited(lambda d: d["states"]["open"]["on"]["write"]["actions"][0]["assign"].update(
        text={"concat": ["$event.text", "!"]}))
    report = replay(new, history, "x")
    assert report.difference is not None and "context" in report.difference.fields


def test_cut_data_replays_from_its_exact_copy() -> None:
    history = record(load_definition(CHART), [write("y" * (DATA_MAX + 10))])
    assert history[1]["data_cut"] and history[1]["data_full"] == {"text": "y" * (DATA_MAX + 10)}
    assert replay(load_definition(CHART), history, "x").ok


def test_cut_data_without_a_kept_history_stops_the_replay() -> None:
    history = record(load_definition(CHART), [write("y" * (DATA_MAX + 10)), write("z")], archive=False)
    report = replay(load_definition(CHART), history, "x")
    assert report.ok and report.checked == 1
    assert report.stopped is not None and "data was cut" in report.stopped


def test_a_terminated_execution_ignores_the_events_after() -> None:
    defn = load_definition(CHART)
    history = record(defn, [write("a")])
    exe = Execution(id="x", definition_id=defn.id, status="running", active_path="open")
    history.append({"event": "durastate.terminate", "event_id": "t", "from": "open", "to": "open",
                    "status": "terminated", "at": 200.0, "index": 2, **terminate(exe, "enough", 200.0).trace})
    later = Event(id="w9", name="write", data={"text": "late"})
    res_trace = {"event": "write", "event_id": "w9", "from": "open", "to": "open", "status": "terminated",
                 "ignored": True, "at": 201.0, "data": later.data, "index": 3}
    history.append(res_trace)
    report = replay(defn, history, "x")
    assert report.ok and report.skipped == 1 and report.checked == 3


def test_a_redrive_or_a_history_without_its_start_stops_the_replay() -> None:
    defn = load_definition(CHART)
    history = record(defn, [write("a")])
    redrive = {"event": "durastate.redrive", "control": "redrive", "at": 150.0, "index": 2}
    report = replay(defn, [*history, redrive], "x")
    assert report.ok and report.stopped is not None and "redrive" in report.stopped
    report = replay(defn, history[1:], "x")
    assert report.checked == 0 and report.stopped is not None and "does not begin with its start" in report.stopped
