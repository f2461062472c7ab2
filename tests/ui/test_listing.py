"""The executions page over 10,000 executions: counts stop at their cap, filters narrow the list, and keyset
paging walks it page after page without a repeat or a gap."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Served, bulk

pytestmark = pytest.mark.slow

N = 10_000


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('many') / 'many.db'}"
    bulk(url, N)  # running, finished, failed in turn; order and payment in turn
    return url


def ids_on(page: Any) -> list[str]:
    return [str(i) for i in page.locator("#executions tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)")]


def test_counts_stop_at_the_cap_instead_of_scanning(many: str, serve_console: Callable[..., Served],
                                                    page: Any) -> None:
    served = serve_console(many)
    page.goto(served.url + "/")
    running = page.locator('a.count[data-status="running"]')
    expect(running).to_have_text(re.compile(r"^1,000\+ running$"))
    expect(running).to_have_attribute("data-capped", "1")
    expect(page.locator('a.count[data-status="suspended"]')).to_have_text(re.compile(r"^0 suspended$"))


def test_filters_narrow_the_list(many: str, serve_console: Callable[..., Served], page: Any) -> None:
    served = serve_console(many)
    page.goto(served.url + "/")
    page.locator('#filters input[name="status"][value="failed"]').check()
    page.locator('#filters input[name="definition"]').fill("order")
    page.locator("#filters button[type=submit]").click()
    expect(page).to_have_url(re.compile(r"status=failed.*definition=order|definition=order.*status=failed"))
    rows = page.locator("#executions tbody tr")
    expect(rows).to_have_count(50)
    assert set(rows.locator(".status").all_inner_texts()) == {"failed"}
    assert {link.strip() for link in rows.locator("td:nth-child(2)").all_inner_texts()} == {"order"}
    page.goto(served.url + "/?parent=nobody")
    expect(page.locator("#executions tbody td.empty")).to_have_text("no executions match")
    page.goto(served.url + "/?since=15m")  # all were last updated in 2023
    expect(page.locator("#executions tbody td.empty")).to_be_visible()


def test_keyset_paging_walks_the_list_without_repeats(many: str, serve_console: Callable[..., Served],
                                                      page: Any) -> None:
    served = serve_console(many)
    page.goto(served.url + "/?status=finished&limit=200")
    seen: list[str] = []
    for _ in range(4):
        ids = ids_on(page)
        assert len(ids) == 200
        seen += ids
        page.locator("#next-page").click()
        expect(page).to_have_url(re.compile(r"cursor="))
    assert seen == sorted(seen) and len(set(seen)) == len(seen)  # in id order, no repeats
    assert seen == [f"bulk-{i:06d}" for i in range(1, 3 * 800, 3)]  # and no gaps: every finished one
    page.locator("#first-page").click()
    assert ids_on(page)[0] == "bulk-000001"
