"""``durastate serve`` rides out transient errors of a round: one warning line each, a growing wait.

The fault is injected through the store: a real :class:`SqliteStore` whose ``pending_outbox`` — read by the
relay in every round — raises as scripted. The wait between failed rounds goes through
``durastate.cli.serve._wait``, replaced here by one that records the delay and returns at once: no test
waits for real.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from durastate.cli import backends
from durastate.cli import serve as serve_cmd
from durastate.errors import DeliveryFailed, GroupAborted, StoreThrottled, StoreUnavailable
from durastate.store.base import OutboxEntry
from durastate.store.sqlite.sync import SqliteStore

from ._support import Env, Outcome, assert_one_line_error

Cli = Callable[..., Outcome]
RETRY = re.compile(r"^warning: round failed \((\w+): (.*)\); retrying in ([0-9.]+)s$")


class FlakyOutboxStore(SqliteStore):
    """The real store, but each ``pending_outbox`` call takes the next scripted outcome: an exception to
    raise, or ``None`` to read the outbox (also once the script has run out)."""

    script: list[Exception | None] = []

    def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry]:
        if FlakyOutboxStore.script:
            fault = FlakyOutboxStore.script.pop(0)
            if fault is not None:
                raise fault
        return super().pending_outbox(limit)


@pytest.fixture
def flaky(env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Exception | None]]:
    """Every command of the test opens the flaky store; the returned list is its script."""
    script: list[Exception | None] = []
    monkeypatch.setattr(FlakyOutboxStore, "script", script)
    monkeypatch.setattr(backends, "open_cli_store",
                        lambda url, retries, **_: FlakyOutboxStore(backends.sqlite_path(url)))
    yield script


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits serve asked for, in order (none of them is waited)."""
    asked: list[float] = []

    def record(stop: threading.Event, seconds: float) -> bool:
        asked.append(seconds)
        return stop.is_set()

    monkeypatch.setattr(serve_cmd, "_wait", record)
    return asked


def retries(out: Outcome) -> list[tuple[str, str, float]]:
    found = [RETRY.match(line) for line in out.stderr.splitlines()]
    return [(m[1], m[2], float(m[3])) for m in found if m]


def down(n: int) -> list[Exception | None]:
    return [StoreUnavailable(f"database is down (injected {i + 1})") for i in range(n)]


def queue_counter(cli: Cli, incs: int) -> None:
    assert cli("start", "counter", "--id", "c1").code == 0
    for _ in range(incs):
        assert cli("send", "c1", "inc").code == 0


def test_serve_rides_out_a_store_that_is_down_for_a_while(
        cli: Cli, flaky: list[Exception | None], waits: list[float]) -> None:
    queue_counter(cli, incs=10)
    # One event a round (--batch 1), so every round has work: 7 rounds fail (after applying their
    # event: the relay reads the outbox last), a good one, one more failure, then good ones till idle.
    flaky.extend([*down(7), None, *down(1)])
    injected = [str(fault) for fault in flaky if fault is not None]
    out = cli("serve", "--until-idle", "--batch", "1")
    assert out.code == 0, out.stderr
    seen = retries(out)  # one line per failed round: what failed, and how long it waits
    assert [(kind, reason) for kind, reason, _ in seen] == [("StoreUnavailable", r) for r in injected]
    delays = [d for _, _, d in seen]
    assert delays == pytest.approx(waits, abs=0.05)  # each line says how long it waits
    # Growing and capped: failure n waits between half and all of min(30, 0.5 * 2**(n-1)) ...
    for n, delay in enumerate(delays[:7], start=1):
        ceiling = min(serve_cmd.MAX_ERROR_WAIT, serve_cmd.FIRST_ERROR_WAIT * 2 ** (n - 1))
        assert ceiling / 2 - 0.05 <= delay <= ceiling + 0.05, (n, delay)
    assert delays[6] >= serve_cmd.MAX_ERROR_WAIT / 2 - 0.05  # the 7th reached the cap
    # ... and a good round starts it over.
    assert delays[7] <= serve_cmd.FIRST_ERROR_WAIT + 0.05
    assert "idle: 11 applied" in out.stderr  # the start and the ten incs, nothing lost or doubled
    shown = cli("show", "c1", "--json")
    assert '"count": 10' in shown.stdout


def test_every_kind_of_transient_error_is_ridden_out(
        cli: Cli, flaky: list[Exception | None], waits: list[float]) -> None:
    queue_counter(cli, incs=1)
    flaky.extend([sqlite3.OperationalError("database is locked"),
                  StoreThrottled("the table is throttled (injected)"),
                  GroupAborted("disk I/O error (injected)"),
                  DeliveryFailed("SQS queue q.fifo", [("e1", "InternalError", "injected")])])
    out = cli("serve", "--until-idle")
    assert out.code == 0, out.stderr
    assert [kind for kind, _, _ in retries(out)] == [
        "OperationalError", "StoreThrottled", "GroupAborted", "DeliveryFailed"]
    assert "idle: 2 applied" in out.stderr


def test_a_permanent_error_still_ends_serve_with_one_line(
        cli: Cli, flaky: list[Exception | None], waits: list[float]) -> None:
    queue_counter(cli, incs=0)
    flaky.extend([*down(2), RuntimeError("the outbox table is corrupt (injected)")])
    out = cli("serve")
    assert len(retries(out)) == 2  # the transient ones were ridden out first
    assert_one_line_error(out, "RuntimeError", "the outbox table is corrupt")


def test_a_stop_while_waiting_out_an_error_stops_cleanly(
        cli: Cli, flaky: list[Exception | None], monkeypatch: pytest.MonkeyPatch) -> None:
    queue_counter(cli, incs=0)
    flaky.extend(down(100))

    asked: list[float] = []

    def stop_on_second_wait(stop: threading.Event, seconds: float) -> bool:
        asked.append(seconds)
        if len(asked) == 2:
            stop.set()  # what the SIGTERM handler does
        return stop.is_set()

    monkeypatch.setattr(serve_cmd, "_wait", stop_on_second_wait)
    out = cli("serve")
    assert out.code == 0 and len(retries(out)) == 2
    assert "stopped:" in out.stderr


LAUNCHER = """
import sys
from durastate.cli import backends, main, serve
from durastate.errors import DeliveryFailed, GroupAborted, StoreThrottled, StoreUnavailable
from durastate.store.sqlite.sync import SqliteStore

class Flaky(SqliteStore):
    fails = int(sys.argv.pop(1))
    def pending_outbox(self, limit=None):
        if Flaky.fails:
            Flaky.fails -= 1
            raise StoreUnavailable("database is down (injected)")
        return super().pending_outbox(limit)

backends.open_cli_store = lambda url, retries, **_: Flaky(backends.sqlite_path(url))
serve._wait = lambda stop, seconds: stop.is_set()
main(sys.argv[1:])
"""


def test_serve_as_a_process_rides_out_transient_errors_and_exits_zero(
        cli: Cli, env: Env) -> None:
    queue_counter(cli, incs=1)
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, "4", "serve", "--until-idle"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env.vars()}, cwd=env.tmp)
    out = Outcome(proc.returncode, proc.stdout, proc.stderr)
    assert out.code == 0, out.stderr
    assert [kind for kind, _, _ in retries(out)] == ["StoreUnavailable"] * 4
    assert "Traceback" not in out.stderr and "idle: 2 applied" in out.stderr


