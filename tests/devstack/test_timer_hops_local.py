"""Timers on the local stack: the delayed hop through the standard timers queue, on the stack's moved clock.

A timer due within 15 minutes is handed to the timers queue right after the commit that armed it and is
applied by the timers function when due, so it fires without waiting for the sweeper (which runs once a
minute); a timer due days ahead waits in the timers table until a sweep finds it within range. A lost hop
(the worker died after its commit) is fired by the sweeper once overdue; a hop delivered twice fires once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.devstack import LocalStack
from durastate.engine.schedules import tick_execution_id
from durastate.runtime.sweeper import timeout_event
from durastate.store.dynamodb.sync import DynamoDBStore
from durastate.transport.wire import dump_envelope

from .helpers import QUIET, FakeClock, executions, send, start

pytestmark = pytest.mark.slow


DEFINITION = """\
id: timer
initial: waiting
context: {fired: 0}
states:
  waiting:
    after:
      seconds: $context.delay
      target: done
      actions: [{assign: {fired: {add: ["$context.fired", 1]}}}]
    on:
      compute:
        actions: [{assign: {doubled: {mul: ["$event.x", 2]}}}]
  done: {}
"""


@pytest.fixture()
def definitions(tmp_path: Path) -> Path:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "timer.yaml").write_text(DEFINITION)
    return folder


def open_stack(cloud_assembly: Path, definitions: Path, clock: FakeClock, **env: str) -> LocalStack:
    """The stack of ``cloud_assembly`` (a folder) or of a template file, with these definitions."""
    template = cloud_assembly if cloud_assembly.is_file() else cloud_assembly / "DurastateStack.template.json"
    return LocalStack(template, port=0, clock=clock, retry_delay=0, definitions_dir=definitions,
                      environment={**QUIET, **env})


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def stack(cloud_assembly: Path, definitions: Path, clock: FakeClock) -> Iterator[LocalStack]:
    with open_stack(cloud_assembly, definitions, clock) as st:
        yield st


def settle(stack: LocalStack) -> None:
    stack.run_until_idle(max_steps=500)


def fired(stack: LocalStack) -> dict[str, int]:
    """How many times each execution's timer took effect (the ``after`` transition counts itself)."""
    return {eid: exe["context"]["fired"] for eid, exe in executions(stack.client("dynamodb")).items()
            if exe["definition_id"] == "timer"}


def armed(stack: LocalStack) -> list[tuple[str, str, float]]:
    """The timers table's timers of this module's executions (not the ones other tests left behind)."""
    due = DynamoDBStore(stack.client("dynamodb"), prefix="durastate").due_timers(1e12)
    return [t for t in due if t[0] in fired(stack)]


def test_timers_of_one_second_five_minutes_and_two_days_fire_once_when_due(stack: LocalStack,
                                                                            clock: FakeClock) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    for eid, delay in (("t-1s", 1), ("t-5m", 300), ("t-2d", 2 * 86400)):
        start(sqs, q, eid, "timer", {"delay": delay})
    settle(stack)
    assert fired(stack) == {"t-1s": 0, "t-5m": 0, "t-2d": 0}
    assert len(armed(stack)) == 3  # every timer is in the timers table (the sweeper's safety net)

    clock.advance(1)  # well before the sweeper's next run (a minute): only the hop can fire it
    settle(stack)
    assert fired(stack) == {"t-1s": 1, "t-5m": 0, "t-2d": 0}

    clock.advance(299)
    settle(stack)
    assert fired(stack) == {"t-1s": 1, "t-5m": 1, "t-2d": 0}

    clock.advance(2 * 86400 - 300 - 1)  # a second before the 2-day timer is due: the sweeper hops it
    settle(stack)
    assert fired(stack)["t-2d"] == 0
    clock.advance(1)
    settle(stack)
    clock.advance(120)  # more sweeps find nothing left to fire
    settle(stack)
    assert fired(stack) == {"t-1s": 1, "t-5m": 1, "t-2d": 1}
    assert armed(stack) == []
    assert {e["active_path"] for e in executions(stack.client("dynamodb")).values()
            if e["definition_id"] == "timer"} == {"done"}


def test_without_the_hop_the_sweeper_fires_timers_on_its_schedule(cloud_assembly: Path, definitions: Path,
                                                                  clock: FakeClock) -> None:
    with open_stack(cloud_assembly, definitions, clock, DURASTATE_TIMERS_QUEUE_URL="") as stack:
        start(stack.client("sqs"), stack.queue_url, "slow", "timer", {"delay": 1})
        settle(stack)
        clock.advance(1)
        settle(stack)
        assert fired(stack) == {"slow": 0}  # due, but the sweeper has not run yet
        clock.advance(60)
        settle(stack)
        assert fired(stack) == {"slow": 1}


