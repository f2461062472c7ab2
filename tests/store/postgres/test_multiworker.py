"""Four worker processes on one PostgreSQL server share hundreds of executions — and survive a SIGKILL.

The workload is the ``counter`` chart: each execution gets a start, ``INCS`` ``inc`` events and a
``finish``. Exactly-once shows in the data: every execution ends ``finished`` with ``count == INCS`` (a
lost event leaves it short, one applied twice pushes it over) and one dedupe mark per event (in the
row's recent ids or in ``processed_events``, never both). Each
``inc`` step also writes a row to a probe table outside the step's transaction, so a step that ran twice
— two workers advancing one execution at once, the loser retrying — leaves two rows for one event.

Tests wait for the workers by polling the database with a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine.ids import is_system_id
from durastate.engine.model import START, Event
from durastate.store.postgres.sync import PostgresStore
from durastate.transport.postgres import PostgresTransport

from .conftest import DSN

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "multiworker"
ROOT = Path(__file__).resolve().parents[3]
EXECUTIONS = 200
INCS = 5
DEADLINE = 240.0


def durastate_command() -> list[str]:
    script = Path(sys.executable).with_name("durastate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "durastate.cli"]


def serve_command(dsn: str, *extra: str) -> list[str]:
    return [
        *durastate_command(),
        "--connect-retries",
        "10",
        "serve",
        "-q",
        "--poll",
        "0.05",
        "--store",
        dsn,
        "--definitions",
        str(HERE / "defs"),
        *extra,
    ]


class Workers:
    """Worker subprocesses of one test; whatever is still running at the end is killed."""

    def __init__(self, tmp: Path, schema: str) -> None:
        self.tmp = tmp
        path = os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])
        self.env = {
            **os.environ,
            "PYTHONPATH": path,
            "DURASTATE_MW_PROBE_DSN": DSN,
            "DURASTATE_MW_PROBE_SCHEMA": schema,
        }
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], **env: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115 - closed with the proc
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**self.env, **env}, cwd=self.tmp
        )
        self.procs.append(proc)
        return proc

    def wait_serving(self, i: int) -> None:
        """Until worker ``i`` says "serving": from then on SIGTERM stops it cleanly (before, the
        interpreter may still be importing, and SIGTERM's default action would apply)."""
        log, proc = self.tmp / f"worker-{i}.log", self.procs[i]
        deadline = time.monotonic() + DEADLINE
        while "serving" not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, self.logs()
            time.sleep(0.05)  # polling interval only: the log line is the synchronisation

    def logs(self) -> str:
        return "\n".join(
            f"--- worker {i}\n" + (self.tmp / f"worker-{i}.log").read_text(errors="replace")
            for i in range(len(self.procs))
        )

    def stop(self) -> list[int]:
        for i, proc in enumerate(self.procs):
            if proc.poll() is None:
                self.wait_serving(i)
                proc.send_signal(signal.SIGTERM)
        return [proc.wait(timeout=60) for proc in self.procs]

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


@pytest.fixture
def workers(tmp_path: Path, schema: str) -> Iterator[Workers]:
    w = Workers(tmp_path, schema)
    yield w
    w.kill_all()


def queue_work(dsn: str, schema: str, admin: Any) -> list[str]:
    PostgresStore.from_dsn(dsn).close()
    admin.execute(
        f'CREATE TABLE "{schema}".probe (event_id TEXT NOT NULL, pid INT NOT NULL, stalled BOOLEAN NOT NULL)'
    )
    ids = [f"x{i:04d}" for i in range(EXECUTIONS)]
    messages: list[tuple[str, Event]] = []
    for eid in ids:
        messages.append(
            (eid, Event(id=f"{eid}:start", name=START, data={"definition_id": "counter", "context": {}}))
        )
        messages.extend((eid, Event(id=f"{eid}-inc-{n}", name="inc")) for n in range(INCS))
        messages.append((eid, Event(id=f"{eid}-finish", name="finish")))
    with PostgresTransport.from_dsn(dsn) as inbox:
        inbox.send(messages)
    return ids


def finished(admin: Any, schema: str) -> int:
    return int(
        admin.execute(f"SELECT count(*) FROM \"{schema}\".executions WHERE status = 'finished'").fetchone()[0]
    )


def wait_until(admin: Any, schema: str, workers: Workers, count: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while finished(admin, schema) < count:
        dead = [p.returncode for p in workers.procs if p.poll() is not None and p.returncode != -9]
        assert not dead, f"a worker exited early ({dead}):\n{workers.logs()}"
        assert time.monotonic() < deadline, (
            f"only {finished(admin, schema)}/{count} finished after {DEADLINE:.0f}s:\n{workers.logs()}"
        )
        time.sleep(0.2)  # polling the database for progress, not synchronising


def check_exactly_once(admin: Any, schema: str, ids: list[str]) -> dict[str, list[int]]:
    """Every execution finished with every event applied once; returns the probe rows per event."""
    s = f'"{schema}"'
    # The context has its own column (durastate.store.sql.context_apart).
    store_rows = [r for r in admin.execute(f"SELECT id, status, context FROM {s}.executions ORDER BY id").fetchall()
                  if not is_system_id(r[0])]  # the definition's archived version is stored there too
    assert [r[0] for r in store_rows] == ids
    import json

    bad = [
        (r[0], r[1], json.loads(r[2]).get("count"))
        for r in store_rows
        if r[1] != "finished" or json.loads(r[2]).get("count") != INCS
    ]
    assert bad == []
    # One dedupe mark per event: in the row's recent ids or spilled to processed_events, never both.
    marks: dict[str, list[str]] = {}
    for eid, event_id in admin.execute(f"SELECT execution_id, event_id FROM {s}.processed_events").fetchall():
        marks.setdefault(eid, []).append(event_id)
    for eid, rids in admin.execute(f"SELECT id, rids FROM {s}.executions").fetchall():
        if not is_system_id(eid):
            marks.setdefault(eid, []).extend(rids.split("\n") if rids else [])

    def expected(eid: str) -> list[str]:
        return [f"{eid}:start", *(f"{eid}-inc-{n}" for n in range(INCS)), f"{eid}-finish"]

    assert {eid: sorted(m) for eid, m in marks.items()} == {eid: sorted(expected(eid)) for eid in ids}
    assert admin.execute(f"SELECT count(*) FROM {s}.inbox").fetchone()[0] == 0
    probes: dict[str, list[int]] = {}
    for event_id, pid in admin.execute(f"SELECT event_id, pid FROM {s}.probe").fetchall():
        probes.setdefault(event_id, []).append(pid)
    assert set(probes) == {f"{eid}-inc-{n}" for eid in ids for n in range(INCS)}
    return probes


def test_four_durastate_serve_processes_share_the_work_exactly_once(
    dsn: str, schema: str, admin: Any, workers: Workers
) -> None:
    ids = queue_work(dsn, schema, admin)
    for _ in range(4):
        workers.start(serve_command(dsn))
    wait_until(admin, schema, workers, EXECUTIONS)
    assert workers.stop() == [0, 0, 0, 0], workers.logs()
    probes = check_exactly_once(admin, schema, ids)
    twice = {e: pids for e, pids in probes.items() if len(pids) > 1}
    assert twice == {}, "a step ran twice: two workers advanced one execution at once"
    assert len({pid for pids in probes.values() for pid in pids}) >= 2, "the work was not shared"


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(
    dsn: str, schema: str, admin: Any, workers: Workers
) -> None:
    ids = queue_work(dsn, schema, admin)
    # The victim hangs in the middle of its 20th step, holding claims; then it is SIGKILLed there.
    victim = workers.start(serve_command(dsn, "--lease", "8"), DURASTATE_MW_STALL_AFTER="20")
    for _ in range(3):
        workers.start(serve_command(dsn, "--lease", "8"))  # a dead worker's claims return after 8 s
    deadline = time.monotonic() + DEADLINE
    stalled_query = f'SELECT event_id FROM "{schema}".probe WHERE stalled'
    while not (stalled := admin.execute(stalled_query).fetchall()):
        assert victim.poll() is None and time.monotonic() < deadline, workers.logs()
        time.sleep(0.2)  # polling the database for progress, not synchronising
    victim.kill()  # SIGKILL mid-step: no commit, no ack, no release — its claims wait out their lease
    victim.wait(timeout=30)
    assert finished(admin, schema) < EXECUTIONS, "the run ended before the kill; raise EXECUTIONS"
    wait_until(admin, schema, workers, EXECUTIONS)
    assert workers.stop()[1:] == [0, 0, 0], workers.logs()
    probes = check_exactly_once(admin, schema, ids)
    # The one step the victim died in ran again elsewhere once its lease expired; no other step twice.
    twice = {e: pids for e, pids in probes.items() if len(pids) > 1}
    (stalled_event,) = (row[0] for row in stalled)
    assert list(twice) == [stalled_event] and len(twice[stalled_event]) == 2, twice
    assert victim.pid in twice[stalled_event]
