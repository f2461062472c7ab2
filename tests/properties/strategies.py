"""Hypothesis strategies: message bodies valid and invalid, event sequences, and how they are encoded.

Valid messages are built with placeholders for everything that names an execution (:class:`Ref`,
:class:`ChildOf`), must agree with stored state (:class:`ArmedAt`, :class:`StatusOf`) or is an id the
runtime derives (:class:`DerivedId`); the driver resolves them in the example's namespace just before
delivery (:func:`materialize`), so the same drawn sequence means the same thing in any namespace of any
store. Inside :func:`sequences`, :class:`Live` / :class:`LiveChild` / :class:`Own` stand for "one of the
executions this sequence started" and are bound when the sequence is drawn (the strategies themselves
stay static, which keeps drawing cheap).
"""

from __future__ import annotations

import functools
import json
import math
import reprlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from durastate.engine import ids as _ids
from durastate.engine.ids import (
    MAX_ID_LENGTH,
    child_execution_id,
    emit_event_id,
    finished_event_id,
    start_event_id,
    timeout_event_id,
)
from durastate.store.base import ExecutionStore

from .definitions import NATURAL, STATE_PATHS, USER_EVENTS
from .harness import PREFIX_LEN

# -- placeholders -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """The execution ``name`` of the example's namespace (``prefix + name``)."""

    name: str


@dataclass(frozen=True)
class ChildOf:
    """The ``n``-th child (region or invoke) of execution ``parent``."""

    parent: str
    n: int


@dataclass(frozen=True)
class ArmedAt:
    """The ``fire_at`` the execution ``name`` has armed for ``path`` right now (0.0 when none): a forged
    timeout that is nevertheless true."""

    name: str
    path: str


@dataclass(frozen=True)
class StatusOf:
    """The stored status of the ``n``-th child of ``parent`` (``"running"`` when it does not exist)."""

    parent: str
    n: int


@dataclass(frozen=True)
class DerivedId:
    """An event id the runtime derives for its own events, claimed by a producer's message first:
    ``start`` (of ``name``), ``timeout`` (of its timer at ``path``, as armed now), ``emit`` (the first
    event its next step emits) or ``finished`` (the notice of its ``n``-th child)."""

    kind: str
    name: Any
    n: int = 1
    path: str = "waiting"


@dataclass(frozen=True)
class Message:
    body: Any
    """The envelope (a dict with placeholders) — or, for invalid messages, anything at all."""
    form: str
    """How it goes on the wire: ``mapping``, ``text``, ``ascii`` (JSON text, non-ASCII escaped),
    ``bytes``, ``bytearray``, or ``raw`` (``body`` is passed to ``parse_envelope`` as it is)."""


@dataclass(frozen=True)
class Tick:
    """Advance the clock (timers fall due and the sweeper fires them)."""

    seconds: float


def materialize(value: Any, prefix: str, store: ExecutionStore) -> Any:
    """``value`` with its placeholders resolved in namespace ``prefix`` of ``store``."""
    if isinstance(value, Ref):
        return prefix + value.name
    if isinstance(value, ChildOf):
        return child_execution_id(prefix + value.parent, value.n)
    if isinstance(value, ArmedAt):
        exe = store.load(prefix + value.name)
        return exe.timers.get(value.path, 0.0) if exe is not None else 0.0
    if isinstance(value, StatusOf):
        exe = store.load(child_execution_id(prefix + value.parent, value.n))
        return exe.status if exe is not None else "running"
    if isinstance(value, DerivedId):
        eid = prefix + value.name
        if value.kind == "start":
            return start_event_id(eid)
        if value.kind == "finished":
            return finished_event_id(child_execution_id(eid, value.n))
        exe = store.load(eid)
        if value.kind == "timeout":
            return timeout_event_id(eid, value.path, exe.timers.get(value.path, 0.0) if exe is not None else 0.0)
        return emit_event_id(eid, (exe.version if exe is not None else 0) + 1, 1)
    if isinstance(value, dict):
        return {materialize(k, prefix, store): materialize(v, prefix, store) for k, v in value.items()}
    if isinstance(value, list):
        return [materialize(v, prefix, store) for v in value]
    return value


def encode(body: Any, form: str) -> Any:
    """``body`` in wire form ``form`` (see :class:`Message`)."""
    if form in ("mapping", "raw"):
        return body
    text = json.dumps(body, ensure_ascii=(form == "ascii"))
    if form == "bytes":
        return text.encode("utf-8", "surrogatepass")  # a lone surrogate makes it invalid UTF-8: refused
    if form == "bytearray":
        return bytearray(text.encode("utf-8", "surrogatepass"))
    return text


