"""The CLI on ``postgresql://``: ``start``/``send`` queue into PostgresTransport, ``serve`` applies them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from ._support import Outcome, postgres_schema_url

pytestmark = pytest.mark.slow


@pytest.fixture
def pg_url() -> Iterator[str]:
    with postgres_schema_url("cli") as url:
        yield url


def test_start_send_serve_on_postgres(cli: Callable[..., Outcome], pg_url: str) -> None:
    def ok(*args: str) -> Outcome:
        out = cli("--store", pg_url, *args)
        assert out.code == 0, (out.stdout, out.stderr)
        return out

    assert "queued" in ok("start", "counter", "--id", "pg1").stdout
    ok("send", "pg1", "inc")  # the start is still queued: send finds it in the queue
    ok("send", "pg1", "inc", "--id", "same")
    ok("send", "pg1", "inc", "--id", "same")
    bogus = cli("--store", pg_url, "send", "pg1", "bogus")
    assert bogus.code == 1 and "known events: finish, inc" in bogus.stderr
    ok("serve", "--until-idle")
    ok("send", "pg1", "finish")
    ok("serve", "--until-idle")
    exe = json.loads(ok("show", "pg1", "--json").stdout)
    assert (exe["status"], exe["context"]) == ("finished", {"count": 2})
    assert [s["event"] for s in json.loads(ok("trace", "pg1", "--json").stdout)] == \
        ["durastate.start", "inc", "inc", "finish"]
    listed = json.loads(ok("list", "--status", "finished", "--json").stdout)
    assert [i["id"] for i in listed["items"]] == ["pg1"]
