"""The console under test: ``durastate ui`` run as a user runs it (a process on a free port), stores filled
through the library, and Debian's Chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry
from durastate.engine.model import Event, Execution
from durastate.runtime import LocalRuntime
from durastate.store import ExecutionStore, open_store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DURASTATE = [str(Path(sys.executable).with_name("durastate"))]


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DURASTATE_", "AWS_"))}
    env.update({"DURASTATE_CONNECT_RETRIES": "1", "NO_COLOR": "1", "COLUMNS": "200"}, **extra)
    return env


def durastate(*args: str, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run one ``durastate`` command to its end."""
    return subprocess.run([*DURASTATE, *args], capture_output=True, text=True, timeout=120,
                          env=env or cli_env(), cwd=cwd)


class Served:
    """A running ``durastate ui``: its address, and its process (stopped with Ctrl-C at the end)."""

    def __init__(self, proc: subprocess.Popen[str], url: str, first_line: str) -> None:
        self.proc, self.url, self.first_line = proc, url, first_line

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def serve_console() -> Iterator[Callable[..., Served]]:
    """Start ``durastate ui --port 0`` over a store; returns once it printed its address."""
    running: list[Served] = []

    def start(store_url: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Served:
        proc = subprocess.Popen([*DURASTATE, "ui", "--store", store_url, "--definitions", str(EXAMPLES),
                                 "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env or cli_env(), cwd=cwd)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server is up, or the process ends
        if "durastate console on " not in line:
            proc.wait(timeout=30)
            raise AssertionError(f"the console did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
        url = line.split("durastate console on ", 1)[1].split()[0]
        served = Served(proc, url, line.strip())
        running.append(served)
        return served

    yield start
    for served in running:
        served.stop()


# -- the browser ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module. Not for the session: Playwright's sync API keeps an event loop running
    in the main thread while it is started, so every later test of the process that calls ``asyncio.run``
    (the async stores' tests) would fail with "cannot be called from a running event loop" — in one process
    that runs a console module first, as a ``make test`` worker may."""
    if not CHROMIUM.exists():
        pytest.fail(f"the console tests need Debian's Chromium at {CHROMIUM}: "
                    "apt-get install -y --no-install-recommends chromium (.ci/run does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    yield tab
    context.close()


def screenshot(page: Any, name: str) -> None:
    """Take the page's full-page screenshot (it must render); with ``DURASTATE_UPDATE_SCREENSHOTS=1`` keep it
    as docs/screenshots/NAME.png, for the README and docs/console.md (a plain test run leaves the tree
    alone: the pictures carry times, so they would differ on every run)."""
    folder = SCREENSHOTS if os.environ.get("DURASTATE_UPDATE_SCREENSHOTS") else Path(tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name}.png"
    page.screenshot(path=str(out), full_page=True)
    assert out.stat().st_size > 0


# -- stores with executions in them ------------------------------------------------------------------------
def registry() -> DefinitionRegistry:
    return DefinitionRegistry.from_dir(EXAMPLES)


def drive(store: ExecutionStore, steps: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Apply events (target, name, data) with a local runtime, each until idle: what ``serve`` would do."""
    runtime = LocalRuntime(store, registry())
    for n, (target, name, data) in enumerate(steps):
        runtime.send(target, Event(id=f"{target}:{name}:{n}", name=name, data=data))
        runtime.run_until_idle()


def start(exe_id: str, definition: str = "order") -> tuple[str, str, dict[str, Any]]:
    return exe_id, "durastate.start", {"definition_id": definition, "context": {}}


ORDERS: list[tuple[str, str, dict[str, Any]]] = [
    start("order-1001"), ("order-1001", "add_item", {"price": 120}), ("order-1001", "submit", {}),
    start("order-1002"), ("order-1002", "add_item", {"price": 40}), ("order-1002", "add_item", {"price": 35}),
    ("order-1002", "submit", {}), ("order-1002~1", "authorize", {"receipt": "R-77"}),
    ("order-1002", "picked", {}),
    start("order-1003"), ("order-1003", "add_item", {"price": 15}), ("order-1003", "submit", {}),
    ("order-1003~1", "authorize", {"receipt": "R-78"}), ("order-1003", "picked", {}),
    ("order-1003", "label_printed", {"tracking": "T-1"}),
    start("order-1004"), ("order-1004", "add_item", {"price": 9}), ("order-1004", "durastate.cancel", {}),
    start("order-1005"),
]
"""Orders in every interesting place: paying (a child and a timer), fulfilling (two regions), done,
cancelled, and a cart."""


def fill(url: str, steps: list[tuple[str, str, dict[str, Any]]] = ORDERS) -> None:
    store = open_store(url)
    try:
        drive(store, steps)
    finally:
        store.close()


def bulk(url: str, n: int, statuses: tuple[str, ...] = ("running", "finished", "failed")) -> None:
    """``n`` executions written straight through the store API (``save``): fast, and every listing sees them."""
    store = open_store(url)
    try:
        for i in range(n):
            status = statuses[i % len(statuses)]
            store.save(Execution(id=f"bulk-{i:06d}", definition_id="order" if i % 2 else "payment",
                                 status=status, active_path="cart" if i % 2 else "pending",  # type: ignore[arg-type]
                                 created_at=1_700_000_000.0 + i, updated_at=1_700_000_000.0 + i))
    finally:
        store.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'console.db'}"
