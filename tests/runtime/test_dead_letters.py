"""LocalRuntime's dead letters are data: kept durably with why, listed, replayed once fixed, dropped.

On SQLite (the embedded runtime's file) a dead letter outlives the process that made it; a replay puts the
event back with its id, so it applies once — and one already applied changes nothing; a replay that could
only come back is refused before anything moves. Also the control shortcuts of the runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from durastate.client import DurastateClient
from durastate.engine import DefinitionRegistry, control, load_definition
from durastate.engine.model import START, Event
from durastate.errors import DurastateError, UnknownExecution
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store import DictStore, SqliteStore
from durastate.store.control import ControlRefused
from durastate.transport import Claimed, InMemoryTransport
from durastate.transport.base import DeadLetter, ReplayRefused, UnknownDeadLetter, dead_letter_id
from durastate.transport.sqlite import SqliteTransport

from .conftest import COUNTER, ev


class Embedded:
    """A store and its inbox in one SQLite file, opened (and reopened: a restart) like `durastate serve`."""

    def __init__(self, path: Path, registry: DefinitionRegistry, clock: ManualClock) -> None:
        self.path, self.registry, self.clock = path, registry, clock
        self.store: SqliteStore | None = None
        self.inbox: SqliteTransport | None = None

    def runtime(self, **kwargs: Any) -> LocalRuntime:
        self.close()
        self.store = SqliteStore(self.path)
        self.inbox = SqliteTransport(self.store, clock=self.clock)
        return LocalRuntime(self.store, self.registry, self.inbox, self.clock, **kwargs)

    def close(self) -> None:
        if self.inbox is not None:
            self.inbox.close()
        if self.store is not None:
            self.store.close()
        self.store = self.inbox = None


@pytest.fixture
def embedded(tmp_path: Path, registry: DefinitionRegistry, clock: ManualClock) -> Iterator[Embedded]:
    e = Embedded(tmp_path / "durastate.db", registry, clock)
    yield e
    e.close()


class Bare:
    """A queue transport of the user's own, without a dead-letter box."""

    def __init__(self) -> None:
        self.inner = InMemoryTransport()

    def send(self, messages: Any) -> None:
        self.inner.send(messages)

    def claim(self, n: int, lease_seconds: float = 30.0) -> list[Claimed]:
        return self.inner.claim(n, lease_seconds)

    def ack(self, c: Claimed) -> None:
        self.inner.ack(c)

    def release(self, c: Claimed, delay: float = 0.0) -> None:
        self.inner.release(c, delay)


def start(target: str, definition: str, **context: Any) -> Event:
    return Event(id=f"{target}:start", name=START, data={"definition_id": definition, "context": context})


def test_every_kind_of_event_that_can_never_apply_is_kept_and_outlives_the_process(
        embedded: Embedded, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "MAX_HELD", 1)
    rt = embedded.runtime()
    rt.start("counter", execution_id="s1")
    rt.run_until_idle()
    rt.suspend("s1")
    rt.run_until_idle()
    rt.send("ghost", ev("inc", "g1"))  # an execution that does not exist
    rt.send("o-1", start("o-1", "order"))  # a definition that does not exist
    rt.send("bad", Event(id="bad:start", name=START, data={"context": {}}))  # a start without a definition
    rt.send("s1", ev("inc", "held"))  # held while suspended: the held queue takes one…
    rt.send("s1", ev("inc", "refused"))  # …and refuses the next
    # a reserved name durastate does not know, put on the queue (rt.send refuses it: ReservedId)
    rt.transport.send([("s1", Event(id="forged", name="durastate.explode"))])
    stats = rt.run_until_idle()
    assert stats.dead_lettered == 5
    embedded.close()  # the process ends

    rt = embedded.runtime()  # a new one starts on the same file
    letters = {d.event.id: d for d in rt.list_dead_letters().items}
    assert set(letters) == {"g1", "o-1:start", "bad:start", "refused", "forged"}
    assert {k: d.error for k, d in letters.items()} == {
        "g1": "UnknownExecution", "o-1:start": "UnknownDefinition", "bad:start": "MalformedEvent",
        "refused": "MalformedEvent", "forged": "MalformedEvent"}
    assert "no execution 'ghost'" in letters["g1"].reason
    assert "unknown definition 'order'" in letters["o-1:start"].reason
    assert "definition_id" in letters["bad:start"].reason
    assert "not an event durastate knows" in letters["forged"].reason
    assert all(d.at == clock() and d.attempts == 1 for d in letters.values())
    assert letters["g1"].id == dead_letter_id("ghost", "g1")
    assert rt.dead_letters == []  # what *this* runtime dead-lettered: nothing yet
    held = rt.get("s1")
    assert held is not None and [e.id for e in held.held] == ["held"]


