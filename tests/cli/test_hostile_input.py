"""Bad input an outside campaign typed into the CLI: each is one line on stderr, exit 1, nothing stored.

Non-finite numbers (``NaN`` is accepted by Python's json module, not by JSON), ids in the engine's child
namespace or with control characters, and a mistyped cursor once ended in a silent change or in
"unexpected … please report it".
"""

from __future__ import annotations

import json
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
    assert_one_line_error(cli(*args), *fragments)
    listed = cli("list", "--json")
    assert listed.code == 0 and json.loads(listed.stdout)["items"] == [], listed.stdout


def test_bad_event_data_is_refused_before_it_is_queued(cli: Cli, env: Env) -> None:
    assert cli("start", "counter", "--id", "c1").code == 0
    assert_one_line_error(cli("send", "c1", "inc", "--data", '{"n": NaN}'), "NaN is not a JSON number")
    assert cli("serve", "--until-idle").code == 0
    shown = cli("show", "c1", "--json")
    assert shown.code == 0 and json.loads(shown.stdout)["context"]["count"] == 0
