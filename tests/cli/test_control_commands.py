"""The recovery stories through the real CLI, on SQLite and on PostgreSQL.

A payment action whose provider is down fails the execution; `show` says why and what to run;
`redrive` after the fix finishes it as a fault-free run would. Suspend holds what arrives, resume applies
it in order; terminate stops an execution at once; bad input is one line and changes nothing.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._support import Env, Outcome, assert_one_line_error

Cli = Callable[..., Outcome]

HOOKS = '''
from pathlib import Path

def charge(context, event):
    if not Path("provider-up").exists():
        raise ConnectionError("payment provider unreachable")
    return {"charged": context["amount"]}
'''

SHOP = """
id: shop
initial: cart
context: {amount: 25}
states:
  cart:
    on: {submit: paying, note: {actions: [{assign: {note: "$event.data.text"}}]}}
  paying:
    entry: [{call: "shop_hooks:charge"}]
    on: {ship: shipped}
  shipped: {type: final, outcome: shipped}
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def store_url(request: pytest.FixtureRequest, env: Env) -> Iterator[str]:
    if request.param == "sqlite":
        yield env.store_url
        return
    psycopg = pytest.importorskip("psycopg")
    server = "postgresql://postgres@127.0.0.1:5432/test"
    schema = f"ctl_{uuid.uuid4().hex[:10]}"
    yield f"{server}?schema={schema}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def ok(cli: Cli, env: Env, store_url: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Outcome]:
    (env.tmp / "shop_hooks.py").write_text(textwrap.dedent(HOOKS))
    (env.definitions / "shop.yaml").write_text(SHOP)
    monkeypatch.syspath_prepend(str(env.tmp))
    sys.modules.pop("shop_hooks", None)
    monkeypatch.setenv("DURASTATE_STORE", store_url)

    def run(*args: str) -> Outcome:
        out = cli(*args)
        assert out.code == 0, (args, out.stdout, out.stderr)
        return out

    return run


def show(ok: Callable[..., Outcome], execution_id: str) -> dict[str, object]:
    return json.loads(ok("show", execution_id, "--json").stdout)  # type: ignore[no-any-return]


def test_a_failed_execution_is_redriven_after_the_fix(ok: Callable[..., Outcome], env: Env) -> None:
    ok("start", "shop", "--id", "o1")
    ok("send", "o1", "note", "--data", '{"text": "gift wrap"}')
    ok("send", "o1", "submit")
    ok("serve", "--until-idle")
    failed = show(ok, "o1")
    assert failed["status"] == "failed" and "payment provider unreachable" in str(failed["error"])
    human = ok("show", "o1").stdout
    assert "failed on" in human and "submit" in human and "durastate redrive o1" in human
    assert [i["id"] for i in json.loads(ok("list", "--status", "failed", "--json").stdout)["items"]] == ["o1"]
    Path(env.tmp / "provider-up").write_text("")  # the fix
    assert "redriven o1: submit" in ok("redrive", "o1").stdout
    ok("serve", "--until-idle")
    ok("send", "o1", "ship")
    ok("serve", "--until-idle")
    done = show(ok, "o1")
    assert (done["status"], done["outcome"]) == ("finished", "shipped")
    assert done["context"] == {"amount": 25, "note": "gift wrap", "charged": 25}


def test_suspend_holds_and_resume_applies_in_order(ok: Callable[..., Outcome], cli: Cli) -> None:
    ok("start", "counter", "--id", "c1")
    ok("suspend", "c1", "--reason", "maintenance")
    ok("send", "c1", "inc")
    ok("send", "c1", "inc")
    ok("serve", "--until-idle")
    held = show(ok, "c1")
    assert (held["status"], held["reason"], held["context"]) == ("suspended", "maintenance", {"count": 0})
    assert "2 event(s) waiting: inc, inc" in ok("show", "c1").stdout
    assert [i["id"] for i in json.loads(ok("list", "--status", "suspended", "--json").stdout)["items"]] == ["c1"]
    ok("resume", "c1")
    ok("serve", "--until-idle")
    assert show(ok, "c1")["context"] == {"count": 2}
    ok("cancel", "c1", "--reason", "no longer needed")
    ok("serve", "--until-idle")
    ended = show(ok, "c1")
    assert (ended["status"], ended["reason"]) == ("cancelled", "no longer needed")


