"""Property: whatever entries of a relay's sends fail, and however often, each target receives its events
in the order they were committed — over every queue transport the relay can drive.

Faults are injected where each transport can fail. SQS reports failures per entry of a
``SendMessageBatch`` (moto cannot fail one entry, so a client wrapper answers for the failed ones and hands
the rest to moto): entries fail a drawn number of times, or for good as the sender's fault. The in-memory
and SQLite transports write a send as one transaction — all or nothing — so a send fails whole while any
of its entries has failures left to spend. The relay runs pass after pass until the outbox is empty; then
the queue is drained through ``claim``/``ack`` and each target's events compared with the outbox order
(minus the entries dropped as undeliverable).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durastate.engine import DefinitionRegistry
from durastate.engine.model import Event, Execution
from durastate.errors import DeliveryFailed
from durastate.runtime import ManualClock, Relay
from durastate.store import DictStore
from durastate.transport import InMemoryTransport
from durastate.transport.base import QueueTransport
from durastate.transport.wire import parse_envelope

PERMANENT = -1
"""A plan entry: rejected for good (the sender's fault) — SQS only."""

_queues = itertools.count()


class WholeSendFaults:
    """A transport whose send fails whole, before writing anything, while an entry has failures left."""

    def __init__(self, inner: QueueTransport, plan: dict[str, int]) -> None:
        self.inner, self.plan = inner, plan

    def send(self, messages: Sequence[tuple[str, Event]]) -> None:
        due = [e.id for _, e in messages if self.plan.get(e.id, 0) > 0]
        for eid in due:
            self.plan[eid] -= 1
        if due:
            raise ConnectionError(f"injected: the queue refused the send ({', '.join(due)})")
        self.inner.send(messages)


class PerEntryFaults:
    """An SQS client whose ``send_message_batch`` fails entries per plan (see the module docstring)."""

    def __init__(self, inner: Any, plan: dict[str, int]) -> None:
        self.inner, self.plan = inner, plan

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        ok, failed = [], []
        for e in Entries:
            left = self.plan.get(parse_envelope(e["MessageBody"]).event.id, 0)
            if left == PERMANENT:
                failed.append({"Id": e["Id"], "Code": "InvalidParameterValue", "Message": "injected",
                               "SenderFault": True})
            elif left > 0:
                self.plan[parse_envelope(e["MessageBody"]).event.id] = left - 1
                failed.append({"Id": e["Id"], "Code": "InternalError", "Message": "injected",
                               "SenderFault": False})
            else:
                ok.append(e)
        resp: dict[str, Any] = {"Successful": [], "Failed": failed}
        if ok:
            resp["Successful"] = self.inner.send_message_batch(QueueUrl=QueueUrl, Entries=ok)["Successful"]
        return resp


@contextlib.contextmanager
def queue(kind: str, plan: dict[str, int], max_attempts: int) -> Iterator[tuple[Any, QueueTransport]]:
    """(what the relay sends to, what the test drains) for one example."""
    if kind == "memory":
        t = InMemoryTransport(ManualClock())
        yield WholeSendFaults(t, plan), t
    elif kind == "sqlite":
        from durastate.transport.sqlite import SqliteTransport

        with tempfile.TemporaryDirectory() as d, SqliteTransport(Path(d) / "inbox.db", clock=ManualClock()) as t:
            yield WholeSendFaults(t, plan), t
    else:
        import boto3
        from moto import mock_aws

        from durastate.transport.sqs import SqsTransport

        with mock_aws():
            sqs = boto3.client("sqs", region_name="us-east-1")
            url = sqs.create_queue(QueueName=f"order-{next(_queues)}.fifo",
                                   Attributes={"FifoQueue": "true"})["QueueUrl"]
            sender = SqsTransport(PerEntryFaults(sqs, plan), url, max_attempts=max_attempts,
                                  sleep=lambda s: None)
            yield sender, SqsTransport(sqs, url)


@st.composite
def scenarios(draw: st.DrawFn, kind: str) -> tuple[list[str], list[int], int, int]:
    n = draw(st.integers(1, 24))
    targets = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n))
    failures = st.integers(0, 3)
    if kind == "sqs":
        failures = st.one_of(failures, failures, st.just(PERMANENT))
    plan = draw(st.lists(failures, min_size=n, max_size=n))
    return targets, plan, draw(st.integers(1, 3)), draw(st.integers(1, 10))


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqs"])
def test_each_target_receives_its_events_in_commit_order_whatever_fails(kind: str) -> None:
    if kind == "sqs":
        pytest.importorskip("moto")

    @settings(max_examples=int(os.environ.get("DURASTATE_HYPOTHESIS_EXAMPLES") or 40), deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(scenarios(kind))
    def check(scenario: tuple[list[str], list[int], int, int]) -> None:
        targets, failures, max_attempts, batch_size = scenario
        events = [Event(id=f"e{i}", name="go", data={"i": i}) for i in range(len(targets))]
        plan = {e.id: f for e, f in zip(events, failures, strict=True) if f}
        store = DictStore()
        store.commit(Execution(id="src", definition_id="any"), list(zip(targets, events, strict=True)))
        with queue(kind, plan, max_attempts) as (sender, drained):
            relay = Relay(store, DefinitionRegistry(), sender, batch_size=batch_size)
            for _ in range(200):
                if not store.pending_outbox():
                    break
                with contextlib.suppress(DeliveryFailed, ConnectionError):
                    relay.run_once()
            assert store.pending_outbox() == []
            got: dict[str, list[str]] = {}
            while claimed := drained.claim(10):
                for c in claimed:
                    got.setdefault(c.target_id, []).append(c.event.id)
                    drained.ack(c)
        expected: dict[str, list[str]] = {}
        for t, e in zip(targets, events, strict=True):
            if plan.get(e.id) != PERMANENT:
                expected.setdefault(t, []).append(e.id)
        assert got == expected
        assert sorted(e.event.id for e, _ in relay.undeliverable) == sorted(
            e.id for e in events if plan.get(e.id) == PERMANENT)

    check()
