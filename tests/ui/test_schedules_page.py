"""The console's schedules page: the stored schedules, and (with ``--allow-control``) backfill and delete,
each behind its confirmation page — the operations ``durastate schedules backfill|delete`` run."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from durastate.engine.schedules import ScheduleSpec
from durastate.runtime.schedules import list_schedules, sync_schedules
from durastate.store import open_store

from .conftest import Served, cli_env, fill, start

pytestmark = pytest.mark.slow

NOW = "2026-01-01T06:30:00Z"
SYNCED = 1767225600.0  # 2026-01-01T00:00:00Z: the schedule was stored then, ticks hourly since


def store_schedule(url: str) -> None:
    fill(url, [start("o1")])
    store = open_store(url)
    try:
        sync_schedules(store, {"hourly": ScheduleSpec.model_validate({"definition": "order", "rate": "1h"})},
                       SYNCED)
    finally:
        store.close()


def test_backfill_and_delete_a_schedule_from_the_console(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    store_schedule(sqlite_url)
    served = serve_console(sqlite_url, "--allow-control", env=cli_env(DURASTATE_CLOCK=NOW))
    page.goto(served.url + "/schedules")
    row = page.locator('#schedules tr[data-name="hourly"]')
    expect(row).to_contain_text("order")
    form = "#form-backfill-hourly"
    page.locator(f'{form} input[name="from"]').fill("yesterday")
    page.locator(f"{form} button").click()
    expect(page.locator("#error-message")).to_contain_text("from 'yesterday' is not an ISO 8601 time")

    page.goto(served.url + "/schedules")
    page.locator(f'{form} input[name="from"]').fill("2026-01-01T01:00Z")
    page.locator(f'{form} input[name="to"]').fill("2026-01-01T02:00Z")
    page.locator(f"{form} button").click()
    expect(page.locator("#summary")).to_contain_text("backfill schedule hourly from 2026-01-01 01:00 UTC to "
                                                     "2026-01-01 02:00 UTC")
    token = page.locator('input[name="confirm"]').get_attribute("value")
    page.locator("#confirm-button").click()
    expect(page).to_have_url(re.compile(r"/schedules\?done="))
    expect(page.locator("#notice")).to_contain_text("backfilled hourly: started 2 tick(s)")
    again = page.request.post(served.url + "/schedules/hourly/do/backfill",
                              form={"from": "2026-01-01T01:00Z", "to": "2026-01-01T02:00Z", "confirm": token})
    assert again.status == 409  # the same confirmation twice: it ran once

    page.locator("#form-delete-hourly button").click()
    expect(page.locator("#summary")).to_contain_text("delete schedule hourly: its timer is cancelled")
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("deleted hourly")
    expect(page.locator("#no-schedules")).to_be_visible()
    store = open_store(sqlite_url)
    try:
        assert list_schedules(store) == []
        assert [e.target_id for e in store.pending_outbox()] == ["hourly~20260101T010000Z",
                                                                 "hourly~20260101T020000Z"]
    finally:
        store.close()


def test_a_read_only_console_lists_schedules_and_offers_no_action(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    store_schedule(sqlite_url)
    served = serve_console(sqlite_url, env=cli_env(DURASTATE_CLOCK=NOW))
    page.goto(served.url + "/schedules")
    expect(page.locator('#schedules tr[data-name="hourly"]')).to_be_visible()
    expect(page.locator("#form-delete-hourly")).to_have_count(0)
    for step in ("confirm", "do"):
        assert page.request.post(f"{served.url}/schedules/hourly/{step}/delete").status == 403
    unconfirmed = serve_console(sqlite_url, "--allow-control", env=cli_env(DURASTATE_CLOCK=NOW))
    assert page.request.post(f"{unconfirmed.url}/schedules/hourly/do/delete", form={"confirm": "0" * 64}).status == 400
