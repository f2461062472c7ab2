"""A parser for the small part of ECMAScript that SCXML charts use in ``cond``/``expr``, mapped onto
durastate's values and guards. It never evaluates anything: it tokenizes, parses by precedence climbing
into a tree of tuples, and translates that tree; whatever falls outside the subset raises
:class:`Unsupported` with the reason, for the importer to report.

The subset: literals (numbers, strings, ``true``/``false``/``null``/``undefined``, arrays and objects of
values), datamodel variables and their members (``Var1``, ``a.b``, ``a[0]`` -> ``$context.a.b``),
``_event.name`` and ``_event.data.x`` (-> ``$event.name``, ``$event.x``), ``_event.type``/``sendid``/
``origin``/``origintype`` (-> ``$meta.kind``/``send_id``/``origin``/``origin_type``), ``+ - * /``,
``a.concat(b)`` of arrays, the comparisons ``== === != !== < <= > >=`` and ``&& || !`` in conditions, a
value used as a condition (its truthiness: false for ``null``, ``undefined``, ``false``, ``0`` and ``""``),
``typeof x === 'undefined'`` (no value: JSON's ``null`` is the one ``undefined``), ``'field' in _event``,
and ``In('id')`` in conditions (-> ``{in_state: PATH}``, the full dotted path of the state with that id).
Not in it: other function and method calls (``Math.random()``, ``x.map(...)``), assignments, ``%``,
``?:``, ``typeof`` compared with another type name, ``new`` and regular expressions. Note that ``==``
compares like ``===`` (no type coercion) and ``+`` of a string and a number fails the step instead of
concatenating.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from durastate.engine.expressions import VALUE_OPS
from durastate.engine.ids import START

__all__ = ["Computed", "Invalid", "Unsupported", "bind", "parse", "to_guard", "to_value"]

MAX_LENGTH = 4000
"""Longer expressions are refused rather than parsed (a chart's conditions are short)."""
MAX_DEPTH = 60
"""How deeply an expression may nest (parentheses, operators, literals)."""

Node = tuple[Any, ...]


class Unsupported(Exception):
    """The expression (or a part of it) has no durastate equivalent; the message says what and why."""


class Invalid(Unsupported):
    """The text is no ECMAScript expression at all (a statement keyword where a value belongs): an SCXML
    processor fails to evaluate it, and raises ``error.execution``, wherever it meets it."""


_STATEMENT_WORDS = frozenset((
    "break", "case", "catch", "const", "continue", "debugger", "default", "do", "else", "enum", "export",
    "extends", "finally", "for", "if", "return", "switch", "throw", "try", "var", "while", "with",
))
"""Reserved words that can never start an ECMAScript expression."""


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
      | (?P<str>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
      | (?P<name>[A-Za-z_$][\w$]*)
      | (?P<op>===|!==|==|!=|<=|>=|&&|\|\||[-+*/%<>!()\[\]{}.,:?=&|^~])
    )""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "/": "/", "0": "\0"}
_BINARY: dict[str, int] = {
    "||": 1, "&&": 2, "==": 3, "===": 3, "!=": 3, "!==": 3, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "+": 5, "-": 5, "*": 6, "/": 6, "%": 6,
}
_COMPARE = {"==": "eq", "===": "eq", "!=": "ne", "!==": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None, "undefined": None}


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos, n = 0, len(text)
    while pos < n:
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            bad = text[pos:].lstrip()[:1]
            if bad in "'\"":
                raise Invalid(f"the string {text[pos:].lstrip()!r} is not terminated: this is no ECMAScript "
                              "expression")
            raise Unsupported(f"unexpected character {bad!r}")
        pos = m.end()
        if m.group("num") is not None:
            raw = m.group("num")
            value: float | int = float(raw) if any(c in raw for c in ".eE") else int(raw)
            if isinstance(value, float) and not math.isfinite(value):
                raise Unsupported(f"{raw} is not a finite number")
            out.append(("lit", value))
        elif m.group("str") is not None:
            out.append(("lit", _unquote(m.group("str"))))
        elif m.group("name") is not None:
            out.append(("name", m.group("name")))
        else:
            out.append(("op", m.group("op")))
    out.append(("end", None))
    return out


