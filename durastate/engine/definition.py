"""The definition of a statechart: one pydantic model, whether written in YAML/JSON or built in Python.

``Definition`` validates in two passes and reports *every* problem at once as a
:class:`~durastate.errors.DefinitionError`, each issue prefixed by the dotted path of the offending node
(``states.pay.on.paid[0].target: no state 'shiped' (did you mean 'shipped'?)``):

1. structure (pydantic: unknown keys, wrong types), after normalising the shorthands
   (``on: {submit: active}`` is ``on: {submit: [{target: active}]}``);
2. semantics (:mod:`durastate.engine.tables`: targets, initial states, history placement, parallel regions,
   final states, timers, callables), which also compiles the lookup tables the interpreter runs on.

A validated ``Definition`` carries its compiled tables, so ``step`` never re-validates anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from durastate.engine.expressions import did_you_mean
from durastate.errors import DefinitionError

if TYPE_CHECKING:
    from durastate.engine.tables import Tables

__all__ = ["After", "Definition", "Invoke", "State", "StateType", "Transition", "load_definition"]

StateType = Literal["atomic", "compound", "parallel", "final", "history"]


def _as_list(v: Any) -> Any:
    """``x`` -> ``[x]``; ``None`` -> ``[]``; lists unchanged (shorthand for one-item lists)."""
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


class Transition(BaseModel):
    """``{target?, guard?, actions?, internal?}``; a bare string is a target.

    No target: the actions run and the configuration does not change (no exit, no entry).
    ``internal: true`` with a target inside the source: the source is not exited and re-entered.
    """

    model_config = ConfigDict(extra="forbid")

    target: str | None = None
    guard: Any = None
    actions: list[Any] = Field(default_factory=list)
    internal: bool = False

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"target": data}
        if data is None:
            return {}
        return data

    @field_validator("actions", mode="before")
    @classmethod
    def _actions_list(cls, v: Any) -> Any:
        return _as_list(v)


class After(BaseModel):
    """The delayed transition of a state: armed on entry, cancelled on exit (one per state)."""

    model_config = ConfigDict(extra="forbid")

    seconds: float
    target: str | None = None
    guard: Any = None
    actions: list[Any] = Field(default_factory=list)
    internal: bool = False

    @field_validator("actions", mode="before")
    @classmethod
    def _actions_list(cls, v: Any) -> Any:
        return _as_list(v)


class Invoke(BaseModel):
    """Start a child execution of another definition while the (atomic) state is active."""

    model_config = ConfigDict(extra="forbid")

    definition: str = Field(min_length=1)
    context: dict[str, Any] = Field(default_factory=dict)
    """Values (``$context.x`` references allowed) that seed the child's context."""


