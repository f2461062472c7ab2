"""Operating an execution from the console: suspend, resume and terminate (each offered only where it
applies, each behind its confirmation page), and a send the definition does not handle (refused unless
forced, as ``durastate send`` refuses it without ``--force``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from durastate.engine import load_definition
from durastate.engine.versions import definition_version

from .conftest import EXAMPLES, Served, durastate, fill, start
from .test_control import status_of

pytestmark = pytest.mark.slow

CART: list[tuple[str, str, dict[str, Any]]] = [start("o1"), ("o1", "add_item", {"price": 5})]


def apply_queued(url: str) -> None:
    """What ``durastate serve`` does with the events the console queued."""
    applied = durastate("--store", url, "--definitions", str(EXAMPLES), "serve", "--until-idle")
    assert applied.returncode == 0, applied.stderr


def confirm(page: Any, form: str, summary: str, reason: str | None = None) -> None:
    if reason is not None:
        page.locator(f'#{form} input[name="reason"]').fill(reason)
    page.locator(f"#{form} button").click()
    expect(page.locator("#summary")).to_contain_text(summary)
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_be_visible()


def test_suspend_resume_and_terminate_are_offered_where_they_apply(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/executions/o1")
    expect(page.locator("#form-resume")).to_have_count(0)  # running: it can be suspended, not resumed

    confirm(page, "form-suspend", "suspend o1 (night freeze)", reason="night freeze")
    assert status_of(sqlite_url, "o1")[0] == "running"  # queued, not applied yet
    apply_queued(sqlite_url)
    expect(page.locator("h1 .status")).to_have_text("suspended")
    page.goto(served.url + "/executions/o1")
    expect(page.locator("#form-suspend")).to_have_count(0)
    expect(page.locator("#form-resume")).to_have_count(1)

    confirm(page, "form-resume", "resume o1")
    apply_queued(sqlite_url)
    expect(page.locator("h1 .status")).to_have_text("running")
    assert status_of(sqlite_url, "o1")[:2] == ("running", "cart")

    page.goto(served.url + "/executions/o1")
    confirm(page, "form-terminate", "terminate o1 (duplicate order)", reason="duplicate order")
    expect(page.locator("#notice")).to_contain_text("terminated o1: duplicate order")
    assert status_of(sqlite_url, "o1")[0] == "terminated"  # a commit to the store: no serve needed
    page.goto(served.url + "/executions/o1")
    for form in ("form-suspend", "form-resume", "form-terminate"):
        expect(page.locator(f"#{form}")).to_have_count(0)


def test_suspend_of_an_execution_that_is_not_running_is_refused(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    answer = page.request.post(served.url + "/executions/o1/confirm/resume")
    token = re.search(r'name="confirm" value="([0-9a-f]+)"', answer.text())
    assert token is not None
    refused = page.request.post(served.url + "/executions/o1/do/resume", form={"confirm": token.group(1)})
    assert refused.status == 400 and "is running: resume does not apply" in refused.text()
    apply_queued(sqlite_url)
    assert status_of(sqlite_url, "o1")[:2] == ("running", "cart")


def test_a_read_only_console_has_no_suspend_resume_or_terminate(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url)
    page.goto(served.url + "/executions/o1")
    expect(page.locator("#controls")).to_have_count(0)
    for action in ("suspend", "resume", "terminate"):
        for step in ("confirm", "do"):
            answer = page.request.post(f"{served.url}/executions/o1/{step}/{action}", form={"confirm": "forged"})
            assert answer.status == 403 and "--allow-control" in answer.text()
    assert status_of(sqlite_url, "o1")[:2] == ("running", "cart")


def test_send_refuses_an_event_the_definition_does_not_handle_unless_forced(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/executions/o1")
    page.locator('#form-send input[name="event"]').fill("add_itme")
    page.locator("#form-send button").click()
    expect(page.locator("#error-message")).to_contain_text("no transition on event 'add_itme'")
    expect(page.locator("#error-message")).to_contain_text("did you mean 'add_item'?")
    expect(page.locator("#error-message")).to_contain_text("send even if unhandled")

    page.goto(served.url + "/executions/o1")
    page.locator('#form-send input[name="event"]').fill("add_itme")
    page.locator('#form-send input[name="force"]').check()
    page.locator("#form-send button").click()
    expect(page.locator("#summary")).to_contain_text("send add_itme to o1, even if no state")
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("add_itme for o1")
    expect(page.locator("#queued li")).to_contain_text("add_itme")


def test_start_an_execution_from_its_definition_page(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/definitions/order")
    page.locator('#form-start input[name="context"]').fill('{"total": 3')
    page.locator("#form-start button").click()
    expect(page.locator("#error-message")).to_contain_text("the context is not valid JSON")

    page.goto(served.url + "/definitions/order")
    page.locator('#form-start input[name="id"]').fill("o1")
    page.locator("#form-start button").click()
    expect(page.locator("#error-message")).to_contain_text("execution o1 already exists (order, running)")

    page.goto(served.url + "/definitions/order")
    page.locator('#form-start input[name="id"]').fill("o2")
    page.locator('#form-start input[name="context"]').fill('{"total": 3}')
    page.locator("#form-start button").click()
    expect(page.locator("#summary")).to_contain_text('start o2 of order with context {"total": 3}')
    page.locator("#confirm-button").click()
    expect(page).to_have_url(re.compile(r"/definitions/order\?done="))  # queued: `durastate serve` applies it
    expect(page.locator("#notice")).to_contain_text("started o2 (order): queued")
    apply_queued(sqlite_url)
    page.goto(served.url + "/executions/o2")
    expect(page.locator("#active-path")).to_have_text("cart")
    expect(page.locator("#context pre")).to_contain_text('"total": 3')
    assert status_of(sqlite_url, "o1")[:2] == ("running", "cart")  # the refused starts changed nothing


def test_a_start_needs_its_confirmation_and_a_read_only_console_offers_none(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    refused = page.request.post(served.url + "/definitions/order/do/start", form={"id": "o3", "confirm": "0" * 64})
    assert refused.status == 400
    apply_queued(sqlite_url)
    served.stop()
    read_only = serve_console(sqlite_url)
    page.goto(read_only.url + "/definitions/order")
    expect(page.locator("#form-start")).to_have_count(0)
    for step in ("confirm", "do"):
        answer = page.request.post(f"{read_only.url}/definitions/order/{step}/start", form={"id": "o3"})
        assert answer.status == 403
    store_has_no_o3 = durastate("--store", sqlite_url, "show", "o3")
    assert store_has_no_o3.returncode == 1


def test_a_start_from_the_definition_page_can_carry_its_own_run_timeout(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/definitions/order")
    page.locator('#form-start input[name="id"]').fill("o5")
    page.locator('#form-start input[name="timeout"]').fill("0s")
    page.locator("#form-start button").click()
    expect(page.locator("#error-message")).to_contain_text("the run timeout: more than 0 seconds")

    page.goto(served.url + "/definitions/order")
    page.locator('#form-start input[name="id"]').fill("o5")
    page.locator('#form-start input[name="timeout"]').fill("1h")
    page.locator("#form-start button").click()
    expect(page.locator("#summary")).to_contain_text("start o5 of order with the definition's default context, "
                                                     "ending it (timed out) unless it ends within 1h")
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("started o5 (order): queued")
    apply_queued(sqlite_url)
    shown = durastate("--store", sqlite_url, "show", "o5", "--json")
    assert shown.returncode == 0, shown.stderr
    exe = json.loads(shown.stdout)
    assert exe["timers"]["~deadline"] - exe["created_at"] == 3600  # the run timeout's timer, an hour on


SHIPPING = """\
id: shipping
initial: packing
states:
  packing:
    on: {packed: waiting}
  waiting:
    on: {picked_up: delivered}
  delivered: {type: final, outcome: delivered}
