"""Search fields: the context values a definition declares under ``search:``, and the filters that find them.

A definition names a few values of its executions' context that a listing can filter on
(``list --where customer=c-17 --where total>100``)::

    search:
      customer: {path: customer.id, type: string}
      total: {type: number}          # path defaults to the field's name

Every step (and a migration) recomputes them with :func:`search_values` into ``Execution.search``, and
the store writes that index in the commit that writes the execution, so a listing reads the executions
that match from the index instead of filtering every row. This module is pure: it extracts values and
types filters; the stores keep and query them.

A value is indexed only when it is present at its path and of the declared type (``number``: an int or a
float, never a bool; ``bool``: true or false; ``string``: at most :data:`MAX_TEXT` characters); otherwise
the execution has no value for that field and no filter on it matches it (not even ``!=``). Numbers are
compared with ``= != > >= < <=``, strings and bools with ``=`` and ``!=`` only (an order of strings would
differ between the stores' collations).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from durastate.errors import InvalidSearch

__all__ = [
    "MAX_FIELDS",
    "MAX_TEXT",
    "OPERATORS",
    "Condition",
    "IndexPlan",
    "SearchField",
    "SearchType",
    "SearchValue",
    "check_conditions",
    "condition",
    "index_entries",
    "index_entry",
    "index_plan",
    "parse_where",
    "search_values",
    "typed_where",
    "values_match",
]

SearchType = Literal["string", "number", "bool"]
SearchValue = str | float | bool

MAX_FIELDS = 16
"""How many search fields a definition may declare: each is an index row (a DynamoDB item) per commit."""
MAX_TEXT = 256
"""The longest string value indexed (an index key must stay small); a longer one is left unindexed."""
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

OPERATORS = ("=", "!=", ">", ">=", "<", "<=")
_WHERE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(!=|>=|<=|=|>|<)(.*)$", re.DOTALL)

_ORDERED = frozenset((">", ">=", "<", "<="))


class SearchField(BaseModel):
    """One ``search:`` entry: where in the context its value is, and its type."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(default=None, min_length=1, max_length=256)
    """Dotted path into the context (``customer.id``); ``None``: the field's own name."""
    type: SearchType = "string"


@dataclass(frozen=True, slots=True)
class Condition:
    """One listing filter: the executions whose search field ``name`` compares with ``value`` by ``op``."""

    name: str
    op: str
    value: SearchValue

    def __str__(self) -> str:
        shown = str(self.value).lower() if isinstance(self.value, bool) else str(self.value)
        return f"{self.name}{self.op}{shown}"


def check_name(name: str) -> str | None:
    """Why ``name`` cannot be a search field's name, or ``None`` when it can."""
    if not NAME_PATTERN.match(name):
        return "a search field's name is a letter or _ then letters, digits or _ (at most 64)"
    return None


def _at(context: Mapping[str, Any], path: str) -> Any:
    value: Any = context
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _typed(value: Any, kind: SearchType) -> SearchValue | None:
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if math.isfinite(value) else None
    return value if isinstance(value, str) and len(value) <= MAX_TEXT else None


def search_values(fields: Mapping[str, SearchField], context: Mapping[str, Any]) -> dict[str, SearchValue | None]:
    """Every declared field's value in ``context`` (``None``: absent or of another type, so not indexed).

    Each declared name is a key, so a store can tell "no value any more" from "no search fields"."""
    return {name: _typed(_at(context, f.path or name), f.type) for name, f in fields.items()}


def parse_where(text: str) -> tuple[str, str, str]:
    """``customer=c-17`` -> ``("customer", "=", "c-17")``; :class:`InvalidSearch` for anything else."""
    m = _WHERE.match(text)
    if m is None or check_name(m.group(1)) is not None:
        raise InvalidSearch(f"--where {text!r}: write FIELD OP VALUE, OP one of {' '.join(OPERATORS)} "
                            "(customer=c-17, total>100)")
    return m.group(1), m.group(2), m.group(3).strip()


def condition(name: str, op: str, raw: str, kind: SearchType) -> Condition:
    """The typed filter of ``name op raw`` for a field of type ``kind`` (:class:`InvalidSearch` if ``raw``
    is not a value of it, or ``op`` orders a bool)."""
    value: SearchValue
    if kind == "number":
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise InvalidSearch(f"--where {name}{op}{raw}: {name} is a number; compare it with one (total>100)")
    elif kind == "bool":
        if raw.lower() not in ("true", "false"):
            raise InvalidSearch(f"--where {name}{op}{raw}: {name} is a bool; compare it with true or false")
        value = raw.lower() == "true"
    else:
        value = raw
    if op in _ORDERED and kind != "number":
        raise InvalidSearch(f"--where {name}{op}{raw}: only a number is ordered; compare a {kind} with = or !=")
    return Condition(name, op, value)


