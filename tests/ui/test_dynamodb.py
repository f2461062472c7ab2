"""The console over the no-Docker local stack's DynamoDB tables (moto's server, the real synthesized stack):
orders run by the stack's own handlers show up, and a table prefix with a typo is refused, creating nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from durastate.devstack import LocalStack
from tests.devstack.helpers import FakeClock, send, start
from tests.infra.synth import cloud_assembly  # noqa: F401  (the session's one `cdk synth`)

from .conftest import Served, cli_env, durastate

pytestmark = pytest.mark.slow

QUIET = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}


@pytest.fixture
def stack(cloud_assembly: Path) -> Iterator[LocalStack]:  # noqa: F811
    with LocalStack(cloud_assembly / "DurastateStack.template.json", port=0, clock=FakeClock(), retry_delay=0,
                    environment=QUIET) as st:
        yield st


def aws_env(st: LocalStack) -> dict[str, str]:
    return cli_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION=st.region)


def store_url(st: LocalStack, prefix: str = "durastate") -> str:
    return f"dynamodb://{prefix}?endpoint_url={st.endpoint_url}&region={st.region}"


def test_the_console_reads_the_local_stacks_tables(stack: LocalStack, serve_console: Callable[..., Served],
                                                   page: Any) -> None:
    sqs, q = stack.client("sqs"), stack.queue_url
    start(sqs, q, "aws-1")
    send(sqs, q, "aws-1", "add_item", {"price": 30})
    send(sqs, q, "aws-1", "submit")
    stack.run_until_idle(max_steps=500)

    served = serve_console(store_url(stack), env=aws_env(stack))
    page.goto(served.url + "/")
    expect(page.locator('#executions tr[data-id="aws-1"] .status')).to_have_text("running")
    expect(page.locator('#executions tr[data-id="aws-1~1"]')).to_be_visible()  # the invoked payment
    page.goto(served.url + "/executions/aws-1")
    expect(page.locator("#active-path")).to_have_text("processing.payment")
    expect(page.locator('#chart g[data-path="processing.payment"]')).to_have_class(re.compile(r"\bactive\b"))
    expect(page.locator("#context pre")).to_contain_text('"total": 30')
    expect(page.locator("#children tbody tr")).to_have_count(1)
    page.goto(served.url + "/definitions/order")
    expect(page.locator('#state-counts tr[data-path="processing.payment"] .n')).to_have_text("1")


def test_a_table_prefix_with_a_typo_is_refused_and_creates_nothing(stack: LocalStack) -> None:
    done = durastate("ui", "--store", store_url(stack, "durastat"), "--port", "0", env=aws_env(stack))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "no store at" in done.stderr and "durastat_executions" in done.stderr, done.stderr
    tables = stack.client("dynamodb").list_tables()["TableNames"]
    assert not [t for t in tables if t.startswith("durastat_")]
