"""Parent-close policy of an invoked child on the no-Docker local stack, driven through its event queue.

The parent's events go on the stack's SQS queue; the worker function applies them, the outbox stream
carries the child's start and the parent's close of it (or, for ``abandon``, nothing), and the child's
finished notice comes back through the queue — where an abandoned child's is consumed and traced as
ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.devstack import LocalStack
from durastate.store.dynamodb.sync import DynamoDBStore

from .helpers import QUIET, FakeClock, send, start

pytestmark = pytest.mark.slow

JOB = """\
id: job
initial: working
states:
  working:
    on: {done: ok}
    exit: [{assign: {exited: true}}]
  ok: {type: final, outcome: ok}
"""


def boss(policy: str) -> str:
    return f"""\
id: boss_{policy}
initial: waiting
states:
  waiting:
    invoke: {{definition: job, parent_close: {policy}}}
    on: {{skip: elsewhere, quit: gone}}
    on_done: joined
  elsewhere: {{on: {{quit: gone}}}}
  joined: {{type: final, outcome: joined}}
  gone: {{type: final, outcome: gone}}
"""


@pytest.fixture()
def stack(cloud_assembly: Path, tmp_path: Path) -> Iterator[LocalStack]:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "job.yaml").write_text(JOB)
    for policy in ("abandon", "terminate"):
        (folder / f"boss_{policy}.yaml").write_text(boss(policy))
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=FakeClock(), retry_delay=0,
                    definitions_dir=folder, environment={**QUIET, "DURASTATE_TRACE": "1"}) as st:
        yield st


def started(stack: LocalStack, store: DynamoDBStore, parent: str, policy: str) -> str:
    start(stack.client("sqs"), stack.queue_url, parent, f"boss_{policy}")
    stack.run_until_idle(max_steps=500)
    exe = store.load(parent)
    assert exe is not None and exe.active_path == "waiting"
    (child,) = exe.children
    running = store.load(child)
    assert running is not None and running.status == "running"
    return child


def test_leaving_the_state_terminates_a_terminate_child_and_leaves_an_abandoned_one_running(
        stack: LocalStack) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    store = DynamoDBStore(stack.client("dynamodb"), prefix="durastate")
    ended = started(stack, store, "b-t", "terminate")
    kept = started(stack, store, "b-a", "abandon")
    send(sqs, q, "b-t", "skip")
    send(sqs, q, "b-a", "skip")
    stack.run_until_idle(max_steps=500)

    terminated = store.load(ended)
    assert terminated is not None and terminated.status == "terminated" and "exited" not in terminated.context
    abandoned = store.load(kept)
    assert abandoned is not None and abandoned.status == "running"
    parent = store.load("b-a")
    assert parent is not None and parent.active_path == "elsewhere" and parent.children[kept].abandoned

    send(sqs, q, kept, "done")  # the abandoned child runs on, and its end changes nothing in the parent
    stack.run_until_idle(max_steps=500)
    finished = store.load(kept)
    assert finished is not None and (finished.status, finished.outcome) == ("finished", "ok")
    parent = store.load("b-a")
    assert parent is not None and (parent.status, parent.active_path, parent.children) == ("running", "elsewhere", {})
    last = store.read_trace("b-a")[-1]
    assert last["ignored"] is True and "parent_close: abandon" in last["reason"]
