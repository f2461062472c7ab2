"""``list --where``, ``history ID --json`` and ``trace`` through the command on the server stores (PostgreSQL,
DynamoDB on moto), as on SQLite in test_search_cli/test_history_cli: the same answers, and the same one-line
errors for a bad filter or an unknown execution."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._support import Outcome, assert_one_line_error, moto_dynamodb_url, postgres_schema_url

pytestmark = pytest.mark.slow

Cli = Callable[..., Outcome]


@pytest.fixture(params=["postgres", "dynamodb"])
def server_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL of an empty store of the kind, keeping whole histories."""
    if request.param == "postgres":
        with postgres_schema_url("cli", "&history=1") as url:
            yield url
        return
    yield moto_dynamodb_url(monkeypatch, "cli", "&history=1")


def ok(out: Outcome) -> Outcome:
    assert out.code == 0, (out.code, out.stdout, out.stderr)
    return out


def test_where_and_history_through_the_command(server_store: str, cli: Cli,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURASTATE_STORE", server_store)
    for n, (customer, total) in enumerate([("c-17", 120), ("c-17", 40), ("c-3", 300)]):
        ok(cli("start", "shop", "--id", f"s{n}", "--context", json.dumps({"customer": customer, "total": total})))
    ok(cli("start", "counter", "--id", "other"))
    ok(cli("serve", "--until-idle"))
    ok(cli("send", "s1", "add", "--data", '{"price": 100}'))
    ok(cli("serve", "--until-idle"))

    def ids(*where: str) -> list[str]:
        args = [a for w in where for a in ("--where", w)]
        return [i["id"] for i in json.loads(ok(cli("list", "--json", *args)).stdout)["items"]]

    assert ids("customer=c-17") == ["s0", "s1"]
    assert ids("customer=c-17", "total>130") == ["s1"]  # s1's total followed its add: 140
    assert sorted(ids("total>=120", "total<300")) == ["s0", "s1"]
    assert ids("customer=c-99") == []
    assert_one_line_error(cli("list", "--where", "colour=red"), "no definition declares a search field 'colour'")
    assert_one_line_error(cli("list", "--where", "total>lots"), "total is a number")

    lines = ok(cli("history", "s1", "--json")).stdout.splitlines()
    steps = [json.loads(line) for line in lines]
    assert [(s["index"], s["event"]) for s in steps] == [(0, "durastate.start"), (1, "add")]
    assert steps[1]["data"] == {"price": 100}
    assert_one_line_error(cli("history", "nope"), "nope")
    assert [s["event"] for s in json.loads(ok(cli("trace", "s1", "--json")).stdout)] == ["durastate.start", "add"]


BOOM = """\
id: boom
initial: idle
context: {n: 0}
states:
  idle:
    on:
      inc: {actions: [{assign: {n: {add: ["$context.n", 1]}}}]}
      boom: {actions: [{assign: {n: {div: ["$context.n", 0]}}}]}
"""


def test_trace_on_aws_says_only_failed_steps_are_recorded(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """On AWS the trace is off unless DURASTATE_TRACE=1 (LocalRuntime(trace=False) is that deployment): an
    execution that never failed has no step, one that failed has only its failed step, and `trace` says why
    the other steps are missing in both cases, on the command a user runs."""
    pytest.importorskip("boto3")
    from durastate.engine import DefinitionRegistry
    from durastate.engine.model import Event
    from durastate.runtime import LocalRuntime, ManualClock
    from durastate.runtime.definitions import load_file
    from durastate.store import open_store

    url = moto_dynamodb_url(monkeypatch, "cli")
    (tmp_path / "boom.yaml").write_text(BOOM)
    store = open_store(url)
    rt = LocalRuntime(store, DefinitionRegistry([load_file(tmp_path / "boom.yaml")]), clock=ManualClock(1_000.0),
                      trace=False)
    for eid in ("fine", "broke"):
        rt.start("boom", execution_id=eid)
        rt.send(eid, Event(id=f"{eid}-inc", name="inc"))
    rt.send("broke", Event(id="broke-boom", name="boom"))
    rt.run_until_idle()
    store.close()
    monkeypatch.setenv("DURASTATE_STORE", url)

    empty = ok(cli("trace", "fine"))
    assert "only the steps that fail are recorded" in empty.stdout + empty.stderr
    failed = ok(cli("trace", "broke"))
    assert "boom" in failed.stdout and "ZeroDivisionError" in failed.stdout
    said = failed.stdout + failed.stderr
    assert "only the steps that fail are recorded" in said and "DURASTATE_TRACE=1" in said
    assert [s["event"] for s in json.loads(ok(cli("trace", "broke", "--json")).stdout)] == ["boom"]  # JSON as is
