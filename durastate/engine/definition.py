"""The definition of a statechart: one pydantic model, whether written in YAML/JSON or built in Python.

``Definition`` validates in one run and reports *every* problem at once as a
:class:`~durastate.errors.DefinitionError`, each issue prefixed by the dotted path of the offending node
(``states.pay.on.paid[0].target: no state 'shiped' (did you mean 'shipped'?)``):

0. the document itself (:func:`load_definition`): UTF-8, each mapping key once, no cyclic YAML aliases,
   bounded nesting and size, and a ``context`` of plain JSON (finite numbers, at most
   :data:`~durastate.engine.values.MAX_DEPTH` deep);
1. structure (pydantic: unknown keys, wrong types), after normalising the shorthands
   (``on: {submit: active}`` is ``on: {submit: [{target: active}]}``);
2. semantics (:mod:`durastate.engine.tables`: targets, initial states, history placement, parallel regions,
   final states, timers, callables, event descriptors), which also compiles the lookup tables the
   interpreter runs on.

The three are not successive gates: a structurally broken node is repaired in a scratch copy (a
placeholder, the close match of a misspelt ``type``, or nothing) so that the semantics of everything else
is still checked in the same run, and fixing what one load reports never reveals a second round.

A validated ``Definition`` carries its compiled tables, so ``step`` never re-validates anything.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from durastate.engine.expressions import did_you_mean
from durastate.engine.ids import SYSTEM_PREFIX
from durastate.engine.search import MAX_FIELDS as MAX_SEARCH_FIELDS
from durastate.engine.search import SearchField, check_name
from durastate.engine.states import _STATE_TYPES, After, Invoke, Map, State, StateType, Transition, _nulls_as_empty
from durastate.engine.tables import build_tables
from durastate.engine.values import MAX_DEPTH, check_json
from durastate.errors import DefinitionError, InvalidValue

if TYPE_CHECKING:
    from durastate.engine.compiled import Tables

__all__ = [
    "MAX_DOCUMENT_DEPTH",
    "MAX_DOCUMENT_VALUES",
    "After",
    "Definition",
    "Invoke",
    "Map",
    "State",
    "StateType",
    "Transition",
    "load_definition",
    "parse_document",
]

MAX_DOCUMENT_DEPTH = 200
"""How deeply a definition document may nest (mappings and lists). About 100 levels of nested states;
far below the parsers' and the validator's recursion limits, so a deeper document is an issue, not a crash."""
MAX_DOCUMENT_VALUES = 1_000_000
"""How many values a document may hold once its YAML aliases are expanded (an "alias bomb" of a few lines
expands to billions; a real definition holds thousands)."""


class Definition(BaseModel):
    """A validated statechart definition (see ``docs``: the definition format)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    description: str | None = None
    initial: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    """The default context of a new execution (the start event's context is merged over it)."""
    timeout: float | str | None = None
    """The run timeout (Step Functions' ``TimeoutSeconds``): seconds or a duration (``1h``, ``2d 3h``) after
    the start, by the runtime's clock, when the execution is ended as ``on_timeout`` says; a start may
    give its own (:mod:`durastate.engine.run_timeout`)."""
    on_timeout: Literal["fail", "cancel"] = "fail"
    """What the run timeout does: ``fail`` (the default, as Step Functions does: failed with the reason) or
    ``cancel`` (the active states' exit actions run, children are cancelled, the parent is told)."""
    action_errors: Literal["fail", "raise"] = "fail"
    """What a guard or an action that raises does (docs/recovery.md): ``fail`` the execution (the default;
    a redrive replays the step once the cause is fixed), or ``raise`` the internal event ``error.execution``
    (``$event.error`` says what failed) and go on, as an SCXML processor does: the rest of the failing
    action list is skipped, a failing guard counts as false. Imported SCXML charts say ``raise``."""
    done_events: Literal["durastate", "scxml"] = "durastate"
    """The name of the event a compound state raises when it reaches a final child (and a parallel state
    when every region has): ``durastate`` (the default), the reserved ``durastate.done.<path>`` that only
    the state's ``on_done`` takes; ``scxml``, SCXML's ``done.state.<name>``, an ordinary event that any
    state's transitions (and ``*``) take while it is queued, as an SCXML chart expects. Then no two such states
    may share a name. Imported SCXML charts say ``scxml``."""
    states: dict[str, State] = Field(default_factory=dict)
    search: dict[str, SearchField] = Field(default_factory=dict)
    """Context values a listing can filter on (``list --where``): name -> path and type
    (:mod:`durastate.engine.search`); every commit indexes them."""

    # Plain slots, not pydantic private attributes: ``step`` reads the tables on every event, and a
    # slot read is ~50x cheaper than pydantic's private-attribute lookup.
    __slots__ = ("_compiled", "_source_name", "_version")
    if TYPE_CHECKING:
        _compiled: Tables

    @field_validator("states", mode="before")
    @classmethod
    def _null_children(cls, v: Any) -> Any:
        return _nulls_as_empty(v)

    @field_validator("search")
    @classmethod
    def _search_names(cls, v: dict[str, SearchField]) -> dict[str, SearchField]:
        if len(v) > MAX_SEARCH_FIELDS:
            raise ValueError(f"at most {MAX_SEARCH_FIELDS} search fields (each is an index entry per commit); "
                             f"this declares {len(v)}")
        for name in v:
            why = check_name(name)
            if why:
                raise ValueError(f"{name!r}: {why}")
        return v

    @field_validator("id")
    @classmethod
    def _own_id(cls, v: str) -> str:
        if v.startswith(SYSTEM_PREFIX):
            raise ValueError(f"a definition id may not start with {SYSTEM_PREFIX!r}: durastate keeps that prefix for "
                             "its own records (archived versions, schedules); rename the definition")
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _validate_all(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Definition:
        """Check the document, turn pydantic's errors into path-prefixed issues, check semantics, compile.

        Every issue of every stage is collected in the same run (see the module docstring).
        """
        if isinstance(data, Definition):
            return data
        source: str | None = None
        issues: list[str] = []
        ctx = info.context if isinstance(info.context, Mapping) else {}
        if isinstance(ctx.get("source"), str):
            source = ctx["source"]
        issues.extend(ctx.get("issues") or ())
        if isinstance(data, Mapping) and "__source__" in data:
            data = dict(data)
            source = data.pop("__source__")
        data = _plain_tree(data, issues, source)
        single_timers = _single_timers(data)
        if isinstance(data, dict) and isinstance(data.get("context"), dict):
            bad = _context_issues(data["context"])
            if bad:
                issues += bad
                data["context"] = {}
        try:
            defn: Definition = handler(data)
        except ValidationError as exc:
            issues += _pydantic_issues(exc)
            issues += _semantic_issues_despite(data, exc, handler)
            raise DefinitionError(_as_written(issues, single_timers), source) from None
        tables = build_tables(defn, issues)
        if issues:
            raise DefinitionError(_as_written(issues, single_timers), source)
        object.__setattr__(defn, "_compiled", tables)
        object.__setattr__(defn, "_source_name", source)
        return defn

    def __eq__(self, other: object) -> bool:
        # Equal documents are equal definitions (the compiled tables are derived, not compared).
        if not isinstance(other, Definition):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]

    @property
    def tables(self) -> Tables:
        """The compiled lookup tables the interpreter runs on (built once, at validation)."""
        try:
            return self._compiled
        except AttributeError:  # a model_copy() or model_construct(): compile now
            issues: list[str] = []
            tables = build_tables(self, issues)
            if issues:
                raise DefinitionError(issues, None) from None
            object.__setattr__(self, "_compiled", tables)
            return tables

    @property
    def source(self) -> str | None:
        """The file it was loaded from, if any."""
        return getattr(self, "_source_name", None)

    @property
    def paths(self) -> list[str]:
        """Every state path in document order."""
        return list(self.tables.paths[1:])

    def initial_context(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A fresh deep copy of the default context with ``overrides`` merged over it."""
        ctx: dict[str, Any] = json.loads(json.dumps(self.context))
        if overrides:
            ctx.update(overrides)
        return ctx

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able document form (defaults left out); ``load_definition`` of it round-trips."""
        return self.model_dump(mode="json", exclude_defaults=True)


def _single_timers(doc: Any) -> set[str]:
    """Make every state's ``after`` of ``doc`` (a private copy) a list; the sites where it was one mapping.

    Done on the document rather than by the model so that structural errors come with list positions that
    :func:`_repair` can follow; :func:`_as_written` then drops the ``[0]`` from the issues about a timer
    written as one mapping, which name it as written (``states.pay.after.seconds``).
    """
    sites: set[str] = set()

    def walk(states: Any, prefix: str) -> None:
        if not isinstance(states, dict):
            return
        for name, state in states.items():
            if not isinstance(state, dict):
                continue
            site = f"{prefix}states.{name}"
            after = state.get("after")
            if after is not None and not isinstance(after, list):
                state["after"] = [after]
                sites.add(f"{site}.after")
            walk(state.get("states"), site + ".")

    if isinstance(doc, dict):
        walk(doc.get("states"), "")
    return sites


def _as_written(issues: list[str], single_timers: set[str]) -> list[str]:
    """``states.a.after[0].x: ...`` -> ``states.a.after.x: ...`` where ``after`` was one mapping."""
    if not single_timers:
        return issues
    out: list[str] = []
    for issue in issues:
        head, sep, rest = issue.partition("[0]")
        if sep and head in single_timers:
            issue = head + rest
        out.append(issue)
    return out


def _loc_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _is_marker(part):
            continue  # pydantic's union/validator-branch markers are noise to a user
        else:
            out += f".{part}" if out else str(part)
    return out


_FIELDS: dict[str, tuple[str, ...]] = {}


def _model_fields_at(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    """Allowed keys of the model at ``loc`` (for a did-you-mean on an unknown key)."""
    if not _FIELDS:
        for model in (Definition, State, Transition, After, Invoke, Map):
            _FIELDS[model.__name__] = tuple(model.model_fields)
    parent = [p for p in loc[:-1] if not isinstance(p, int)]
    if not parent:
        return _FIELDS["Definition"]
    last = parent[-1]
    if last in ("after",):
        return _FIELDS["After"]
    if last == "invoke":
        return _FIELDS["Invoke"]
    if last == "map":
        return _FIELDS["Map"]
    if (len(parent) >= 2 and parent[-2] == "on") or last in ("always", "on_done", "on_error"):
        return _FIELDS["Transition"]
    return _FIELDS["State"]


def _pydantic_issues(exc: ValidationError) -> list[str]:
    issues: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        where = _loc_path(loc) or "(document)"
        if err["type"] == "extra_forbidden":
            key = str(loc[-1])
            allowed = _model_fields_at(loc)
            issues.append(f"{where}: unknown key{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}")
        elif err["type"] == "missing":
            issues.append(f"{where}: required")
        elif err["type"] == "literal_error":
            got = err["input"]
            options = _STATE_TYPES if loc and loc[-1] == "type" else ("shallow", "deep")
            hint = did_you_mean(got, options) if isinstance(got, str) else ""
            issues.append(f"{where}: {err['msg'].replace('Input should be', 'must be')}, got {got!r}{hint}")
        else:
            issues.append(f"{where}: {err['msg']} (got {_short(err.get('input'))})")
    return issues


# -- every issue in one run: repair a scratch copy, then check its semantics ------------------------------

_PLACEHOLDERS: dict[str, Any] = {"id": "?", "seconds": 1.0, "definition": "?", "items": [],
                                  "invoke": {"definition": "?"}}
"""What a missing required field is assumed to be while the rest of the document is checked."""


def _semantic_issues_despite(
    doc: Any, exc: ValidationError, handler: ValidatorFunctionWrapHandler
) -> list[str]:
    """The semantic issues of a document that also has structural ones, so that all come at once.

    ``doc`` (a private copy, changed in place) is repaired until it validates: a missing field gets a
    placeholder, a misspelt ``type`` its close match, an unknown key is dropped, any other bad value is
    dropped (or, in a list, emptied). Then the semantics of the result are checked. Only what a repair
    could have caused is left out: the issues at the repaired node itself and, for a state whose kind
    is no longer known (an unrecognisable ``type``, ``states`` that is not a mapping), the checks that
    depend on its kind.
    """
    if not isinstance(doc, dict):
        return []
    tainted: set[str] = set()
    unsure: set[str] = set()
    for _ in range(8):
        for err in exc.errors():
            _repair(doc, err, tainted, unsure)
        try:
            defn = handler(doc)
        except ValidationError as again:
            exc = again
            continue
        issues: list[str] = []
        build_tables(defn, issues, unsure)
        return [i for i in issues if not any(_under(i, t) for t in tainted)]
    return []


def _under(issue: str, path: str) -> bool:
    return issue.startswith(path) and issue[len(path) : len(path) + 1] in (":", ".", "[")


def _repair(doc: dict[str, Any], err: Any, tainted: set[str], unsure: set[str]) -> None:
    loc = [p for p in err["loc"] if isinstance(p, int) or not _is_marker(p)]
    kind = err["type"]
    if not loc:
        return
    parent = _get(doc, loc[:-1])
    key = loc[-1]
    if isinstance(parent, list) and isinstance(key, int):
        if 0 <= key < len(parent):
            parent[key] = None  # an empty (targetless, guardless) transition: it causes no issue
        tainted.add(_loc_path(tuple(loc)))
        return
    if not isinstance(parent, dict):
        return
    if kind == "extra_forbidden":
        parent.pop(key, None)
        return
    if kind == "missing":
        parent[key] = _PLACEHOLDERS.get(str(key), "?")
        return
    path = _loc_path(tuple(loc))
    if _is_state(loc):  # a state that is not a mapping: keep its name (others may target it), drop the rest
        parent[key] = {}
        tainted.add(path)
        return
    state_site = _loc_path(tuple(loc[:-1]))
    on_state = bool(loc[:-1]) and _is_state(loc[:-1])
    if not on_state:
        if len(loc) > 1 or key not in ("id", "context"):
            parent.pop(key, None)
        else:
            parent[key] = "?" if key == "id" else {}
        tainted.add(path)
        return
    if key == "type" and kind == "literal_error":
        got = parent.get("type")
        close = difflib.get_close_matches(got, _STATE_TYPES, n=1, cutoff=0.6) if isinstance(got, str) else []
        if close:
            parent["type"] = close[0]  # the same guess the issue suggests
        else:
            parent.pop("type", None)
            unsure.add(state_site)
        return
    if key == "history":
        parent["history"] = "shallow"
    elif key == "invoke":
        parent["invoke"] = {"definition": "?"}  # so on_done/on_error are judged as on an invoking state
    elif key == "map":
        parent["map"] = {"items": [], "invoke": {"definition": "?"}}  # the same, for a state that maps
    elif key == "states":
        parent.pop(key, None)
        unsure.add(state_site)
    else:
        parent.pop(key, None)
    tainted.add(path)


def _is_state(loc: list[int | str]) -> bool:
    """Whether ``loc`` is a state node (``states.a.states.b``), not a key of one."""
    return bool(loc) and len(loc) % 2 == 0 and all(loc[j] == "states" for j in range(0, len(loc), 2))


def _get(doc: Any, loc: list[int | str]) -> Any:
    obj = doc
    for part in loc:
        try:
            obj = obj[part]
        except (KeyError, IndexError, TypeError):
            return None
    return obj


def _is_marker(part: str) -> bool:
    return part.startswith(("function-", "json-or-python")) or part in ("str", "list[...]", "dict[...]")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- the document: a tree of plain data ----------------------------------------------------------------


class _DocumentTooBig(Exception):
    pass


def _plain_tree(data: Any, issues: list[str], source: str | None) -> Any:
    """A private copy of ``data`` (mappings and lists copied, other values shared) that is a finite tree.

    A value that contains itself (a cyclic YAML alias, or a cyclic Python structure) and nesting deeper
    than :data:`MAX_DOCUMENT_DEPTH` are issues, replaced by ``null`` in the copy so that the rest is
    still checked. More than :data:`MAX_DOCUMENT_VALUES` values (an alias bomb) stops the load at once.
    """
    count = 0
    active: set[int] = set()

    def walk(obj: Any, path: str, depth: int) -> Any:
        nonlocal count
        count += 1
        if count > MAX_DOCUMENT_VALUES:
            raise _DocumentTooBig
        is_map = isinstance(obj, Mapping)
        if not (is_map or isinstance(obj, list)):
            return obj
        if id(obj) in active:
            issues.append(
                f"{path or '(document)'}: refers back to a value that contains it (a cyclic YAML "
                "anchor/alias?); a definition is plain data: a tree, without cycles"
            )
            return None
        if depth >= MAX_DOCUMENT_DEPTH:
            issues.append(
                f"{_clip(path)}: nests deeper than {MAX_DOCUMENT_DEPTH} levels of mappings/lists; "
                "a definition this deep is a mistake"
            )
            return None
        active.add(id(obj))
        try:
            if is_map:
                return {k: walk(v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in obj.items()}
            return [walk(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(obj)]
        finally:
            active.discard(id(obj))

    try:
        return walk(data, "", 0)
    except _DocumentTooBig:
        raise DefinitionError(
            [
                *issues,
                f"(document): holds more than {MAX_DOCUMENT_VALUES:,} values once its YAML aliases are "
                "expanded; an alias that repeats an alias that repeats... is refused rather than expanded",
            ],
            source,
        ) from None


def _context_issues(context: dict[str, Any]) -> list[str]:
    """Every reason the default context is not plain JSON that stores keep exactly (each at its path):
    the rules of :func:`~durastate.engine.values.check_json`, which has the last word."""
    issues: list[str] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                issues.append(
                    f"{_clip(path)}: nests deeper than {MAX_DEPTH} levels of objects/arrays; a context this "
                    "deep could not be loaded again once stored: flatten it"
                )
                return
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if isinstance(value, dict) and not isinstance(k, str):
                    issues.append(f"{path}: the key {k!r} is not a string; JSON object keys are strings")
                    continue
                walk(v, f"{path}.{k}" if isinstance(value, dict) else f"{path}[{k}]", depth + 1)
        elif isinstance(value, float) and not math.isfinite(value):
            issues.append(
                f"{path}: {value!r} is not a finite number; JSON has none (stores would keep null): use a "
                "finite number, a string or null"
            )
        elif not (value is None or isinstance(value, bool | int | float | str)):
            issues.append(f"{path}: a {type(value).__name__} is not JSON; use objects, arrays, strings, numbers")

    walk(context, "context", 0)
    if not issues:
        try:
            check_json(context, "context")
        except InvalidValue as exc:
            issues.append(f"context: {exc}")
    return issues


def _clip(path: str) -> str:
    return path if len(path) <= 80 else f"{path[:60]}...{path[-17:]}"


# -- loading -------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML 1.2-ish booleans: only true/false. YAML 1.1 reads the key ``on:`` as ``True``.

    :meth:`duplicate_keys` finds the keys written twice in a mapping (PyYAML keeps the last silently).
    """

    def duplicate_keys(self, root: yaml.Node) -> list[str]:
        """One issue per repeated key, with its path and both lines; walks the composed node graph once.

        Keys that a YAML merge (``<<: *base``) brings in may be overridden: only keys written in the
        mapping itself count.
        """
        found: list[tuple[tuple[int, int], str]] = []
        seen: set[int] = set()
        todo: list[tuple[yaml.Node, str]] = [(root, "")]
        while todo:
            node, path = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                first: dict[tuple[str, str], tuple[int, int]] = {}
                for key_node, value_node in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        todo.append((value_node, path))
                        continue
                    name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                    here = f"{path}.{name}" if path else str(name)
                    if isinstance(key_node, yaml.ScalarNode):
                        mark = key_node.start_mark
                        at = (mark.line + 1, mark.column + 1)
                        ident = (key_node.tag, name)
                        if ident in first:
                            found.append((at, _duplicate(here, name, first[ident], at)))
                        else:
                            first[ident] = at
                    todo.append((value_node, here))
            elif isinstance(node, yaml.SequenceNode):
                todo.extend((v, f"{path}[{i}]") for i, v in enumerate(node.value))
        return [issue for _, issue in sorted(found)]


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    __import__("re").compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _duplicate(path: str, key: Any, first: tuple[int, int], again: tuple[int, int]) -> str:
    return (
        f"{path}: duplicate key {key!r} (first at line {first[0]} column {first[1]}, again at line "
        f"{again[0]} column {again[1]}); a key may appear once in a mapping (a YAML/JSON loader would "
        "silently keep the last one): merge them or rename one"
    )


def _json_duplicate_keys(text: str) -> list[str]:
    """The keys repeated in one object of ``text`` (valid JSON), with their path and lines.

    A small scan of the structure (``json`` reports no positions to its hooks); only run when the hook
    saw a duplicate, so a clean file pays nothing for it.
    """
    issues: list[str] = []
    # one frame per open object/array: [is_object, path, first line per key, current key, array index,
    # expecting a key]
    stack: list[list[Any]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while True:
                j = text.index('"', j)
                backslashes = 0
                while text[j - 1 - backslashes] == "\\":
                    backslashes += 1
                if backslashes % 2 == 0:
                    break
                j += 1
            frame = stack[-1] if stack else None
            if frame is not None and frame[0] and frame[5]:
                key = json.loads(text[i : j + 1])
                at = (text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i))
                if key in frame[2]:
                    here = f"{frame[1]}.{key}" if frame[1] else key
                    issues.append(_duplicate(here, key, frame[2][key], at))
                else:
                    frame[2][key] = at
                frame[3], frame[5] = key, False
            i = j + 1
            continue
        if c in "{[":
            if not stack:
                path = ""
            elif stack[-1][0]:
                path = f"{stack[-1][1]}.{stack[-1][3]}" if stack[-1][1] else str(stack[-1][3])
            else:
                path = f"{stack[-1][1]}[{stack[-1][4]}]"
            stack.append([c == "{", path, {}, None, 0, c == "{"])
        elif c in "}]":
            stack.pop()
        elif c == "," and stack:
            if stack[-1][0]:
                stack[-1][5] = True
            else:
                stack[-1][4] += 1
        i += 1
    return issues


def _parse(text: str, source: str | None) -> tuple[Any, list[str]]:
    """Parse YAML or JSON text into plain data and the issues of the text itself (repeated keys).

    A syntax error (or a text too deeply nested to parse) is a :class:`DefinitionError`.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        if text.lstrip().startswith("{"):
            repeated = False

            def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
                nonlocal repeated
                obj = dict(items)
                if len(obj) != len(items):
                    repeated = True
                return obj

            data = json.loads(text, object_pairs_hook=pairs)
            return data, (_json_duplicate_keys(text) if repeated else [])
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None, []
            issues = loader.duplicate_keys(node)
            return loader.construct_document(node), issues
        finally:
            loader.dispose()  # type: ignore[no-untyped-call]
    except json.JSONDecodeError as exc:
        raise DefinitionError(
            [f"(document): invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"], source
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DefinitionError([f"(document): invalid YAML{at}: {problem}"], source) from None
    except RecursionError:
        raise DefinitionError(
            [f"(document): nests too deeply to parse (a definition nests at most {MAX_DOCUMENT_DEPTH} "
             "levels of mappings/lists)"],
            source,
        ) from None


def parse_document(text: str, source: str | None = None) -> Any:
    """Parse YAML or JSON text into plain data; a syntax error or a repeated key is a :class:`DefinitionError`."""
    data, issues = _parse(text, source)
    if issues:
        raise DefinitionError(issues, source)
    return data


def _read_text(path: Path, name: str) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark dropped); else a DefinitionError saying where."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DefinitionError([f"(document): cannot read {path}: {exc.strerror or exc}"], name) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DefinitionError(
            [
                f"(document): not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line} column {column} "
                f"(byte offset {exc.start}) is not valid UTF-8; save {path.name} as UTF-8"
            ],
            name,
        ) from None


def load_definition(source: str | Path | Mapping[str, Any] | Definition) -> Definition:
    """Load and validate a definition from a file path, YAML/JSON text, a dict, or a ``Definition``.

    Raises :class:`~durastate.errors.DefinitionError` listing every issue, each with its path: the file's
    (not UTF-8, a key written twice, a cyclic alias), the structure's and the semantics', all at once.
    """
    if isinstance(source, Definition):
        return source
    name: str | None = None
    text_issues: list[str] = []
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".yaml", ".yml", ".json"))
    ):
        path = Path(source)
        name = str(path)
        data, text_issues = _parse(_read_text(path, name), name)
    elif isinstance(source, str):
        data, text_issues = _parse(source, None)
    else:
        data = source
    if not isinstance(data, Mapping):
        raise DefinitionError(
            [*text_issues,
             f"(document): a definition is a mapping with id/initial/states, got {type(data).__name__}"],
            name,
        )
    return Definition.model_validate(data, context={"source": name, "issues": text_issues})
