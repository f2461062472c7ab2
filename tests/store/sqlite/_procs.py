"""Process bodies for the multi-process tests (importable by a ``spawn``-ed child)."""

from __future__ import annotations

import os
import signal
from multiprocessing.synchronize import Event as MpEvent
from typing import Any

from durastate.engine.model import Event
from durastate.errors import StoreConflict


def bump_counter(path: str, worker: int, rounds: int, start: Any, out: Any) -> None:
    """Increment one shared counter ``rounds`` times (load, modify, commit; retry on conflict)."""
    from durastate.store.sqlite.sync import SqliteStore

    store = SqliteStore(path, busy_timeout=60.0)
    conflicts = 0
    start.wait()
    for n in range(rounds):
        while True:
            exe = store.load("counter")
            assert exe is not None
            exe.context["n"] += 1
            try:
                store.commit(exe, [(None, Event(id=f"w{worker}-{n}", name="bumped"))],
                             processed_event_id=f"w{worker}-{n}", trace={"w": worker, "n": n})
                break
            except StoreConflict:
                conflicts += 1
    store.close()
    out.put((worker, conflicts))


def commit_stale(path: str, loaded: MpEvent, go: MpEvent, out: Any) -> None:
    """Load at the current version, wait until the parent advanced it, then commit: must conflict."""
    from durastate.store.sqlite.sync import SqliteStore

    store = SqliteStore(path)
    exe = store.load("e1")
    assert exe is not None
    loaded.set()
    go.wait()
    exe.context["child"] = True
    try:
        store.commit(exe, [(None, Event(name="lost"))], processed_event_id="child-ev")
        out.put(("committed", exe.version))
    except StoreConflict as exc:
        out.put(("conflict", exc.expected, exc.found, exe.version))
    store.close()


def send_then_die(path: str, sent: MpEvent) -> None:
    """Send to the durable inbox, report, then wait to be SIGKILLed (never closes anything)."""
    from durastate.transport.sqlite import SqliteTransport

    t = SqliteTransport(path)
    t.send([("order-1", Event(id="ev-1", name="submit", data={"n": 1})),
            ("order-1", Event(id="ev-2", name="pay"))])
    sent.set()
    os.kill(os.getpid(), signal.SIGKILL)


def open_fresh_and_commit(path: str, worker: int, start: Any, out: Any) -> None:
    """Open a file that may not exist yet (racing the other openers), then write to it."""
    from durastate.engine.model import Execution
    from durastate.store.sqlite.sync import SqliteStore
    from durastate.transport.sqlite import SqliteTransport

    start.wait()
    store = SqliteStore(path)
    inbox = SqliteTransport(store)
    for n in range(10):
        store.save(Execution(id=f"w{worker}-{n}", definition_id="d"))
        inbox.send([(f"w{worker}-{n}", Event(name="go"))])
    store.close()
    out.put(worker)