def typed_where(texts: Iterable[str], declared: Mapping[str, Mapping[str, SearchField]]) -> tuple[Condition, ...]:
    """``--where`` texts as conditions, each typed by the field's declared type; ``declared``: definition
    id -> its search fields (the definitions the listing may return). :class:`InvalidSearch` for a
    malformed text, a field none of them declares, one they declare with different types, or a value
    that is not of the type."""
    out: list[Condition] = []
    for text in texts:
        name, op, raw = parse_where(text)
        kinds = {f.type: d for d, fields in declared.items() if (f := fields.get(name)) is not None}
        if not kinds:
            known = sorted({n for fields in declared.values() for n in fields})
            raise InvalidSearch(f"--where {text}: no definition declares a search field {name!r} "
                                + (f"(declared: {', '.join(known)})" if known else "(none declares any)"))
        if len(kinds) > 1:
            which = ", ".join(f"a {k} in {d}" for k, d in sorted(kinds.items()))
            raise InvalidSearch(f"--where {text}: {name} is {which}; pick one with --definition")
        out.append(condition(name, op, raw, next(iter(kinds))))
    return tuple(out)


def check_conditions(where: Iterable[Condition | tuple[str, str, Any]]) -> tuple[Condition, ...]:
    """The filters a store is given, checked (operator, name, a str/number/bool value); tuples accepted."""
    out: list[Condition] = []
    for c in where:
        cond = c if isinstance(c, Condition) else Condition(*c)
        if cond.op not in OPERATORS:
            raise InvalidSearch(f"search operator {cond.op!r}: use one of {' '.join(OPERATORS)}")
        why = check_name(cond.name)
        if why:
            raise InvalidSearch(f"search field {cond.name!r}: {why}")
        v = cond.value
        if isinstance(v, bool | str):
            if cond.op in _ORDERED:
                raise InvalidSearch(f"{cond}: only a number is ordered; compare a string or a bool with = or !=")
        elif isinstance(v, int | float) and math.isfinite(v):
            cond = Condition(cond.name, cond.op, float(v))
        else:
            raise InvalidSearch(f"{cond.name}{cond.op}{v!r}: compare a search field with a string, a number or "
                                "a bool")
        out.append(cond)
    return tuple(out)


def _compare(have: SearchValue, op: str, want: SearchValue) -> bool:
    if isinstance(have, bool) != isinstance(want, bool) or isinstance(have, str) != isinstance(want, str):
        return False  # another type: no filter matches it
    if op == "=":
        return have == want
    if op == "!=":
        return have != want
    a: Any = have
    b: Any = want
    return bool(a > b if op == ">" else a >= b if op == ">=" else a < b if op == "<" else a <= b)


def index_entry(name: str, value: SearchValue) -> tuple[str, str | None, float | None]:
    """How an index stores one value: (key, text, number). The key carries the value's type (``total#n``,
    ``rush#b``; a string keeps its bare name), so values of one name but different types (two definitions
    may disagree) never compare with each other; a bool is the number 1 or 0 under its key."""
    if isinstance(value, bool):
        return f"{name}#b", None, 1.0 if value else 0.0
    if isinstance(value, str):
        return name, value, None
    return f"{name}#n", None, float(value)


def index_entries(values: Mapping[str, SearchValue | None]) -> list[tuple[str, str | None, float | None]]:
    """The index entries of an execution's search values (a ``None`` value has none)."""
    return [index_entry(name, v) for name, v in values.items() if v is not None]


def values_match(values: Mapping[str, Any] | None, where: Sequence[Condition]) -> bool:
    """Whether an execution's search values meet every filter (the reference semantics every store keeps)."""
    for c in where:
        have = (values or {}).get(c.name)
        if have is None or not _compare(have, c.op, c.value):
            return False
    return True


@dataclass(frozen=True, slots=True)
class IndexPlan:
    """How a listing reads the index for its conditions (:func:`index_plan`).

    ``equal``: the index key and value of the first equality (read in id order); else ``key`` with the
    number bounds of every ordered condition on that field (read in the order of the value, then id; a
    ``None`` bound is open, ``*_inclusive`` says whether the bound itself matches)."""

    key: str
    equal: str | float | None = None
    low: float | None = None
    low_inclusive: bool = True
    high: float | None = None
    high_inclusive: bool = True

    @property
    def ranged(self) -> bool:
        return self.equal is None

    def admits(self, number: float) -> bool:
        """Whether ``number`` lies within the bounds (the range's scan stops at the first that does not)."""
        if self.high is None:
            return True
        return number <= self.high if self.high_inclusive else number < self.high


def index_plan(where: Sequence[Condition]) -> IndexPlan | None:
    """Which index read drives a listing with the (checked) conditions ``where``: the first equality, else
    the number range of the first ordered condition's field (all its ordered conditions are bounds), else
    ``None`` (only ``!=``: no index range selects it, the executions are read in id order)."""
    for c in where:
        if c.op == "=":
            key, text, num = index_entry(c.name, c.value)
            return IndexPlan(key, text if text is not None else num)
    first = next((c for c in where if c.op in _ORDERED), None)
    if first is None:
        return None
    low: float | None = None
    high: float | None = None
    low_in = high_in = True
    for c in where:
        if c.name != first.name or c.op not in _ORDERED:
            continue
        v = float(c.value)
        if c.op in (">", ">="):
            if low is None or v > low or (v == low and c.op == ">"):
                low, low_in = v, c.op == ">="
        elif high is None or v < high or (v == high and c.op == "<"):
            high, high_in = v, c.op == "<="
    return IndexPlan(index_entry(first.name, 0.0)[0], None, low, low_in, high, high_in)
