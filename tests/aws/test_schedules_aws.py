"""Schedules on AWS: the sweeper Lambda stores the deployment's schedules and fires them (moto)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from durastate.engine.schedules import ScheduleSpec, schedule_record_id, tick_execution_id
from durastate.runtime.schedules import delete_schedule, get_schedule, list_schedules

from .harness import COUNTER_YAML, Stack


def tick(stack: Stack, seconds: float) -> int:
    """Move time, run the sweeper, then the relay as the outbox stream would (a schedule's start goes
    through the outbox) and the worker; return the timers fired."""
    stack.clock.advance(seconds)
    fired = int(stack.call_sweeper()["fired"])
    stack.call_relay()
    stack.pump()
    return fired


def test_the_sweeper_lambda_stores_and_fires_schedules(queues: tuple[str, str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "counter.yaml").write_text(COUNTER_YAML)
    (folder / "schedules.yaml").write_text("schedules:\n  pulse: {definition: counter, rate: 15m}\n")
    # the construct's `schedules` prop reaches the sweeper as JSON
    monkeypatch.setenv("DURASTATE_SCHEDULES", json.dumps({"hourly": {"definition": "counter", "cron": "0 * * * *",
                                                                     "context": {"count": 7}}}))
    stack = Stack(*queues, folder)
    try:
        t0 = stack.clock()
        assert stack.call_sweeper()["fired"] == 0  # the container's first run stores the schedules
        assert [s.name for s in list_schedules(stack.raw_store)] == ["hourly", "pulse"]
        assert tick(stack, 15 * 60) == 1
        assert tick(stack, 45 * 60) == 2  # pulse (the two ticks in between were missed: dropped) and hourly
        pulses = [tick_execution_id("pulse", t0 + 900), tick_execution_id("pulse", t0 + 3600)]
        for eid in [*pulses, tick_execution_id("hourly", t0 + 3600)]:
            exe = stack.raw_store.load(eid)
            assert exe is not None and exe.status == "running", eid
        hourly = stack.raw_store.load(tick_execution_id("hourly", t0 + 3600))
        assert hourly is not None and hourly.context["count"] == 7
        stack.runtime.schedules_synced = False  # a cold start: the unchanged schedules are only read
        assert tick(stack, 0) == 0
        page = stack.raw_store.list_executions(definition_id="counter")
        assert len(page.items) == 3
    finally:
        stack.close()


def test_window_jitter_and_delete_through_the_sweeper_lambda(queues: tuple[str, str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "counter.yaml").write_text(COUNTER_YAML)
    stack = Stack(*queues, folder)
    t0 = stack.clock()
    start = (t0 // 3600 + 2) * 3600  # the window: the second and third whole hour from now
    window = {"start_at": datetime.fromtimestamp(start, UTC).isoformat(),
              "end_at": datetime.fromtimestamp(start + 3600, UTC).isoformat()}
    monkeypatch.setenv("DURASTATE_SCHEDULES", json.dumps({
        "windowed": {"definition": "counter", "rate": "1h", **window},
        "jittered": {"definition": "counter", "rate": "1h", "jitter": "20m"},
        "doomed": {"definition": "counter", "rate": "1h"}}))
    stack.close()
    stack = Stack(*queues, folder)
    try:
        stack.call_sweeper()
        record = stack.raw_store.load(schedule_record_id("jittered"))
        assert record is not None and record.secret is not None
        spec = ScheduleSpec(definition="counter", rate="1h", jitter="20m")
        first = (t0 // 3600 + 1) * 3600
        assert get_schedule(stack.raw_store, "jittered").next_tick == spec.fire_at(first, record.secret, "jittered")
        delete_schedule(stack.raw_store, "doomed", stack.clock())
        for _ in range(5):
            tick(stack, 3600)
        ids = sorted(s.id for s in stack.raw_store.list_executions(definition_id="counter", limit=100).items)
        assert [i for i in ids if i.startswith("windowed~")] == [tick_execution_id("windowed", start),
                                                                 tick_execution_id("windowed", start + 3600)]
        fired_by_now = [first + 3600 * n for n in range(6)
                        if spec.fire_at(first + 3600 * n, record.secret, "jittered") <= stack.clock()]
        assert [i for i in ids if i.startswith("jittered~")] == [tick_execution_id("jittered", t)
                                                                 for t in fired_by_now]
        assert [i for i in ids if i.startswith("doomed~")] == []
    finally:
        stack.close()
