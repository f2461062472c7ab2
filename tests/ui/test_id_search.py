"""Finding an execution by its id on the executions page: the exact id, or the start of some ids, and a
clear "no such execution" when none has it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Served, fill

pytestmark = pytest.mark.slow


def ids_on(page: Any) -> list[str]:
    return [str(i) for i in page.locator("#executions tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)")]


def search(page: Any, text: str) -> None:
    page.locator("#search-id").fill(text)
    page.locator("#filters button[type=submit]").click()


def test_search_by_exact_id_and_by_prefix(sqlite_url: str, serve_console: Callable[..., Served],
                                          page: Any) -> None:
    fill(sqlite_url)  # order-1001 .. order-1005, and the children of some (order-1002~1, ...)
    served = serve_console(sqlite_url)
    page.goto(served.url + "/")
    search(page, "order-1003")
    expect(page.locator("#search-note")).to_be_visible()
    assert ids_on(page)[0] == "order-1003"
    assert all(i.startswith("order-1003") for i in ids_on(page))  # itself and its children (order-1003~1)

    search(page, "order-100")
    expect(page.locator("#executions tbody tr")).not_to_have_count(0)
    found = ids_on(page)
    assert {"order-1001", "order-1002", "order-1003", "order-1004", "order-1005"} <= set(found)
    assert all(i.startswith("order-100") for i in found)

    page.locator('#filters input[name="status"][value="cancelled"]').check()
    page.locator("#filters button[type=submit]").click()
    expect(page.locator("#executions tbody tr")).to_have_count(1)
    assert ids_on(page) == ["order-1004"]  # the other filters still hold


def test_an_id_no_execution_has_says_so(sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url)
    served = serve_console(sqlite_url)
    page.goto(served.url + "/?id=order-9")
    expect(page.locator("#search-id")).to_have_value("order-9")
    expect(page.locator("#no-match")).to_have_text("no execution has the id order-9 or an id starting with it")