FORMS = st.sampled_from(["mapping", "text", "ascii", "bytes"])

# -- JSON values within the entry rules ---------------------------------------------------------------

SPECIAL_STRINGS = [
    "", "\x00", "a\x00b", "\x00\x00", "\ud800", "\udfff", "a\udc80b", "\ud83d", "\ufeff", "\u2028\u2029",
    "\x7f", "\x1b[31m", "\x85", "💥", "\U0010ffff", "'", '"', "\\", "\\u0000", "\\ud800", "NaN", "Infinity",
    "-0", "1e400", "$context.count", "$$", "$event", "durastate.start", "~", "a~1", "null", "e\u0301",
    "\r\n", "\t", " ", "\U0001d518\U0001d52b\U0001d526", "%00", "\U0001f600" * 3,
]
SPECIAL_INTS = [0, -1, 1, 2**31, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, -(2**63), 2**64, 2**70,
                -(2**70), 10**20]
huge_ints = st.sampled_from([300, -300, 4299, -4299]).map(lambda e: (10 ** abs(e) + 7) * (1 if e > 0 else -1))
"""Up to the largest integers (4300 digits) that JSON text on the wire still carries (built lazily: a
4300-digit literal in a strategy's repr makes every report huge)."""
SPECIAL_FLOATS = [0.0, -0.0, 1e308, -1e308, 1.7976931348623157e308, 5e-324, -5e-324, 2.2250738585072014e-308,
                  0.1, 1e16, 1e-7, 123456789.123456789, 2.0**53, 1e22, 1e23]
SPECIAL_KEYS = ["", ".", "a.b", "a..b", "$", "$context", "count", "peer", "n", "last", "__proto__", "\x00",
                "a\x00", "\ud800", "💥", " ", "by", "a", "b", "v", "to", "data", "id", "~"]

ints = st.one_of(st.integers(-10, 10), st.sampled_from(SPECIAL_INTS), st.integers(-(2**80), 2**80), huge_ints)
floats = st.one_of(st.sampled_from(SPECIAL_FLOATS), st.floats(allow_nan=False, allow_infinity=False))
strings = st.one_of(
    st.text(max_size=10),
    st.sampled_from(SPECIAL_STRINGS),
    st.lists(st.one_of(*[st.characters()] * 7, st.integers(0xD800, 0xDFFF).map(chr)), max_size=6).map("".join),
)
keys = st.one_of(st.sampled_from(SPECIAL_KEYS), st.text(max_size=6))
scalars = st.one_of(st.none(), st.booleans(), ints, floats, strings)


def chain(depth: int, leaf: Any = None, kind: str = "dict") -> Any:
    """``depth`` nested containers (the innermost holds ``leaf``, or is empty)."""
    value: Any = leaf
    for i in range(depth):
        if kind == "list" or (kind == "mix" and i % 2):
            value = [] if value is None and i == 0 else [value]
        else:
            value = {} if value is None and i == 0 else {"k": value}
    return value


deep_but_allowed = st.builds(chain, st.sampled_from([60, 62, 63]), st.none(), st.sampled_from(["dict", "list", "mix"]))
"""At ``data[key]`` a chain of 63 puts its innermost container at depth 63 of the data: the deepest
the entry rules allow (``MAX_DEPTH`` = 64 levels, counting the data object itself as the first)."""


def json_values(leaves: st.SearchStrategy[Any] = scalars) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
        max_leaves=10,
    )


values = json_values()


@st.composite
def rarely(draw: st.DrawFn, usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], one_in: int = 12) -> Any:
    return draw(rare) if draw(st.integers(0, one_in - 1)) == 0 else draw(usual)


big_strings = st.sampled_from([3_000, 70_000, 450_000]).map(lambda n: "x" * n)
"""Large payloads: the 450 kB one is over DynamoDB's item limit (typed ExecutionTooLarge there)."""

# -- names --------------------------------------------------------------------------------------------

