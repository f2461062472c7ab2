"""``durastate dead-letters`` through the real command, on SQLite and on PostgreSQL.

The story a user lives: events are queued against a definitions folder that has the definition, a server
runs with one that does not, so the start and the events behind it become dead letters — ``serve`` says
so, one line each, naming the command that shows them, and still exits 0 (it did its job: nothing was
lost, everything else went on). ``dead-letters list`` shows them with the reason; a replay before the fix
is refused in one line and moves nothing; once the definition is deployed, ``replay --all`` and ``serve``
apply each event exactly once, and a second replay changes nothing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._support import EXAMPLES, Env, Outcome, assert_one_line_error, postgres_schema_url


@pytest.fixture
def pg_url() -> Iterator[str]:
    with postgres_schema_url("cli_dl") as url:
        yield url


@pytest.fixture
def deployed(env: Env) -> Path:
    """The server's definitions folder: the payment child, but not the order."""
    folder = env.tmp / "deployed"
    folder.mkdir()
    shutil.copy(EXAMPLES / "payment.yaml", folder / "payment.yaml")
    return folder


def story(run: Callable[..., Outcome], deployed: Path, store: list[str]) -> None:
    def ok(*args: str) -> Outcome:
        out = run(*store, *args)
        assert out.code == 0, (args, out.stdout, out.stderr)
        return out

    server = ["--definitions", str(deployed)]
    ok("start", "order", "--id", "o-1")
    ok("send", "o-1", "add_item", "--data", '{"price": 30}')
    ok("send", "o-1", "submit")

    served = ok(*server, "serve", "--until-idle")  # exit 0: the letters are kept, the server did its job
    lines = [ln for ln in served.stderr.splitlines() if "dead letter" in ln]
    assert len(lines) == 3, served.stderr
    assert "start (order) for o-1" in lines[0] and "unknown definition 'order'" in lines[0]
    assert all("see `durastate dead-letters show " in ln for ln in lines)
    assert "3 dead-lettered" in served.stderr and "ERROR" not in served.stderr  # one line each, no log echo

    listed = json.loads(ok("dead-letters", "list", "--json").stdout)
    items = listed["items"]
    assert [(d["event"]["name"], d["error"]) for d in items] == [
        ("durastate.start", "UnknownDefinition"), ("add_item", "UnknownExecution"),
        ("submit", "UnknownExecution")]
    assert "unknown definition 'order'" in items[0]["reason"] and all(d["attempts"] == 1 for d in items)
    assert listed["next_cursor"] is None
    table = ok("dead-letters", "list").stdout
    assert all(d["id"] in table for d in items) and "UnknownDefinition" in table
    shown = ok("dead-letters", "show", items[0]["id"]).stdout
    assert "unknown definition 'order'" in shown and "o-1:start" in shown

    # Before the fix: refused in one line, nothing moved.
    refused = run(*store, *server, "dead-letters", "replay", "--all")
    assert_one_line_error(refused, items[0]["id"], "definition 'order', which is still missing",
                          "would only come back as a dead letter")
    refused = run(*store, *server, "dead-letters", "replay", "--id", items[2]["id"])
    assert_one_line_error(refused, "o-1, which does not exist")
    assert len(json.loads(ok("dead-letters", "list", "--json").stdout)["items"]) == 3
    assert "0 applied" in ok(*server, "serve", "--until-idle").stderr

    # The fix, then the replay: each event applied once.
    shutil.copy(EXAMPLES / "order.yaml", deployed / "order.yaml")
    replayed = ok(*server, "dead-letters", "replay", "--all").stdout
    assert "3 dead letter(s) replayed" in replayed
    assert "4 applied" in ok(*server, "serve", "--until-idle").stderr  # the three, and the payment child
    exe = json.loads(ok("show", "o-1", "--json").stdout)
    assert (exe["status"], exe["active_path"], exe["context"]) == (
        "running", "processing.payment", {"items": 1, "total": 30})
    assert json.loads(ok("dead-letters", "list", "--json").stdout)["items"] == []

    # A second replay changes nothing.
    assert "no dead letters to replay" in ok(*server, "dead-letters", "replay", "--all").stdout
    assert_one_line_error(run(*store, *server, "dead-letters", "replay", "--id", items[0]["id"]),
                          f"no dead letter '{items[0]['id']}'")
    assert "0 applied" in ok(*server, "serve", "--until-idle").stderr
    assert json.loads(ok("show", "o-1", "--json").stdout) == exe