def test_a_replay_after_the_fix_applies_each_event_once_and_a_second_replay_changes_nothing(
        embedded: Embedded, registry: DefinitionRegistry) -> None:
    rt = embedded.runtime()
    rt.send("o-1", start("o-1", "order"))
    rt.send("o-1", ev("inc", "i1"))
    rt.send("o-1", ev("inc", "i2"))
    assert rt.run_until_idle().dead_lettered == 3
    start_letter = dead_letter_id("o-1", "o-1:start")
    with pytest.raises(ReplayRefused, match="definition 'order', which is still missing"):
        rt.replay_dead_letters()
    with pytest.raises(ReplayRefused, match="does not exist and whose start is neither queued nor replayed"):
        rt.replay_dead_letters([dead_letter_id("o-1", "i1")])
    assert len(rt.list_dead_letters().items) == 3 and embedded.inbox is not None
    assert embedded.inbox.pending() == 0  # refused: nothing moved

    registry.register(load_definition({**COUNTER, "id": "order"}))  # the fix: the definition is deployed
    assert [d.event.id for d in rt.replay_dead_letters()] == ["o-1:start", "i1", "i2"]
    stats = rt.run_until_idle()
    assert (stats.applied, stats.dead_lettered) == (3, 0)
    exe = rt.get("o-1")
    assert exe is not None and exe.context["count"] == 2
    assert rt.replay_dead_letters() == []
    with pytest.raises(UnknownDeadLetter):
        rt.replay_dead_letters([start_letter])
    assert rt.run_until_idle().handled == 0
    exe = rt.get("o-1")
    assert exe is not None and exe.context["count"] == 2 and exe.version == 3


def test_replaying_an_event_that_was_in_fact_applied_changes_nothing(embedded: Embedded) -> None:
    rt = embedded.runtime()
    rt.start("counter", execution_id="c1")
    rt.send("c1", ev("inc", "i1"))
    rt.run_until_idle()
    rt.dead_letter_box.add(DeadLetter("c1", ev("inc", "i1"), "kept by hand", "RuntimeError"))
    rt.replay_dead_letters()
    stats = rt.run_until_idle()
    assert (stats.applied, stats.duplicates) == (0, 1)
    exe = rt.get("c1")
    assert exe is not None and exe.context["count"] == 1


def test_a_crash_between_keeping_a_letter_and_acking_its_message_keeps_it_once(
        tmp_path: Path, registry: DefinitionRegistry, clock: ManualClock) -> None:
    class CrashOnAck(SqliteTransport):
        crash = True

        def ack_many(self, claims: Sequence[Claimed]) -> None:  # how the runtime acks a claim's messages
            if self.crash:
                self.crash = False
                raise RuntimeError("killed before the ack")
            super().ack_many(claims)

    store = DictStore()
    inbox = CrashOnAck(tmp_path / "inbox.db", clock=clock)
    rt = LocalRuntime(store, registry, inbox, clock, lease_seconds=30)
    rt.send("ghost", ev("inc", "g1"))
    with pytest.raises(RuntimeError, match="killed"):
        rt.run_until_idle()
    inbox.close()

    inbox = CrashOnAck(tmp_path / "inbox.db", clock=clock)
    inbox.crash = False
    rt = LocalRuntime(store, registry, inbox, clock, lease_seconds=30)
    clock.advance(31)  # the dead worker's lease ends: its message is claimed again
    assert rt.run_until_idle().dead_lettered == 1
    [letter] = rt.list_dead_letters().items
    assert (letter.event.id, letter.attempts) == ("g1", 2)
    assert inbox.pending() == 0
    inbox.close()