"""


def test_migrate_an_execution_to_the_newest_version_from_its_page(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any, tmp_path: Path) -> None:
    old, new = tmp_path / "v1", tmp_path / "v2"
    for folder, text in ((old, SHIPPING), (new, SHIPPING.replace("waiting", "ready"))):
        folder.mkdir()
        (folder / "shipping.yaml").write_text(text)
    for args in (("start", "shipping", "--id", "s-1"), ("send", "s-1", "packed"), ("serve", "--until-idle")):
        done = durastate("--store", sqlite_url, "--definitions", str(old), *args)
        assert done.returncode == 0, done.stderr
    v1 = json.loads(durastate("--store", sqlite_url, "show", "s-1", "--json").stdout)["definition_version"]
    served = serve_console(sqlite_url, "--allow-control", "--definitions", str(new))
    page.goto(served.url + "/executions/s-1")
    page.locator("#form-migrate button").click()  # `waiting` is gone from the new version: refused, unconfirmed
    expect(page.locator("#error-message")).to_contain_text(
        "sit in states that version {} does not have: waiting; nothing was migrated. Say where they went: the "
        "renamed states field: waiting=<new path>".format(definition_version(load_definition(new / "shipping.yaml"))))

    page.goto(served.url + "/executions/s-1")
    page.locator('#form-migrate input[name="mapping"]').fill("waiting=ready")
    page.locator("#form-migrate button").click()
    expect(page.locator("#summary")).to_contain_text(f"migrate s-1 from version {v1} to ")
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text(f"migrated s-1 from version {v1} to ")
    shown = json.loads(durastate("--store", sqlite_url, "show", "s-1", "--json").stdout)
    assert shown["active_path"] == "ready" and shown["definition_version"] != v1
