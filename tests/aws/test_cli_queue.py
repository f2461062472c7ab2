"""``durastate start/send --queue-url`` (and ``DURASTATE_QUEUE_URL``) enqueue the wire format on SQS (moto)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durastate.cli import run

from .conftest import receive_all


def test_start_and_send_enqueue_on_the_queue(sqs: Any, queues: tuple[str, str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = queues
    assert run(["start", "order", "--id", "o-1", "--context", '{"total": 3}', "--queue-url", q]) == 0
    assert "started o-1 (order): queued on" in capsys.readouterr().out
    assert run(["send", "o-1", "pay", "--data", '{"amount": 3}', "--id", "ev-9", "-q", "--queue-url", q]) == 0
    assert capsys.readouterr().out.strip() == "ev-9"
    bodies = [json.loads(m["Body"]) for m in receive_all(sqs, q)]
    assert bodies == [
        {"target_id": "o-1", "event": {"id": "o-1:start", "name": "durastate.start",
                                       "data": {"definition_id": "order", "context": {"total": 3}}}},
        {"target_id": "o-1", "event": {"id": "ev-9", "name": "pay", "data": {"amount": 3}}},
    ]


def test_env_var_and_reserved_names(sqs: Any, queues: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    q, _ = queues
    monkeypatch.setenv("DURASTATE_QUEUE_URL", q)
    assert run(["start", "order", "-q"]) == 0
    exe_id = capsys.readouterr().out.strip()
    assert len(exe_id) == 32
    assert run(["send", exe_id, "durastate.timeout"]) == 1
    assert "reserved" in capsys.readouterr().err
    [m] = receive_all(sqs, q)
    assert json.loads(m["Body"])["target_id"] == exe_id


def test_start_checks_the_definition_when_a_folder_is_named(sqs: Any, queues: tuple[str, str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    q, _ = queues
    examples = str(Path(__file__).resolve().parents[2] / "examples")
    assert run(["start", "ordr", "-d", examples, "--queue-url", q]) == 1
    assert "unknown definition 'ordr'" in capsys.readouterr().err
    assert receive_all(sqs, q) == []
