"""The executions page's search box: it filters by the search fields the definitions declare, as
``list --where`` does, and a bad filter is a 400 page saying why."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from durastate.engine.model import Execution
from durastate.store import open_store

from .conftest import EXAMPLES, Served

pytestmark = pytest.mark.slow

CART = """\
id: cart
initial: open
context: {customer: null, total: 0}
search: {customer: {type: string}, total: {type: number}}
states:
  open: {on: {close: closed}}
  closed: {type: final}
"""


@pytest.fixture
def carts(tmp_path: Path) -> tuple[str, Path]:
    folder = tmp_path / "defs"
    folder.mkdir()
    for name in ("order.yaml", "payment.yaml"):
        shutil.copyfile(EXAMPLES / name, folder / name)
    (folder / "cart.yaml").write_text(CART)
    url = f"sqlite:///{tmp_path / 'carts.db'}"
    store = open_store(url)
    try:
        for n, (customer, total) in enumerate([("c-17", 120.0), ("c-17", 40.0), ("c-3", 300.0)]):
            store.save(Execution(id=f"cart-{n}", definition_id="cart", active_path="open",
                                 context={"customer": customer, "total": total},
                                 search={"customer": customer, "total": total}))
    finally:
        store.close()
    return url, folder


def ids_on(page: Any) -> list[str]:
    return [str(i) for i in page.locator("#executions tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)")]


def test_the_search_box_filters_by_search_fields(carts: tuple[str, Path], serve_console: Callable[..., Served],
                                                 page: Any) -> None:
    url, folder = carts
    served = serve_console(url, "--definitions", str(folder))
    page.goto(served.url + "/")
    page.locator("#search").fill("customer=c-17 total>100")
    page.locator("#filters button[type=submit]").click()
    expect(page).to_have_url(re.compile(r"where=customer%3Dc-17\+total%3E100"))
    expect(page.locator("#executions tbody tr")).to_have_count(1)
    assert ids_on(page) == ["cart-0"]
    expect(page.locator("#search")).to_have_value("customer=c-17 total>100")
    page.goto(served.url + "/?where=customer%3Dc-17")
    expect(page.locator("#executions tbody tr")).to_have_count(2)


def test_a_bad_search_is_a_400_page(carts: tuple[str, Path], serve_console: Callable[..., Served],
                                    page: Any) -> None:
    url, folder = carts
    served = serve_console(url, "--definitions", str(folder))
    answer = page.goto(served.url + "/?where=total%3Elots")
    assert answer is not None and answer.status == 400
    expect(page.locator("main")).to_contain_text("total is a number")
