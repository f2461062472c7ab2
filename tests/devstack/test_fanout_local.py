"""A map (examples/batch.yaml) end to end on the no-Docker local stack: the packaged handlers on moto's
DynamoDB and SQS, the children started and their notices checked by the Lambda worker, the outputs back in
item order, the window of three kept, and leaving the state cancelling the children still running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.devstack import LocalStack

from .helpers import QUIET, FakeClock, executions, send, start

pytestmark = pytest.mark.slow


@pytest.fixture()
def stack(cloud_assembly: Path) -> Iterator[LocalStack]:
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=FakeClock(), retry_delay=0,
                    environment=QUIET) as st:
        yield st


def settle(stack: LocalStack) -> dict[str, dict[str, Any]]:
    stack.run_until_idle(max_steps=500)
    assert stack.settled()
    return executions(stack.client("dynamodb"))


def running(exes: dict[str, dict[str, Any]], parent: str) -> list[str]:
    children = exes[parent].get("children", {})
    return sorted(c for c, ref in children.items() if ref["kind"] == "map" and ref["status"] == "running")


def test_a_batch_of_payments_fans_out_and_comes_back_in_item_order(stack: LocalStack) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "b", "batch")  # amounts [120, 80, 4500, 9000, 35], three payments at a time
    exes = settle(stack)
    assert running(exes, "b") == ["b~1", "b~2", "b~3"] and "b~4" not in exes
    assert exes["b"]["maps"]["charging"]["started"] == 3
    assert {exes[c]["context"]["amount"] for c in ("b~1", "b~2", "b~3")} == {120, 80, 4500}

    answers = {"b~3": "authorize", "b~1": "decline", "b~4": "authorize", "b~2": "authorize", "b~5": "authorize"}
    for child, event in answers.items():  # out of order: the third payment ends first
        send(sqs, q, child, event, {"receipt": "r", "reason": "no"})
        exes = settle(stack)
        if exes["b"]["status"] == "running":
            assert 0 < len(running(exes, "b")) <= 3
    b = exes["b"]
    assert (b["status"], b["active_path"]) == ("finished", "settled")
    assert b["context"]["outcomes"] == ["declined", "paid", "paid", "declined", "paid"]
    assert "maps" not in b and b.get("children", {}) == {}


def test_leaving_the_map_cancels_its_running_payments(stack: LocalStack) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "c", "batch")
    settle(stack)
    send(sqs, q, "c", "cancel_batch")
    exes = settle(stack)
    assert exes["c"]["active_path"] == "cancelled"
    assert [exes[f"c~{n}"]["status"] for n in (1, 2, 3)] == ["cancelled"] * 3 and "c~4" not in exes


FAN = """\
id: fan
initial: mapping
context: {numbers: [1, 2, 3, 4, 5]}
states:
  mapping:
    map:
      items: $context.numbers
      invoke:
        definition: work
        context: {n: $item}
        retry: {max_attempts: 2, backoff: {initial: 60}}
      max_concurrency: 3
      output: $event.output.square
      tolerate: "20%"
    on_done: {target: done, actions: [{assign: {squares: $event.outputs}}]}
    on_error: failed
  done: {type: final, outcome: ok}
  failed: {type: final, outcome: failed}
"""

WORK = """\
id: work
initial: busy
states:
  busy:
    on:
      go: {target: done, actions: [{assign: {square: {mul: [$context.n, $context.n]}}}]}
      crash: {target: done, actions: [{assign: {x: {div: [1, 0]}}}]}
  done: {type: final}
"""


def test_a_failed_item_is_retried_after_its_backoff_and_a_percentage_tolerates_the_last_failure(
        cloud_assembly: Path, tmp_path: Path) -> None:
    """``invoke.retry`` and ``tolerate: "20%"`` through the packaged handlers: the first try of item 0 fails,
    its retry timer is armed in the timers table and fired by the stack's clock, a new child takes the
    item's slot; that one fails too, and one failure of five is within 20%."""
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "fan.yaml").write_text(FAN)
    (folder / "work.yaml").write_text(WORK)
    clock = FakeClock()
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=clock, retry_delay=0,
                    definitions_dir=folder, environment=QUIET) as stack:
        sqs, q = stack.client("sqs"), stack.queue_url
        start(sqs, q, "p", "fan")
        assert running(settle(stack), "p") == ["p~1", "p~2", "p~3"]
        send(sqs, q, "p~1", "crash")
        exes = settle(stack)
        assert running(exes, "p") == ["p~2", "p~3"]  # item 0 waits for its retry, in its slot
        assert exes["p~1"]["status"] == "failed"
        clock.advance(60)
        exes = settle(stack)
        assert running(exes, "p") == ["p~2", "p~3", "p~4"]  # p~4: item 0's second try
        assert exes["p~4"]["context"]["n"] == 1
        send(sqs, q, "p~4", "crash")  # its tries ran out: one failure of five, within 20%
        exes = settle(stack)
        while exes["p"]["status"] == "running" and running(exes, "p"):
            send(sqs, q, running(exes, "p")[0], "go")
            exes = settle(stack)
        p = exes["p"]
        assert (p["status"], p["outcome"]) == ("finished", "ok"), p.get("error")
        assert p["context"]["squares"] == [None, 4, 9, 16, 25]
