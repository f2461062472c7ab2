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
