"""``durastate serve`` as real processes on one SQLite file: crash safety and sharing the work.

The workload is the ``counter`` chart: each execution receives K ``inc`` events and then ``finish``, so
exactly-once delivery means every execution ends ``finished`` with ``count == K`` — a lost event leaves
it short, an event applied twice pushes it over. Tests synchronise by polling the store with a deadline;
nothing here sleeps to wait for something to happen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durastate.cli import run
from durastate.engine.model import START, Event
from durastate.store.sqlite.sync import SqliteStore
from durastate.transport.sqlite import SqliteTransport

from ._support import Env, durastate_executable

pytestmark = pytest.mark.slow

DEADLINE = 120.0


class Servers:
    """``durastate serve`` subprocesses of one test, all stopped at its end."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.procs: list[subprocess.Popen[bytes]] = []
        self.killed: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.env.tmp / f"serve-{len(self.procs)}.log", "wb")  # noqa: SIM115 - closed with the proc
        proc = subprocess.Popen([*durastate_executable(), "serve", "-q", *args], stdout=log, stderr=log,
                                env={**os.environ, **self.env.vars()}, cwd=self.env.tmp)
        self.procs.append(proc)
        return proc

    def wait_serving(self, proc: subprocess.Popen[bytes]) -> None:
        """Until ``proc`` says "serving": from then on SIGTERM stops it cleanly (before, the interpreter
        may still be importing, and SIGTERM's default action would apply)."""
        log = self.env.tmp / f"serve-{self.procs.index(proc)}.log"
        wait_for("the server to start", lambda: "serving" in log.read_text(errors="replace"), self)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no handler runs, nothing is flushed or released — a crash."""
        self.killed.append(proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join((self.env.tmp / f"serve-{i}.log").read_text(errors="replace")
                         for i in range(len(self.procs)))

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


@pytest.fixture
def servers(env: Env) -> Iterator[Servers]:
    s = Servers(env)
    yield s
    s.stop_all()


def queue_work(env: Env, ids: list[str], incs: int) -> None:
    """Queue each execution's start and ``incs`` inc events in the durable inbox, as `durastate` would."""
    with SqliteTransport(env.db) as inbox:
        messages: list[tuple[str, Event]] = []
        for eid in ids:
            messages.append((eid, Event(id=f"{eid}:start", name=START,
                                        data={"definition_id": "counter", "context": {}})))
            messages.extend((eid, Event(id=f"{eid}-inc-{n}", name="inc")) for n in range(incs))
        inbox.send(messages)


def counts(store: SqliteStore, ids: list[str]) -> dict[str, tuple[str, int]]:
    out = {}
    for eid in ids:
        exe = store.load(eid)
        out[eid] = (exe.status, int(exe.context.get("count", 0))) if exe else ("absent", 0)
    return out


def wait_for(what: str, check: Callable[[], bool], servers: Servers) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        for proc in servers.procs:
            if proc not in servers.killed and proc.poll() is not None and proc.returncode != 0:
                pytest.fail(f"a server exited with {proc.returncode} while waiting for {what}:\n"
                            f"{servers.logs()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}:\n{servers.logs()}")
        time.sleep(0.05)  # polling interval only: the condition above is the synchronisation


def stop_cleanly(servers: Servers, proc: subprocess.Popen[bytes]) -> None:
    servers.wait_serving(proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_sigkill_mid_run_then_restart_applies_every_event_once(env: Env, servers: Servers) -> None:
    ids = [f"k{i:02d}" for i in range(24)]
    incs = 25
    queue_work(env, ids, incs)
    store = SqliteStore(env.db)
    try:
        first = servers.start("--batch", "4", "--lease", "2")
        wait_for("a quarter of the events", lambda: sum(c for _, c in counts(store, ids).values())
                 >= len(ids) * incs // 4, servers)
        servers.kill(first)
        at_kill = counts(store, ids)
        assert all(status in ("running", "absent") for status, _ in at_kill.values())  # mid-run
        # While no server runs, `durastate send` queues the finishes durably.
        for eid in ids:
            assert run(["send", eid, "finish", "-q"]) == 0
        second = servers.start("--lease", "2")
        wait_for("every execution to finish", lambda: all(
            s == "finished" for s, _ in counts(store, ids).values()), servers)
        stop_cleanly(servers, second)
        final = counts(store, ids)
        assert final == {eid: ("finished", incs) for eid in ids}
        with SqliteTransport(env.db) as inbox:
            assert inbox.pending() == 0
    finally:
        store.close()


def test_two_servers_share_one_file_and_apply_each_event_once(env: Env, servers: Servers) -> None:
    ids = [f"t{i:02d}" for i in range(20)]
    incs = 20
    a = servers.start("--batch", "4", "--lease", "5", "--poll", "0.05")
    b = servers.start("--batch", "4", "--lease", "5", "--poll", "0.05")
    queue_work(env, ids, incs)
    with SqliteTransport(env.db) as inbox:
        inbox.send([(eid, Event(id=f"{eid}-finish", name="finish")) for eid in ids])
    store = SqliteStore(env.db)
    try:
        wait_for("every execution to finish", lambda: all(
            s == "finished" for s, _ in counts(store, ids).values()), servers)
        stop_cleanly(servers, a)
        stop_cleanly(servers, b)
        assert counts(store, ids) == {eid: ("finished", incs) for eid in ids}
        for eid in ids:  # each step recorded once: start + incs + finish
            assert [s["event"] for s in store.read_trace(eid)].count("inc") == incs
    finally:
        store.close()


def test_sigterm_stops_an_idle_server_cleanly(env: Env, servers: Servers) -> None:
    proc = servers.start("--poll", "0.05")
    assert run(["start", "counter", "--id", "sig1", "-q"]) == 0
    store = SqliteStore(env.db)
    try:
        wait_for("the start to be applied", lambda: store.load("sig1") is not None, servers)
    finally:
        store.close()
    stop_cleanly(servers, proc)
    assert "stopped" in Path(env.tmp / "serve-0.log").read_text()