class State(BaseModel):
    """One node of the state tree. ``type`` defaults to ``compound`` if it has ``states``, else ``atomic``."""

    model_config = ConfigDict(extra="forbid")

    type: StateType | None = None
    description: str | None = None
    initial: str | None = None
    entry: list[Any] = Field(default_factory=list)
    exit: list[Any] = Field(default_factory=list)
    on: dict[str, list[Transition]] = Field(default_factory=dict)
    always: list[Transition] = Field(default_factory=list)
    after: After | None = None
    on_done: list[Transition] = Field(default_factory=list)
    on_error: list[Transition] = Field(default_factory=list)
    invoke: Invoke | None = None
    states: dict[str, State] = Field(default_factory=dict)
    history: Literal["shallow", "deep"] | None = None
    """History states only: what is restored (default shallow)."""
    target: str | None = None
    """History states only: the default when nothing was recorded yet (else the parent's ``initial``)."""
    outcome: str | None = None
    """Final states only: the execution's outcome when it finishes here (default: the state's name)."""

    @field_validator("entry", "exit", "always", "on_done", "on_error", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _as_list(v)

    @field_validator("on", mode="before")
    @classmethod
    def _on_lists(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: _as_list(t) for k, t in v.items()}
        return v

    @field_validator("states", mode="before")
    @classmethod
    def _null_children(cls, v: Any) -> Any:
        # `b: {}` and `b:` (YAML null) both mean an empty atomic state.
        if isinstance(v, Mapping):
            return {k: ({} if s is None else s) for k, s in v.items()}
        return v

    @property
    def kind(self) -> StateType:
        """The effective type (``type`` or the inferred default)."""
        if self.type is not None:
            return self.type
        return "compound" if self.states else "atomic"


class Definition(BaseModel):
    """A validated statechart definition (see ``docs``: the definition format)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    description: str | None = None
    initial: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    """The default context of a new execution (the start event's context is merged over it)."""
    states: dict[str, State] = Field(default_factory=dict)

    # Plain slots, not pydantic private attributes: ``step`` reads the tables on every event, and a
    # slot read is ~50x cheaper than pydantic's private-attribute lookup.
    __slots__ = ("_compiled", "_source_name")
    if TYPE_CHECKING:
        _compiled: Tables

    @field_validator("states", mode="before")
    @classmethod
    def _null_children(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: ({} if s is None else s) for k, s in v.items()}
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _validate_all(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Definition:
        """Turn pydantic's errors into path-prefixed issues, then check semantics and compile."""
        if isinstance(data, Definition):
            return data
        source = None
        if isinstance(data, Mapping) and "__source__" in data:
            data = dict(data)
            source = data.pop("__source__")
        from durastate.engine.tables import build_tables

        try:
            defn: Definition = handler(data)
        except ValidationError as exc:
            issues = _pydantic_issues(exc)
            issues += _semantic_issues_despite(data, exc, handler)
            raise DefinitionError(issues, source) from None
        issues = []
        tables = build_tables(defn, issues)
        if issues:
            raise DefinitionError(issues, source)
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
            from durastate.engine.tables import build_tables

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
        for model in (Definition, State, Transition, After, Invoke):
            _FIELDS[model.__name__] = tuple(model.model_fields)
    parent = [p for p in loc[:-1] if not isinstance(p, int)]
    if not parent:
        return _FIELDS["Definition"]
    last = parent[-1]
    if last in ("after",):
        return _FIELDS["After"]
    if last == "invoke":
        return _FIELDS["Invoke"]
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
            issues.append(
                f"{where}: {err['msg'].replace('Input should be', 'must be')}, got {err['input']!r}"
            )
        else:
            issues.append(f"{where}: {err['msg']} (got {_short(err.get('input'))})")
    return issues


def _semantic_issues_despite(
    data: Any, exc: ValidationError, handler: ValidatorFunctionWrapHandler
) -> list[str]:
    """The semantic issues of a document that also has structural ones, so that all come at once.

    The structurally broken nodes are pruned from a copy of the document until it validates; the
    semantic issues of what remains are kept, except those inside a state that had something pruned
    (they could be artefacts of the pruning).
    """
    from durastate.engine.tables import build_tables

    try:
        doc = json.loads(json.dumps(data))
    except (TypeError, ValueError):
        return []  # Python objects inside: structural issues only
    tainted: set[str] = set()
    for _ in range(8):
        for err in exc.errors():
            loc = [p for p in err["loc"] if isinstance(p, int) or not _is_marker(p)]
            if err["type"] == "missing":
                loc = loc[:-1]
            if not loc:
                if err["type"] == "missing":
                    doc[err["loc"][-1]] = "?"
                continue
            if err["type"] != "extra_forbidden":
                # Dropping these changes what the rest of the state means: trust none of its issues.
                key = loc[-1]
                whole_state = key in _SHAPING_KEYS or (len(loc) >= 2 and loc[-2] == "states")
                tainted.add(_state_site(loc) if whole_state else _loc_path(tuple(loc)))
            _prune(doc, loc)
        try:
            defn = handler(doc)
        except ValidationError as again:
            exc = again
            continue
        issues: list[str] = []
        build_tables(defn, issues)
        return [
            i
            for i in issues
            if not any(i.startswith(t + ".") or i.startswith(t + ":") for t in tainted if t)
            and not ("" in tainted and not i.startswith("states."))
        ]
    return []


_SHAPING_KEYS = frozenset({"type", "invoke", "states", "initial", "history", "on_done", "on_error"})


def _is_marker(part: str) -> bool:
    return part.startswith(("function-", "json-or-python")) or part in ("str", "list[...]", "dict[...]")


def _state_site(loc: list[int | str]) -> str:
    """The dotted site of the innermost state containing ``loc`` (``""`` for the document itself)."""
    k = 0
    while k + 1 < len(loc) and loc[k] == "states" and isinstance(loc[k + 1], str):
        k += 2
    return _loc_path(tuple(loc[:k]))


def _prune(doc: Any, loc: list[int | str]) -> None:
    obj = doc
    for part in loc[:-1]:
        try:
            obj = obj[part]
        except (KeyError, IndexError, TypeError):
            return
    try:
        if isinstance(obj, list):
            obj[loc[-1]] = None  # type: ignore[index]
        elif isinstance(obj, dict) and len(loc) >= 2 and loc[-2] == "states":
            obj[loc[-1]] = {}  # keep the state's name: other states may target it
        elif isinstance(obj, dict):
            obj.pop(loc[-1], None)
    except (IndexError, TypeError):
        return


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- loading -------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML 1.2-ish booleans: only true/false. YAML 1.1 reads the key ``on:`` as ``True``."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    __import__("re").compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def parse_document(text: str, source: str | None = None) -> Any:
    """Parse YAML or JSON text into plain data; a syntax error is a :class:`DefinitionError`."""
    stripped = text.lstrip()
    try:
        if stripped.startswith("{"):
            return json.loads(text)
        return yaml.load(text, Loader=_Loader)
    except json.JSONDecodeError as exc:
        raise DefinitionError(
            [f"(document): invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"], source
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DefinitionError([f"(document): invalid YAML{at}: {problem}"], source) from None


def load_definition(source: str | Path | Mapping[str, Any] | Definition) -> Definition:
    """Load and validate a definition from a file path, YAML/JSON text, a dict, or a ``Definition``.

    Raises :class:`~durastate.errors.DefinitionError` listing every issue, each with its path.
    """
    if isinstance(source, Definition):
        return source
    name: str | None = None
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".yaml", ".yml", ".json"))
    ):
        path = Path(source)
        name = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DefinitionError([f"(document): cannot read {path}: {exc.strerror or exc}"], name) from None
        data: Any = parse_document(text, name)
    elif isinstance(source, str):
        data = parse_document(source)
    else:
        data = source
    if not isinstance(data, Mapping):
        raise DefinitionError(
            [f"(document): a definition is a mapping with id/initial/states, got {type(data).__name__}"], name
        )
    if name is not None:
        data = {**data, "__source__": name}
    return Definition.model_validate(data)
