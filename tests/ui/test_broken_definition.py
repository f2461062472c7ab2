"""A definitions folder with one definition whose Python module does not import: the console starts anyway,
serves the others, and says on that definition (its row, its page, its executions' pages) what failed and
what to do."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from durastate.engine.model import Execution
from durastate.store import open_store

from .conftest import EXAMPLES, ROOT, Served, cli_env, fill

pytestmark = pytest.mark.slow

BROKEN = """\
id: invoice
initial: draft
states:
  draft:
    on:
      issue: {target: issued, actions: [{call: "invoice_actions:send_invoice"}]}
  issued: {type: final}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    defs = tmp_path / "definitions"
    defs.mkdir()
    for name in ("order.yaml", "payment.yaml"):
        shutil.copy(EXAMPLES / name, defs / name)
    (defs / "invoice.yaml").write_text(BROKEN)
    (tmp_path / "invoice_actions.py").write_text('raise RuntimeError("the invoicing SDK needs INVOICE_KEY")\n')
    return tmp_path


def test_a_definition_whose_module_does_not_import_is_shown_as_such(
        sqlite_url: str, folder: Path, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, [("o1", "durastate.start", {"definition_id": "order", "context": {}})])
    store = open_store(sqlite_url)  # an invoice started while its module still imported
    store.save(Execution(id="inv-1", definition_id="invoice", active_path="draft", created_at=1_700_000_000.0,
                         updated_at=1_700_000_000.0))
    store.close()
    env = cli_env(PYTHONPATH=f"{ROOT}:{folder}")
    served = serve_console(sqlite_url, "--definitions", str(folder / "definitions"), env=env)

    page.goto(served.url + "/definitions")
    expect(page.locator("#definitions tbody tr")).to_have_count(2)  # order and payment are served
    row = page.locator('#broken tr[data-file="invoice.yaml"]')
    expect(row).to_contain_text("invoice")
    expect(row).to_contain_text("cannot import module 'invoice_actions'")
    expect(row).to_contain_text("the invoicing SDK needs INVOICE_KEY")
    expect(page.locator("#broken-fix")).to_contain_text("restart the console")

    page.goto(served.url + "/definitions/invoice")
    expect(page.locator("#broken-issues")).to_contain_text("RuntimeError: the invoicing SDK needs INVOICE_KEY")
    expect(page.locator("#broken-fix")).to_contain_text("durastate validate")

    page.goto(served.url + "/definitions/order")  # the others work as usual
    expect(page.locator("#chart svg")).to_have_count(1)
    page.goto(served.url + "/executions/o1")
    expect(page.locator("#active-path")).to_have_text("cart")
    page.goto(served.url + "/executions/inv-1")  # its page says why there is no chart
    expect(page.locator("#definition-broken")).to_contain_text("Definition invoice does not load")
    expect(page.locator("#definition-broken")).to_contain_text("INVOICE_KEY")