def test_a_hop_lost_after_the_commit_is_fired_by_the_sweeper(stack: LocalStack, clock: FakeClock) -> None:
    stack.runtime.worker.on_commit = None  # the worker dies right after its commit: no hop is sent
    start(stack.client("sqs"), stack.queue_url, "lost", "timer", {"delay": 5})
    settle(stack)
    clock.advance(5)
    settle(stack)
    assert fired(stack) == {"lost": 0}  # nothing in the timers queue
    clock.advance(60)  # the sweeper finds it overdue in the timers table and fires it itself
    settle(stack)
    assert fired(stack) == {"lost": 1}
    assert armed(stack) == []


def test_a_hop_delivered_twice_fires_once(stack: LocalStack, clock: FakeClock) -> None:
    start(stack.client("sqs"), stack.queue_url, "twice", "timer", {"delay": 300})
    settle(stack)
    [(eid, path, fire_at)] = armed(stack)
    clock.advance(300)
    record = {"messageId": "m-1", "body": dump_envelope(eid, timeout_event(eid, path, fire_at))}
    for _ in range(2):  # the timers function retried (or two hops: the worker's and a sweep's)
        assert stack.invoke("timers", {"Records": [record]}) == {"batchItemFailures": []}
    settle(stack)  # the hop held by the stack is delivered a third time
    clock.advance(60)
    settle(stack)
    assert fired(stack) == {"twice": 1}
    assert armed(stack) == []


def test_a_failed_step_is_traced_with_the_trace_off(stack: LocalStack) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "ok", "timer", {"delay": 3600})
    start(sqs, q, "bad", "timer", {"delay": 3600})
    send(sqs, q, "bad", "compute", {"x": "not a number"}, event_id="bad-compute")
    settle(stack)
    store = DynamoDBStore(stack.client("dynamodb"), prefix="durastate")
    assert store.read_trace("ok") == []  # off: a step that went well costs no trace write
    exe = store.load("bad")
    assert exe is not None and exe.status == "failed"
    [step] = store.read_trace("bad")
    assert step["event_id"] == "bad-compute" and step["status"] == "failed" and "mul" in step["error"]


def test_the_trace_on_records_every_step(cloud_assembly: Path, definitions: Path, clock: FakeClock) -> None:
    with open_stack(cloud_assembly, definitions, clock, DURASTATE_TRACE="1") as stack:
        start(stack.client("sqs"), stack.queue_url, "traced", "timer", {"delay": 1})
        settle(stack)
        clock.advance(1)
        settle(stack)
        steps: list[dict[str, Any]] = DynamoDBStore(stack.client("dynamodb"), prefix="durastate").read_trace(
            "traced")
        assert [s["event"] for s in steps] == ["durastate.start", "durastate.timeout"]


def test_a_schedule_ticks_on_time_through_the_hop_not_once_a_sweep(full_template: Path, definitions: Path,
                                                                    clock: FakeClock) -> None:
    """A `rate: 30s` schedule starts an execution at each tick, 30 s apart, within the sweeper's minute:
    the first sweep hops the first tick, and each fired tick hops the next one. (On the stack synthesized
    with a schedules file: only then does the sweeper's role hold the grants on schedule records.)"""
    (definitions / "schedules.yaml").write_text(
        "schedules:\n  pulse: {definition: timer, rate: 30s, context: {delay: 86400}}\n")
    t0 = clock.now  # a whole multiple of 30 s: the ticks fall on t0 + 30 n
    with open_stack(full_template, definitions, clock) as stack:
        settle(stack)
        clock.advance(60)  # the sweeper's first run: it stores the schedule and hops its first tick, +90
        settle(stack)
        assert [e for e in fired(stack) if e.startswith("pulse")] == []
        expected = []
        for n in (3, 4, 5):
            clock.advance(30)  # the ticks at +90 and +150 fall between the sweeper's runs (+60, +120, +180)
            settle(stack)
            expected.append(tick_execution_id("pulse", t0 + 30 * n))
            assert sorted(e for e in fired(stack) if e.startswith("pulse")) == sorted(expected), n


