"""``durastate list --where``: executions found by the search fields their definition declares, with every
filter typed by the declared type; a bad filter is one clear line and exit 1."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ._support import Outcome, assert_one_line_error

Cli = Callable[..., Outcome]


def ok(out: Outcome) -> Outcome:
    assert out.code == 0, (out.code, out.stdout, out.stderr)
    return out


def ids(cli: Cli, *args: str) -> list[str]:
    return [i["id"] for i in json.loads(ok(cli("list", "--json", *args)).stdout)["items"]]


@pytest.fixture
def shops(cli: Cli) -> Cli:
    for n, (customer, total, rush) in enumerate([("c-17", 120, False), ("c-17", 40, True), ("c-3", 300, False)]):
        ok(cli("start", "shop", "--id", f"s{n}", "--context",
               json.dumps({"customer": customer, "total": total, "rush": rush})))
    ok(cli("start", "counter", "--id", "other"))
    ok(cli("serve", "--until-idle"))
    return cli


def test_where_finds_executions_by_their_search_fields(shops: Cli) -> None:
    assert ids(shops, "--where", "customer=c-17") == ["s0", "s1"]
    assert ids(shops, "--where", "customer=c-17", "--where", "total>100") == ["s0"]
    # A number range alone is read from the index in the order of the value: s1 (40) before s0 (120).
    assert ids(shops, "--where", "total>=40", "--where", "total<300") == ["s1", "s0"]
    assert ids(shops, "--where", "rush=true") == ["s1"]
    assert ids(shops, "--where", "customer!=c-17", "--definition", "shop") == ["s2"]
    table = ok(shops("list", "--where", "customer=c-3")).stdout
    assert "s2" in table and "s0" not in table


def test_where_follows_the_events_that_change_a_value(shops: Cli) -> None:
    ok(shops("send", "s1", "add", "--data", '{"price": 100}'))
    ok(shops("serve", "--until-idle"))
    assert ids(shops, "--where", "total>100") == ["s0", "s1", "s2"]


def test_where_pages_carry_the_filter(shops: Cli) -> None:
    out = ok(shops("list", "--where", "customer=c-17", "--limit", "1"))
    assert "--where customer=c-17" in out.stderr


@pytest.mark.parametrize("where, says", [
    ("customer", "write FIELD OP VALUE"),
    ("colour=red", "no definition declares a search field 'colour'"),
    ("total>lots", "total is a number"),
    ("rush=maybe", "rush is a bool"),
    ("customer>c-1", "only a number is ordered"),
])
def test_a_bad_where_is_one_line_and_exit_1(shops: Cli, where: str, says: str) -> None:
    assert_one_line_error(shops("list", "--where", where), says)
