"""The handler loop (``durastate local`` attached to a running server) killed with SIGKILL mid-run and restarted:
nothing is lost and nothing is applied twice.

moto's server — the durable state: queue, tables, streams — lives in the test process; the handler loop is
a separate process, as Lambda's containers are. What the killed loop had in flight reappears after the
visibility timeout, a relay killed between send and ack re-sends (deduplicated by SQS and the worker), and
the restarted loop's first relay run delivers what the stream trigger of the dead one never saw.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.devstack import LocalStack

from .helpers import QUIET, count, drain_queue, executions, send, start

pytestmark = pytest.mark.slow

ORDERS = [f"k{i}" for i in range(8)]
TIMEOUT = 180.0


class Loop:
    """One ``durastate local --endpoint-url …`` process; its stdout lines arrive on a queue (no polling)."""

    def __init__(self, endpoint: str, template: Path) -> None:
        cmd = [sys.executable, "-m", "durastate.cli.local", "--endpoint-url", endpoint, "--no-create",
               "--template", str(template), "--visibility-timeout", "5", "--retry-delay", "0",
               "--poll", "0.05"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: str) -> str:
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} within {TIMEOUT}s") from None
            if line is None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"the loop exited ({self.proc.wait()}) before {pattern!r}:\n{err}")
            if re.search(pattern, line):
                return line

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture()
def server(cloud_assembly: Path) -> Iterator[LocalStack]:
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, environment=QUIET) as st:
        yield st


def test_killed_and_restarted_loop_loses_and_duplicates_nothing(server: LocalStack,
                                                                cloud_assembly: Path) -> None:
    template = cloud_assembly / "DurastateStack.template.json"
    sqs, ddb, q = server.client("sqs"), server.client("dynamodb"), server.queue_url
    prices = {oid: i + 1 for i, oid in enumerate(ORDERS)}
    loops: list[Loop] = []
    try:
        for oid in ORDERS:
            start(sqs, q, oid)
            send(sqs, q, oid, "add_item", {"price": prices[oid]})
            send(sqs, q, oid, "submit")
        loops.append(Loop(server.endpoint_url, template))
        loops[-1].wait_for(r"^step worker [1-9]")
        loops[-1].kill()  # mid-run: batches applied, others in flight or not yet received
        assert not server.settled(), "the loop finished before it was killed: nothing was tested"

        loops.append(Loop(server.endpoint_url, template))
        loops[-1].wait_for(r"^settled$")
        exes = executions(ddb)
        assert all(exes[oid]["active_path"] == "processing.payment" for oid in ORDERS)

        for oid in ORDERS:  # pay every order; kill the loop again while the joins are under way
            send(sqs, q, f"{oid}~1", "authorize", {"receipt": f"R-{oid}"})
        loops[-1].wait_for(r"^step (worker [1-9]|.*stream [1-9])")
        loops[-1].kill()
        loops.append(Loop(server.endpoint_url, template))
        loops[-1].wait_for(r"^settled$")

        for oid in ORDERS:
            send(sqs, q, oid, "picked")
            send(sqs, q, oid, "label_printed", {"tracking": f"T-{oid}"})
        loops[-1].wait_for(r"^settled$")
    finally:
        for loop in loops:
            loop.stop()

    exes = executions(ddb)
    for oid in ORDERS:
        exe = exes[oid]
        assert (exe["status"], exe["outcome"]) == ("finished", "fulfilled"), oid
        # applied exactly once: a duplicate add_item would count the item twice
        assert exe["context"]["items"] == 1 and exe["context"]["total"] == prices[oid], exe["context"]
        assert exe["context"]["receipt"] == f"R-{oid}" and exe["context"]["tracking"] == f"T-{oid}"
        children = [f"{oid}~{n}" for n in (1, 2, 3)]  # the payment, then the two regions
        assert all(exes[c]["status"] == "finished" and exes[c]["parent_id"] == oid for c in children)
    assert len(exes) == 4 * len(ORDERS), sorted(exes)  # no stray execution
    for table in ("durastate_outbox", "durastate_spawns"):
        assert count(ddb, table) == 0
    assert drain_queue(sqs, server.dlq_url) == []