def test_a_schedules_window_jitter_and_delete_hold_through_the_hop(full_template: Path, definitions: Path,
                                                                   clock: FakeClock) -> None:
    """On the stack the ticks go through the hop: a windowed schedule starts only the ticks inside its
    window, a jittered one starts each tick at its derived offset (the hop carries it), and a schedule
    deleted after its first tick was hopped starts nothing when that hop arrives."""
    from datetime import UTC, datetime

    from durastate.engine.schedules import ScheduleSpec, schedule_record_id
    from durastate.runtime.schedules import delete_schedule

    t0 = clock.now  # a whole multiple of 5 minutes
    iso = lambda at: datetime.fromtimestamp(at, UTC).isoformat()  # noqa: E731
    (definitions / "schedules.yaml").write_text(
        "schedules:\n"
        f"  windowed: {{definition: timer, rate: 5m, start_at: '{iso(t0 + 600)}', end_at: '{iso(t0 + 900)}', "
        "context: {delay: 86400}}\n"
        "  jittered: {definition: timer, rate: 5m, jitter: 2m, context: {delay: 86400}}\n"
        "  doomed: {definition: timer, rate: 5m, context: {delay: 86400}}\n")
    with open_stack(full_template, definitions, clock) as stack:
        settle(stack)
        clock.advance(60)  # the sweeper stores the schedules and hops their first ticks
        settle(stack)
        store = DynamoDBStore(stack.client("dynamodb"), prefix="durastate")
        record = store.load(schedule_record_id("jittered"))
        assert record is not None and record.secret is not None
        delete_schedule(store, "doomed", clock())  # its first tick's hop is on its way already
        spec = ScheduleSpec(definition="timer", rate="5m", jitter="2m")
        for _ in range(20):
            clock.advance(60)
            settle(stack)
        started = sorted(fired(stack))
        assert [e for e in started if e.startswith("windowed~")] == [
            tick_execution_id("windowed", t0 + 600), tick_execution_id("windowed", t0 + 900)]
        ticks = [t0 + 300 * n for n in range(1, 5)]
        assert [e for e in started if e.startswith("jittered~")] == [
            tick_execution_id("jittered", t) for t in ticks if spec.fire_at(t, record.secret, "jittered")
            <= clock()]
        assert [e for e in started if e.startswith("doomed~")] == []


def test_backfill_starts_the_ticks_a_pause_missed_once_on_the_stack(
        full_template: Path, definitions: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`durastate schedules pause` and `backfill --from --to` on the stack's tables (as an operator runs
    them against the deployed stack): the ticks the pause skipped are started, once each, and applied by
    the worker function; a second backfill of the same window starts nothing, and an unknown schedule is
    one line and exit status 1."""
    from datetime import UTC, datetime

    from durastate.cli import run

    iso = lambda at: datetime.fromtimestamp(at, UTC).isoformat()  # noqa: E731
    monkeypatch.setenv("DURASTATE_CLOCK", str(clock.now))  # the CLI on the stack's clock
    (definitions / "schedules.yaml").write_text(
        "schedules:\n  late: {definition: timer, rate: 5m, context: {delay: 86400}}\n")
    t0 = clock.now  # a whole multiple of 5 minutes
    with open_stack(full_template, definitions, clock) as stack:
        settle(stack)
        clock.advance(60)  # the sweeper stores the schedule and hops its first tick (+5m)
        settle(stack)
        url = f"dynamodb://durastate?endpoint_url={stack.endpoint_url}"
        cli = lambda *args: run(["--store", url, "--definitions", str(definitions), *args])  # noqa: E731
        monkeypatch.setenv("DURASTATE_CLOCK", str(clock.now))
        assert cli("schedules", "pause", "late") == 0
        for _ in range(20):  # the ticks of +5m … +20m are missed while paused
            clock.advance(60)
            settle(stack)
        assert [e for e in fired(stack) if e.startswith("late~")] == []
        monkeypatch.setenv("DURASTATE_CLOCK", str(clock.now))
        capsys.readouterr()
        window = ("--from", iso(t0 + 300), "--to", iso(t0 + 1200))
        assert cli("schedules", "backfill", "late", *window) == 0
        assert "backfilled late: started 4 tick(s)" in capsys.readouterr().out
        settle(stack)
        ticks = [tick_execution_id("late", t0 + 300 * n) for n in (1, 2, 3, 4)]
        assert sorted(e for e in fired(stack) if e.startswith("late~")) == ticks
        assert cli("schedules", "backfill", "late", *window) == 0
        assert "started 0 tick(s); 4 already ran" in capsys.readouterr().out
        assert cli("schedules", "backfill", "nope", *window) == 1
        assert "unknown schedule 'nope'" in capsys.readouterr().err
        settle(stack)
        assert sorted(e for e in fired(stack) if e.startswith("late~")) == ticks
