"""Retention on AWS: the sweeper Lambda purges old ended executions when the construct sets ``retention``.

The tombstone it leaves carries the TTL attribute DynamoDB deletes it by, keeps the dedupe marks inside
the item, and the worker Lambda's path still recognises a repeated start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.engine.model import Event
from durastate.runtime import HandleResult
from durastate.store.dynamodb.layout import TTL_ATTRIBUTE

from .harness import COUNTER_YAML, PREFIX, Stack

DAY = 86400.0


@pytest.fixture
def stack(queues: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "counter.yaml").write_text(COUNTER_YAML)
    monkeypatch.setenv("DURASTATE_RETENTION_SECONDS", str(int(30 * DAY)))
    monkeypatch.setenv("DURASTATE_TOMBSTONE_TTL_SECONDS", str(int(7 * DAY)))
    s = Stack(*queues, folder)
    yield s
    s.close()


def start_event(eid: str) -> Event:
    return Event(id=f"{eid}:start", name="durastate.start", data={"definition_id": "counter"})


def test_the_sweeper_purges_what_ended_before_the_retention(stack: Stack) -> None:
    w = stack.runtime.worker
    for eid in ("done-1", "done-2", "busy"):
        w.handle(eid, start_event(eid))
    for eid in ("done-1", "done-2"):
        w.handle(eid, Event(id=f"{eid}:stop", name="stop"))

    assert stack.call_sweeper()["purged"] == 0  # ended a moment ago
    stack.clock.advance(31 * DAY)
    result = stack.call_sweeper()

    assert result["purged"] == 2 and result["purge_more"] is False
    tomb = stack.raw_store.load("done-1")
    assert tomb is not None and tomb.status == "purged" and tomb.outcome == "ok"
    item = stack.dynamodb.get_item(TableName=f"{PREFIX}_executions", Key={"id": {"S": "done-1"}})["Item"]
    assert int(item[TTL_ATTRIBUTE]["N"]) == int(stack.clock() + 7 * DAY)
    assert "ended_shard" not in item  # out of the ``ended`` index
    assert w.handle("done-1", start_event("done-1")) == HandleResult.DUPLICATE
    busy = stack.raw_store.load("busy")
    assert busy is not None and busy.status == "running"
