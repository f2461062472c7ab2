"""An execution's page says how far it has come as ``durastate show`` does: a map state's items (started,
done, failed of the total) and the timers its children have armed."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import EXAMPLES, Served, durastate, fill, start

pytestmark = pytest.mark.slow

BATCH = [start("b1", "batch"), ("b1~1", "authorize", {"receipt": "R-1"})]
"""Five payments, three at a time: the first is paid, so the fourth has started."""


def test_map_progress_and_the_childrens_timers_read_as_durastate_show_prints_them(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, BATCH)
    shown = durastate("--store", sqlite_url, "--definitions", str(EXAMPLES), "show", "b1")
    assert shown.returncode == 0, shown.stderr
    cli_line = re.search(r"map\s+(charging: .*)", shown.stdout)
    assert cli_line is not None, shown.stdout
    assert cli_line.group(1).startswith("charging: 4 started, 1 done, 0 failed of 5 (3 running)")

    served = serve_console(sqlite_url)
    page.goto(served.url + "/executions/b1")
    expect(page.locator("dl.facts .map-progress")).to_have_text(cli_line.group(1).strip())
    # the batch arms no timer of its own; each running payment's expiry is listed with it, linked
    children = page.locator('#timers tbody tr[data-kind="map"]')
    expect(children).to_have_count(3)
    expect(children.first).to_contain_text("b1~")
    expect(children.first.locator(".rel")).to_have_text(re.compile(r"^in 1[45]m"))
    cli_children = re.findall(r"^\S.*\bb1~\d+\s+map\b", shown.stdout, re.M)
    assert len(cli_children) == 3, shown.stdout
