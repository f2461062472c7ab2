"""Values, guards and actions of a definition, compiled once at load into plain Python closures.

A definition never contains code to ``eval``: its values are constants, ``$`` references into the
context or the event, and a handful of operators; its guards are comparisons and boolean combinators;
its actions are ``assign``/``send``/``raise``/``log``/``call``. Anything else is a Python callable named
by import path (``"package.module:function"``), imported when the definition is loaded so that a typo
is a validation issue and not a failure at 3 a.m.

Compiling to closures (instead of walking the spec on every step) keeps the interpreter's hot path to a
few function calls. Every ``compile_*`` function appends human-readable issues, each prefixed by the
dotted path of the offending node, instead of raising: the definition loader reports all of them at once.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import math
import operator
import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from durastate.engine.model import Event
from durastate.engine.retry import RetryableFailure, RetryPolicy, parse_retry
from durastate.engine.run_context import ActionFailed
from durastate.engine.timers import BadTimerValue, delay_of
from durastate.engine.values import check_event_id, check_json

if TYPE_CHECKING:
    from durastate.engine.run_context import ActionContext

__all__ = [
    "ACTION_KINDS",
    "ACTIVE",
    "GUARD_OPS",
    "VALUE_OPS",
    "Action",
    "Guard",
    "Issues",
    "Value",
    "action_state_refs",
    "compile_actions",
    "compile_guard",
    "compile_value",
    "declarative_actions",
    "declarative_guard",
    "did_you_mean",
    "resolve_callable",
    "state_refs",
]

Value = Callable[[dict[str, Any], Event], Any]
"""A compiled value: (context, event) -> any JSON value."""
Guard = Callable[[dict[str, Any], Event], bool]
"""A compiled condition: (context, event) -> bool."""
Action = Callable[["ActionContext"], None]
"""A compiled action: it acts on the interpreter's per-step state (context, emits, raised events, logs)."""
Issues = list[str]

