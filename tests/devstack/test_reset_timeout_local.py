"""Reset and the run timeout on the no-Docker local stack, driven as a user drives the deployed stack.

The reset goes through the event queue (``durastate reset … --queue-url``, checked first against the
stack's tables with ``--store dynamodb://…``) and is applied by the worker function; the timer of the
state it enters is armed in the timers table and fired by the stack. The run timeout's timer is armed at
the start and, with the timer hop off, fired by the sweeper on its schedule, by the stack's clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.cli import run
from durastate.devstack import LocalStack
from durastate.store.dynamodb.sync import DynamoDBStore

from .helpers import QUIET, FakeClock, drain_queue, start

pytestmark = pytest.mark.slow

FLOW = """\
id: flow
initial: a
timeout: 10m
states:
  a: {on: {next: b}}
  b:
    after: {seconds: 60, target: c}
  c: {type: final, outcome: reached}
"""


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


def open_stack(cloud_assembly: Path, tmp_path: Path, clock: FakeClock, **env: str) -> LocalStack:
    folder = tmp_path / "definitions"
    folder.mkdir(exist_ok=True)
    (folder / "flow.yaml").write_text(FLOW)
    return LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=clock, retry_delay=0,
                      definitions_dir=folder, environment={**QUIET, "DURASTATE_TRACE": "1", **env})


@pytest.fixture()
def stack(cloud_assembly: Path, tmp_path: Path, clock: FakeClock) -> Iterator[LocalStack]:
    with open_stack(cloud_assembly, tmp_path, clock) as st:
        yield st


def store_of(stack: LocalStack) -> DynamoDBStore:
    return DynamoDBStore(stack.client("dynamodb"), prefix="durastate")


def settle(stack: LocalStack) -> None:
    stack.run_until_idle(max_steps=500)


def test_a_reset_through_the_queue_moves_the_execution_and_arms_the_timer_of_its_state(
        stack: LocalStack, clock: FakeClock, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "r-1", "flow")
    settle(stack)
    store_url = f"dynamodb://durastate?endpoint_url={stack.endpoint_url}"
    capsys.readouterr()
    assert run(["--store", store_url, "--definitions", str(tmp_path / "definitions"), "reset", "r-1",
                "--to", "nowhere", "--queue-url", q]) == 1
    assert "'nowhere' is not a state of 'flow'" in capsys.readouterr().err  # checked before anything is queued
    code = run(["--store", store_url, "--definitions", str(tmp_path / "definitions"), "reset", "r-1", "--to", "b",
                "--reason", "skip the form", "--by", "ops", "--queue-url", q])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "queued reset for r-1" in out.out
    settle(stack)
    store = store_of(stack)
    exe = store.load("r-1")
    assert exe is not None and (exe.active_path, sorted(exe.timers)) == ("b", ["b", "~deadline"])
    step = store.read_trace("r-1")[-1]
    assert (step["control"], step["by"], step["reason"]) == ("reset", "ops", "skip the form")
    clock.advance(60)
    settle(stack)
    exe = store.load("r-1")
    assert exe is not None and (exe.status, exe.outcome) == ("finished", "reached")
    assert drain_queue(sqs, stack.dlq_url) == []


def test_the_run_timeout_is_fired_by_the_sweeper(cloud_assembly: Path, tmp_path: Path, clock: FakeClock) -> None:
    with open_stack(cloud_assembly, tmp_path, clock, DURASTATE_TIMERS_QUEUE_URL="") as stack:
        start(stack.client("sqs"), stack.queue_url, "t-1", "flow")
        settle(stack)
        store = store_of(stack)
        clock.advance(599)
        settle(stack)
        assert store.load("t-1").status == "running"  # type: ignore[union-attr]
        clock.advance(61)  # past the deadline, and the sweeper's next run
        settle(stack)
        exe = store.load("t-1")
        assert exe is not None and exe.status == "failed"
        assert exe.error == "timed out: the run did not end within its timeout of 10m"