def test_the_callback_sees_a_letter_once_it_is_kept_and_the_log_names_it(
        registry: DefinitionRegistry, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[bool] = []
    rt = LocalRuntime(DictStore(), registry,
                      on_dead_letter=lambda d: seen.append(rt.dead_letter_box.get(d.id) == d))
    rt.send("ghost", ev("inc", "g1"))
    with caplog.at_level(logging.ERROR, logger="durastate.runtime"):
        rt.run_until_idle()
    assert seen == [True]
    assert f"dead letter {dead_letter_id('ghost', 'g1')}" in caplog.text
    assert rt.drop_dead_letter(dead_letter_id("ghost", "g1")).event.id == "g1"
    assert rt.list_dead_letters().items == []


def test_a_transport_without_a_box_gets_one_in_memory_and_a_warning(
        registry: DefinitionRegistry, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="durastate.runtime"):
        rt = LocalRuntime(DictStore(), registry, Bare())
    assert "keeps no dead letters" in caplog.text
    rt.send("ghost", ev("inc", "g1"))
    rt.run_until_idle()
    assert [d.event.id for d in rt.list_dead_letters().items] == ["g1"]
    rt.start("counter", execution_id="ghost")
    rt.run_until_idle()
    assert [d.event.id for d in rt.replay_dead_letters()] == ["g1"]  # replayed through that transport
    rt.run_until_idle()
    exe = rt.get("ghost")
    assert exe is not None and exe.context["count"] == 1


def test_control_shortcuts_of_the_runtime(registry: DefinitionRegistry, clock: ManualClock) -> None:
    calls = {"up": False}

    def charge(context: dict[str, Any], event: Event) -> dict[str, Any]:
        if not calls["up"]:
            raise ConnectionError("provider unreachable")
        return {"charged": True}

    registry.register(load_definition({"id": "pay", "initial": "cart", "context": {}, "states": {
        "cart": {"on": {"submit": "paying"}},
        "paying": {"entry": [charge], "on": {"ship": "done"}},
        "done": {"type": "final", "outcome": "shipped"}}}))
    rt = LocalRuntime(DictStore(), registry, clock=clock)
    for eid in ("a", "b", "p"):
        rt.start("counter" if eid != "p" else "pay", execution_id=eid)
    rt.run_until_idle()
    rt.suspend("a", "maintenance")
    rt.send("a", ev("inc", "i1"))
    rt.run_until_idle()
    a = rt.get("a")
    assert a is not None and (a.status, a.context["count"], len(a.held)) == ("suspended", 0, 1)
    rt.resume("a")
    rt.run_until_idle()
    a = rt.get("a")
    assert a is not None and (a.status, a.context["count"]) == ("running", 1)
    rt.cancel("a", "no longer needed")
    rt.run_until_idle()
    a = rt.get("a")
    assert a is not None and (a.status, a.reason) == ("cancelled", "no longer needed")
    assert rt.terminate("b", "stuck").status == "terminated"
    with pytest.raises(ControlRefused):
        rt.terminate("b")
    with pytest.raises(UnknownExecution):
        rt.terminate("nope")
    rt.send("p", ev("submit"))
    rt.run_until_idle()
    p = rt.get("p")
    assert p is not None and p.status == "failed"
    calls["up"] = True  # the fix
    redriven = rt.redrive("p")
    assert redriven.execution_id == "p" and redriven.event.name == "submit"
    rt.run_until_idle()
    p = rt.get("p")
    assert p is not None and (p.status, p.active_path, p.context["charged"]) == ("running", "paying", True)


def test_the_client_over_the_embedded_file_lists_replays_drops_and_controls(
        embedded: Embedded, registry: DefinitionRegistry) -> None:
    rt = embedded.runtime()
    assert embedded.store is not None
    client = DurastateClient(SqliteTransport(embedded.path), embedded.store)  # another connection, same file
    client.send("ghost", "inc", event_id="g1")
    client.send("lost", "inc", event_id="l1")
    rt.run_until_idle()
    assert [d.event.id for d in client.dead_letters().items] == ["g1", "l1"]
    assert client.dead_letter(dead_letter_id("ghost", "g1")) is not None
    assert client.drop_dead_letter(dead_letter_id("lost", "l1")).target_id == "lost"
    client.start("counter", execution_id="ghost")
    assert [d.event.id for d in client.replay_dead_letters()] == ["g1"]
    rt.run_until_idle()
    exe = client.get("ghost")
    assert exe is not None and exe.context["count"] == 1 and client.dead_letters().items == []

    client.suspend("ghost")
    client.send("ghost", "inc", event_id="g2")
    rt.run_until_idle()
    exe = client.get("ghost")
    assert exe is not None and (exe.status, exe.context["count"]) == ("suspended", 1)
    client.resume("ghost")
    rt.run_until_idle()
    exe = client.get("ghost")
    assert exe is not None and (exe.status, exe.context["count"]) == ("running", 2)
    assert client.terminate("ghost", "enough").status == "terminated"
    with pytest.raises(DurastateError, match="already terminated"):
        client.terminate("ghost")
    with pytest.raises(UnknownExecution):
        client.redrive("nope")
    client.transport.close()  # type: ignore[attr-defined]
    with pytest.raises(DurastateError, match="no dead-letter box"):
        DurastateClient(Bare()).dead_letters()
    with pytest.raises(DurastateError, match="no store"):
        DurastateClient(InMemoryTransport()).redrive("ghost")
