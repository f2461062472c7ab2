"""Search fields (pure): what a definition declares under ``search:``, the values a step indexes, and the
``--where`` filters typed against the declared types."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.engine import Execution, load_definition
from durastate.engine.interpreter import step
from durastate.engine.migration import apply_migration, plan_migration
from durastate.engine.model import START, Event
from durastate.engine.search import Condition, check_conditions, condition, parse_where, search_values, values_match
from durastate.errors import DefinitionError, InvalidSearch


def order(search: dict[str, Any] | None = None) -> Any:
    return load_definition({
        "id": "order", "initial": "open",
        "search": search if search is not None else {
            "customer": {"path": "customer.id"}, "total": {"type": "number"}, "rush": {"type": "bool"}},
        "states": {"open": {"on": {"pay": {"target": "paid",
                                                   "actions": [{"assign": {"total": "$event.total"}}]}}},
                   "paid": {"type": "final"}}})


def started(defn: Any, **context: Any) -> Execution:
    exe = Execution(definition_id=defn.id, context=defn.initial_context(context))
    step(defn, exe, Event(name=START, data={}), 1.0)
    return exe


def test_a_step_records_the_declared_values_of_the_context() -> None:
    exe = started(order(), customer={"id": "c-17"}, total=120, rush=True)
    assert exe.search == {"customer": "c-17", "total": 120.0, "rush": True}


def test_an_absent_or_mistyped_value_is_none_and_matches_no_filter() -> None:
    exe = started(order(), customer={"id": 17}, rush="yes")
    assert exe.search == {"customer": None, "total": None, "rush": None}
    assert not values_match(exe.search, [Condition("customer", "!=", "c-1")])


def test_a_later_step_updates_the_values() -> None:
    defn = order()
    exe = started(defn, customer={"id": "c-1"}, total=5)
    step(defn, exe, Event(name="pay", data={"total": 250}), 2.0)
    assert exe.search["total"] == 250.0


def test_a_definition_without_search_fields_stores_none() -> None:
    exe = started(order({}), total=1)
    assert exe.search == {}
    assert "search" not in exe.model_dump_json()


def test_a_number_is_never_a_bool() -> None:
    defn = order()
    assert search_values(defn.search, {"total": True, "rush": 1}) == {"customer": None, "total": None,
                                                                       "rush": None}


@pytest.mark.parametrize("search, says", [
    ({"1st": {}}, "'1st': a search field's name"),
    ({"x": {"type": "date"}}, "search.x.type"),
    ({f"f{n}": {} for n in range(17)}, "at most 16 search fields"),
])
def test_bad_search_declarations_are_definition_errors(search: dict[str, Any], says: str) -> None:
    with pytest.raises(DefinitionError, match=says):
        order(search)


def test_a_migration_indexes_the_new_versions_fields() -> None:
    old = order({"customer": {"path": "customer.id"}})
    exe = started(old, customer={"id": "c-3"}, total=9)
    new = order({"total": {"type": "number"}})
    apply_migration(exe, plan_migration(exe, old, new, {}))
    assert exe.search == {"customer": None, "total": 9.0}  # None: the store drops customer from its index


@pytest.mark.parametrize("text, parsed", [
    ("customer=c-17", ("customer", "=", "c-17")),
    ("total>=100", ("total", ">=", "100")),
    ("total > 100", ("total", ">", "100")),
    ("rush!=true", ("rush", "!=", "true")),
    ("note=a=b", ("note", "=", "a=b")),
    ("total<=-1.5", ("total", "<=", "-1.5")),
])
def test_parse_where(text: str, parsed: tuple[str, str, str]) -> None:
    assert parse_where(text) == parsed


@pytest.mark.parametrize("text", ["customer", "=c-17", "no such=1", "total~1"])
def test_parse_where_refuses_malformed_filters(text: str) -> None:
    with pytest.raises(InvalidSearch, match="FIELD OP VALUE"):
        parse_where(text)


def test_condition_types_the_value_by_the_declared_type() -> None:
    assert condition("total", ">", "100", "number") == Condition("total", ">", 100.0)
    assert condition("rush", "=", "TRUE", "bool") == Condition("rush", "=", True)
    assert condition("customer", "=", "17", "string") == Condition("customer", "=", "17")


@pytest.mark.parametrize("args, says", [
    (("total", ">", "lots", "number"), "total is a number"),
    (("rush", "=", "1", "bool"), "rush is a bool"),
    (("customer", ">", "c", "string"), "only a number is ordered"),
])
def test_condition_refuses_a_value_of_another_type(args: tuple[Any, ...], says: str) -> None:
    with pytest.raises(InvalidSearch, match=says):
        condition(*args)


def test_values_match_ands_the_conditions() -> None:
    values = {"customer": "c-1", "total": 150.0}
    assert values_match(values, check_conditions([("customer", "=", "c-1"), ("total", ">", 100)]))
    assert not values_match(values, check_conditions([("customer", "=", "c-1"), ("total", ">", 200)]))
    assert not values_match(values, check_conditions([("customer", "=", 1)]))  # another type: no match
