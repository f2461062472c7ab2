"""DynamoDB's hard limits, its typed attribute values, and item sizes as DynamoDB counts them.

Why a module of its own: a request DynamoDB would refuse for its size must be refused *before any
request* (with :class:`~durastate.errors.ExecutionTooLarge`, not a ValidationException halfway through a
commit), so the store computes item sizes itself, by DynamoDB's documented rules, from the same typed
values (``{"S": …}``, ``{"N": …}``) it sends. Those rules and limits are facts about DynamoDB, not
choices of this store; they are kept together, apart from the logic that applies them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

MAX_ITEM_BYTES = 400_000
"""DynamoDB's "400 KB" item limit, read conservatively as decimal kilobytes: AWS accepts slightly
more, moto rejects above 405,000 bytes; refusing here is a clear error instead of a ValidationException."""
MAX_TXN_ITEMS = 100
MAX_TXN_BYTES = 4_000_000
"""The 4 MB aggregate size of one TransactWriteItems, read conservatively (decimal)."""
BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25

Item = dict[str, Any]
"""One DynamoDB item (or key): attribute name -> typed attribute value."""


def S(value: str) -> dict[str, str]:
    return {"S": value}


def N(value: int | float) -> dict[str, str]:
    return {"N": num(value)}


def num(value: int | float) -> str:
    """A number in DynamoDB's plain decimal form; floats round-trip exactly (shortest repr)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number here")
    if isinstance(value, int):
        return str(value)
    d = Decimal(repr(float(value)))
    if not d.is_finite():
        raise ValueError(f"{value!r} cannot be stored in DynamoDB")
    text = format(d, "f")
    return text[:-2] if text.endswith(".0") else text


def value_size(value: dict[str, Any]) -> int:
    """DynamoDB's billed size of one attribute value (documented rules, rounded up where approximate)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode("utf-8"))
    if kind == "N":
        digits = v.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_size(e) + 1 for e in v)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(e) + 1 for k, e in v.items())
    if kind == "SS":
        return sum(len(e.encode("utf-8")) for e in v)
    if kind == "NS":
        return sum(value_size({"N": e}) for e in v)
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: Item) -> int:
    """An item's size as DynamoDB counts it against the 400 KB / 4 MB limits and capacity units."""
    return sum(len(k.encode("utf-8")) + value_size(v) for k, v in item.items())