def _unquote(raw: str) -> str:
    body, chars, i = raw[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise Unsupported(f"the string escape \\{nxt} is not supported")
            chars.append(_ESCAPES[nxt])
            i += 2
            continue
        chars.append(c)
        i += 1
    return "".join(chars)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, Any]:
        return self.toks[self.i]

    def take(self) -> tuple[str, Any]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, op: str) -> None:
        kind, value = self.take()
        if (kind, value) != ("op", op):
            raise Unsupported(f"expected {op!r}, found {_show(kind, value)}")

    def expression(self, min_prec: int = 1) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unsupported(f"nests deeper than {MAX_DEPTH} levels")
        left = self.unary()
        while True:
            kind, op = self.peek()
            if (kind, op) == ("name", "in") and _BINARY["<"] >= min_prec:
                self.take()  # the relational `in`: only `'key' in _event` maps (to_guard)
                left = ("bin", "in", left, self.expression(_BINARY["<"] + 1))
                continue
            if kind != "op":
                break
            if op in ("?", "=") or (op in ("&", "|", "^")):
                raise Unsupported(_why_not(op))
            prec = _BINARY.get(op)
            if prec is None or prec < min_prec:
                break
            self.take()
            right = self.expression(prec + 1)
            left = ("bin", op, left, right)
        self.depth -= 1
        return left

    def unary(self) -> Node:
        kind, value = self.peek()
        if (kind == "op" and value in ("!", "-", "+", "~")) or (kind, value) == ("name", "typeof"):
            self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise Unsupported(f"nests deeper than {MAX_DEPTH} levels")
            inner = self.unary()
            self.depth -= 1
            return ("unary", value, inner)
        if kind == "name" and value in ("new", "delete", "void", "function", "this", "instanceof"):
            raise Unsupported(f"'{value}' is outside the supported expression subset")
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        while True:
            kind, value = self.peek()
            if (kind, value) == ("op", "."):
                self.take()
                k2, name = self.take()
                if k2 != "name":
                    raise Unsupported(f"expected a member name after '.', found {_show(k2, name)}")
                node = ("member", node, name)
            elif (kind, value) == ("op", "["):
                self.take()
                index = self.expression()
                self.expect("]")
                if index[0] != "lit" or not isinstance(index[1], str | int) or isinstance(index[1], bool):
                    raise Unsupported("a computed member (a[i] with a variable i) is not supported")
                node = ("member", node, index[1])
            elif (kind, value) == ("op", "("):
                self.take()
                args: list[Node] = []
                if self.peek() != ("op", ")"):
                    args.append(self.expression())
                    while self.peek() == ("op", ","):
                        self.take()
                        args.append(self.expression())
                self.expect(")")
                node = ("call", node, args)
            else:
                return node

    def primary(self) -> Node:
        kind, value = self.take()
        if kind == "lit":
            return ("lit", value)
        if kind == "name":
            if value in _WORDS:
                return ("lit", _WORDS[value])
            if value in _STATEMENT_WORDS:
                raise Invalid(f"{value!r} is a reserved word: this is no ECMAScript expression")
            return ("name", value)
        if (kind, value) == ("op", "("):
            inner = self.expression()
            self.expect(")")
            return inner
        if (kind, value) == ("op", "["):
            items: list[Node] = []
            if self.peek() != ("op", "]"):
                items.append(self.expression())
                while self.peek() == ("op", ","):
                    self.take()
                    items.append(self.expression())
            self.expect("]")
            return ("array", items)
        if (kind, value) == ("op", "{"):
            pairs: list[tuple[str, Node]] = []
            while self.peek() != ("op", "}"):
                k2, key = self.take()
                if k2 not in ("name", "lit") or not isinstance(key, str):
                    raise Unsupported(f"an object key must be a name or a string, found {_show(k2, key)}")
                self.expect(":")
                pairs.append((key, self.expression()))
                if self.peek() == ("op", ","):
                    self.take()
                elif self.peek() != ("op", "}"):
                    raise Unsupported(f"expected ',' or '}}', found {_show(*self.peek())}")
            self.take()
            return ("object", pairs)
        raise Unsupported(f"unexpected {_show(kind, value)}")


