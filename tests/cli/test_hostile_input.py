"""Bad input an outside campaign typed into the CLI: each is one line on stderr, exit 1, nothing stored.

Non-finite numbers (``NaN`` is accepted by Python's json module, not by JSON), ids in the engine's child
namespace or with control characters, and a mistyped cursor once ended in a silent change or in
"unexpected … please report it".
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest

from ._support import Env, Outcome, assert_one_line_error

Cli = Callable[..., Outcome]


@pytest.mark.parametrize("args, fragments", [
    (["start", "counter", "--context", '{"a": NaN}'], ["--context", "NaN is not a JSON number"]),
    (["start", "counter", "--context", '{"a": 1e400}'], ["--context.a is inf"]),
    (["start", "counter", "--context", '{"a": -Infinity}'], ["-Infinity is not a JSON number"]),
    (["start", "counter", "--context", "[" * 70 + "]" * 70], ["must be a JSON object"]),
    (["start", "counter", "--context", '{"a": ' + "[" * 70 + "]" * 70 + "}"], ["nests deeper than 64"]),
    (["start", "counter", "--id", "x~1"], ["reserves for the ids of child executions"]),
    (["start", "counter", "--id", "x" * 129], ["over the limit of 128"]),
    (["list", "--cursor", "%%%"], ["invalid cursor '%%%'"]),
])
def test_bad_input_is_one_line_and_changes_nothing(cli: Cli, env: Env, args: list[str],
                                                   fragments: list[str]) -> None:
    if args[0] == "list":
        assert cli("start", "counter", "--id", "c0").code == 0  # a store to list (it holds a queued start)
    assert_one_line_error(cli(*args), *fragments)
    if env.db.exists():  # (a refused start creates no store; a refused listing had one already)
        listed = cli("list", "--json")
        assert listed.code == 0 and json.loads(listed.stdout)["items"] == [], listed.stdout  # c0: queued


def test_bad_event_data_is_refused_before_it_is_queued(cli: Cli, env: Env) -> None:
    assert cli("start", "counter", "--id", "c1").code == 0
    assert_one_line_error(cli("send", "c1", "inc", "--data", '{"n": NaN}'), "NaN is not a JSON number")
    assert cli("serve", "--until-idle").code == 0
    shown = cli("show", "c1", "--json")
    assert shown.code == 0 and json.loads(shown.stdout)["context"]["count"] == 0


@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["trace", "x"], ["send", "x", "inc"],
                                     ["cancel", "x"], ["terminate", "x"], ["redrive", "x"]])
def test_a_mistyped_sqlite_store_is_an_error_not_a_new_empty_store(cli: Cli, env: Env,
                                                                   command: list[str]) -> None:
    typo = env.tmp / "typo.db"
    assert_one_line_error(cli("--store", f"sqlite:///{typo}", *command), "no store at", "typo.db")
    assert not typo.exists()


def test_viz_to_a_folder_that_does_not_exist_is_one_line(cli: Cli, env: Env) -> None:
    out = cli("viz", str(env.definitions / "counter.yaml"), "-o", str(env.tmp / "missing" / "dir" / "x.mmd"))
    assert_one_line_error(out, "cannot write", "does its folder exist")


def test_a_store_file_this_user_cannot_write_is_read(cli: Cli, env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("start", "counter", "--id", "c1").code == 0
    assert cli("serve", "--until-idle").code == 0
    before = env.db.read_bytes()
    real_access = os.access
    # Tests run as root, for whom every file is writable: pretend this one is not (as for another user).
    monkeypatch.setattr(os, "access", lambda p, mode: False if mode == os.W_OK and str(p).endswith(".db")
                        else real_access(p, mode))
    listed = cli("list", "--json")
    assert listed.code == 0 and [i["id"] for i in json.loads(listed.stdout)["items"]] == ["c1"]
    assert cli("show", "c1").code == 0
    assert_one_line_error(cli("cancel", "c1"), "read-only")
    assert env.db.read_bytes() == before