_MISSING = object()
_CALLABLE_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def did_you_mean(word: str, candidates: list[str] | tuple[str, ...] | set[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or an empty string."""
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# -- callables ------------------------------------------------------------------------------------------


def resolve_callable(spec: Any, where: str, issues: Issues) -> Callable[..., Any] | None:
    """Import ``"package.module:function"`` (or accept a Python callable as is) now, at load."""
    if callable(spec):
        return spec  # type: ignore[no-any-return]
    if not isinstance(spec, str) or not _CALLABLE_RE.match(spec):
        issues.append(f"{where}: {spec!r} is not a callable reference; write 'package.module:function'")
        return None
    mod_name, _, attr_path = spec.partition(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except Exception as exc:
        issues.append(
            f"{where}: cannot import module {mod_name!r} for {spec!r} ({type(exc).__name__}: {exc})"
        )
        return None
    for part in attr_path.split("."):
        nxt = getattr(obj, part, _MISSING)
        if nxt is _MISSING:
            names = [n for n in dir(obj) if not n.startswith("_")]
            issues.append(f"{where}: {mod_name!r} has no attribute {part!r}{did_you_mean(part, names)}")
            return None
        obj = nxt
    if not callable(obj):
        issues.append(f"{where}: {spec!r} is not callable")
        return None
    return obj  # type: ignore[no-any-return]


# -- values ---------------------------------------------------------------------------------------------


def _getter(root: str, keys: tuple[str, ...]) -> Value:
    """A reference like ``$context.a.b`` or ``$event.amount``; a missing key reads as ``None``."""

    def walk(obj: Any) -> Any:
        for k in keys:
            if isinstance(obj, dict):
                obj = obj.get(k)
            elif isinstance(obj, list) and k.lstrip("-").isdigit():
                i = int(k)
                obj = obj[i] if -len(obj) <= i < len(obj) else None
            else:
                return None
        return obj

    if root == "context":
        if len(keys) == 1:
            k0 = keys[0]
            return lambda ctx, ev: ctx.get(k0)
        return lambda ctx, ev: walk(ctx)
    if root == "event.name":
        return lambda ctx, ev: ev.name
    if root == "event.id":
        return lambda ctx, ev: ev.id
    # event data
    if len(keys) == 1:
        k0 = keys[0]
        return lambda ctx, ev: ev.data.get(k0)
    return lambda ctx, ev: walk(ev.data)


def _reference(text: str, where: str, issues: Issues) -> Value | None:
    parts = text[1:].split(".")
    head, rest = parts[0], tuple(parts[1:])
    if any(p == "" for p in parts):
        issues.append(f"{where}: malformed reference {text!r} (empty segment)")
        return None
    if head == "context":
        if not rest:
            return lambda ctx, ev: ctx
        return _getter("context", rest)
    if head == "event":
        if not rest:
            return lambda ctx, ev: {"id": ev.id, "name": ev.name, "data": ev.data}
        if rest == ("name",):
            return _getter("event.name", ())
        if rest == ("id",):
            return _getter("event.id", ())
        if rest[0] == "data":
            rest = rest[1:]
            if not rest:
                return lambda ctx, ev: ev.data
        return _getter("event", rest)
    if head == "meta":
        if len(rest) != 1 or rest[0] not in META_KEYS:
            issues.append(f"{where}: {text!r}: $meta has {', '.join('$meta.' + k for k in META_KEYS)}")
            return None
        key = rest[0]
        if key == "origin_type":
            return lambda ctx, ev: None if ev.origin is None else SEND_PROCESSOR
        return lambda ctx, ev: getattr(ev, key)
    issues.append(
        f"{where}: unknown reference {text!r}{did_you_mean('$' + head, ['$context', '$event', '$meta'])}; "
        "use $context.<key>, $event.<data key> or $meta.<what is known of the event> (write $$ for a literal '$')"
    )
    return None


META_KEYS = ("kind", "send_id", "origin", "origin_type")
"""What ``$meta`` tells of the event in hand, beyond its name and data (:class:`~durastate.engine.model.Event`):
how it came (``external``, ``internal``, ``platform``), the id of the send that sent it, the execution that
sent it and (while there is one) the processor it came through (SCXML's ``_event.type``, ``sendid``,
``origin``, ``origintype``); ``null`` where there is none."""
SEND_PROCESSOR = "http://www.w3.org/TR/scxml/#SCXMLEventProcessor"
"""``$meta.origin_type`` of an event another execution's ``send`` sent: a durastate send is SCXML's event
I/O processor (an execution addressed by its id), and is named so."""


def _num2(name: str, fn: Callable[[Any, Any], Any]) -> Callable[[list[Value]], Value]:
    def make(args: list[Value]) -> Value:
        a, b = args
        return lambda ctx, ev: fn(a(ctx, ev), b(ctx, ev))

    return make


def _mul(a: Any, b: Any) -> Any:
    """Numbers only: Python's ``*`` also repeats a string or a list, which a chart never means (and a
    large count would build gigabytes)."""
    if not (isinstance(a, int | float) and isinstance(b, int | float)) or isinstance(a, bool) or isinstance(b, bool):
        raise TypeError(f"mul takes two numbers, got {type(a).__name__} and {type(b).__name__}")
    return a * b


def _fold(fn: Callable[[list[Any]], Any]) -> Callable[[list[Value]], Value]:
    def make(args: list[Value]) -> Value:
        return lambda ctx, ev: fn([a(ctx, ev) for a in args])

    return make


def _len(args: list[Value]) -> Value:
    (a,) = args
    return lambda ctx, ev: len(a(ctx, ev))


# name -> (min args, max args or None, builder)
VALUE_OPS: dict[str, tuple[int, int | None, Callable[[list[Value]], Value]]] = {
    "add": (2, 2, _num2("add", operator.add)),
    "sub": (2, 2, _num2("sub", operator.sub)),
    "mul": (2, 2, _num2("mul", _mul)),
    "div": (2, 2, _num2("div", operator.truediv)),
    "min": (1, None, _fold(min)),
    "max": (1, None, _fold(max)),
    "len": (1, 1, _len),
}


def _constant(value: Any) -> Value:
    if isinstance(value, dict | list):
        # A fresh copy per use: a context must never share a mutable object with the definition.
        return lambda ctx, ev: copy.deepcopy(value)
    return lambda ctx, ev: value


def compile_value(spec: Any, where: str, issues: Issues) -> Value:
    """Compile a VALUE: constant, ``$reference``, ``{op: [args]}``, or a dict/list of values."""
    if isinstance(spec, str):
        if spec.startswith("$$"):
            literal = spec[1:]
            return lambda ctx, ev: literal
        if spec.startswith("$"):
            ref = _reference(spec, where, issues)
            return ref if ref is not None else _constant(None)
        return _constant(spec)
    if isinstance(spec, dict):
        if len(spec) == 1:
            ((op, args),) = spec.items()
            if op in VALUE_OPS:
                lo, hi, make = VALUE_OPS[op]
                arg_list = args if isinstance(args, list) else [args]
                if len(arg_list) < lo or (hi is not None and len(arg_list) > hi):
                    want = str(lo) if hi == lo else f"{lo}..{hi if hi is not None else 'n'}"
                    issues.append(f"{where}.{op}: takes {want} argument(s), got {len(arg_list)}")
                    return _constant(None)
                return make([compile_value(a, f"{where}.{op}[{i}]", issues) for i, a in enumerate(arg_list)])
        parts = {str(k): compile_value(v, f"{where}.{k}", issues) for k, v in spec.items()}
        if not _has_refs(spec):
            return _constant(spec)
        return lambda ctx, ev: {k: f(ctx, ev) for k, f in parts.items()}
    if isinstance(spec, list):
        items = [compile_value(v, f"{where}[{i}]", issues) for i, v in enumerate(spec)]
        if not _has_refs(spec):
            return _constant(spec)
        return lambda ctx, ev: [f(ctx, ev) for f in items]
    if isinstance(spec, float) and not math.isfinite(spec):
        issues.append(
            f"{where}: {spec!r} is not a finite number; a definition's values are plain JSON (which has no "
            "NaN or infinity, and stores would keep null)"
        )
        return _constant(None)
    if spec is None or isinstance(spec, bool | int | float):
        return _constant(spec)
    issues.append(f"{where}: {type(spec).__name__} is not a JSON value")
    return _constant(None)


def _has_refs(spec: Any) -> bool:
    if isinstance(spec, str):
        return spec.startswith("$")
    if isinstance(spec, dict):
        if len(spec) == 1 and next(iter(spec)) in VALUE_OPS:
            return True
        return any(_has_refs(v) for v in spec.values())
    if isinstance(spec, list):
        return any(_has_refs(v) for v in spec)
    return False


# -- guards ---------------------------------------------------------------------------------------------


def _safe_cmp(fn: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """Orderings between values that cannot be ordered (a missing field, a string vs a number) are false.

    A durable execution must not fail because an external event lacked a field: the guard just does not
    hold, and the next transition in the list is tried.
    """

    def cmp(a: Any, b: Any) -> bool:
        try:
            return bool(fn(a, b))
        except TypeError:
            return False

    return cmp


_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": _safe_cmp(operator.gt),
    "ge": _safe_cmp(operator.ge),
    "lt": _safe_cmp(operator.lt),
    "le": _safe_cmp(operator.le),
}
GUARD_OPS = (*_CMP, "in", "exists", "not", "and", "or", "in_state")

ACTIVE: ContextVar[Callable[[str], bool]] = ContextVar("durastate_active", default=lambda path: False)
"""What an ``in_state`` guard asks: is this state path in the active configuration? The interpreter sets it
to its step's configuration when the definition has such a guard (guards see only context and event, and
keep that signature); anything that evaluates guards outside a step (explain) sets it the same way."""


def state_refs(spec: Any) -> list[str]:
    """The state paths the ``in_state`` guards in ``spec`` name (checked against the definition's states)."""
    if isinstance(spec, dict):
        out: list[str] = []
        for op, args in spec.items():
            if op == "in_state" and isinstance(args, str):
                out.append(args)
            elif op in ("not", "and", "or"):
                for sub in args if isinstance(args, list) else [args]:
                    out.extend(state_refs(sub))
        return out
    return []


def action_state_refs(specs: Any) -> list[str]:
    """The state paths the ``in_state`` guards of ``choose`` branches in the action list ``specs`` name."""
    out: list[str] = []
    for spec in specs if isinstance(specs, list) else []:
        if not isinstance(spec, dict) or len(spec) != 1:
            continue
        ((kind, args),) = spec.items()
        if kind == "choose" and isinstance(args, list):
            for branch in args:
                if isinstance(branch, dict):
                    out.extend(state_refs(branch.get("guard")))
                    out.extend(action_state_refs(branch.get("actions")))
        elif kind == "foreach" and isinstance(args, dict):
            out.extend(action_state_refs(args.get("actions")))
        elif kind == "block":
            out.extend(action_state_refs(args))
    return out


def _always(value: bool) -> Guard:
    return lambda ctx, ev: value


def compile_guard(spec: Any, where: str, issues: Issues) -> Guard:
    """Compile a GUARD: ``{eq|ne|gt|ge|lt|le: [v, v]}``, ``{in: [v, [..]]}``, ``{exists: ref}``,
    ``{in_state: path}`` (SCXML ``In()``),
    ``{not: G}``, ``{and: [G..]}``, ``{or: [G..]}``, a boolean, or ``"package.module:function"``."""
    if isinstance(spec, bool):
        return _always(spec)
    if isinstance(spec, str) or callable(spec):
        fn = resolve_callable(spec, where, issues)
        if fn is None:
            return _always(False)
        user = fn
        return lambda ctx, ev: bool(user(ctx, ev))
    retried = _with_retry(spec, where, issues) if isinstance(spec, dict) else None
    if retried is not None:
        target, policy = retried
        fn = resolve_callable(target, f"{where}.call", issues)
        if fn is None or policy is None:
            return _always(False)
        checked = _retrying(fn, policy, f"{where}.call")
        return lambda ctx, ev: bool(checked(ctx, ev))
    if not isinstance(spec, dict) or len(spec) != 1:
        issues.append(
            f"{where}: a guard is one of {{{', '.join(GUARD_OPS)}}} with its arguments, "
            "'package.module:function', or {call: 'package.module:function', retry: {...}}"
        )
        return _always(False)
    ((op, args),) = spec.items()
    sub = f"{where}.{op}"
    if op in _CMP:
        if not isinstance(args, list) or len(args) != 2:
            issues.append(f"{sub}: takes a list of 2 values")
            return _always(False)
        a, b = (compile_value(v, f"{sub}[{i}]", issues) for i, v in enumerate(args))
        cmp = _CMP[op]
        return lambda ctx, ev: cmp(a(ctx, ev), b(ctx, ev))
    if op == "in":
        if not isinstance(args, list) or len(args) != 2:
            issues.append(f"{sub}: takes [value, list of values]")
            return _always(False)
        item, pool = compile_value(args[0], f"{sub}[0]", issues), compile_value(args[1], f"{sub}[1]", issues)

        def is_in(ctx: dict[str, Any], ev: Event) -> bool:
            container = pool(ctx, ev)
            try:
                return item(ctx, ev) in container
            except TypeError:
                return False

        return is_in
    if op == "exists":
        if not isinstance(args, str) or not args.startswith("$") or args.startswith("$$"):
            issues.append(f"{sub}: takes a reference like '$event.amount' or '$context.total'")
            return _always(False)
        ref = compile_value(args, sub, issues)
        return lambda ctx, ev: ref(ctx, ev) is not None
    if op == "not":
        inner = compile_guard(args, sub, issues)
        return lambda ctx, ev: not inner(ctx, ev)
    if op == "in_state":
        if not isinstance(args, str) or not args:
            issues.append(f"{sub}: takes a state path, like 'work.upload.done' (true while it is active)")
            return _always(False)
        path = args
        return lambda ctx, ev: ACTIVE.get()(path)
    if op in ("and", "or"):
        if not isinstance(args, list) or not args:
            issues.append(f"{sub}: takes a non-empty list of guards")
            return _always(False)
        parts = [compile_guard(g, f"{sub}[{i}]", issues) for i, g in enumerate(args)]
        if op == "and":
            return lambda ctx, ev: all(p(ctx, ev) for p in parts)
        return lambda ctx, ev: any(p(ctx, ev) for p in parts)
    issues.append(
        f"{where}: unknown guard {op!r}{did_you_mean(str(op), GUARD_OPS)}; "
        f"use one of {', '.join(GUARD_OPS)} or 'package.module:function'"
    )
    return _always(False)


# -- actions --------------------------------------------------------------------------------------------

ACTION_KINDS = ("assign", "send", "cancel", "raise", "log", "call", "choose", "foreach", "fail", "block")
_SEND_KEYS = ("event", "to", "data", "delay", "id", "id_location")
_RAISE_KEYS = ("event", "data")


def _setter(key: str) -> Callable[[dict[str, Any], Any], None]:
    """``assign`` target: ``count`` or a dotted ``customer.address.city`` (intermediate dicts created)."""
    parts = key.split(".")
    if len(parts) == 1:

        def set_top(ctx: dict[str, Any], value: Any) -> None:
            ctx[key] = value

        return set_top
    head, last = parts[:-1], parts[-1]

    def set_nested(ctx: dict[str, Any], value: Any) -> None:
        # Copy-on-write: each dict on the path is replaced by a copy, never changed in place, so a context
        # copied at its top level before a step still holds what it held (the worker's trace and copies).
        obj = ctx
        for p in head:
            nxt = obj.get(p)
            nxt = obj[p] = dict(nxt) if isinstance(nxt, dict) else {}
            obj = nxt
        obj[last] = value

    return set_nested


def _compile_assign(args: Any, where: str, issues: Issues) -> Action | None:
    if not isinstance(args, dict) or not args:
        issues.append(f"{where}: takes a mapping of context keys to values")
        return None
    writes: list[tuple[str, Callable[[dict[str, Any], Any], None], Value]] = []
    for k, v in args.items():
        if not isinstance(k, str) or not k or any(p == "" for p in k.split(".")):
            issues.append(f"{where}: {k!r} is not a context key")
            continue
        writes.append((k, _setter(k), compile_value(v, f"{where}.{k}", issues)))

    def assign(run: ActionContext) -> None:
        ctx, ev = run.exe.context, run.event
        # Evaluate every value before writing any: `{a: $context.b, b: $context.a}` swaps.
        values = [val(ctx, ev) for _, _, val in writes]
        for (key, _, _), value in zip(writes, values, strict=True):
            if type(value) is not int or value.bit_length() > 64:  # a small int needs no look
                try:  # arithmetic can overflow to inf or grow an int past what JSON reads back
                    # The value sits under its key's segments in the context, and the context one level
                    # down in the finished notice that carries it as the output: it must fit there too.
                    check_json(value, f"assign {key}", depth=key.count(".") + 2)
                except ValueError as exc:
                    raise ValueError(f"{exc} (no store could keep it; guard the computation)") from None
        for (_, put, _), value in zip(writes, values, strict=True):
            put(ctx, value)

    return assign


def _check_keys(args: dict[str, Any], allowed: tuple[str, ...], where: str, issues: Issues) -> bool:
    ok = True
    for k in args:
        if k not in allowed:
            issues.append(
                f"{where}.{k}: unknown key{did_you_mean(str(k), allowed)}; allowed: {', '.join(allowed)}"
            )
            ok = False
    if not isinstance(args.get("event"), str) or not args.get("event"):
        issues.append(f"{where}.event: required (the event name)")
        ok = False
    elif str(args["event"]).startswith("durastate."):
        issues.append(f"{where}.event: names starting with 'durastate.' are reserved")
        ok = False
    return ok


def _compile_send(args: Any, where: str, issues: Issues) -> Action | None:
    if not isinstance(args, dict):
        issues.append(f"{where}: takes {{event: NAME, to: parent|self|<id>|'$context.key', data: {{...}}}}")
        return None
    keys_ok = _check_keys(args, _SEND_KEYS, where, issues)
    # The data and `to` are checked even when a key is wrong: every issue comes in the same report.
    data = compile_value(args.get("data") or {}, f"{where}.data", issues)
    to = args.get("to")
    if to is not None and not isinstance(to, str):
        issues.append(f"{where}.to: parent, self, an execution id or a '$context.key' reference")
        return None
    to_value = (
        compile_value(to, f"{where}.to", issues) if isinstance(to, str) and to.startswith("$") else None
    )
    named = _send_id(args, where, issues)
    if not keys_ok or named is None:
        return None
    name: str = args["event"]
    if "delay" in args or ("id" in args and to == "self"):
        return _compile_delayed_send(args, data, where, issues, named)

    def send(run: ActionContext) -> None:
        exe = run.exe
        if to_value is not None:
            got = to_value(exe.context, run.event)
            target = None if got is None else str(got)
        elif to == "parent":
            target = exe.parent_id
        elif to == "self":
            target = exe.id
        else:
            target = to
        if target is not None:
            check_event_id(target, "send target")  # an id no store can key fails the step, not the relay
        payload = data(exe.context, run.event)
        if not isinstance(payload, dict):
            raise TypeError(f"send data must evaluate to a mapping, got {type(payload).__name__}")
        check_json(payload, "send data")  # an event no store could keep must not reach the outbox
        run.emit(target, name, payload, named(run))

    return send


def _send_id(args: dict[str, Any], where: str, issues: Issues) -> Callable[[ActionContext], str | None] | None:
    """What names a send (the event carries it as ``$meta.send_id``): its ``id`` (a constant or computed), or
    with ``id_location`` only, a new id of the execution's (:meth:`~durastate.engine.run.Run.new_send_id`);
    ``id_location`` is the context key the id is assigned to before the event leaves (SCXML's
    ``idlocation``). ``None``: an issue was reported."""
    given, location = args.get("id"), args.get("id_location")
    if given is not None and (not isinstance(given, str) or not given):
        issues.append(f"{where}.id: a send id is a non-empty string or a '$context.key' reference")
        return None
    if location is not None and (not isinstance(location, str) or not location or location.startswith("$")):
        issues.append(f"{where}.id_location: the context key the send's id is assigned to ('last_send')")
        return None
    id_value = None if given is None else compile_value(given, f"{where}.id", issues)
    put = None if location is None else _setter(location)

    def named(run: ActionContext) -> str | None:
        if id_value is None:
            send_id = None if put is None else run.new_send_id()
        else:
            send_id = str(id_value(run.exe.context, run.event))
        if put is not None:
            put(run.exe.context, send_id)
        return send_id

    return named


def _compile_delayed_send(args: dict[str, Any], data: Callable[..., Any], where: str, issues: Issues,
                          named: Callable[[ActionContext], str | None]) -> Action | None:
    """``{send: {event, data, to: self, delay, id}}``: the event reaches the execution itself after ``delay``
    (seconds or a duration, constant or computed when the action runs), through a durable timer that
    outlives the state that sent it; ``id`` (constant or computed) names it for a ``cancel`` action, and a
    later send with the same id replaces it. SCXML's delayed ``<send>``: the data is evaluated when it is
    sent, the event delivered as an external one."""
    if args.get("to") != "self":
        issues.append(f"{where}: a send with a delay or an id goes to the execution itself: add `to: self`")
        return None
    delay = args.get("delay", 0)
    if not (isinstance(delay, str) and delay.startswith("$")):
        try:
            delay_of(delay)
        except BadTimerValue as exc:
            issues.append(f"{where}.delay: {exc}")
            return None
    delay_value = compile_value(delay, f"{where}.delay", issues)
    name: str = args["event"]

    def send_later(run: ActionContext) -> None:
        exe = run.exe
        seconds = delay_of(delay_value(exe.context, run.event))
        send_id = named(run)
        payload = data(exe.context, run.event)
        if not isinstance(payload, dict):
            raise TypeError(f"send data must evaluate to a mapping, got {type(payload).__name__}")
        check_json(payload, "send data")
        run.send_later(send_id, seconds, name, payload)

    return send_later


def _compile_cancel(args: Any, where: str, issues: Issues) -> Action | None:
    """``{cancel: ID}``: drop the pending delayed send with that id (a constant or a reference); nothing
    happens if it was delivered already or never sent. SCXML's ``<cancel sendid|sendidexpr>``."""
    if not isinstance(args, str) or not args:
        issues.append(f"{where}: takes the id of a delayed send: a string or a '$context.key' reference")
        return None
    value = compile_value(args, where, issues)

    def cancel(run: ActionContext) -> None:
        run.cancel_send(str(value(run.exe.context, run.event)))

    return cancel


def _compile_raise(args: Any, where: str, issues: Issues) -> Action | None:
    if isinstance(args, str):
        args = {"event": args}
    if not isinstance(args, dict):
        issues.append(f"{where}: takes {{event: NAME, data: {{...}}}} or an event name")
        return None
    keys_ok = _check_keys(args, _RAISE_KEYS, where, issues)
    data = compile_value(args.get("data") or {}, f"{where}.data", issues)
    if not keys_ok:
        return None
    name: str = args["event"]

    def raise_(run: ActionContext) -> None:
        payload = data(run.exe.context, run.event)
        if not isinstance(payload, dict):
            raise TypeError(f"raise data must evaluate to a mapping, got {type(payload).__name__}")
        run.raise_internal(name, payload)

    return raise_


def _compile_log(args: Any, where: str, issues: Issues) -> Action | None:
    text = compile_value(args, where, issues)

    def log(run: ActionContext) -> None:
        value = text(run.exe.context, run.event)
        run.logs.append(value if isinstance(value, str) else repr(value))

    return log


def _compile_call(args: Any, where: str, issues: Issues, policy: RetryPolicy | None = None) -> Action | None:
    fn = resolve_callable(args, where, issues)
    if fn is None:
        return None
    user = _retrying(fn, policy, where) if policy is not None else fn

    def call(run: ActionContext) -> None:
        out = user(run.exe.context, run.event)
        if out is None:
            return
        if not isinstance(out, dict):
            raise TypeError(
                f"{getattr(user, '__qualname__', user)!s} returned {type(out).__name__}; "
                "a call action returns a dict (merged into the context) or None"
            )
        check_json(out, f"{getattr(user, '__qualname__', user)!s}() result")  # what no store could keep
        run.exe.context.update(out)

    return call


def _compile_choose(args: Any, where: str, issues: Issues) -> Action | None:
    """``{choose: [{guard: G, actions: [...]}, ..., {actions: [...]}]}``: the actions of the first branch whose
    guard holds (a branch without one always does), SCXML's ``<if>``/``<elseif>``/``<else>``; the guards are
    tested when the action runs, so they see what the actions before it assigned."""
    if not isinstance(args, list) or not args:
        issues.append(f"{where}: takes a list of branches {{guard: G, actions: [...]}} (the last may have no guard)")
        return None
    branches: list[tuple[Guard | None, tuple[Action, ...]]] = []
    for i, branch in enumerate(args):
        here = f"{where}[{i}]"
        if not isinstance(branch, dict) or not set(branch) <= {"guard", "actions"}:
            issues.append(f"{here}: a branch is {{guard: G, actions: [...]}}")
            continue
        guard = compile_guard(branch["guard"], f"{here}.guard", issues) if "guard" in branch else None
        body = branch.get("actions") or []
        branches.append((guard, compile_actions(body if isinstance(body, list) else [body], f"{here}.actions",
                                                issues)))

    def choose(run: ActionContext) -> None:
        site = run.site
        for guard, actions in branches:
            if guard is None or guard(run.exe.context, run.event):
                for a in actions:
                    a(run)
                break
        run.site = site

    return choose


_FOREACH_KEYS = ("array", "item", "index", "actions")


def _compile_foreach(args: Any, where: str, issues: Issues) -> Action | None:
    """``{foreach: {array: VALUE, item: KEY, index?: KEY, actions: [...]}}``: the actions once per item of a
    copy of the list ``array`` evaluates to, the item (and its index) assigned to the context keys first,
    SCXML's ``<foreach>``. A value that is not a list fails the step; a loop is as long as its list."""
    if not isinstance(args, dict) or not isinstance(args.get("item"), str) or "array" not in args:
        issues.append(f"{where}: takes {{array: VALUE, item: KEY, index: KEY, actions: [...]}}")
        return None
    for k in args:
        if k not in _FOREACH_KEYS:
            issues.append(f"{where}.{k}: unknown key{did_you_mean(str(k), _FOREACH_KEYS)}")
            return None
    array = compile_value(args["array"], f"{where}.array", issues)
    put_item = _setter(args["item"])
    index = args.get("index")
    put_index = _setter(index) if isinstance(index, str) and index else None
    body = args.get("actions") or []
    actions = compile_actions(body if isinstance(body, list) else [body], f"{where}.actions", issues)

    def foreach(run: ActionContext) -> None:
        items = array(run.exe.context, run.event)
        if not isinstance(items, list):
            raise TypeError(f"foreach array must evaluate to a list, got {type(items).__name__}")
        site = run.site
        for i, item in enumerate(list(items)):
            put_item(run.exe.context, copy.deepcopy(item))
            if put_index is not None:
                put_index(run.exe.context, i)
            for a in actions:
                a(run)
        run.site = site

    return foreach


def _compile_fail(args: Any, where: str, issues: Issues) -> Action | None:
    """``{fail: ERROR}`` or ``{fail: {error: ERROR, send_id: ID}}``: the action that fails, saying why (a value,
    constant or computed). The execution fails with that error, as when any action raises; a definition with
    ``action_errors: raise`` gets ``error.execution`` instead (``send_id``, if given, is its
    ``$meta.send_id``: the send whose failure it reports). What an SCXML import writes where the document
    itself makes a processor fail (an ``<assign>`` to an undeclared variable)."""
    spec = args if isinstance(args, dict) else {"error": args}
    if not set(spec) <= {"error", "send_id"} or spec.get("error") is None:
        issues.append(f"{where}: takes an error (a string or a reference) or {{error: VALUE, send_id: VALUE}}")
        return None
    error = compile_value(spec["error"], f"{where}.error", issues)
    send_id = None if spec.get("send_id") is None else compile_value(spec["send_id"], f"{where}.send_id", issues)

    def fail(run: ActionContext) -> None:
        ctx, ev = run.exe.context, run.event
        why = error(ctx, ev)
        named = None if send_id is None else send_id(ctx, ev)
        raise ActionFailed(why if isinstance(why, str) else repr(why), None if named is None else str(named))

    return fail


def _compile_block(args: Any, where: str, issues: Issues) -> Action | None:
    """``{block: [...]}``: the actions, as one block: under ``action_errors: raise``, one that fails raises
    ``error.execution`` and skips the rest of this block only, and the actions after it run (each SCXML
    ``<onentry>``/``<onexit>`` of a state is a block of its own). Otherwise it is just its actions."""
    if not isinstance(args, list):
        issues.append(f"{where}: takes a list of actions")
        return None
    actions = compile_actions(args, where, issues)

    def block(run: ActionContext) -> None:
        site = run.site
        try:
            for a in actions:
                a(run)
        except Exception as exc:
            run.failed_action(exc)
        run.site = site

    return block


_ACTION_COMPILERS: dict[str, Callable[[Any, str, Issues], Action | None]] = {
    "assign": _compile_assign,
    "send": _compile_send,
    "cancel": _compile_cancel,
    "raise": _compile_raise,
    "log": _compile_log,
    "call": _compile_call,
    "choose": _compile_choose,
    "foreach": _compile_foreach,
    "fail": _compile_fail,
    "block": _compile_block,
}


def _retrying(fn: Callable[..., Any], policy: RetryPolicy, where: str) -> Callable[..., Any]:
    """``fn``, its exceptions that ``policy`` covers turned into :class:`RetryableFailure`."""

    def attempt(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            if policy.matches(exc):
                raise RetryableFailure(policy, exc, where) from exc
            raise

    return attempt


def _with_retry(spec: dict[str, Any], where: str, issues: Issues) -> tuple[Any, RetryPolicy | None] | None:
    """``{call: X, retry: {...}}``: the call's argument and its policy (``None``: not that form)."""
    if set(spec) != {"call", "retry"}:
        return None
    return spec["call"], parse_retry(spec["retry"], f"{where}.retry", issues)


# -- what runs user code ---------------------------------------------------------------------------------
# A step of a definition whose guards and actions are all declarative has no effect outside its result (the
# new context, emits, timers, spawns, trace): run on a stale copy of an execution and thrown away when its
# commit is refused, it did nothing. A Python callable may do anything (charge a card, send a mail), so the
# runtime runs one only on the stored state (durastate.runtime.worker). These two say which is which, and
# must stay conservative: only the forms the compilers above build without ``resolve_callable`` (values
# never resolve one) count as declarative; anything else, valid or not, counts as user code.

_PURE_GUARDS = (*_CMP, "in", "exists", "in_state")
_PURE_ACTIONS = ("assign", "send", "cancel", "raise", "log", "fail")


def declarative_guard(spec: Any) -> bool:
    """Whether the guard ``spec`` (as :func:`compile_guard` takes it) evaluates without running user code."""
    if isinstance(spec, bool):
        return True
    if not isinstance(spec, dict) or len(spec) != 1:
        return False  # a callable reference, {call, retry}, or not a guard at all
    ((op, args),) = spec.items()
    if op in _PURE_GUARDS:
        return True
    if op == "not":
        return declarative_guard(args)
    if op in ("and", "or"):
        return isinstance(args, list) and all(declarative_guard(g) for g in args)
    return False


def declarative_actions(specs: Any) -> bool:
    """Whether the action list ``specs`` (as :func:`compile_actions` takes it) runs no user code."""
    if not isinstance(specs, list):
        return False
    return all(isinstance(spec, dict) and len(spec) == 1 and _declarative_action(*next(iter(spec.items())))
               for spec in specs)


def _declarative_action(kind: Any, args: Any) -> bool:
    if kind in _PURE_ACTIONS:
        return True
    if kind == "choose":
        return isinstance(args, list) and all(
            isinstance(b, dict) and ("guard" not in b or declarative_guard(b["guard"]))
            and declarative_actions(b.get("actions") or []) for b in args)
    if kind == "foreach":
        return isinstance(args, dict) and declarative_actions(args.get("actions") or [])
    if kind == "block":
        return declarative_actions(args)
    return False


def compile_actions(specs: list[Any], where: str, issues: Issues) -> tuple[Action, ...]:
    """Compile an action list; each item is ``{kind: args}`` (or ``"package.module:function"``); a
    ``call`` may carry a ``retry`` policy beside it (:mod:`durastate.engine.retry`)."""
    out: list[Action] = []
    for i, spec in enumerate(specs):
        here = f"{where}[{i}]"
        if (isinstance(spec, str) and ":" in spec) or callable(spec):
            spec = {"call": spec}
        retried = _with_retry(spec, here, issues) if isinstance(spec, dict) else None
        if retried is not None:
            target, policy = retried
            action = _compile_call(target, f"{here}.call", issues, policy)
            if action is not None:
                out.append(action)
            continue
        if not isinstance(spec, dict) or len(spec) != 1:
            issues.append(
                f"{here}: an action is one of {{{', '.join(ACTION_KINDS)}: ...}} or 'package.module:function'"
            )
            continue
        ((kind, args),) = spec.items()
        compiler = _ACTION_COMPILERS.get(kind)
        if compiler is None:
            issues.append(
                f"{here}: unknown action {kind!r}{did_you_mean(str(kind), ACTION_KINDS)}; "
                f"use one of {', '.join(ACTION_KINDS)}"
            )
            continue
        action = compiler(args, f"{here}.{kind}", issues)
        if action is not None:
            out.append(action)
    return tuple(out)
