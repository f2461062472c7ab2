"""Dead letters on AWS (moto in-process, the worker handler of ``durastate/functions/``): what the worker moves to the
DLQ carries why, when and after how many receives; what SQS's redrive policy moved is shown as such; a
replay after the fix applies each event once — also when it was killed between its send and its delete —
and the worker counts dead letters, retries and redrives as metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.engine.model import Event
from durastate.errors import DurastateError, StoreThrottled
from durastate.transport.base import dead_letter_id
from durastate.transport.sqs import REDRIVE_POLICY, SqsDeadLetters, SqsTransport

from .conftest import receive_all
from .harness import COUNTER_YAML, Stack
from .test_handlers import Proxy, count, metrics_out, start


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "counter.yaml").write_text(COUNTER_YAML)
    return folder


class Throttled(Proxy):
    """The store throttles every load of the targets in ``down`` (a transient failure: the error the DynamoDB
    store raises for ``ProvisionedThroughputExceededException`` past the SDK's retries)."""

    down: set[str] = set()

    def load_for_event(self, execution_id: str, event_id: str) -> Any:
        if execution_id in self.down:
            raise StoreThrottled("DynamoDB throttled GetItem: slow down (injected by the test)")
        return self.inner.load_for_event(execution_id, event_id)


@pytest.fixture
def stack(queues: tuple[str, str], definitions: Path) -> Iterator[Stack]:
    Throttled.down = set()
    s = Stack(*queues, definitions, wrap_store=Throttled)
    yield s
    s.close()


def send(stack: Stack, target: str, eid: str, name: str = "inc") -> None:
    SqsTransport(stack.sqs, stack.queue_url).send([(target, Event(id=eid, name=name))])


def test_a_dead_letter_carries_why_when_and_attempts_and_a_replay_after_the_fix_applies_it_once(
        stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    send(stack, "ghost", "g1")
    stack.pump()
    box = stack.runtime.dead_letter_box
    [letter] = box.list().items
    assert (letter.id, letter.target_id, letter.event.id, letter.error) == (
        dead_letter_id("ghost", "g1"), "ghost", "g1", "UnknownExecution")
    assert "no execution 'ghost'" in letter.reason
    assert (letter.attempts, letter.at) == (1, stack.clock())

    start(stack, "ghost")  # the fix: the execution exists now
    client = DurastateClient.for_aws(stack.queue_url, table_prefix=None, dlq_url=stack.dlq_url)
    assert [d.id for d in client.replay_dead_letters()] == [letter.id]
    stack.pump()
    assert count(stack, "ghost") == 1
    assert client.dead_letters().items == [] and client.replay_dead_letters() == []
    stack.pump()
    assert count(stack, "ghost") == 1
    totals = metrics_out(capsys.readouterr().out)
    assert (totals["DeadLettered"], totals["Redrives"], totals["EventsApplied"]) == (1, 1, 1)


def test_what_the_redrive_policy_moved_is_shown_as_such_and_replays(
        stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    start(stack, "A")
    # Every attempt fails transiently: SQS retries it, and this queue's redrive policy (5 receives; the
    # construct's is 1000, which a transient failure backed off by the worker never reaches) moves it.
    Throttled.down = {"A"}
    send(stack, "A", "i1")
    stack.pump()
    assert count(stack, "A") == 0
    box = SqsDeadLetters(stack.sqs, stack.dlq_url, stack.queue_url)
    for _ in range(2):  # reading the DLQ counts as a receive too; the number shown stays the policy's
        [letter] = box.list().items
        assert (letter.error, letter.attempts, letter.event.id) == (REDRIVE_POLICY, 5, "i1")
        assert letter.reason.startswith("moved by the queue's redrive policy after 5 receives")
    totals = metrics_out(capsys.readouterr().out)
    assert (totals["Failures"], totals["Retries"]) == (5, 4)

    Throttled.down = set()  # the fix
    assert [d.event.id for d in box.replay()] == ["i1"]
    stack.pump()
    assert count(stack, "A") == 1 and box.list().items == []


class KilledAfterSend:
    """An SQS client whose process dies right after a send to the event queue succeeded."""

    def __init__(self, inner: Any, queue_url: str) -> None:
        self.inner, self.queue_url = inner, queue_url
        self.receipts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def receive_message(self, **kwargs: Any) -> Any:
        resp = self.inner.receive_message(**kwargs)
        self.receipts += [m["ReceiptHandle"] for m in resp.get("Messages", [])]
        return resp

    def send_message(self, **kwargs: Any) -> Any:
        resp = self.inner.send_message(**kwargs)
        if kwargs["QueueUrl"] == self.queue_url:
            raise RuntimeError("killed between the send and the delete")
        return resp

    def change_message_visibility_batch(self, **kwargs: Any) -> Any:
        raise RuntimeError("dead: releases nothing")


def test_a_replay_killed_between_its_send_and_its_delete_loses_nothing_and_applies_nothing_twice(
        stack: Stack) -> None:
    send(stack, "ghost", "g1")
    send(stack, "ghost", "g2")
    stack.pump()
    start(stack, "ghost")
    dying = KilledAfterSend(stack.sqs, stack.queue_url)
    with pytest.raises(RuntimeError, match="killed"):
        SqsDeadLetters(dying, stack.dlq_url, stack.queue_url).replay()
    # What SQS does once the dead process's lease on the DLQ messages ends:
    for receipt in dying.receipts:
        stack.sqs.change_message_visibility(QueueUrl=stack.dlq_url, ReceiptHandle=receipt, VisibilityTimeout=0)
    box = SqsDeadLetters(stack.sqs, stack.dlq_url, stack.queue_url)
    assert [d.event.id for d in box.list().items] == ["g1", "g2"]  # nothing lost: both still dead letters
    stack.pump()  # g1 went out before the kill and is applied
    assert count(stack, "ghost") == 1

    assert [d.event.id for d in box.replay()] == ["g1", "g2"]  # g1 again: the worker dedupes it
    stack.pump()
    assert count(stack, "ghost") == 2
    assert box.list().items == [] and receive_all(stack.sqs, stack.queue_url) == []


def test_the_worker_dead_letter_attributes_name_the_event(stack: Stack) -> None:
    stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody="{not json", MessageGroupId="m",
                           MessageDeduplicationId="m1")
    send(stack, "ghost", "g1")
    stack.pump()
    letters = {m["MessageAttributes"]["durastate.error"]["StringValue"]: m["MessageAttributes"]
               for m in receive_all(stack.sqs, stack.dlq_url)}
    assert set(letters) == {"MalformedEvent", "UnknownExecution"}
    ghost = letters["UnknownExecution"]
    assert {k: ghost[k]["StringValue"] for k in ("durastate.attempts", "durastate.at", "durastate.event_id",
                                                  "durastate.target_id")} == {
        "durastate.attempts": "1", "durastate.at": repr(stack.clock()), "durastate.event_id": "g1",
        "durastate.target_id": "ghost"}


def test_an_unreadable_dead_letter_can_be_shown_and_dropped_never_replayed(stack: Stack) -> None:
    stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody="{not json", MessageGroupId="m",
                           MessageDeduplicationId="m1")
    stack.pump()
    client = DurastateClient.for_aws(stack.queue_url, table_prefix=None, dlq_url=stack.dlq_url)
    [letter] = client.dead_letters().items
    assert not letter.replayable and letter.body == "{not json" and letter.error == "MalformedEvent"
    assert client.replay_dead_letters() == []
    with pytest.raises(DurastateError, match="no event to replay"):
        client.replay_dead_letters([letter.id])
    assert client.dead_letter(letter.id) == letter
    assert client.drop_dead_letter(letter.id).id == letter.id
    assert client.dead_letters().items == []


def test_a_client_without_a_dlq_or_a_store_says_so(stack: Stack) -> None:
    client = DurastateClient.for_aws(stack.queue_url, table_prefix=None)
    with pytest.raises(DurastateError, match=r"no dead-letter box.*dlq_url"):
        client.dead_letters()
    with pytest.raises(DurastateError, match="no store"):
        client.terminate("A")
    start(stack, "A")
    eid = client.suspend("A", "maintenance")
    client.send("A", "inc", event_id="i1")
    client.resume("A")
    stack.pump()
    exe = stack.raw_store.load("A")
    assert exe is not None and (exe.status, exe.context["count"]) == ("running", 1)
    assert client.cancel("A", "done") == client.cancel("A")  # one cancel, however often it is asked for
    stack.pump()
    exe = stack.raw_store.load("A")
    assert exe is not None and (exe.status, exe.reason) == ("cancelled", "done") and eid
    assert [json.loads(m["Body"]) for m in receive_all(stack.sqs, stack.dlq_url)] == []
