"""The console's pages in a real browser: each loads and shows what a user looks for, the execution page
follows an event applied by another process, and every page leaves its screenshot under docs/screenshots."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import EXAMPLES, Served, durastate, fill, screenshot

pytestmark = pytest.mark.slow


@pytest.fixture
def orders(tmp_path: Path, serve_console: Callable[..., Served]) -> Served:
    fill(f"sqlite:///{tmp_path / 'orders.db'}")
    return serve_console("sqlite:///orders.db", cwd=tmp_path)  # a short URL, as the screenshots show it


def test_it_says_where_it_listens_and_that_it_only_reads(orders: Served) -> None:
    assert re.fullmatch(r"durastate console on http://127\.0\.0\.1:\d+ \(read-only\); Ctrl-C to stop",
                        orders.first_line)


def test_executions_page_lists_them_with_counts_per_status(orders: Served, page: Any) -> None:
    page.goto(orders.url + "/")
    rows = page.locator("#executions tbody tr")
    expect(rows).to_have_count(12)  # five orders, their payments and their regions
    expect(page.locator('a.count[data-status="running"]')).to_have_attribute("data-count", "5")
    expect(page.locator('a.count[data-status="cancelled"]')).to_have_attribute("data-count", "1")
    expect(page.locator('tr[data-id="order-1003"] .status')).to_have_text("finished (fulfilled)")
    screenshot(page, "executions")


def test_execution_page_draws_the_chart_with_the_active_states(orders: Served, page: Any) -> None:
    page.goto(orders.url + "/executions/order-1002")
    expect(page.locator("h1 .status")).to_have_text("running")
    chart = page.locator("#chart svg")
    expect(chart).to_have_class(re.compile(r"\bstatus-running\b"))
    # in fulfilment, with the shipping region still waiting for its label (the packing region is done)
    expect(chart.locator('g[data-path="processing.fulfilment.shipping.awaiting_label"]')).to_have_class(
        re.compile(r"\bactive\b"))
    expect(page.locator("#children tbody tr")).to_have_count(3)  # the (paid) payment and the two regions
    page.locator("#children a", has_text="order-1002~3").click()
    expect(page).to_have_url(re.compile(r"/executions/order-1002~3$"))
    expect(page.locator("dl.facts")).to_contain_text("order-1002")  # the parent, linked back

    page.goto(orders.url + "/executions/order-1001")
    expect(page.locator("#context pre")).to_contain_text('"total": 120')
    page.goto(orders.url + "/executions/order-1001~1")  # the payment: its timeout is armed
    expect(page.locator("#timers tbody tr")).to_have_count(1)
    expect(page.locator("#timers .rel")).to_have_text(re.compile(r"^in 1[45]m"))
    page.goto(orders.url + "/executions/order-1002")
    page.locator("#timeline li[data-step] summary").last.click()  # a step opens to show what it recorded
    expect(page.locator("#timeline li[data-step] details[open] dl")).to_be_visible()
    screenshot(page, "execution")


def test_finished_and_cancelled_executions_show_their_status(orders: Served, page: Any) -> None:
    page.goto(orders.url + "/executions/order-1003")
    expect(page.locator("#chart svg")).to_have_class(re.compile(r"\bstatus-finished\b"))
    page.goto(orders.url + "/executions/order-1004")
    expect(page.locator("#chart svg")).to_have_class(re.compile(r"\bstatus-cancelled\b"))


def test_trace_page_is_a_timeline(orders: Served, page: Any) -> None:
    page.goto(orders.url + "/executions/order-1003/trace")
    steps = page.locator("ol.timeline li[data-step]")
    expect(steps.first).to_contain_text("durastate.start")
    expect(steps.last).to_contain_text("finished")
    assert steps.count() >= 5
    steps.nth(1).locator("summary").click()
    screenshot(page, "trace")


def test_definition_page_counts_running_executions_per_state(orders: Served, page: Any) -> None:
    page.goto(orders.url + "/definitions/order")
    expect(page.locator('#state-counts tr[data-path="processing"] .n')).to_have_text("2")
    expect(page.locator('#state-counts tr[data-path="processing.payment"] .n')).to_have_text("1")
    expect(page.locator('#state-counts tr[data-path="cart"] .n')).to_have_text("1")
    expect(page.locator('#chart g[data-path="processing.payment"] .count-badge')).to_have_text("1")
    screenshot(page, "definition")
    page.goto(orders.url + "/definitions")
    expect(page.locator("#definitions")).to_contain_text("payment")


def test_the_execution_page_follows_an_event_applied_by_another_process(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, [("live", "durastate.start", {"definition_id": "order", "context": {}}),
                      ("live", "add_item", {"price": 10})])
    served = serve_console(sqlite_url)
    page.goto(served.url + "/executions/live")
    expect(page.locator("#active-path")).to_have_text("cart")
    page.wait_for_function("document.getElementById('live').dataset.version !== undefined")
    for args in (("send", "live", "submit"), ("serve", "--until-idle")):
        done = durastate("--store", sqlite_url, "--definitions", str(EXAMPLES), *args)
        assert done.returncode == 0, done.stderr
    expect(page.locator("#active-path")).to_have_text("processing.payment")  # without a reload
    expect(page.locator('#chart g[data-path="processing.payment"]')).to_have_class(re.compile(r"\bactive\b"))
    expect(page.locator("#timeline li[data-step]").last).to_contain_text("submit")