def test_terminate_is_immediate(ok: Callable[..., Outcome], cli: Cli) -> None:
    ok("start", "counter", "--id", "t1")
    ok("serve", "--until-idle")
    assert "terminated t1: stuck" in ok("terminate", "t1", "--reason", "stuck").stdout
    assert show(ok, "t1")["status"] == "terminated"
    assert_one_line_error(cli("terminate", "t1"), "already terminated")


@pytest.mark.parametrize("args, fragments", [
    (["redrive", "nope"], ["no execution 'nope'", "`durastate list` shows the executions"]),
    (["terminate", "nope"], ["no execution 'nope'", "`durastate list` shows the executions"]),
    (["cancel", "nope"], ["no execution 'nope'", "`durastate list` shows the executions"]),
    (["suspend", "nope"], ["no execution 'nope'", "`durastate list` shows the executions"]),
    (["redrive", "r1"], ["r1 is running", "only a failed execution"]),
    (["redrive"], ["give the ID of a failed execution"]),
    (["redrive", "--definition", "counter", "--status", "running"], ["only failed executions"]),
])
def test_bad_control_input_is_one_line_and_changes_nothing(ok: Callable[..., Outcome], cli: Cli,
                                                           args: list[str], fragments: list[str]) -> None:
    ok("start", "counter", "--id", "r1")
    ok("serve", "--until-idle")
    before = show(ok, "r1")
    assert_one_line_error(cli(*args), *fragments)
    assert show(ok, "r1") == before


def test_events_sent_to_a_suspended_execution_are_held_not_refused(ok: Callable[..., Outcome]) -> None:
    ok("start", "counter", "--id", "s1")
    ok("suspend", "s1")
    ok("serve", "--until-idle")  # the suspend is applied: s1 is suspended now
    ok("send", "s1", "inc")
    ok("serve", "--until-idle")
    assert "1 event(s) waiting: inc" in ok("show", "s1").stdout
    ok("resume", "s1")
    ok("serve", "--until-idle")
    assert show(ok, "s1")["context"] == {"count": 1}


NOTED_SHOP = """
id: noted_shop
initial: open
context: {amount: 25}
states:
  open:
    initial: cart
    on: {note: {actions: [{assign: {note: "$event.data.text"}}]}}
    states:
      cart: {on: {submit: paying}}
      paying:
        entry: [{call: "shop_hooks:charge"}]
        on: {ship: shipped}
  shipped: {type: final, outcome: shipped}
"""


def test_an_event_sent_to_a_failed_execution_is_held_and_applies_after_the_redrive(
        ok: Callable[..., Outcome], env: Env) -> None:
    (env.definitions / "noted_shop.yaml").write_text(NOTED_SHOP)
    up = Path(env.tmp / "provider-up")
    up.write_text("")  # the fault-free run first
    ok("start", "noted_shop", "--id", "fine")
    for event in ("submit", "note", "ship"):
        ok("send", "fine", event, *(["--data", '{"text": "ring twice"}'] if event == "note" else []))
    ok("serve", "--until-idle")
    up.unlink()
    ok("start", "noted_shop", "--id", "o1")
    ok("send", "o1", "submit")
    ok("serve", "--until-idle")
    sent = ok("send", "o1", "note", "--data", '{"text": "ring twice"}')  # taken, not refused
    assert "held, and applies after `durastate redrive o1`" in " ".join(sent.stderr.split())
    ok("serve", "--until-idle")
    assert "1 event(s) waiting: note" in ok("show", "o1").stdout
    up.write_text("")  # the fix
    ok("redrive", "o1")
    ok("send", "o1", "ship")
    ok("serve", "--until-idle")
    done, fine = show(ok, "o1"), show(ok, "fine")
    assert (done["status"], done["outcome"], done["context"]) == (fine["status"], fine["outcome"], fine["context"])
    assert done["context"] == {"amount": 25, "charged": 25, "note": "ring twice"}


