"""The command's one clock: every ``durastate`` command reads the time through :mod:`durastate.cli.clock`,
and ``DURASTATE_CLOCK`` makes it a manual clock that stands still between commands (the CLI tests and the
documents run on it, so nothing they check depends on how fast the machine is)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

import durastate.cli
from durastate.cli.clock import (
    CLOCK_ENV,
    command_clock,
    manual_instant,
    move_offset,
    read_offset,
    use_store_offset,
)
from durastate.store import open_store

from ._support import CLOCK, Env, Outcome, assert_one_line_error

Cli = Callable[..., Outcome]
CLI_PACKAGE = Path(durastate.cli.__file__).parent


NOW_WITHOUT_ARGUMENT = {"localtime": 0, "gmtime": 0, "ctime": 0, "strftime": 1}
"""``time`` functions that read the wall clock when given no time (their arguments then number this many)."""


def _is_time(node: ast.expr, *names: str) -> bool:
    """``time.NAME`` (``datetime.NAME``, … for other modules given as ``module.name``)."""
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and any(f"{node.value.id}.{node.attr}" == name for name in names))


def _reads_now(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return _is_time(node, "time.time", "time.time_ns", "time.monotonic", "datetime.now", "datetime.utcnow",
                        "date.today", "datetime.today")
    if isinstance(node, ast.ImportFrom):
        return node.module == "time" and any(a.name in ("time", "time_ns", *NOW_WITHOUT_ARGUMENT)
                                             for a in node.names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        wanted = NOW_WITHOUT_ARGUMENT.get(node.func.attr)
        return wanted is not None and _is_time(node.func, f"time.{node.func.attr}") and len(node.args) <= wanted
    return False


def reads_the_wall_clock(source: str) -> list[int]:
    """Lines that read the wall clock: ``time.time`` (called or passed as a clock), ``from time import time``,
    ``time.strftime(fmt)`` / ``time.localtime()`` without a time, ``datetime.now()``."""
    return sorted({node.lineno for node in ast.walk(ast.parse(source)) if _reads_now(node)
                   and hasattr(node, "lineno")})


def test_the_scan_finds_each_way_of_reading_the_wall_clock() -> None:
    source = ("import time\nfrom datetime import datetime\nfrom time import time as now\n"
              "a = time.time()\nb = time.time\nc = time.strftime('%H')\nd = time.localtime()\n"
              "e = datetime.now()\nf = time.strftime('%H', time.localtime(5))\ng = time.sleep(0)\n")
    assert reads_the_wall_clock(source) == [3, 4, 5, 6, 7, 8]


def test_no_command_reads_the_wall_clock_but_through_the_command_clock() -> None:
    strays = {path.name: found for path in sorted(CLI_PACKAGE.glob("*.py")) if path.name != "clock.py"
              if (found := reads_the_wall_clock(path.read_text()))}
    assert strays == {}, f"read the time with durastate.cli.clock (so DURASTATE_CLOCK and --advance apply): {strays}"


def test_the_manual_clock_stands_still_and_advance_moves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLOCK_ENV, "2026-01-05T10:00:00Z")
    assert manual_instant() == CLOCK
    assert command_clock()() == command_clock()() == CLOCK
    assert command_clock(900)() == CLOCK + 900
    monkeypatch.setenv(CLOCK_ENV, repr(CLOCK))
    assert command_clock()() == CLOCK
    monkeypatch.delenv(CLOCK_ENV)
    assert manual_instant() is None


def test_show_says_exactly_when_a_timer_fires_however_slow_the_machine(env: Env, cli: Cli) -> None:
    """The symptom this clock removes: ``in 14m 59s`` where ``in 15m`` was meant, on a slow machine."""
    assert cli("start", "order", "--id", "c1").code == 0
    assert cli("send", "c1", "add_item", "--data", '{"price": 3}').code == 0
    assert cli("send", "c1", "submit").code == 0
    assert cli("serve", "--until-idle", "-q").code == 0
    shown = cli("show", "c1~1").stdout
    assert "in 15m\n" in shown.replace("\r", ""), shown
    done = cli("serve", "--until-idle", "--advance", "14m 59s")
    assert "0 timer(s) fired" in done.stderr, done.stderr  # a second early: still armed, on any machine
    assert "in 1s\n" in cli("show", "c1~1").stdout  # the store keeps the clock where --advance left it
    done = cli("serve", "--until-idle", "--advance", "1s")
    assert "1 timer(s) fired" in done.stderr, done.stderr


def test_a_bad_manual_clock_is_one_line_error(env: Env, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLOCK_ENV, "tomorrow")
    assert_one_line_error(cli("list", "--since", "1h"), "DURASTATE_CLOCK='tomorrow'", "ISO 8601")


def test_the_store_keeps_the_offset_and_it_never_goes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two servers advancing one store at once leave the larger offset; every clock of the command reads it."""
    monkeypatch.setenv(CLOCK_ENV, repr(CLOCK))
    store = open_store("memory://")
    try:
        use_store_offset(lambda: read_offset(store))
        assert read_offset(store) == 0.0 and command_clock()() == CLOCK  # never advanced: no record
        move_offset(store, 3600.0, CLOCK + 3600)
        assert read_offset(store) == 3600.0 and command_clock()() == CLOCK + 3600
        move_offset(store, 60.0, CLOCK + 60)  # a server that read an older offset: it does not win
        assert read_offset(store) == 3600.0 and command_clock(5)() == CLOCK + 3605
        assert store.list_executions().items == []  # the record is no execution
    finally:
        use_store_offset(None)
        store.close()
