"""Which guards and actions run user code: ``declarative_guard``/``declarative_actions`` must never call a
form declarative that the compilers build around a Python callable (the worker skips its stale-copy check
for declarative definitions). The oracle is the compiler itself: a spec is user code exactly when compiling
it asks ``resolve_callable`` for something."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durastate.engine import expressions
from durastate.engine.expressions import compile_actions, compile_guard, declarative_actions, declarative_guard


def _fn(ctx: dict[str, Any], ev: Any) -> bool:
    return True


def _resolves(compile_it: Any, spec: Any) -> bool:
    """Whether compiling ``spec`` resolves a callable (valid or not)."""
    asked: list[Any] = []
    real = expressions.resolve_callable

    def spy(target: Any, where: str, issues: list[str]) -> Any:
        asked.append(target)
        return real(target, where, issues)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(expressions, "resolve_callable", spy)
        compile_it(spec, "x", [])
    return bool(asked)


VALUES = st.sampled_from([1, "a", "$context.n", "$event.x", {"add": ["$context.n", 1]}, [1, 2], None])
CALLABLES = st.sampled_from(["tests.engine.test_user_code:_fn", _fn, "no.such:thing", "not a path"])
GUARDS = st.recursive(
    st.one_of(
        st.booleans(),
        CALLABLES,
        st.builds(lambda op, a, b: {op: [a, b]}, st.sampled_from(["eq", "ne", "gt", "ge", "lt", "le", "in"]),
                  VALUES, VALUES),
        st.builds(lambda ref: {"exists": ref}, st.sampled_from(["$context.n", "$event.x", 3])),
        st.builds(lambda path: {"in_state": path}, st.sampled_from(["a", "a.b", ""])),
        st.builds(lambda fn: {"call": fn, "retry": {"max_attempts": 2}}, CALLABLES),
        st.sampled_from([{}, {"nope": 1}, 3, None, {"eq": [1, 2], "ne": [1, 2]}]),
    ),
    lambda inner: st.one_of(
        st.builds(lambda g: {"not": g}, inner),
        st.builds(lambda op, gs: {op: gs}, st.sampled_from(["and", "or"]), st.lists(inner, max_size=3)),
    ),
    max_leaves=6,
)
ACTIONS = st.lists(st.one_of(
    st.builds(lambda v: {"assign": {"n": v}}, VALUES),
    st.just({"send": {"event": "go", "to": "self"}}),
    st.just({"raise": "go"}),
    st.builds(lambda v: {"log": v}, VALUES),
    st.builds(lambda fn: {"call": fn}, CALLABLES),
    st.builds(lambda fn: {"call": fn, "retry": {"max_attempts": 2}}, CALLABLES),
    CALLABLES,
    st.sampled_from([{"nope": 1}, {}, "raise", 3, {"assign": 1, "log": "x"}]),
), max_size=4)


@settings(max_examples=300, deadline=None)
@given(spec=GUARDS)
def test_a_guard_is_declarative_only_if_compiling_it_resolves_no_callable(spec: Any) -> None:
    resolves = _resolves(compile_guard, spec)
    if declarative_guard(spec):
        assert not resolves
    elif not resolves:  # conservative only where the spec is not a guard at all
        assert _invalid_guard(spec)


@settings(max_examples=300, deadline=None)
@given(specs=ACTIONS)
def test_actions_are_declarative_only_if_compiling_them_resolves_no_callable(specs: list[Any]) -> None:
    resolves = _resolves(compile_actions, specs)
    if declarative_actions(specs):
        assert not resolves
    elif not resolves:  # conservative only for a list with an item that is not an action
        issues: list[str] = []
        compile_actions(specs, "x", issues)
        assert issues


def _invalid_guard(spec: Any) -> bool:
    issues: list[str] = []
    compile_guard(spec, "x", issues)
    return bool(issues)


def test_the_common_forms() -> None:
    assert declarative_guard({"and": [{"gt": ["$event.n", 1]}, {"not": {"in_state": "a"}}]})
    assert not declarative_guard({"or": [True, "pkg.mod:fn"]})
    assert not declarative_guard(_fn)
    assert declarative_actions([{"assign": {"n": 1}}, {"send": {"event": "e"}}, {"raise": "r"}, {"log": "x"}])
    assert not declarative_actions([{"assign": {"n": 1}}, {"call": "pkg.mod:fn"}])
    assert not declarative_actions(["pkg.mod:fn"])
