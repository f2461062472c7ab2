"""Control from the console: absent and refused (403) unless ``--allow-control``; with it, every action goes
through a confirmation page, and a post without that page's token is refused (400) and changes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from durastate.engine.model import Event
from durastate.store import open_store
from durastate.transport.base import DeadLetter
from durastate.transport.sqlite import SqliteTransport

from .conftest import EXAMPLES, Served, durastate, fill, screenshot

pytestmark = pytest.mark.slow

CART = [("o1", "durastate.start", {"definition_id": "order", "context": {}}), ("o1", "add_item", {"price": 5})]


def status_of(url: str, exe_id: str) -> tuple[str, str | None, int]:
    store = open_store(url)
    try:
        exe = store.load(exe_id)
        assert exe is not None
        return exe.status, exe.active_path, exe.version
    finally:
        store.close()


def test_a_read_only_console_offers_no_control_and_refuses_every_post(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url)
    page.goto(served.url + "/executions/o1")
    expect(page.locator("header .mode")).to_have_text("read-only")
    expect(page.locator("#controls")).to_have_count(0)
    for path in ("/executions/o1/confirm/cancel", "/executions/o1/do/cancel", "/executions/o1", "/nowhere"):
        answer = page.request.post(served.url + path, form={"reason": "x", "confirm": "forged"})
        assert answer.status == 403, path
        assert "--allow-control" in answer.text()
    assert status_of(sqlite_url, "o1")[:2] == ("running", "cart")


def test_cancel_needs_its_confirmation(sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    assert served.first_line.endswith("(control enabled); Ctrl-C to stop")
    before = status_of(sqlite_url, "o1")

    refused = page.request.post(served.url + "/executions/o1/do/cancel", form={"reason": "no token"})
    assert refused.status == 400 and "needs confirmation" in refused.text()
    forged = page.request.post(served.url + "/executions/o1/do/cancel", form={"reason": "x", "confirm": "0" * 64})
    assert forged.status == 400

    page.goto(served.url + "/executions/o1")
    page.locator('#form-cancel input[name="reason"]').fill("customer asked")
    page.locator("#form-cancel button").click()
    expect(page.locator("#summary")).to_contain_text("cancel o1 (customer asked)")
    screenshot(page, "confirm")
    assert status_of(sqlite_url, "o1") == before  # the confirmation page changed nothing
    # the token covers the values: the same token with another reason is refused
    token = page.locator('#confirm input[name="confirm"]').get_attribute("value")
    other = page.request.post(served.url + "/executions/o1/do/cancel", form={"reason": "other", "confirm": token})
    assert other.status == 400

    page.locator("#confirm-button").click()
    expect(page).to_have_url(re.compile(r"/executions/o1\?done="))
    expect(page.locator("#notice")).to_contain_text("durastate.cancel for o1")
    applied = durastate("--store", sqlite_url, "--definitions", str(EXAMPLES), "serve", "--until-idle")
    assert applied.returncode == 0, applied.stderr
    expect(page.locator("h1 .status")).to_have_text("cancelled")  # the live view follows
    assert status_of(sqlite_url, "o1")[0] == "cancelled"


def test_send_event_after_confirmation(sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/executions/o1")
    page.locator('#form-send input[name="event"]').fill("add_item")
    page.locator('#form-send input[name="data"]').fill('{"price": 7}')
    page.locator("#form-send button").click()
    expect(page.locator("#summary")).to_contain_text('send add_item to o1 with data {"price": 7}')
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("queued")
    applied = durastate("--store", sqlite_url, "--definitions", str(EXAMPLES), "serve", "--until-idle")
    assert applied.returncode == 0, applied.stderr
    expect(page.locator("#context pre")).to_contain_text('"total": 12')

    page.goto(served.url + "/executions/o1")
    page.locator('#form-send input[name="event"]').fill("add_item")
    page.locator('#form-send input[name="data"]').fill("[1, 2]")
    page.locator("#form-send button").click()
    expect(page.locator("#error-message")).to_contain_text("must be a JSON object")


def test_redrive_is_refused_for_an_execution_that_has_not_failed(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/executions/o1")
    expect(page.locator("#form-redrive")).to_have_count(0)  # offered for failed executions only
    confirm = page.request.post(served.url + "/executions/o1/confirm/redrive")
    token = re.search(r'name="confirm" value="([0-9a-f]+)"', confirm.text())
    assert token is not None
    answer = page.request.post(served.url + "/executions/o1/do/redrive", form={"confirm": token.group(1)})
    assert answer.status == 400 and "o1" in answer.text()
    assert status_of(sqlite_url, "o1")[:2] == ("running", "cart")


def test_a_dead_letter_shows_on_its_execution_and_is_replayed_after_confirmation(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    inbox = SqliteTransport(sqlite_url.removeprefix("sqlite:///"))  # what a worker does with an event it gave up on
    inbox.dead_letter_box.add(DeadLetter(target_id="o1", event=Event(id="submit-1", name="submit", data={}),
                                         attempts=5, reason="the payment service was down", error="ConnectionError",
                                         at=1_800_000_000.0))
    inbox.close()

    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/executions/o1")
    letters = page.locator("#dead-letters tbody tr")
    expect(letters).to_have_count(1)
    expect(letters).to_contain_text("submit")
    screenshot(page, "execution-control")
    page.locator("#controls form", has_text="replay submit").locator("button").click()
    expect(page.locator("#summary")).to_contain_text("replay dead letter")
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("replayed")
    expect(page.locator("#queued li")).to_contain_text("submit")  # back in the inbox, not applied yet
    applied = durastate("--store", sqlite_url, "--definitions", str(EXAMPLES), "serve", "--until-idle")
    assert applied.returncode == 0, applied.stderr
    expect(page.locator("#active-path")).to_have_text("processing.payment")
    expect(page.locator("#dead-letters")).to_have_count(0)


def test_reset_after_confirmation_moves_the_execution_and_a_bad_configuration_is_refused(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/executions/o1")
    page.locator('#form-reset input[name="to"]').fill("nowhere")
    page.locator("#form-reset button").click()  # the plan is shown; the configuration is checked on confirm
    page.locator("#confirm-button").click()
    expect(page.locator("#error-message")).to_contain_text("'nowhere' is not a state of 'order'")
    assert status_of(sqlite_url, "o1")[:2] == ("running", "cart")

    page.goto(served.url + "/executions/o1")
    page.locator('#form-reset input[name="to"]').fill("on_hold")
    page.locator('#form-reset input[name="context_patch"]').fill('{"total": 99}')
    page.locator('#form-reset input[name="reason"]').fill("customer called")
    page.locator("#form-reset button").click()
    expect(page.locator("#summary")).to_contain_text('reset o1 to on_hold with the context patch {"total": 99}')
    token = page.locator('#confirm input[name="confirm"]').get_attribute("value")
    other = page.request.post(served.url + "/executions/o1/do/reset",
                              form={"to": "cart", "actions": "none", "context_patch": "", "reason": "",
                                    "confirm": token})
    assert other.status == 400  # the token covers the configuration it was shown for
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("reset o1 to on_hold")
    applied = durastate("--store", sqlite_url, "--definitions", str(EXAMPLES), "serve", "--until-idle")
    assert applied.returncode == 0, applied.stderr
    assert status_of(sqlite_url, "o1")[:2] == ("running", "on_hold")
    expect(page.locator("#context pre")).to_contain_text('"total": 99')
