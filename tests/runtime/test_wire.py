"""The wire format: exact round trips, and a precise reason for every way a message can be wrong."""

from __future__ import annotations

import json

import pytest

from durastate.engine.model import Event
from durastate.errors import MalformedEvent
from durastate.transport.wire import Envelope, dump_envelope, parse_envelope


def test_round_trip_is_exact_from_text_bytes_and_mapping() -> None:
    ev = Event(id="e-1", name="paid", data={"amount": 12.5, "items": [{"sku": "a", "n": 2}], "ok": True})
    body = dump_envelope("order-7", ev)
    assert json.loads(body) == {"target_id": "order-7", "event": {"id": "e-1", "name": "paid",
                                                                 "data": ev.data}}
    for form in (body, body.encode(), bytearray(body.encode()), json.loads(body)):
        env = parse_envelope(form)
        assert env == Envelope(target_id="order-7", event=ev)
        assert dump_envelope(env.target_id, env.event) == body


@pytest.mark.parametrize(("body", "reason"), [
    ("{", "body is not valid JSON"),
    ("[1, 2]", "expected a JSON object, got an array"),
    ('"hello"', "expected a JSON object, got a string"),
    ("{}", "target_id: missing (required)"),
    ('{"target_id": "a"}', "event: missing (required)"),
    ('{"target_id": "", "event": {"id": "1", "name": "x"}}', "target_id: string should have at least 1"),
    ('{"target_id": "a", "event": {"id": "1"}}', "event.name: missing (required)"),
    ('{"target_id": "a", "event": {"id": "1", "name": "x", "data": [1]}}', "event.data:"),
    ('{"target_id": "a", "event": {"id": "1", "name": "x", "colour": 1}}', "event.colour: unexpected field"),
    ('{"targetId": "a", "event": {"id": "1", "name": "x"}}', "targetId: unexpected field"),
    ('{"target_id": 5, "event": {"id": "1", "name": "x"}}', "target_id: input should be a valid string"),
    ('{"target_id": "a", "event": {"name": "x"}}', "event.id is missing"),
    (b"\xff\xfe{}", "not UTF-8"),
])
def test_malformed_messages_say_what_is_wrong(body: str | bytes, reason: str) -> None:
    with pytest.raises(MalformedEvent) as info:
        parse_envelope(body)
    assert reason in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(MalformedEvent) as info:
        parse_envelope({"target_id": "", "event": {"id": "1", "data": 3}})
    msg = str(info.value)
    assert "target_id:" in msg and "event.name: missing" in msg and "event.data:" in msg


def test_long_bodies_are_quoted_truncated() -> None:
    with pytest.raises(MalformedEvent) as info:
        parse_envelope('{"target_id": "a", "event": {"id": "1", "name": "' + "x" * 1000 + '", "bad": 1}}')
    assert len(str(info.value)) < 600 and "…" in str(info.value)


def test_a_non_message_type_is_rejected() -> None:
    with pytest.raises(MalformedEvent, match="expected JSON text, bytes or a mapping"):
        parse_envelope(42)  # type: ignore[arg-type]