BASE_NAMES = ["c1", "c2", "k1", "k2", "f1", "i1"]
ODD_NAMES = ["é", "💥", "a.b", "a b", "a/b", "%25", "\u200b", "ⅷ", "x~1", "k.1", "\\", "'", "\ufeff"]
LONG_NAMES = ["c" + "L" * (MAX_ID_LENGTH - PREFIX_LEN - 1), "k" + "M" * (MAX_ID_LENGTH - PREFIX_LEN - 2),
              "f" + "F" * (MAX_ID_LENGTH - PREFIX_LEN - 1), "i" + "I" * (MAX_ID_LENGTH - PREFIX_LEN - 3)]
"""Ids of 128, 127 and 125 characters (with the prefix): their children's ids are hashed."""


def exec_names(long_ids: bool = True) -> st.SearchStrategy[str]:
    pool = BASE_NAMES + ODD_NAMES + (LONG_NAMES if long_ids else [])
    return st.one_of(st.sampled_from(BASE_NAMES), st.sampled_from(pool))


def targets(long_ids: bool = True) -> st.SearchStrategy[Any]:
    names = exec_names(long_ids)
    return st.one_of(
        names.map(Ref),
        st.builds(ChildOf, names, st.integers(1, 3)),
        st.sampled_from(["x1", "f1~1", "i1~1", "n0000-c1"]).map(Ref),  # never started / never derived
    )


id_chars = st.characters(exclude_categories=("Cc", "Cs"))
valid_ids = st.one_of(
    st.sampled_from(["e1", "e2", "e3", "e4"]),
    st.text(id_chars, min_size=1, max_size=12),
    st.sampled_from(["é", "💥", "a.b", "~", "x" * MAX_ID_LENGTH, "\U0010ffff" * MAX_ID_LENGTH, "\u200b"]),
)
"""Event ids within the rules (printable, at most 128 characters)."""

RESERVED_NAMES = sorted(getattr(_ids, "RESERVED", {_ids.START, _ids.TIMEOUT, _ids.FINISHED, _ids.CANCEL}))
OTHER_NAMES = ["nonsense", "error", "error.x", "durastate", "Durastate.start", "durastate.bogus",
               "durastate.done.both", "durastate.error.calling", "durastate.done.calling", "*", "💥"]
STATUSES = ["finished", "failed", "cancelled", "running", "bogus"]

# -- valid envelopes ----------------------------------------------------------------------------------


def _envelope(target: Any, eid: Any, name: str, data: Any, omit_data: bool) -> dict[str, Any]:
    event: dict[str, Any] = {"id": eid, "name": name}
    if not omit_data:
        event["data"] = data
    return {"target_id": target, "event": event}


extra_keys = keys.filter(lambda k: k not in ("a", "b"))
"""Random keys of event data: not the operands of ``mul`` (see :data:`mul_operands`)."""