def _show(kind: str, value: Any) -> str:
    return "the end of the expression" if kind == "end" else repr(value)


def _why_not(op: str) -> str:
    if op == "=":
        return "an assignment inside an expression is not supported (use <assign>)"
    if op == "?":
        return "the conditional operator ?: is not supported"
    return f"the bitwise operator {op!r} is not supported"


def parse(text: str) -> Node:
    """The syntax tree of ``text``; :class:`Unsupported` if it is not in the subset's grammar."""
    if len(text) > MAX_LENGTH:
        raise Unsupported(f"longer than {MAX_LENGTH} characters")
    parser = _Parser(text)
    node = parser.expression()
    kind, value = parser.peek()
    if kind != "end":
        raise Unsupported(f"unexpected {_show(kind, value)} after a complete expression")
    return node


@dataclass(frozen=True, slots=True)
class Computed:
    """A part of a bound system variable that the document does not fix but durastate computes: ``value`` is
    the durastate VALUE that reads it (an I/O processor's ``location``, from ``_sessionid``)."""

    value: Any


def _resolved(value: Any) -> Any:
    """A bound constant with each :class:`Computed` part replaced by the VALUE that computes it."""
    if isinstance(value, Computed):
        return value.value
    if isinstance(value, dict):
        return {k: _resolved(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v) for v in value]
    return value


def bind(node: Node, constants: Mapping[str, Any]) -> Node:
    """``node`` with each variable named in ``constants`` replaced by its value as a literal: the system
    variables whose value the document fixes (SCXML's ``_name`` is the ``<scxml name>``, ``_ioprocessors``
    the processors it has). A key may name a member (``_event.data``: the ``<donedata>`` of the done event a
    transition handles); a member of a bound value is read now (:class:`Unsupported` if it has none)."""
    path = _path(node)
    if path is not None:
        dotted = ".".join(str(p) for p in path)
        if dotted in constants:
            return ("lit", constants[dotted])
    if node[0] == "member":
        base = bind(node[1], constants)
        if base[0] == "lit" and isinstance(base[1], Computed) and isinstance(base[1].value, str):
            # a member of a bound reference (``_event.data.x`` where _event.data is ``$event.content``)
            return ("lit", Computed(_reference([base[1].value, node[2]], ())))
        if base[0] == "lit":
            return ("lit", _member(base[1], node[2], _render(node)))
        return ("member", base, node[2])

    def part(item: Any) -> Any:
        if isinstance(item, tuple) and item and isinstance(item[0], str):
            return bind(item, constants)
        if isinstance(item, list):
            return [part(i) for i in item]
        return item

    return tuple(part(item) for item in node)


def _member(value: Any, key: str | int, text: str) -> Any:
    """``value[key]`` of a constant; :class:`Unsupported` where it has no such member."""
    if isinstance(value, dict) and isinstance(key, str) and key in value:
        return value[key]
    if isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
        return value[key]
    raise Unsupported(f"{text} has no value the document fixes")


def _render(node: Node) -> str:
    """A short rendering of a node for messages."""
    if node[0] == "name":
        return str(node[1])
    if node[0] == "member":
        return f"{_render(node[1])}.{node[2]}"
    if node[0] == "call":
        return f"{_render(node[1])}(...)"
    if node[0] == "lit":
        return repr(node[1])
    if node[0] == "unary":
        return f"{node[1]} {_render(node[2])}" if node[1] == "typeof" else f"{node[1]}{_render(node[2])}"
    return str(node[0])


def _path(node: Node) -> list[str | int] | None:
    """``a.b[0]`` -> ``['a', 'b', 0]``; ``None`` if the node is not a variable or a member of one."""
    if node[0] == "name":
        return [node[1]]
    if node[0] == "member":
        base = _path(node[1])
        return None if base is None else [*base, node[2]]
    return None


_META = {"type": "kind", "sendid": "send_id", "origin": "origin", "origintype": "origin_type"}
"""SCXML's ``_event`` fields that durastate keeps with an event, read as ``$meta.<key>``
(:data:`durastate.engine.expressions.META_KEYS`)."""


