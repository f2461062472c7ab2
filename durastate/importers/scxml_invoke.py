"""SCXML ``<invoke>`` -> an invoked child definition (the SCXML importer's part for ``<invoke>``).

An ``<invoke>`` of an SCXML document (inline in ``<content>``, or a file named by ``src``) becomes a
definition of its own, converted by the same importer, and the invoking state starts it with durastate's
``invoke: {definition: ...}``: a durable child execution, started once the step that entered the state ends
(as SCXML starts invokes at the end of the macrostep) and cancelled when the state is left. What goes with
it:

- ``<param name expr|location>`` and ``namelist``: the child's start context (SCXML puts them in the
  child's datamodel over its ``<data>`` values; a name the child does not declare is left out, as SCXML
  leaves it out); an argument that is no ECMAScript expression raises ``error.execution`` instead, and no
  child is started;
- ``done.invoke.<invokeid>``: sent by the child itself as it ends, after everything else it sends, so that
  it reaches the parent in SCXML's order even once the parent has left the invoking state (durastate's
  ``on_done`` is dropped by then), and every transition that matches it (``done.invoke``, ``*``...) takes it;
- ``#_parent`` sends in the child are ``send: {to: parent}`` (the importer's ``<send>``), guarded so that a
  cancelled child sends nothing (SCXML stops it; durastate runs its exit actions);
- ``<finalize>``: the child's events travel as ``invoke.<invokeid>.<name>``; the invoking state, while it is
  active, runs the content and raises ``<name>``;
- ``<send target="#_<id>">`` (an ``<invoke id>`` of the document): a send to the child, whose execution id
  the invoke keeps in the context key ``_invoke_<id>`` (``id_key``) as it starts;
- ``autoforward``: durastate's ``forward: true`` (the parent's events from outside go to the child too);
- ``idlocation``: the invoke id assigned to that variable at the end of the state's entry.

The child definition's id is the parent's id, ``~`` and the invoke id (its ``id``, or the invoking
state's id, ``.`` and the invoke's number in the document), so that it cannot be taken for a definition
written by hand: ``~`` is how durastate marks what it derives from another thing's id (child executions
are ``<parent id>~<n>``).

An ``<invoke>`` of a compound state is durastate's ``invoke`` on that compound state (its child runs while
any of the state's children is active); the second ``<invoke>`` of an atomic state is a state inside it
(``_invoke2``, and so on: a durastate state invokes one child). Not mapped, and reported: a second
``<invoke>`` of a compound state, one inside a ``<parallel>``,
``typeexpr``/``srcexpr``, a type other than SCXML, ``<content expr>``, an invoke id used twice, and ``src``
that is not a file beside the chart (read through the ``resolve`` the caller gives).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from durastate.engine.compiled import descriptor_matches, descriptor_problem
from durastate.engine.model import CANCEL
from durastate.errors import DefinitionError
from durastate.importers import ecma
from durastate.importers.result import ImportIssue, ImportResult, escape

if TYPE_CHECKING:
    from durastate.importers.scxml import _Converter, _El

__all__ = ["INVOKE_EVENT_PREFIX", "MAX_INVOKED", "MAX_INVOKE_DEPTH", "SCXML_TYPES", "Budget", "ChildSource", "Invokes",
           "child_definition_id"]

SCXML_TYPES = ("scxml", "http://www.w3.org/TR/scxml/", "http://www.w3.org/TR/scxml")
"""The ``<invoke type>`` values that name an SCXML session (the only kind of child an import can give)."""
MAX_INVOKE_DEPTH = 8
"""How deeply charts may invoke charts (a ``src`` that invokes itself is refused before this)."""
NESTED_INVOKE = "_invoke"
"""The second ``<invoke>`` of an atomic state is a state ``_invoke2`` inside it, the third ``_invoke3``
inside that...: a durastate state invokes one child."""
MAX_INVOKED = 200
"""How many invoked charts one import may give, all depths together (``src`` documents that invoke each
other several times would otherwise multiply at each level)."""
INVOKE_EVENT_PREFIX = "invoke"
"""The events an invoked chart sends to its parent travel as ``invoke.<invoke id>.<name>``: only the
invoking state, while it is active, takes them (and raises ``<name>``)."""
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Resolve = Callable[[str], tuple[str, str]]
"""``src`` -> (the text of that document, its name); raises :class:`ValueError` saying why it cannot be read."""


def child_definition_id(parent_id: str, invoke_id: str) -> str:
    """The id of the definition an invoke of ``parent_id`` starts (see the module's docstring)."""
    return f"{parent_id}~{invoke_id}"


@dataclass(slots=True)
class Budget:
    """How many more invoked charts the import may convert (shared by every level of it)."""

    left: int = MAX_INVOKED


@dataclass(slots=True)
class ChildSource:
    """The document an ``<invoke>`` starts: an element of the parent's own tree or a parsed ``src`` file."""

    root: _El
    source: str | None
    chain: tuple[str, ...]
    """The ``src`` documents above it (a document may not invoke one of them: a loop)."""
    external: bool
    """From ``src``: its issues are located at the ``<invoke>`` (their lines are of another file)."""
    budget: Budget = field(default_factory=Budget)


ConvertChild = Callable[[ChildSource, str, "Resolve | None"], ImportResult]
"""How a child document is converted (the importer's own ``convert``, given the child's definition id)."""


@dataclass(slots=True)
class Invokes:
    """The ``<invoke>`` elements of one document and the definitions they give."""

    convert_child: ConvertChild
    resolve: Resolve | None = None
    chain: tuple[str, ...] = ()
    budget: Budget = field(default_factory=Budget)
    contents: dict[int, _El] = field(default_factory=dict)
    """id(<invoke>) -> its ``<content>``'s ``<scxml>``, taken out of the tree (:meth:`detach`)."""
    numbers: dict[int, int] = field(default_factory=dict)
    """id(<invoke>) -> its number in the document, from 1."""
    invoked: list[dict[str, Any]] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    """The invoke ids given so far (each names a definition: one id, one chart)."""
    targets: dict[str, str] = field(default_factory=dict)
    """``#_<id>`` of each ``<invoke id>`` -> the ``send`` ``to`` that reaches its child: the context key
    the child's execution id is kept in (durastate's ``invoke.id_key``)."""
    relays: list[tuple[str, list[Any]]] = field(default_factory=list)
    """The actions that relay an event after a ``<finalize>`` (the last one raises it), by its name (see
    :meth:`finish`)."""

    def finish(self, document: dict[str, Any]) -> None:
        """Drop each relayed ``raise`` of an event no transition of ``document`` takes (SCXML drops that
        event; a definition that raises it would not validate, since it goes nowhere)."""
        keys: set[str] = set()
        stack = [document]
        while stack:
            state = stack.pop()
            keys.update(state.get("on", {}))
            stack.extend(state.get("states", {}).values())
        for name, actions in self.relays:
            if not any(descriptor_matches(key, name) for key in keys):
                actions.pop()

    def detach(self, root: _El) -> None:
        """Take each ``<invoke>``'s inline document out of ``root``'s tree, so that what reads the whole
        document (its ``<data>``, its ``_sessionid``...) reads the parent's alone."""
        stack = [root]
        named: set[str] = set()  # the <invoke id>s
        sent: set[str] = set()  # the <send target>s
        while stack:
            el = stack.pop()
            if el.tag == "send" and not el.foreign and "target" in el.attrs:
                sent.add(el.attrs["target"])
            if el.tag == "invoke" and not el.foreign:
                self.numbers[id(el)] = len(self.numbers) + 1
                if el.attrs.get("id"):
                    named.add(el.attrs["id"])
                for child in el.children:
                    if child.tag == "content" and not child.foreign:
                        docs = [c for c in child.children if c.tag == "scxml" and not c.foreign]
                        if len(docs) == 1 and len(child.children) == 1 and not child.text.strip():
                            self.contents[id(el)] = docs[0]
                            child.children = []
                stack.extend(reversed([c for c in el.children if c.tag != "content"]))  # its <finalize>
                continue
            stack.extend(reversed(el.children))
        self.targets = {f"#_{name}": f"$context.{_id_key(name)}" for name in sorted(named) if f"#_{name}" in sent}

    def map_invoke(self, conv: _Converter, state: _El, el: _El, before: int, out: dict[str, Any],
                   entry: list[Any]) -> None:
        """Add what ``<invoke>`` ``el`` of ``state`` becomes to its durastate state ``out`` (and to the end of
        its ``entry``), or report why it cannot; ``before``: how many ``<invoke>``s of ``state`` precede it."""
        if state.tag != "state":
            conv.report(el, f"<invoke> of a <{state.tag}> is not supported: durastate invokes from an atomic "
                            "or a compound state")
        elif before and conv.in_parallel(state):
            conv.report(el, "a second <invoke> in a state inside a <parallel> is not supported: a durastate "
                            "state invokes one child; give each its own state")
        elif before and any(c.tag in ("state", "parallel", "final") and not c.foreign for c in state.children):
            conv.report(el, "a second <invoke> in a state with child states is not supported: a durastate state "
                            "invokes one child; give each its own state")
        elif before:
            # an atomic state's next <invoke>: a state of its own inside it, the only one, with nothing else (the
            # state keeps its transitions and actions), so both are active exactly when the state is
            holder = out
            while "states" in holder:
                holder = next(iter(holder["states"].values()))
            name = f"{NESTED_INVOKE}{before + 1}"
            holder["initial"] = name
            holder["states"] = {name: {}}
            self.map_one(conv, state, el, holder["states"][name], entry)
        else:
            self.map_one(conv, state, el, out, entry)

    def map_one(self, conv: _Converter, state: _El, el: _El, out: dict[str, Any], entry: list[Any]) -> None:
        """``<invoke>`` ``el`` as the ``invoke`` of the durastate state ``out`` (with its relays, and its
        ``idlocation`` at the end of ``entry``), its chart added to :attr:`invoked`; or reported."""
        attrs = _with_known_exprs(conv, state, el)
        ok = True
        for key in attrs:
            if key not in ("type", "src", "id", "idlocation", "namelist", "autoforward"):
                conv.report(el, f"<invoke {key}=...> is not supported (only a constant type and src, id, "
                                "idlocation, namelist and autoforward)")
                ok = False
        kind = attrs.get("type", "scxml")
        if kind not in SCXML_TYPES:
            conv.report(el, f"<invoke type={kind!r}>: only an SCXML session can be invoked")
            ok = False
        invoke_id = attrs.get("id") or f"{state.attrs.get('id', conv.el_paths[id(state)])}.{self.numbers[id(el)]}"
        definition_id = child_definition_id(conv.definition_id, invoke_id)
        if invoke_id in self.ids:
            conv.report(el, f"the invoke id {invoke_id!r} is used twice in the document; invoke ids are unique")
            return
        self.ids.add(invoke_id)
        child = self.child(conv, el, definition_id, attrs.get("src"))
        error = _args_error(el)
        if error is not None and child is not None and ok:
            # SCXML evaluates the arguments as it starts the child: an error raises error.execution and the
            # child is not started
            from durastate.importers.scxml import _raised_error

            entry.append(_raised_error(error))
            return
        context = self.context(conv, el, child)
        finalize: list[Any] = []
        for block in (c for c in el.children if c.tag == "finalize" and not c.foreign):
            finalize += conv.actions(block)
        location = attrs.get("idlocation")
        if location is not None and location not in conv.variables:
            conv.report(el, f"idlocation={location!r}: not a variable of the datamodel")
            ok = False
        if child is None or context is None or not ok:
            return
        done = f"done.invoke.{invoke_id}"
        wire = f"{INVOKE_EVENT_PREFIX}.{invoke_id}" if finalize else None
        if descriptor_problem(done) is not None:
            conv.report(el, f"the invoke id {invoke_id!r} cannot be part of an event name (no spaces or '*')")
            return
        invoke: dict[str, Any] = {"definition": definition_id}
        if context:
            invoke["context"] = context
        if f"#_{invoke_id}" in self.targets:
            invoke["id_key"] = _id_key(invoke_id)
        if attrs.get("autoforward") == "true":
            invoke["forward"] = True
        out["invoke"] = invoke
        names = _to_parent(child.document, done, wire)
        if wire is not None:
            # <finalize>: what the child sends travels as <wire>.<name>; the invoking state, while it is active,
            # runs the <finalize> content and raises <name>
            out["on"] = {}
            for name in names:
                actions = [*copy.deepcopy(finalize), {"raise": {"event": name, "data": "$event.data"}}]
                self.relays.append((name, actions))
                out["on"][f"{wire}.{name}"] = [{"actions": actions}]
        if location is not None:
            entry.append({"assign": {location: escape(invoke_id)}})
        self.invoked.extend(child.documents)

    def child(self, conv: _Converter, el: _El, definition_id: str, src: str | None) -> ImportResult | None:
        """The converted document ``el`` invokes (``src``, or its ``<content>``; its issues added to the
        parent's), or ``None``: reported."""
        content = [c for c in el.children if c.tag == "content" and not c.foreign]
        inline = self.contents.get(id(el))
        if src is not None and content:
            conv.report(el, "<invoke> with both src and <content>: SCXML allows one")
            return None
        if src is None and inline is None and "srcexpr" in el.attrs:
            return None  # reported: a srcexpr whose value the document does not fix
        if src is None and inline is None:
            what = "<content expr>" if content and "expr" in content[0].attrs else \
                "<content> that is not one <scxml> document" if content else "nothing to invoke (no src or <content>)"
            conv.report(content[0] if content else el, f"<invoke> of {what} is not supported")
            return None
        found: ChildSource | None
        if inline is not None:
            found = ChildSource(inline, conv.source, self.chain, external=False, budget=self.budget)
        else:
            assert src is not None
            found = self.read(conv, el, src)
        if found is None:
            return None
        if len(self.chain) + 1 > MAX_INVOKE_DEPTH or len(definition_id) > 128:
            conv.report(el, f"<invoke> nested too deeply (more than {MAX_INVOKE_DEPTH} charts, or a definition "
                            "id over 128 characters)")
            return None
        if self.budget.left <= 0:
            conv.report(el, f"<invoke>: more than {MAX_INVOKED} invoked charts in one import; refused")
            return None
        self.budget.left -= 1
        result = self.convert_child(found, definition_id, self.resolve)
        for issue in result.issues:
            if found.external:
                conv.issues.append(ImportIssue(el.path, f"in {src}: {issue}", el.line))
            elif issue.location == "(definition)":
                conv.issues.append(ImportIssue(el.path, f"the invoked chart {issue.message}", el.line))
            else:
                conv.issues.append(issue)
        return result

    def read(self, conv: _Converter, el: _El, src: str) -> ChildSource | None:
        """The parsed document ``src`` names, read through :attr:`resolve` (``None``: reported)."""
        from durastate.importers.scxml import _parse  # (the module that imports this one)

        if self.resolve is None:
            conv.report(el, f"<invoke src={src!r}>: the chart was given as text, with no folder to read "
                            "the document from")
            return None
        if src in self.chain:
            conv.report(el, f"<invoke src={src!r}>: the document invokes itself (through {' -> '.join(self.chain)})")
            return None
        try:
            text, name = self.resolve(src)
            root = _parse(text, name)
        except ValueError as exc:
            conv.report(el, f"<invoke src={src!r}>: {exc}")
            return None
        except DefinitionError as exc:
            conv.report(el, f"<invoke src={src!r}>: {'; '.join(exc.issues)}")
            return None
        return ChildSource(root, name, (*self.chain, src), external=True, budget=self.budget)

    def context(self, conv: _Converter, el: _El, child: ImportResult | None) -> dict[str, Any] | None:
        """The child's start context from ``namelist`` and ``<param>``s (``None``: reported). A name the
        child's datamodel does not declare is left out, as SCXML leaves it out."""
        values: dict[str, Any] = {}
        for var in el.attrs.get("namelist", "").split():
            try:
                values[var] = ecma.to_value(ecma.parse(var), conv.variables)
            except ecma.Unsupported as exc:
                conv.report(el, f"namelist {var!r}: {exc}")
                return None
        for param in (c for c in el.children if c.tag == "param" and not c.foreign):
            name = param.attrs.get("name")
            expr = param.attrs.get("expr", param.attrs.get("location"))
            if not name or expr is None or not _VARIABLE.match(name):
                conv.report(param, "<param> needs a name (a variable) and an expr (or location)")
                return None
            value = conv.value(param, expr, "expr")
            if value is _nothing():
                return None
            values[name] = value
        declared = set((child.document.get("context") or {}) if child is not None else ())
        return {k: v for k, v in values.items() if k in declared}


def _with_known_exprs(conv: _Converter, state: _El, el: _El) -> dict[str, str]:
    """The attributes of ``<invoke>`` ``el`` with a ``typeexpr``/``srcexpr`` whose value as the invoke starts
    the document fixes written as ``type``/``src``: a variable whose only assignment anywhere is one
    ``<assign>`` of a string constant directly in an ``<onentry>`` of ``state``, an atomic state outside any
    ``<parallel>`` (so, when the invoke starts at the end of the step that entered it, the variable holds that
    constant). Otherwise the attributes as they are (and the ``*expr`` is reported)."""
    from durastate.importers.scxml import _STATE_TAGS, _iter

    attrs = el.attrs
    if conv.in_parallel(state) or any(c.tag in _STATE_TAGS and not c.foreign for c in state.children):
        return attrs
    out = dict(attrs)
    for attr in ("typeexpr", "srcexpr"):
        var = attrs.get(attr, "").strip()
        if not _VARIABLE.match(var) or attr[:-4] in attrs:
            continue
        writes = [e for e in _iter(conv.root) if not e.foreign and (
            (e.tag == "assign" and e.attrs.get("location", "").strip() == var)
            or any(e.attrs.get(a, "").strip() == var for a in ("item", "index", "idlocation")))]
        entries = {id(c) for c in state.children if c.tag == "onentry" and not c.foreign}
        if len(writes) != 1 or writes[0].tag != "assign" or not any(
                id(c) in entries and writes[0] in c.children for c in state.children):
            continue
        try:
            node = ecma.parse(writes[0].attrs.get("expr", ""))
        except ecma.Unsupported:
            continue
        if node[0] == "lit" and isinstance(node[1], str):
            del out[attr]
            out[attr[:-4]] = node[1]
    return out if out != attrs else attrs


def _id_key(invoke_id: str) -> str:
    """The context key that keeps the execution id of the child of ``<invoke id>`` (for ``#_<id>``)."""
    return "_invoke_" + re.sub(r"[^A-Za-z0-9_]", "_", invoke_id)


def _args_error(el: _El) -> str | None:
    """Why a ``namelist`` name or a ``<param>`` of ``<invoke>`` ``el`` is no ECMAScript expression (SCXML
    fails on it when it starts the child); ``None``: each is one (whether it maps is another matter)."""
    params = [(c.attrs.get("name"), c.attrs.get("expr", c.attrs.get("location"))) for c in el.children
              if c.tag == "param" and not c.foreign]
    for what, expr in [*((f"namelist={el.attrs['namelist']!r}", v) for v in el.attrs.get("namelist", "").split()),
                       *((f"<param name={name!r}>", expr) for name, expr in params if expr is not None)]:
        try:
            ecma.parse(expr)
        except ecma.Invalid as exc:
            return f"<invoke {what}>: {exc}"
        except ecma.Unsupported:
            continue
    return None


def _to_parent(document: dict[str, Any], done: str, wire: str | None) -> list[str]:
    """Make the child ``document`` talk to its parent as an SCXML session does, in place; the names of the
    events it sends, in document order.

    - Its ``done.invoke.<id>`` (``done``) is sent by the child itself, last thing as it ends in a final state
      (after everything else it sends), so it reaches the parent whatever the parent does meanwhile, in
      order: a done notice the parent takes as an event of its own, not durastate's ``on_done`` (which the
      parent drops once it has left the invoking state).
    - A cancelled child sends nothing: SCXML stops the invoked session, durastate runs its exit actions
      (while ``durastate.cancel`` is the event), so each send to the parent is guarded against that.
    - With ``wire``, each event travels as ``<wire>.<name>`` (see ``<finalize>``).
    """
    names: dict[str, None] = {}
    for state in document.get("states", {}).values():
        if state.get("type") == "final":
            state["exit"] = [*state.get("exit", []), {"send": {"event": done, "to": "parent"}}]

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        send = node.get("send")
        if isinstance(send, dict) and send.get("to") == "parent" and isinstance(send.get("event"), str):
            names.setdefault(send["event"])
            if wire is not None:
                send["event"] = f"{wire}.{send['event']}"
            return {"choose": [{"guard": {"ne": ["$event.name", CANCEL]}, "actions": [node]}]}
        return {key: value if key in ("context", "data", "guard") else walk(value) for key, value in node.items()}

    document.update(walk(document))
    return list(names)


def _nothing() -> Any:
    from durastate.importers.scxml import _NOTHING

    return _NOTHING
