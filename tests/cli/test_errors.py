"""Every bad input ends as one line on stderr and exit status 1 — never a traceback, never a change.

Most cases run in-process (the same app and error handling as the console script); the ones marked
``proc`` run the installed ``durastate`` executable, to prove the real entry point behaves the same.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from ._support import Env, Outcome, assert_one_line_error

Cli = Callable[..., Outcome]


@pytest.fixture
def finished_counter(cli: Cli) -> str:
    assert cli("start", "counter", "--id", "done1").code == 0
    assert cli("send", "done1", "finish").code == 0
    assert cli("serve", "--until-idle").code == 0
    return "done1"


@pytest.fixture
def running_counter(cli: Cli) -> str:
    assert cli("start", "counter", "--id", "run1").code == 0
    assert cli("serve", "--until-idle").code == 0
    return "run1"


@pytest.mark.parametrize("args, fragments", [
    (["show", "nope"], ["no execution 'nope'"]),
    (["trace", "nope"], ["no execution 'nope'"]),
    (["send", "nope", "inc"], ["no execution 'nope'", "durastate start"]),
    (["viz", "--execution", "nope"], ["no execution 'nope'"]),
    (["start", "nosuch"], ["unknown definition 'nosuch'", "(known: ", "counter, order, payment"]),
    (["start", "counter", "--context", "{bad json"], ["--context is not valid JSON"]),
    (["start", "counter", "--context", "[1, 2]"], ["--context must be a JSON object"]),
    (["start", "counter", "--id", "has space"], ["execution id 'has space'"]),
    (["list", "--status", "bogus"], ["unknown status 'bogus'", "running"]),
    (["viz", "missing.yaml"], ["no such file: missing.yaml"]),
    (["viz", "nosuch"], ["unknown definition 'nosuch'"]),
    (["viz"], ["--execution"]),
    (["--store", "foo://bar", "list"], ["unknown store URL 'foo://bar'"]),
    (["--store", "sqlite://", "list"], ["bad store URL"]),
    (["--definitions", "/nonexistent/defs", "start", "counter"], ["definitions folder", "does not exist"]),
])
def test_bad_input_is_one_line(cli: Cli, args: list[str], fragments: list[str]) -> None:
    assert cli("start", "counter", "--id", "exists").code == 0  # a store to read (read commands create none)
    assert_one_line_error(cli(*args), *fragments)


def test_unknown_event_lists_the_known_ones(cli: Cli, running_counter: str) -> None:
    out = cli("send", running_counter, "bogus")
    assert_one_line_error(out, "no transition on event 'bogus'", "known events: finish, inc", "--force")
    forced = cli("send", running_counter, "bogus", "--force")
    assert forced.code == 0
    assert "1 ignored" in cli("serve", "--until-idle").stderr


def test_bad_event_data_and_reserved_names(cli: Cli, running_counter: str) -> None:
    assert_one_line_error(cli("send", running_counter, "inc", "--data", "{'single': 1}"),
                          "--data is not valid JSON")
    assert_one_line_error(cli("send", running_counter, "inc", "--data", "3"), "--data must be a JSON object")
    assert_one_line_error(cli("send", running_counter, "durastate.timeout"), "reserved")


def test_event_to_an_ended_execution_is_refused(cli: Cli, finished_counter: str) -> None:
    assert_one_line_error(cli("send", finished_counter, "inc"), "has finished (counted)", "--force")


def test_nothing_changes_after_bad_input(cli: Cli, running_counter: str, env: Env) -> None:
    before = json.loads(cli("show", running_counter, "--json").stdout)
    for args in (["send", running_counter, "bogus"], ["send", running_counter, "inc", "--data", "{"],
                 ["send", running_counter, "durastate.start"]):
        assert cli(*args).code == 1
    assert cli("serve", "--until-idle").code == 0
    assert json.loads(cli("show", running_counter, "--json").stdout) == before


def test_a_broken_definitions_folder_is_one_line(cli: Cli, env: Env) -> None:
    (env.definitions / "broken.yaml").write_text(
        "id: broken\ninitial: a\nstates:\n  a: {on: {go: nowhere}}\n  b: {on: {go: neither}}\n")
    out = cli("start", "counter")
    line = assert_one_line_error(out, "invalid definition", "nowhere", "+1 more", "durastate validate")
    assert "\n" not in line


def test_validate_of_an_invalid_file_exits_1(cli: Cli, env: Env) -> None:
    bad = env.tmp / "bad.yaml"
    bad.write_text("id: x\nstates: [1]\n")
    out = cli("validate", str(bad))
    assert out.code == 1 and "Traceback" not in out.stderr
    assert "1 of 1 definition file(s) invalid" in out.stderr
    nothing = cli("validate", str(env.tmp / "absent.yaml"))
    assert nothing.code == 1 and "no such file" in nothing.stdout


def test_an_unwritable_sqlite_store_is_one_line(cli: Cli) -> None:
    assert_one_line_error(cli("--store", "sqlite:////proc/durastate-nope/x.db", "list"), "no store at")
    assert_one_line_error(cli("--store", "sqlite:////proc/durastate-nope/x.db", "start", "counter"), "sqlite")


# -- through the real executable -----------------------------------------------------------------------
@pytest.mark.slow
def test_proc_unknown_id_and_bad_json(durastate_proc: Callable[..., Outcome]) -> None:
    assert_one_line_error(durastate_proc("show", "missing"), "no store at")  # and none is created
    assert_one_line_error(durastate_proc("start", "counter", "--context", "{"), "--context is not valid JSON")
    assert durastate_proc("start", "counter", "--id", "c").code == 0
    assert_one_line_error(durastate_proc("show", "missing"), "no execution 'missing'")
    assert_one_line_error(durastate_proc("start", "nosuch"), "unknown definition 'nosuch'")


@pytest.mark.slow
def test_proc_unreachable_postgres_fails_fast(durastate_proc: Callable[..., Outcome]) -> None:
    started = time.monotonic()
    out = durastate_proc("--store", "postgresql://durastate@nohost.invalid:5432/db", "list", timeout=60)
    assert_one_line_error(out, "PostgreSQL")
    assert time.monotonic() - started < 50  # a hang would hit the subprocess timeout instead


@pytest.mark.slow
def test_proc_unreachable_dynamodb_fails_fast(durastate_proc: Callable[..., Outcome]) -> None:
    pytest.importorskip("boto3")
    out = durastate_proc("--store", "dynamodb://durastate?endpoint_url=http://127.0.0.1:9&region=us-east-1", "list",
                     timeout=60)
    assert_one_line_error(out, "DynamoDB", "did not answer")


@pytest.mark.slow
def test_proc_usage_error_exits_2(durastate_proc: Callable[..., Outcome]) -> None:
    out = durastate_proc("start")
    assert out.code == 2 and "Traceback" not in out.stderr
    assert "Missing argument" in out.stderr
