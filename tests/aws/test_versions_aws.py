"""Definition versions through the Lambda handlers on moto: a deploy that renames a state does not strand
the executions running on the old version, and the archive lives in the executions table (the stack keeps
its seven tables)."""

from __future__ import annotations

from pathlib import Path

from durastate.engine import load_definition
from durastate.engine.model import Event
from durastate.engine.versions import definition_version
from durastate.store.definitions import list_versions
from durastate.transport.sqs import SqsTransport

from .harness import COUNTER_YAML, PREFIX, Stack


def deploy(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "counter.yaml").write_text(text)
    return folder


def send(stack: Stack, target: str, name: str, eid: str, **data: object) -> None:
    SqsTransport(stack.sqs, stack.queue_url).send([(target, Event(id=eid, name=name, data=dict(data)))])


def test_a_deploy_that_renames_a_state_leaves_running_executions_on_their_version(
        queues: tuple[str, str], tmp_path: Path) -> None:
    v1 = load_definition(COUNTER_YAML)
    old = Stack(*queues, deploy(tmp_path, "v1", COUNTER_YAML))
    try:
        send(old, "c-1", "durastate.start", "c-1:start", definition_id="counter")
        send(old, "c-1", "wait", "w1")  # c-1 waits in `waiting`, its 30 s timer armed
        old.pump()
    finally:
        old.close()
    renamed = COUNTER_YAML.replace("waiting", "resting")
    new = Stack(*queues, deploy(tmp_path, "v2", renamed))  # the next deploy: cold Lambdas, new folder
    try:
        send(new, "c-1", "inc", "i1")
        assert new.advance(31) == 1  # the timer of `waiting` fires, on the old version
        send(new, "c-1", "stop", "s1")
        send(new, "c-2", "durastate.start", "c-2:start", definition_id="counter")
        send(new, "c-2", "wait", "w2")
        new.pump()
        c1, c2 = new.raw_store.load("c-1"), new.raw_store.load("c-2")
        assert c1 is not None and (c1.status, c1.outcome, c1.context["count"]) == ("finished", "ok", 1)
        assert c1.definition_version == definition_version(v1)
        assert c2 is not None and c2.active_path == "resting"
        assert c2.definition_version == definition_version(load_definition(renamed))
        assert {v.version for v in list_versions(new.raw_store, "counter")} == {
            c1.definition_version, c2.definition_version}
        tables = new.dynamodb.list_tables()["TableNames"]
        assert len([t for t in tables if t.startswith(f"{PREFIX}_")]) == 7
    finally:
        new.close()