def _reference(parts: list[str | int], variables: Collection[str]) -> str:
    keys = [str(p) for p in parts]
    for k in keys[1:]:
        if not k or "." in k or k.startswith("$") or any(c.isspace() for c in k):
            raise Unsupported(f"the member name {k!r} cannot be part of a durastate reference")
    head, rest = keys[0], keys[1:]
    if head.startswith("$"):
        return ".".join(keys)  # a member of a durastate reference (bind)
    if head == "_event":
        if not rest:
            return "$event"
        if rest[0] == "name" and len(rest) == 1:
            return "$event.name"
        if rest[0] == "data":
            return "$event." + ".".join(rest[1:]) if len(rest) > 1 else "$event.data"
        if rest[0] in _META and len(rest) == 1:
            return "$meta." + _META[rest[0]]
        raise Unsupported(f"_event.{'.'.join(rest)} has no durastate equivalent (only _event.name, data, type, "
                          "sendid, origin and origintype)")
    if head.startswith("_") and head in ("_sessionid", "_name", "_ioprocessors", "_x") and head not in variables:
        raise Unsupported(f"the system variable {head} has no durastate equivalent")
    if head not in variables:
        raise Unsupported(f"{head!r} is not a variable of the datamodel (declare it with <data id=...>)")
    return "$context." + ".".join(keys)


def to_value(node: Node, variables: Collection[str]) -> Any:
    """A durastate VALUE for ``node`` (a constant, a ``$`` reference or an operator)."""
    kind = node[0]
    if kind == "lit":
        value = node[1]
        if isinstance(value, Computed | dict | list):
            return _resolved(value)
        return "$" + value if isinstance(value, str) and value.startswith("$") else value
    path = _path(node)
    if path is not None:
        return _reference(path, variables)
    if kind == "array":
        return [to_value(item, variables) for item in node[1]]
    if kind == "object":
        out = {key: to_value(v, variables) for key, v in node[1]}
        if len(out) == 1 and next(iter(out)) in VALUE_OPS:
            raise Unsupported(f"an object with the single key {next(iter(out))!r} would read as an operator")
        return out
    if kind == "unary" and node[1] == "typeof":
        raise Unsupported("typeof maps only compared with 'undefined' (typeof x === 'undefined')")
    if kind == "unary" and node[1] == "-":
        inner = to_value(node[2], variables)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner
        return {"sub": [0, inner]}
    if kind == "bin" and node[1] in _ARITH:
        return {_ARITH[node[1]]: [to_value(node[2], variables), to_value(node[3], variables)]}
    if kind == "bin" and node[1] == "%":
        raise Unsupported("the remainder operator % is not supported")
    if kind == "call" and node[1][0] == "member" and node[1][2] == "concat" and node[2]:
        # a.concat(b, c): durastate's add joins two arrays (or two strings); anything else fails the step
        # (error.execution), where ECMAScript would append it as an element
        out = to_value(node[1][1], variables)
        for arg in node[2]:
            out = {"add": [out, to_value(arg, variables)]}
        return out
    if kind == "call":
        raise Unsupported(f"the call {_render(node[1])}() is outside the supported subset (no code is run)")
    if kind in ("bin", "unary"):
        raise Unsupported(f"the operator {node[1]!r} does not give a value durastate can compute here")
    raise Unsupported(f"{kind} is not supported")


