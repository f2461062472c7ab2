"""Imported charts on the local stack: an SCXML document and an XState machine config in the deployed
definitions folder are converted when the handlers load it, and run durably — started and driven with plain
boto3 ``send_message``, state in DynamoDB, the XState ``after`` delay a durable timer, an SCXML
``<parallel>`` inline regions of the one execution."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.devstack import LocalStack

from ..importers.charts import LIGHT_XSTATE, TURNSTILE_SCXML, UPLOAD_SCXML
from .helpers import QUIET, FakeClock, executions, send, settle, start

pytestmark = pytest.mark.slow


@pytest.fixture()
def deployed(tmp_path: Path) -> Path:
    folder = tmp_path / "deployed"
    folder.mkdir()
    (folder / "turnstile.scxml").write_text(TURNSTILE_SCXML)
    (folder / "light.xstate.json").write_text(LIGHT_XSTATE)
    (folder / "upload.scxml").write_text(UPLOAD_SCXML)
    return folder


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def stack(cloud_assembly: Path, deployed: Path, clock: FakeClock) -> Iterator[LocalStack]:
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=clock, retry_delay=0,
                    environment=QUIET, definitions_dir=deployed) as st:
        yield st


def test_an_scxml_chart_runs_to_its_final_state(stack: LocalStack) -> None:
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    start(sqs, q, "gate-1", "turnstile")
    send(sqs, q, "gate-1", "coin", {"amount": 60})
    settle(stack)
    gate = executions(ddb)["gate-1"]
    assert (gate["active_path"], gate["context"]) == ("locked", {"paid": 60, "passes": 0})

    send(sqs, q, "gate-1", "coin", {"amount": 40})  # 60 + 40 >= 100: unlocked, paid reset
    send(sqs, q, "gate-1", "push")
    send(sqs, q, "gate-1", "coin", {"amount": 100})
    send(sqs, q, "gate-1", "service")
    settle(stack)
    gate = executions(ddb)["gate-1"]
    assert (gate["status"], gate["outcome"], gate["active_path"]) == ("finished", "out_of_order", "out_of_order")
    assert gate["context"] == {"paid": 0, "passes": 1}


def test_an_xstate_machine_runs_through_its_timer_and_on_done(stack: LocalStack, clock: FakeClock) -> None:
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    start(sqs, q, "crossing", "light")
    send(sqs, q, "crossing", "TIMER")
    settle(stack)
    assert executions(ddb)["crossing"]["active_path"] == "yellow"

    clock.advance(1.5)  # the "after 1500 ms" timer: a durable timer, fired by the timers function
    settle(stack)
    assert executions(ddb)["crossing"]["active_path"] == "red.walk"

    send(sqs, q, "crossing", "PED_COUNTDOWN")
    send(sqs, q, "crossing", "PED_COUNTDOWN")  # red's final child: its onDone leaves for `off`
    settle(stack)
    light = executions(ddb)["crossing"]
    assert (light["status"], light["outcome"], light["context"]) == ("finished", "off", {"cycles": 1})


def test_an_scxml_parallel_runs_inline_in_the_one_execution(stack: LocalStack) -> None:
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    start(sqs, q, "up-1", "upload")
    send(sqs, q, "up-1", "publish")  # In('clean') is false: ignored
    send(sqs, q, "up-1", "scanned")
    settle(stack)
    stored = executions(ddb)
    assert set(stored) == {"up-1"}  # no child execution per region
    assert stored["up-1"]["leaves"] == ["work.scan.clean", "work.thumbnail._leaf"]

    send(sqs, q, "up-1", "publish")  # leaves the parallel state: both regions exit in this one step
    settle(stack)
    upload = executions(ddb)["up-1"]
    assert (upload["status"], upload["outcome"], upload["context"]) == ("finished", "published", {"exits": 2})