def data_with(fields: dict[str, st.SearchStrategy[Any]],
              required: dict[str, st.SearchStrategy[Any]] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Event data: ``required``, some of ``fields``, and random keys (drawn first: the named ones win)."""
    return st.builds(lambda extra, named: {**extra, **named},
                     st.dictionaries(extra_keys, rarely(values, big_strings), max_size=3),
                     st.fixed_dictionaries(required or {}, optional=fields))


def messages(target: st.SearchStrategy[Any], name: st.SearchStrategy[str],
             data: st.SearchStrategy[dict[str, Any]], ids: st.SearchStrategy[Any] = valid_ids
             ) -> st.SearchStrategy[Message]:
    return st.builds(Message, st.builds(_envelope, target, ids, name, data, st.booleans()), FORMS)


numbers = st.one_of(ints, floats)
extreme_numbers = st.one_of(
    st.sampled_from([1e308, -1e308, 1.7976931348623157e308, 5e-324, -0.0, 2**70, -(2**63), 0.5, 3]), huge_ints
)
"""Numbers whose sums and products leave what JSON carries (infinity, integers over 4300 digits)."""
hostile_targets = st.sampled_from(["a\x00b", "\x00", "x" * 300, "\ud800", "", "a~1", "~", "\x1b", " "])
"""Execution ids a definition may be handed (``send: {to: $event.to}``) that no user could start."""
mul_operands = st.one_of(
    extreme_numbers, huge_ints, floats, strings, st.integers(-3, 1000),
    st.sampled_from([v for v in SPECIAL_INTS if abs(v) < 10**4 or abs(v) >= 2**50]),
    st.lists(st.one_of(st.none(), st.booleans(), strings), max_size=3),
)
"""What KEEPER's ``mul`` multiplies (``a`` and ``b`` alike). A string or list times an integer is a
repetition in the engine (see ``test_regressions.py::test_mul_of_a_string_and_a_count_is_refused``), so
no operand may be an integer in the range that would make the test process allocate gigabytes: they are
small, or so large that Python refuses at once (OverflowError/MemoryError, which fail the execution);
all of them drawn with ``sampled_from`` or bounded, so shrinking cannot move them into that range."""


EVENTS_OF = {
    "counter": ["inc", "wait", "stop", "poke", "rearm"],
    "fork": ["go"],
    "invoker": [],
    "keeper": ["put", "set", "add", "mul", "mul2", "mul3", "wrap", "tell", "note", "wait", "close"],
}


def _definition_of(name: str) -> str:
    return NATURAL.get(name[:1], "keeper")


@dataclass(frozen=True)
class Live:
    """The ``i``-th (mod how many) execution the sequence starts; :func:`sequences` resolves it to a
    :class:`Ref` (the strategies stay static, which keeps drawing cheap)."""

    i: int


@dataclass(frozen=True)
class LiveChild:
    i: int
    n: int


@dataclass(frozen=True)
class Own:
    """An event of a started execution's own definition (or of its child's), resolved by :func:`sequences`."""

    i: int
    event: str
    eid: str
    data: dict[str, Any]
    child: int | None
    form: str


@dataclass(frozen=True)
class StartSpec:
    eid: str | None
    data: dict[str, Any]
    form: str

    def message(self, name: str) -> Message:
        data = {"definition_id": _definition_of(name), **self.data}
        eid = self.eid or DerivedId("start", name)  # the id LocalRuntime.start and the client derive
        return Message(_envelope(Ref(name), eid, _ids.START, data, False), self.form)


@functools.lru_cache
def _steps(long_ids: bool) -> tuple[st.SearchStrategy[StartSpec], st.SearchStrategy[Any]]:
    names = exec_names(long_ids)
    live = st.integers(0, 3).map(Live)
    event_ids = st.one_of(valid_ids, valid_ids, valid_ids, st.builds(
        DerivedId, st.sampled_from(["start", "timeout", "emit", "finished"]), live, st.integers(1, 2)))
    refs = st.one_of(live, live, names.map(Ref))
    target = st.one_of(live, live, live, st.builds(LiveChild, st.integers(0, 3), st.integers(1, 2)),
                       targets(long_ids))
    children = st.builds(LiveChild, st.integers(0, 3), st.integers(1, 3))
    context = st.one_of(
        st.dictionaries(keys, values, max_size=4),
        data_with({"peer": st.one_of(refs, hostile_targets, strings), "n": st.one_of(numbers, strings),
                   "count": st.one_of(numbers, strings), "d": deep_but_allowed}),
    )
    start_spec = st.builds(StartSpec, st.one_of(st.none(), valid_ids),
                           st.fixed_dictionaries({}, optional={"context": context}), FORMS)
    to = st.one_of(refs, hostile_targets, strings)
    user_data = data_with({"by": st.one_of(numbers, values), "a": mul_operands, "b": mul_operands, "v": values,
                           "to": to, "d": deep_but_allowed})
    mul_data = data_with({}, {"a": mul_operands, "b": mul_operands})
    event_data = {  # what each event of KEEPER and COUNTER reads, with extreme values often
        "add": data_with({}, {"by": st.one_of(extreme_numbers, numbers, values)}),
        "mul": mul_data, "mul2": mul_data, "mul3": mul_data,
        "set": data_with({"v": st.one_of(values, deep_but_allowed), "d": deep_but_allowed}),
        "wrap": data_with({"d": deep_but_allowed, "v": values}),
        "tell": data_with({"to": to, "d": deep_but_allowed, "v": values}),
        "put": data_with({"d": deep_but_allowed, "v": values}),
    }
    own = st.one_of(*[
        st.builds(Own, st.integers(0, 3), st.just(e), event_ids, event_data.get(e, user_data),
                  st.one_of(st.none(), st.integers(1, 2)), FORMS)
        for e in sorted({e for es in EVENTS_OF.values() for e in es})
    ])
    wild_start = messages(target, st.just(_ids.START), data_with({
        "definition_id": st.one_of(st.sampled_from(["counter", "fork", "keeper", "invoker", "nope", ""]), values),
        "context": st.one_of(context, values),
        "parent_id": st.one_of(refs, values),
        "child_id": st.one_of(target, values),
        "root_path": st.one_of(st.sampled_from(STATE_PATHS), values),
    }))
    any_user = messages(target, st.one_of(st.sampled_from(USER_EVENTS), st.sampled_from(OTHER_NAMES),
                                          st.text(id_chars, min_size=1, max_size=8)), user_data, event_ids)
    timeout = messages(target, st.just(_ids.TIMEOUT), data_with({
        "path": st.one_of(st.sampled_from(STATE_PATHS), strings),
        "fire_at": st.one_of(st.builds(ArmedAt, live, st.sampled_from(["waiting", "idle"])), numbers, values),
    }))
    finished = messages(target, st.just(_ids.FINISHED), data_with({
        "child_id": st.one_of(children, refs, values),
        "status": st.one_of(st.builds(StatusOf, live, st.integers(1, 3)), st.sampled_from(STATUSES), values),
        "outcome": values, "output": values, "error": values,
    }))
    other_reserved = messages(target, st.sampled_from(RESERVED_NAMES + OTHER_NAMES[3:9]), data_with({}), event_ids)
    tick = st.builds(Tick, st.sampled_from([1.0, 5.0, 29.5, 30.0, 31.0, 3600.0]))
    restart = st.builds(lambda name, spec: spec.message(name), names, start_spec)
    step = st.one_of(own, own, own, own, own, any_user, restart, timeout, finished, other_reserved, wild_start, tick)
    return start_spec, step


@st.composite
def sequences(draw: st.DrawFn, long_ids: bool = True, max_size: int = 10) -> list[Any]:
    """Starts of 1-4 executions, then 3-``max_size`` steps: mostly events for them (and their
    children) of their own definitions, and every other kind of message, and clock ticks."""
    start_spec, step = _steps(long_ids)
    started = draw(st.lists(exec_names(long_ids), min_size=1, max_size=3, unique=True))
    if "k1" not in started and draw(st.booleans()):
        started.append("k1")  # KEEPER carries event data into the context and onward: most worth testing
    preamble = [draw(start_spec).message(name) for name in started]
    steps = draw(st.lists(step, min_size=3, max_size=max_size))
    return [_resolve(s, started) for s in preamble + steps]


def _resolve(value: Any, started: list[str]) -> Any:
    """``value`` with :class:`Live`, :class:`LiveChild` and :class:`Own` bound to the started executions."""
    if isinstance(value, Live):
        return Ref(started[value.i % len(started)])
    if isinstance(value, LiveChild):
        return ChildOf(started[value.i % len(started)], value.n)
    if isinstance(value, ArmedAt | StatusOf) and isinstance(value.name if isinstance(value, ArmedAt)
                                                              else value.parent, Live):
        who = _resolve(value.name if isinstance(value, ArmedAt) else value.parent, started).name
        return ArmedAt(who, value.path) if isinstance(value, ArmedAt) else StatusOf(who, value.n)
    if isinstance(value, DerivedId) and isinstance(value.name, Live):
        return DerivedId(value.kind, started[value.name.i % len(started)], value.n, value.path)
    if isinstance(value, Own):
        # the execution that has this event (a started one of a definition that knows it), else the i-th
        having = [n for n in started if value.event in EVENTS_OF[_definition_of(n)]]
        via_child = [n for n in started if _definition_of(n) == "invoker" and value.event in EVENTS_OF["counter"]]
        via_child += [n for n in started if _definition_of(n) == "fork" and value.event in EVENTS_OF["fork"]]
        if value.child is not None and via_child:
            tgt: Any = ChildOf(via_child[value.i % len(via_child)], value.child)
        elif having:
            tgt = Ref(having[value.i % len(having)])
        else:
            tgt = Ref(started[value.i % len(started)])
        eid = value.eid
        if isinstance(eid, DerivedId) and isinstance(tgt, Ref):  # claim an id of the target's own events
            eid = DerivedId(eid.kind, tgt.name, eid.n, eid.path)
        return Message(_envelope(tgt, _resolve(eid, started), value.event, _resolve(value.data, started),
                                 not value.data),
                       value.form)
    if isinstance(value, Message):
        return Message(_resolve(value.body, started), value.form)
    if isinstance(value, dict):
        return {k: _resolve(v, started) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, started) for v in value]
    return value


# -- invalid messages ---------------------------------------------------------------------------------

NON_FINITE_TOKENS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E999", "123e9999", "-0.5e+400"]
NON_UTF8 = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\x80",
            b"\xe2\x82", b"\xf4\x90\x80\x80", b"\xc3"]
CONTROL = [chr(c) for c in (*range(0, 32), 127, *range(0x80, 0xA0))]
"""Control characters: Unicode category Cc (C0, DEL and C1)."""
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]


class Invalid:
    """An invalid message and which rule it breaks (printed bounded: bodies can be megabytes deep)."""

    def __init__(self, message: Message, why: str) -> None:
        self.message, self.why = message, why

    def __repr__(self) -> str:
        return f"Invalid({self.why!r}, body={short_repr(self.message.body)})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict, _REPR.maxlong = 8, 120, 120, 8, 8, 60


def short_repr(value: Any, limit: int = 300) -> str:
    """``repr(value)`` cut to ``limit`` characters, for values too deep or too large to print whole."""
    try:
        r = _REPR.repr(value)
    except (RecursionError, ValueError):
        r = f"<{type(value).__name__}>"
    return r if len(r) <= limit else r[: limit - 3] + "..."


class _Token:
    """Stands for raw JSON text (a non-finite literal, a deep chain) spliced into the serialised body."""

    def __init__(self, text: str, value: Any) -> None:
        self.text, self.value = text, value

    def __repr__(self) -> str:
        return f"<{self.text[:40]}{'…' if len(self.text) > 40 else ''}>"


def _serialise(body: Any, form: str) -> Any:
    """Encode ``body`` whose leaves may be :class:`_Token` (text forms splice their raw text)."""
    tokens: list[_Token] = []

    def walk(v: Any, text: bool) -> Any:
        if isinstance(v, _Token):
            if not text:
                return v.value
            tokens.append(v)
            return f"@@tok{len(tokens) - 1}@@"
        if isinstance(v, dict):
            return {k: walk(x, text) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, text) for x in v]
        return v

    if form in ("mapping", "raw"):
        return walk(body, False)
    text = json.dumps(walk(body, True), ensure_ascii=(form == "ascii"))
    for i, tok in enumerate(tokens):
        text = text.replace(f'"@@tok{i}@@"', tok.text)
    if form in ("bytes", "bytearray"):
        raw = text.encode("utf-8", "surrogatepass")
        return bytearray(raw) if form == "bytearray" else raw
    return text


def _deep_text(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"k":' * (depth - 1) + "{}" + "}" * (depth - 1)


@st.composite
def invalid_messages(draw: st.DrawFn, target_ids: list[str]) -> Invalid:
    """A message that breaks exactly one rule of the wire format (``why`` says which)."""
    target = draw(st.one_of(st.sampled_from(target_ids), valid_ids))
    name = draw(st.sampled_from(["inc", "put", "add", "wait", "go", _ids.CANCEL, _ids.START]))
    data: dict[str, Any] = draw(st.dictionaries(keys, json_values(st.one_of(st.none(), st.booleans(),
                                                                            st.integers(-9, 9), st.text(max_size=4))),
                                                max_size=3))
    body: Any = {"target_id": target, "event": {"id": draw(valid_ids), "name": name, "data": data}}
    any_form = st.sampled_from(["mapping", "text", "ascii", "bytes", "bytearray"])
    text_form = st.sampled_from(["text", "ascii", "bytes", "bytearray"])
    kind = draw(st.sampled_from(["not-an-object", "missing", "extra", "wrong-type", "bad-id", "non-finite",
                                 "too-deep", "not-json-value", "not-utf8", "syntax", "not-a-body"]))
    form = draw(any_form)
    where = ""

    def nest(poison: Any) -> Any:
        """``poison`` at the bottom of 0-8 random containers."""
        for c in draw(st.lists(st.sampled_from(["list", "dict"]), max_size=8)):
            poison = [poison] if c == "list" else {draw(keys): poison}
        return poison

    if kind == "not-an-object":
        body = draw(st.one_of(st.lists(values, max_size=3), strings, ints, st.none(), st.booleans()))
    elif kind == "missing":
        where = draw(st.sampled_from(["target_id", "event", "event.id", "event.name"]))
        del _parent(body, where)[where.split(".")[-1]]
    elif kind == "extra":
        where = draw(st.sampled_from(["", "event"]))
        holder = body if not where else body["event"]
        key = draw(keys.filter(lambda k: k not in holder))
        holder[key] = draw(values)
    elif kind == "wrong-type":
        where = draw(st.sampled_from(["target_id", "event", "event.id", "event.name", "event.data"]))
        if where == "event.data":
            bad = draw(st.one_of(st.lists(values, max_size=2), strings, ints, floats, st.booleans(), st.none()))
        elif where == "event":
            bad = draw(st.one_of(st.lists(values, max_size=2), strings, ints, st.booleans(), st.none()))
        else:
            bad = draw(st.one_of(ints, floats, st.booleans(), st.none(), st.lists(strings, max_size=2),
                                 st.dictionaries(keys, strings, max_size=2)))
        _parent(body, where)[where.split(".")[-1]] = bad
    elif kind == "bad-id":
        where = draw(st.sampled_from(["target_id", "event.id", "event.name"]))
        holder, key = _parent(body, where), where.split(".")[-1]
        good: str = holder[key]
        how = draw(st.sampled_from(["control", "surrogate", "long", "empty"]))
        if how == "control":
            at = draw(st.integers(0, len(good)))
            ch = draw(st.sampled_from(CONTROL))
            holder[key] = good[:at] + ch + good[at:] if len(good) < MAX_ID_LENGTH else ch + good[1:]
            how = f"control U+{ord(ch):04X}"
        elif how == "surrogate":
            holder[key] = good[: MAX_ID_LENGTH - 1] + draw(st.sampled_from(SURROGATES))
        elif how == "long":
            n = draw(st.sampled_from([MAX_ID_LENGTH + 1, 129, 257, 10_000, 1_000_000]))
            holder[key] = (good * (n // len(good) + 1))[:n]
        else:
            holder[key] = ""
        where = f"{where}: {how}"
    elif kind == "non-finite":
        token = draw(st.sampled_from(NON_FINITE_TOKENS))
        value = float(token)
        assert not math.isfinite(value)
        placed = nest(_Token(token, value))
        if draw(st.booleans()) or name != _ids.START:
            data[draw(keys)] = placed
        else:
            data["context"] = {"x": placed}
        where = token
    elif kind == "too-deep":
        depth = draw(st.sampled_from([64, 65, 100, 1000, 5000]))
        shape = draw(st.sampled_from(["dict", "list"]))
        data[draw(keys)] = _Token(_deep_text(depth, shape), chain(depth, None, shape))
        where = f"{depth} {shape}s"
    elif kind == "not-json-value":
        form = "mapping"
        bad = draw(st.sampled_from([(1, 2), {1, 2}, b"bytes", Decimal("1.5"), object(), 1j, {1: "one"},
                                    {"k": {2: "two"}}, float("nan"), [float("inf")], range(3)]))
        data[draw(keys)] = nest(bad)
        where = type(bad).__name__
    elif kind == "not-utf8":
        form = "bytes"
        raw = _serialise(body, "bytes")
        at = draw(st.integers(0, len(raw)))
        bad_bytes = draw(st.sampled_from(NON_UTF8))
        body = raw[:at] + bad_bytes + raw[at:]
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:  # pragma: no cover - every NON_UTF8 sequence is invalid wherever it lands
            assume(False)
        return Invalid(Message(body, "raw"), f"not-utf8 {bad_bytes!r} at byte {at}")
    elif kind == "syntax":
        form = draw(text_form)
        text = _serialise(body, "text")
        how = draw(st.sampled_from(["truncated", "trailing", "comment", "single-quotes", "empty"]))
        if how == "truncated":
            text = text[: draw(st.integers(0, len(text) - 1))]
        elif how == "trailing":
            text += draw(st.sampled_from(["x", "}", "]", ",", "{}", "0", '"', "\x00"]))
        elif how == "comment":
            text = "// hi\n" + text
        elif how == "single-quotes":
            text = text.replace('"', "'")
        else:
            text = draw(st.sampled_from(["", " ", "\n", "\ufeff"]))
        body = text.encode("utf-8", "surrogatepass") if form in ("bytes", "bytearray") else text
        return Invalid(Message(body, "raw"), f"syntax: {how}")
    elif kind == "not-a-body":
        return Invalid(Message(draw(st.sampled_from([None, 42, 1.5, [body], (body,), object(), memoryview(b"{}")])),
                               "raw"), "not-a-body")
    return Invalid(Message(_serialise(body, form), "raw"), f"{kind} {where} ({form})".strip())


def _parent(body: dict[str, Any], dotted: str) -> dict[str, Any]:
    holder = body
    for part in dotted.split(".")[:-1]:
        holder = holder[part]
    return holder
