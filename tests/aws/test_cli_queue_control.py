"""``durastate cancel/suspend/resume --queue-url`` (and ``DURASTATE_QUEUE_URL``) enqueue the control event on
SQS (moto), in the execution's FIFO group; without a queue URL they use the store's inbox as before."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from durastate.cli import run

from .conftest import receive_all

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")
AWS_QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/durastate-events.fifo"


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "please report" not in lines[0] and captured.out == ""
    return lines[0]


def test_control_events_go_in_the_executions_group_behind_its_other_events(
        sqs: Any, queues: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = queues
    assert run(["send", "o-1", "add_item", "--data", '{"price": 3}', "--id", "ev-1", "--queue-url", q]) == 0
    assert run(["suspend", "o-1", "--reason", "stock check", "--id", "s-1", "--queue-url", q]) == 0
    assert run(["resume", "o-1", "--queue-url", q]) == 0
    assert run(["cancel", "o-1", "-r", "customer asked", "--queue-url", q]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"queued suspend for o-1 (event s-1) on {q}; the worker applies it"
    messages = receive_all(sqs, q)
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {"o-1"}
    assert [m["Attributes"]["MessageDeduplicationId"] for m in messages] == [
        json.loads(m["Body"])["event"]["id"] for m in messages]
    bodies = [json.loads(m["Body"]) for m in messages]
    assert {b["target_id"] for b in bodies} == {"o-1"}
    events = [b["event"] for b in bodies]
    assert [(e["name"], e["data"]) for e in events] == [
        ("add_item", {"price": 3}), ("durastate.suspend", {"reason": "stock check"}),
        ("durastate.resume", {}), ("durastate.cancel", {"reason": "customer asked"})]
    assert events[1]["id"] == "s-1"
    resume_id, cancel_id = events[2]["id"], events[3]["id"]
    assert resume_id.startswith("o-1:resume:") and cancel_id.startswith("o-1:cancel:")  # a new id each time
    assert f"queued resume for o-1 (event {resume_id})" in out[2]
    assert f"queued cancel for o-1 (event {cancel_id})" in out[3]


def test_the_environment_variable_names_the_queue(sqs: Any, queues: tuple[str, str],
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = queues
    monkeypatch.setenv("DURASTATE_QUEUE_URL", q)
    assert run(["suspend", "o-2", "--id", "s-2"]) == 0
    assert "on " + q in capsys.readouterr().out
    [m] = receive_all(sqs, q)
    assert json.loads(m["Body"]) == {"target_id": "o-2",
                                     "event": {"id": "s-2", "name": "durastate.suspend", "data": {}}}


@pytest.mark.parametrize(("argv", "fragment"), [
    (["cancel", "x" * 200], "execution id is 200 characters"),
    (["suspend", "o-1", "--id", "y" * 200], "event id is 200 characters"),
    (["resume", "o-1", "--id", "bad\x01id"], "control or surrogate character"),
], ids=["long-execution-id", "long-event-id", "control-character"])
def test_bad_ids_are_one_line_and_enqueue_nothing(sqs: Any, queues: tuple[str, str], argv: list[str],
                                                  fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = queues
    assert run([*argv, "--queue-url", q]) == 1
    assert fragment in one_line_error(capsys)
    assert receive_all(sqs, q) == []


@pytest.mark.parametrize("verb", ["cancel", "suspend", "resume"])
def test_not_a_queue_url_is_one_line(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([verb, "o-1", "--queue-url", "durastate-events.fifo"]) == 1
    assert "is not a queue URL" in one_line_error(capsys)


@pytest.mark.parametrize("verb", ["cancel", "suspend", "resume"])
def test_missing_credentials_for_aws_say_what_to_set(verb: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for name in list(os.environ):
        if name.startswith(("AWS_", "DURASTATE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert run([verb, "o-1", "--queue-url", AWS_QUEUE]) == 1
    line = one_line_error(capsys)
    assert line.startswith("error: no AWS credentials") and "AWS_ACCESS_KEY_ID" in line


def test_without_a_queue_url_the_store_inbox_is_used_as_before(sqs: Any, queues: tuple[str, str], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = queues
    db = f"sqlite:///{tmp_path / 'd.db'}"
    assert run(["--store", db, "start", "order", "--id", "o-3", "-d", EXAMPLES, "-q"]) == 0
    assert run(["--store", db, "suspend", "o-3", "--id", "s-3"]) == 0
    assert "queued suspend for o-3 (event s-3); `durastate serve` applies it" in capsys.readouterr().out
    assert run(["--store", db, "cancel", "o-3", "--id", "y" * 200]) == 1  # the same checks, the same line
    assert "event id is 200 characters" in one_line_error(capsys)
    assert receive_all(sqs, q) == []


def test_only_the_commands_that_queue_an_event_take_a_queue_url(capsys: pytest.CaptureFixture[str]) -> None:
    for verb in ("start", "send", "cancel", "suspend", "resume", "heartbeat", "terminate", "redrive"):
        assert run([verb, "--help"]) == 0
        assert ("--queue-url" in capsys.readouterr().out) == (verb not in ("terminate", "redrive")), verb


def test_a_heartbeat_goes_in_its_executions_group(sqs: Any, queues: tuple[str, str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = queues
    task = "o-4~1~" + "0123456789abcdef"
    assert run(["heartbeat", task, "--details", '{"done": 3}', "--queue-url", q]) == 0
    assert f"queued heartbeat for task {task}" in capsys.readouterr().out
    (message,) = receive_all(sqs, q)
    body = json.loads(message["Body"])
    assert (message["Attributes"]["MessageGroupId"], body["target_id"]) == ("o-4", "o-4")
    assert (body["event"]["name"], body["event"]["data"]) == ("durastate.heartbeat",
                                                              {"task_id": task, "details": {"done": 3}})
    assert run(["heartbeat", "~" + "a" * 64, "--queue-url", q]) == 1  # no execution in a hashed task id
    assert "pass the task's `execution_id` too" in one_line_error(capsys)
    assert receive_all(sqs, q) == []
