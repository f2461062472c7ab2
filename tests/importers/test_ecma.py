"""The expression subset: what each ECMAScript form becomes, and that a guard means what it meant."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine.expressions import compile_guard
from durastate.engine.model import Event
from durastate.importers.ecma import Unsupported, parse, to_guard, to_value

VARS = {"n", "items", "name"}


@pytest.mark.parametrize(("text", "value"), [
    ("42", 42), ("-1.5", -1.5), ("'a\\'b'", "a'b"), ("'$x'", "$$x"), ("null", None),
    ("[1, 'two', n]", [1, "two", "$context.n"]), ("{a: 1, 'b': n}", {"a": 1, "b": "$context.n"}),
    ("n + 1", {"add": ["$context.n", 1]}), ("(n - 1) * 2 / 4", {"div": [{"mul": [{"sub": ["$context.n", 1]}, 2]}, 4]}),
    ("-n", {"sub": [0, "$context.n"]}), ("items[0].price", "$context.items.0.price"),
    ("_event.data.order.total", "$event.order.total"), ("_event.name", "$event.name"),
    ("[].concat(items, [4])", {"add": [{"add": [[], "$context.items"]}, [4]]}),
])
def test_values(text: str, value: Any) -> None:
    assert to_value(parse(text), VARS) == value


@pytest.mark.parametrize(("text", "guard"), [
    ("n == 1 && name !== 'x' || !(n > 2)",
     {"or": [{"and": [{"eq": ["$context.n", 1]}, {"ne": ["$context.name", "x"]}]},
             {"not": {"gt": ["$context.n", 2]}}]}),
    ("true", True), ("n <= 3 && n >= 1 && n < 9", {"and": [{"le": ["$context.n", 3]}, {"ge": ["$context.n", 1]},
                                                       {"lt": ["$context.n", 9]}]}),
])
def test_guards(text: str, guard: Any) -> None:
    assert to_guard(parse(text), VARS) == guard


@pytest.mark.parametrize(("text", "value"), [
    ("_event.type", "$meta.kind"), ("_event.sendid", "$meta.send_id"), ("_event.origin", "$meta.origin"),
    ("_event.origintype", "$meta.origin_type"),
])
def test_what_scxml_exposes_of_an_event_is_read_from_meta(text: str, value: str) -> None:
    assert to_value(parse(text), VARS) == value


@pytest.mark.parametrize(("text", "guard"), [
    ("typeof n === 'undefined'", {"not": {"exists": "$context.n"}}),
    ("'undefined' != typeof _event.sendid", {"exists": "$meta.send_id"}),
    ("typeof _event.data === 'undefined'", {"not": {"ne": ["$event.data", {}]}}),
    ("'sendid' in _event && 'invokeid' in _event", {"and": [True, True]}),
    ("'other' in _event", False),
])
def test_typeof_undefined_and_fields_in_event(text: str, guard: Any) -> None:
    assert to_guard(parse(text), VARS) == guard


@pytest.mark.parametrize(("context", "data", "undefined"), [
    ({}, {}, True), ({"n": None}, {"x": 1}, True), ({"n": 0}, {}, False), ({"n": ""}, {}, False),
])
def test_typeof_undefined_means_no_value(context: dict[str, Any], data: dict[str, Any], undefined: bool) -> None:
    issues: list[str] = []
    guard = compile_guard(to_guard(parse("typeof n === 'undefined'"), VARS), "g", issues)
    no_data = compile_guard(to_guard(parse("typeof _event.data === 'undefined'"), VARS), "g", issues)
    assert issues == []
    assert guard(context, Event(name="e", data=data)) is undefined
    assert no_data(context, Event(name="e", data=data)) is (data == {})


def test_in_is_in_state_with_the_full_path_of_the_id() -> None:
    states = {"s1": "p.r1.s1"}
    assert to_guard(parse("In('s1') && !(n > 2)"), VARS, states) == {
        "and": [{"in_state": "p.r1.s1"}, {"not": {"gt": ["$context.n", 2]}}]}
    with pytest.raises(Unsupported, match="outside the supported subset"):
        to_value(parse("In('s1')"), VARS)  # a state test is a condition, not a value


@pytest.mark.parametrize(("value", "truthy"), [
    (None, False), (False, False), (0, False), (0.0, False), ("", False),
    (True, True), (1, True), (-0.5, True), ("0", True), ("false", True), ([], True), ({}, True),
])
def test_a_value_as_a_condition_has_ecmascript_truthiness(value: Any, truthy: bool) -> None:
    issues: list[str] = []
    guard = compile_guard(to_guard(parse("n"), VARS), "g", issues)
    assert issues == []
    assert guard({"n": value}, Event(name="e")) is truthy
    assert compile_guard(to_guard(parse("!n"), VARS), "g", issues)({"n": value}, Event(name="e")) is not truthy


@pytest.mark.parametrize(("text", "why"), [
    ("Math.random()", "the call Math.random() is outside the supported subset"),
    ("items.map(f)", "the call items.map() is outside"),
    ("In('s1')", "In('s1'): no state with the id 's1'"),
    ("In(s1)", "In() takes one state id written as a string constant"),
    ("n % 2 == 0", "the remainder operator % is not supported"),
    ("n ? 1 : 2", "the conditional operator"),
    ("n = 1", "an assignment"),
    ("n++", "unexpected"),
    ("typeof n", "typeof maps only compared with 'undefined'"),
    ("typeof n === 'number'", "typeof maps only compared with 'undefined'"),
    ("'x' in n", "maps only as 'field' in _event"),
    ("items[n]", "a computed member"),
    ("_sessionid", "the system variable _sessionid"),
    ("_event.raw", "_event.raw has no durastate equivalent"),
    ("other + 1", "'other' is not a variable of the datamodel"),
    ("'unterminated", "is not terminated: this is no ECMAScript expression"),
    ("{add: [1, 2]}", "would read as an operator"),
])
def test_outside_the_subset(text: str, why: str) -> None:
    with pytest.raises(Unsupported) as caught:
        to_guard(parse(text), VARS)
    assert why in str(caught.value)