def to_guard(node: Node, variables: Collection[str], states: Mapping[str, str] | None = None) -> Any:
    """A durastate GUARD for ``node`` (a comparison, ``and``/``or``/``not`` of guards, ``In()``, or a constant).

    ``states`` maps each state id of the chart to its full dotted path: ``In('id')`` becomes ``{in_state:
    PATH}`` (durastate's ``in_state`` reads a path, and SCXML ids are global, so the path is the whole one)."""
    kind = node[0]
    if kind == "lit" and isinstance(node[1], bool):
        return node[1]
    if kind == "bin" and node[1] in ("&&", "||"):
        op = "and" if node[1] == "&&" else "or"
        parts: list[Any] = []
        for side in (node[2], node[3]):
            g = to_guard(side, variables, states)
            parts.extend(g[op] if isinstance(g, dict) and op in g else [g])
        return {op: parts}
    if kind == "unary" and node[1] == "!":
        return {"not": to_guard(node[2], variables, states)}
    if kind == "bin" and node[1] in _COMPARE:
        typed = _typeof_guard(node, variables)
        if typed is not None:
            return typed
        return {_COMPARE[node[1]]: [to_value(node[2], variables), to_value(node[3], variables)]}
    if kind == "bin" and node[1] == "in":
        return _in_event(node)
    if kind == "call" and _path(node[1]) == ["In"]:
        return _in_state(node[2], states or {})
    if _path(node) == ["_event"]:
        # bound once the session processed its first event: what durastate starts an execution with is not
        # one (SCXML runs the initial entry before any event)
        return {"ne": ["$event.name", START]}
    if kind == "call":
        raise Unsupported(f"the call {_render(node[1])}() is outside the supported subset (no code is run)")
    try:
        value = to_value(node, variables)
    except Unsupported as exc:
        raise Unsupported(f"{_render(node)} as a condition: {exc}") from None
    # ECMAScript truthiness of a JSON value: false exactly for null/undefined, false, 0 and "" (Python's
    # == agrees: 0 == 0.0 == False, and [] / {} are equal to none of them, so they are true, as in JS)
    return {"not": {"in": [value, [None, False, 0, ""]]}}


_EVENT_FIELDS = ("name", "type", "sendid", "origin", "origintype", "invokeid", "data")
"""The fields SCXML's ``_event`` always has (some of them undefined)."""


def _in_event(node: Node) -> Any:
    """``'key' in _event``: a constant (``_event`` always has SCXML's fields, whatever the event)."""
    if node[3] != ("name", "_event") or node[2][0] != "lit" or not isinstance(node[2][1], str):
        raise Unsupported("the operator 'in' maps only as 'field' in _event (a string constant)")
    return node[2][1] in _EVENT_FIELDS


def _typeof_guard(node: Node, variables: Collection[str]) -> Any:
    """``typeof X === 'undefined'`` (or ``==``, ``!==``, ``!=``; either side) as a guard: whether ``X`` has a
    value. JSON, and so a durastate context or event, has no ``undefined``: a variable declared without a
    value, never assigned, or a field the event lacks reads as ``null``, and is what ``undefined`` means
    here (``typeof null`` is ``'object'`` in ECMAScript: a variable explicitly set to ``null`` differs). An
    event's data is undefined when it has none (durastate's is then empty). ``None``: no ``typeof`` here;
    :class:`Unsupported` for another type name."""
    op, left, right = node[1], node[2], node[3]
    if right[0] == "unary" and right[1] == "typeof":
        left, right = right, left
    if left[0] != "unary" or left[1] != "typeof":
        return None
    if right[0] != "lit" or right[1] != "undefined" or op not in ("==", "===", "!=", "!=="):
        raise Unsupported("typeof maps only compared with 'undefined' (typeof x === 'undefined')")
    ref = to_value(left[2], variables)
    if ref == "$event.data":
        defined: Any = {"ne": [ref, {}]}
    elif isinstance(ref, str) and ref.startswith("$") and not ref.startswith("$$"):
        defined = {"exists": ref}
    elif not _has_ops(ref):
        defined = ref is not None  # a constant the document fixes (a bound system variable)
    else:
        raise Unsupported("typeof maps only on a variable or an event field")
    undefined = op in ("==", "===")
    if isinstance(defined, bool):
        return defined != undefined
    return {"not": defined} if undefined else defined


def _has_ops(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in VALUE_OPS


def _in_state(args: list[Node], states: Mapping[str, str]) -> Any:
    """``In('id')`` as ``{in_state: PATH}``: one string constant naming a state of the chart."""
    if len(args) != 1 or args[0][0] != "lit" or not isinstance(args[0][1], str):
        raise Unsupported("In() takes one state id written as a string constant ('s1')")
    ident = args[0][1]
    path = states.get(ident)
    if path is None:
        raise Unsupported(f"In({ident!r}): no state with the id {ident!r}")
    return {"in_state": path}
