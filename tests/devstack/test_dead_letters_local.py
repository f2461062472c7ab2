"""Dead letters on the no-Docker local stack, through ``durastate dead-letters --dlq-url``.

The deployed worker lacks the ``order`` definition: a start and the events behind it land in the stack's
SQS dead-letter queue, each with its reason, next to a message that is not the wire format at all. The
CLI lists them; a replay before the fix is refused and moves nothing; after the fix (the definition
deployed) ``replay --all`` puts the events back on the event queue — found through the redrive policy —
and the worker applies each once; a second replay changes nothing; the unreadable one is dropped.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.cli import run
from durastate.devstack import LocalStack

from .helpers import QUIET, FakeClock, executions, send, settle, start

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture()
def deployed(tmp_path: Path) -> Path:
    folder = tmp_path / "deployed"
    folder.mkdir()
    shutil.copy(EXAMPLES / "payment.yaml", folder / "payment.yaml")
    return folder


@pytest.fixture()
def stack(cloud_assembly: Path, deployed: Path) -> Iterator[LocalStack]:
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=FakeClock(), retry_delay=0,
                    environment=QUIET, definitions_dir=deployed) as st:
        yield st


def listed(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert run(["dead-letters", "list", "--dlq-url", stack.dlq_url, "--json"]) == 0
    items: list[dict[str, object]] = json.loads(capsys.readouterr().out)["items"]
    return items


def test_poison_messages_are_listed_with_their_reasons_and_replayed_once_after_the_fix(
        stack: LocalStack, deployed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sqs, ddb, q = stack.client("sqs"), stack.client("dynamodb"), stack.queue_url
    start(sqs, q, "o-1")
    send(sqs, q, "o-1", "add_item", {"price": 30}, event_id="add-1")
    send(sqs, q, "o-1", "submit", event_id="submit-1")
    sqs.send_message(QueueUrl=q, MessageBody="{not json", MessageGroupId="junk", MessageDeduplicationId="junk-1")
    settle(stack)
    assert "o-1" not in executions(ddb)

    letters = listed(stack, capsys)
    by_event = {d["event"]["id"] if d["event"] else None: d for d in letters}  # type: ignore[index]
    assert set(by_event) == {"o-1:start", "add-1", "submit-1", None}
    assert by_event["o-1:start"]["error"] == "UnknownDefinition"
    assert "unknown definition 'order'" in str(by_event["o-1:start"]["reason"])
    assert by_event["add-1"]["error"] == by_event["submit-1"]["error"] == "UnknownExecution"
    junk = by_event[None]
    assert (junk["error"], junk["body"]) == ("MalformedEvent", "{not json")
    assert all(d["attempts"] == 1 for d in letters)
    capsys.readouterr()
    assert run(["dead-letters", "show", str(by_event["submit-1"]["id"]), "--dlq-url", stack.dlq_url]) == 0
    assert "no execution 'o-1'" in capsys.readouterr().out

    # Before the fix, checked against the deployed definitions: refused in one line, nothing moved.
    assert run(["dead-letters", "replay", "--all", "--dlq-url", stack.dlq_url, "--definitions", str(deployed)]) == 1
    err = capsys.readouterr().err
    assert "definition 'order', which is still missing" in err and err.count("error:") == 1
    assert len(listed(stack, capsys)) == 4

    # The fix: the definition is deployed (the worker's registry reloads it), then the replay.
    shutil.copy(EXAMPLES / "order.yaml", deployed / "order.yaml")
    stack.runtime.registry.register(deployed / "order.yaml")
    assert run(["dead-letters", "replay", "--all", "--dlq-url", stack.dlq_url, "--definitions", str(deployed)]) == 0
    out = capsys.readouterr()
    assert "3 dead letter(s) replayed; the worker applies them" in out.out
    assert "1 dead letter(s) carry no event" in out.err
    settle(stack)
    exe = executions(ddb)["o-1"]
    assert (exe["active_path"], exe["context"]) == ("processing.payment", {"items": 1, "total": 30})
    assert [d["id"] for d in listed(stack, capsys)] == [junk["id"]]

    # A second replay changes nothing; the unreadable letter can only be dropped.
    assert run(["dead-letters", "replay", "--all", "--dlq-url", stack.dlq_url]) == 0
    assert "no dead letters to replay" in capsys.readouterr().out
    settle(stack)
    assert executions(ddb)["o-1"] == exe
    assert run(["dead-letters", "drop", str(junk["id"]), "--dlq-url", stack.dlq_url]) == 0
    assert listed(stack, capsys) == []
    assert run(["dead-letters", "show", str(junk["id"]), "--dlq-url", stack.dlq_url]) == 1
    assert f"no dead letter '{junk['id']}'" in capsys.readouterr().err