@pytest.mark.slow
def test_the_story_on_sqlite(durastate_proc: Callable[..., Outcome], deployed: Path) -> None:
    story(durastate_proc, deployed, [])


@pytest.mark.slow
def test_the_story_on_postgresql(durastate_proc: Callable[..., Outcome], deployed: Path, pg_url: str) -> None:
    story(durastate_proc, deployed, ["--store", pg_url])


def test_serve_names_the_store_in_its_hint_when_it_came_from_an_option(
        cli: Callable[..., Outcome], env: Env, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert cli("--store", other, "start", "counter", "--id", "c1").code == 0
    (env.definitions / "counter.yaml").unlink()
    out = cli("--store", other, "serve", "--until-idle")
    assert out.code == 0, out.stderr
    assert f"see `durastate dead-letters show {_id(cli, other)} --store {other}`" in out.stderr


def _id(cli: Callable[..., Outcome], store: str) -> str:
    return str(json.loads(cli("--store", store, "dead-letters", "list", "--json").stdout)["items"][0]["id"])


def test_drop_forgets_a_letter_and_unknown_ids_are_one_line(cli: Callable[..., Outcome], env: Env) -> None:
    assert cli("start", "counter", "--id", "c1").code == 0
    (env.definitions / "counter.yaml").unlink()
    assert cli("serve", "--until-idle").code == 0
    letter_id = _id(cli, env.store_url)
    out = cli("dead-letters", "drop", letter_id)
    assert out.code == 0 and f"dropped {letter_id}: start (counter) for c1" in out.stdout
    for args in (["show", letter_id], ["drop", letter_id], ["replay", "--id", letter_id]):
        assert_one_line_error(cli("dead-letters", *args), f"no dead letter '{letter_id}'")
    assert "no dead letters" in cli("dead-letters", "list").stderr
    assert json.loads(cli("dead-letters", "list", "--json").stdout) == {"items": [], "next_cursor": None}


def test_paging_and_a_bad_cursor(cli: Callable[..., Outcome], env: Env) -> None:
    for i in range(3):
        assert cli("start", "counter", "--id", f"c{i}").code == 0
    (env.definitions / "counter.yaml").unlink()
    assert cli("serve", "--until-idle").code == 0
    first = json.loads(cli("dead-letters", "list", "--limit", "2", "--json").stdout)
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = json.loads(cli("dead-letters", "list", "--limit", "2", "--cursor", first["next_cursor"], "--json").stdout)
    assert [d["target_id"] for d in first["items"] + rest["items"]] == ["c0", "c1", "c2"]
    assert rest["next_cursor"] is None
    assert "--cursor" in cli("dead-letters", "list", "--limit", "2").stderr  # the table says how to go on
    assert_one_line_error(cli("dead-letters", "list", "--cursor", "nope"), "invalid cursor 'nope'")


def test_usage_mistakes_are_one_line_and_change_nothing(cli: Callable[..., Outcome], env: Env) -> None:
    assert_one_line_error(cli("dead-letters", "replay"), "--all, or --id ID")
    assert_one_line_error(cli("dead-letters", "replay", "--all", "--id", "x"), "--all, or --id ID")
    assert_one_line_error(cli("--store", "memory://", "dead-letters", "list"), "memory:// keeps no dead letters")
    assert_one_line_error(cli("dead-letters", "list", "--dlq-url", "not-a-url"), "is not a queue URL")


def test_force_replays_what_the_check_refuses_and_it_comes_back_as_the_same_letter(
        cli: Callable[..., Outcome], env: Env) -> None:
    assert cli("start", "counter", "--id", "c1").code == 0
    (env.definitions / "counter.yaml").unlink()
    assert cli("serve", "--until-idle").code == 0
    [before] = json.loads(cli("dead-letters", "list", "--json").stdout)["items"]
    assert_one_line_error(cli("dead-letters", "replay", "--all"), "still missing")
    out = cli("dead-letters", "replay", "--all", "--force")
    assert out.code == 0 and "1 dead letter(s) replayed" in out.stdout
    served = cli("serve", "--until-idle")
    assert served.code == 0 and f"dead letter {before['id']}" in served.stderr
    [after] = json.loads(cli("dead-letters", "list", "--json").stdout)["items"]
    assert (after["id"], after["event"], after["error"]) == (before["id"], before["event"], before["error"])