def test_a_failed_execution_is_reset_past_the_step_that_cannot_succeed(ok: Callable[..., Outcome]) -> None:
    ok("start", "shop", "--id", "o1")
    ok("send", "o1", "submit")
    ok("serve", "--until-idle")
    assert show(ok, "o1")["status"] == "failed"  # the provider is down: charged by phone instead
    queued = ok("reset", "o1", "--to", "paying", "--context-patch", '{"charged": 25}', "--send", "ship",
                "--reason", "charged by phone", "--by", "ops")
    assert "queued reset for o1" in queued.stdout
    ok("serve", "--until-idle")
    done = show(ok, "o1")
    assert (done["status"], done["outcome"], done["context"]) == ("finished", "shipped", {"amount": 25,
                                                                                          "charged": 25})
    step = json.loads(ok("trace", "o1", "--json").stdout)[-1]
    assert (step["control"], step["by"], step["reason"], step["to"]) == ("reset", "ops", "charged by phone",
                                                                           "shipped")


@pytest.mark.parametrize("args, fragments", [
    (["reset", "nope", "--to", "counting"], ["no execution 'nope'", "`durastate list` shows the executions"]),
    (["reset", "r1", "--to", "nowhere"], ["'nowhere' is not a state of 'counter'"]),
    (["reset", "r1", "--to", "counting,done"], ["are both children of the top level"]),
    (["reset", "r1", "--to", "counting", "--actions", "all"], ["actions 'all'"]),
    (["reset", "r1", "--to", "counting", "--context-patch", "[1]"], ["--context-patch must be a JSON object"]),
    (["reset", "r1", "--to", "counting", "--data", "{}"], ["give --send EVENT too"]),
    (["reset", "r1", "--to", "counting", "--send", "durastate.timeout", "--data", '{"path": "counting"}'],
     ["'durastate.timeout' is an event durastate sends itself"]),
    (["reset", "r1", "--to", "counting", "--send", "incc"],
     ["definition 'counter' has no transition on event 'incc'", "--force sends it anyway"]),
    (["reset", "d1", "--to", "counting"], ["d1 is finished", "only a running, suspended or failed"]),
])
def test_bad_reset_input_is_one_line_and_changes_nothing(ok: Callable[..., Outcome], cli: Cli,
                                                         args: list[str], fragments: list[str]) -> None:
    ok("start", "counter", "--id", "r1")
    ok("start", "counter", "--id", "d1")
    ok("send", "d1", "finish")
    ok("serve", "--until-idle")
    before = show(ok, "r1")
    assert_one_line_error(cli(*args), *fragments)
    assert show(ok, "r1") == before
    ok("serve", "--until-idle")
    assert show(ok, "r1") == before


def test_reset_force_sends_an_event_the_definition_does_not_handle(ok: Callable[..., Outcome]) -> None:
    """As `send --force`: the event is delivered with the reset, and the trace says nothing handled it."""
    ok("start", "counter", "--id", "r1")
    ok("serve", "--until-idle")
    ok("reset", "r1", "--to", "counting", "--send", "incc", "--force")
    ok("serve", "--until-idle")
    step = json.loads(ok("trace", "r1", "--json").stdout)[-1]
    assert step["control"] == "reset" and [s["event"] for s in step["steps"]] == ["incc"]


def test_start_timeout_fails_the_run_when_it_passes_and_a_bad_one_is_one_line(ok: Callable[..., Outcome],
                                                                              cli: Cli) -> None:
    ok("start", "counter", "--id", "t1", "--timeout", "1h")
    ok("serve", "--until-idle")
    assert "(run timeout)" in ok("show", "t1").stdout
    ok("serve", "--until-idle", "--advance", "1h")
    failed = show(ok, "t1")
    assert (failed["status"], failed["error"]) == ("failed", "timed out: the run did not end within its timeout of 1h")
    assert_one_line_error(cli("start", "counter", "--id", "t2", "--timeout", "soon"),
                          "--timeout: 'soon' is not a duration")
    assert_one_line_error(cli("start", "counter", "--id", "t2", "--timeout", "0"), "more than 0 seconds")
    assert_one_line_error(cli("show", "t2"), "no execution 't2'")
