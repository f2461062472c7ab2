"""W3C SCXML -> a durastate definition document (``durastate import scxml FILE``).

The XML is read with the standard library's expat parser, used directly so that every element keeps its
line number, and made safe without a dependency: a document with a DOCTYPE declaration (where entities,
and so the "billion laughs" expansion and external entities, are declared) is refused before anything in
it is expanded, parameter entities are never parsed and no external resource is ever fetched. SCXML does
not need a DOCTYPE.

What maps (see docs/importing.md): ``<state>``, ``<parallel>``, ``<final>``, ``<history type>``, the
``initial`` attribute and ``<initial>`` (naming a child), ``<transition event cond target type>`` (one
``on`` key per event descriptor, eventless ones to ``always``), ``<onentry>``/``<onexit>``, and the
executable content ``<raise>``, ``<send>`` (to the session itself, ``#_internal`` or ``#_parent``, or a
target computed when it runs; with a delay, to the session itself: a delayed ``send`` action, a durable
timer of the execution; ``id``/``idlocation``, ``<content>``), ``<cancel>``, ``<assign>``, ``<log>``,
``<if>`` (guarded transitions in a transition's content, else a ``choose`` action), ``<foreach>`` (a
``foreach`` action) and a ``<script>`` of assignments (translated, never run); ``<datamodel>``/``<data>``
with constant values become the context (``binding="late"``: bound on a state's first entry); a constant
``<donedata>`` is what the ``done.state`` transitions read as ``_event.data``. The definition says
``action_errors: raise`` (what fails raises ``error.execution`` in the chart, as SCXML does; what the import
sees fail in the document is a ``fail`` action) and ``done_events: scxml`` (a state's done event is
``done.state.<id>``, which any state may take). Conditions and values go through
:mod:`durastate.importers.ecma` (the ``ecmascript`` datamodel's subset). An ``<invoke>`` of an SCXML
document becomes an invoked child definition of its own (:mod:`durastate.importers.scxml_invoke`, in the
result's ``invoked``). Everything else (other ``<script>``, delayed sends to other targets, expressions
outside the subset, several targets) is reported with its element path and line; several initial states
map where they are in regions of one child that nothing else enters.

SCXML ids are global and durastate paths are nested, so each id becomes a state name and each target the
full dotted path of the state with that id (which durastate resolves from the top), as does ``In('id')``
(``in_state``). A ``<parallel>`` is a ``regions: inline`` parallel state: SCXML's own semantics (one event
queue, every region steps on each event, transitions may cross regions); an atomic region is given one leaf,
since a durastate region is a compound state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any
from xml.parsers import expat

from durastate.engine.expressions import VALUE_OPS
from durastate.engine.tables import descriptor_problem
from durastate.errors import DefinitionError
from durastate.importers import ecma, scxml_invoke
from durastate.importers.result import REGION_LEAF, ImportIssue, ImportResult, checked, escape

__all__ = ["SCXML_NS", "convert"]

SCXML_NS = "http://www.w3.org/2005/07/scxml"
MAX_BYTES = 10_000_000
"""A larger document is refused before it is parsed (a chart is kilobytes)."""
MAX_ELEMENTS = 100_000
MAX_BRANCHES = 64
"""How many guarded transitions the ``<if>``s of one transition may become (each path through them is one)."""
MAX_NESTING = 100
"""How deeply elements may nest (a definition nests at most about 100 states; deeper is refused, not a crash)."""
_BAD_NAME = re.compile(r"[.\s$~]")
"""Characters a durastate state name cannot hold (``.`` separates a path, ``$`` starts a reference, ``~``
is the timer-key separator), the rule :mod:`durastate.engine.tables` applies."""
_STATE_TAGS = ("state", "parallel", "final", "history")
_SCXML_PROCESSOR = ("http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "scxml")


@dataclass(slots=True)
class _El:
    tag: str
    attrs: dict[str, str]
    line: int
    path: str
    foreign: bool = False
    children: list[_El] = field(default_factory=list)
    text: str = ""
    seen: dict[str, int] = field(default_factory=dict)
    """How many children of each tag were parsed so far (the index of the next one's path, in constant time)."""


def _iter(el: _El) -> Iterator[_El]:
    """``el`` and every element below it, in document order."""
    yield el
    for child in el.children:
        yield from _iter(child)


class _Refused(Exception):
    pass


def _parse(text: str, source: str | None) -> _El:
    """The element tree of ``text`` (namespaces resolved, line numbers kept); a DefinitionError if the text
    is not well-formed XML, declares a DOCTYPE or is too large."""
    if len(text) > MAX_BYTES:
        raise DefinitionError([f"(document): larger than {MAX_BYTES:,} characters; refused"], source)
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_El] = []
    root: list[_El] = []
    count = 0

    def refuse_doctype(*_: Any) -> None:
        raise _Refused("a DOCTYPE declaration: SCXML needs none, and its entities (internal or external) are "
                       "never expanded here; remove it")

    def refuse_entity(*_: Any) -> None:
        raise _Refused("an entity declaration: entities are never expanded here; remove it")

    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal count
        count += 1
        if count > MAX_ELEMENTS:
            raise _Refused(f"more than {MAX_ELEMENTS:,} elements")
        ns, _, tag = name.rpartition(" ")
        plain = {k.rpartition(" ")[2]: v for k, v in attrs.items() if " " not in k}
        parent = stack[-1] if stack else None
        if len(stack) >= MAX_NESTING:
            raise _Refused(f"elements nested more than {MAX_NESTING} deep")
        if parent is None:
            path = tag
        else:
            ident = plain.get("id")
            same = parent.seen[tag] = parent.seen.get(tag, 0) + 1
            path = f"{parent.path}/{tag}[@id='{ident}']" if ident else f"{parent.path}/{tag}[{same}]"
        el = _El(tag, plain, parser.CurrentLineNumber, path, foreign=ns != SCXML_NS)
        if parent is not None:
            parent.children.append(el)
        else:
            root.append(el)
        stack.append(el)

    def end(_: str) -> None:
        stack.pop()

    def chars(data: str) -> None:
        if stack:
            stack[-1].text += data

    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.EntityDeclHandler = refuse_entity
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(text, True)
    except _Refused as exc:
        raise DefinitionError(
            [f"(document) line {parser.CurrentLineNumber}: refused: {exc}"], source) from None
    except expat.ExpatError as exc:
        raise DefinitionError(
            [f"(document) line {exc.lineno} column {exc.offset + 1}: not well-formed XML: "
             f"{expat.ErrorString(exc.code)}"], source) from None
    if not root:
        raise DefinitionError(["(document): no root element"], source)
    top = root[0]
    if top.tag != "scxml" or top.foreign:
        raise DefinitionError(
            [f"(document) line {top.line}: the root element is {top.tag!r}, not <scxml> in the namespace "
             f"{SCXML_NS}"], source)
    return top


class _Converter:
    def __init__(self, root: _El, source: str | None, invokes: scxml_invoke.Invokes,
                 definition_id: str | None = None) -> None:
        self.root = root
        self.source = source
        self.invokes = invokes  # the <invoke>s, and the definitions they give (scxml_invoke)
        self.definition_id = definition_id or ""  # given for an invoked chart, else the chart's name
        self.issues: list[ImportIssue] = []
        self.names: dict[int, str] = {}  # id(element) -> durastate state name
        self.paths: dict[str, str] = {}  # SCXML id -> dotted durastate path
        self.el_paths: dict[int, str] = {}  # id(element) -> dotted durastate path
        self.by_id: dict[str, _El] = {}  # SCXML id -> its state element
        self.sent_content: set[str] | None = None  # see content_events
        self.taken: set[str] = set()  # the paths given so far
        self.parallels: set[str] = set()  # the paths of the <parallel> states
        self.variables: set[str] = set()
        self.initial_entry: dict[str, list[Any]] = {}  # state path -> its parent's <initial> content
        self.entries: dict[str, int] | None = None  # see entry_counts
        self.restored: set[str] = set()
        self.constants: dict[str, Any] = {}  # system variables the document fixes: _name
        self.generated = 0
        self.session_copies: dict[str, Any] = {}  # <data> initialised from _sessionid: its value
        self.late_data: dict[int, list[tuple[str, Any]]] = {}  # id(state) -> its late-bound <data> values
        self.init_errors: list[str] = []  # why SCXML fails to evaluate a <data> (error.execution at the start)
        self.constants_of: dict[str, list[Any]] | None = None  # see constant_values
        self.done_values: dict[int, tuple[Any, str | None]] = {}  # see donedata
        self.cond_errors: dict[int, Any] = {}  # id(state) -> the error.execution its entry ends with: cond_error

    def report(self, el: _El, message: str) -> None:
        self.issues.append(ImportIssue(el.path, message, el.line))

    # -- states and ids -------------------------------------------------------------------------------------
    def name_states(self, el: _El, prefix: str) -> None:
        """Give every state element a durastate name and record the path of each SCXML id."""
        for child in el.children:
            if child.foreign or child.tag not in _STATE_TAGS:
                continue
            ident = child.attrs.get("id")
            if ident is None:
                self.generated += 1
                name = f"_{child.tag}{self.generated}"
            else:
                name = _BAD_NAME.sub("_", ident) or "_"
                if name != ident:
                    self.report(child, f"the id {ident!r} cannot be a durastate state name (no '.', '$', '~' or "
                                       f"spaces); renamed {name!r}")
            path = f"{prefix}.{name}" if prefix else name
            if path in self.taken:
                self.report(child, f"the state name {name!r} is taken by a sibling (after renaming); rename one")
            if ident is not None:
                if ident in self.paths:
                    self.report(child, f"the id {ident!r} is used twice; ids must be unique")
                self.paths[ident] = path
            self.names[id(child)] = name
            self.el_paths[id(child)] = path
            if ident is not None:
                self.by_id.setdefault(ident, child)
            self.taken.add(path)
            if child.tag == "parallel":
                self.parallels.add(path)
            self.name_states(child, path)

    def in_parallel(self, el: _El) -> bool:
        """Whether state ``el`` is a ``<parallel>`` or inside one (then it is in an inline region)."""
        path = self.el_paths[id(el)]
        return any(path == p or path.startswith(p + ".") for p in self.parallels)

    def target(self, el: _El, spec: str) -> str | None:
        ids = spec.split()
        if len(ids) != 1:
            self.report(el, f"several targets ({spec!r}): a durastate transition has one target")
            return None
        path = self.paths.get(ids[0])
        if path is None:
            self.report(el, f"no state with the id {ids[0]!r}")
        return path

    # -- the document ---------------------------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        root = self.root
        for key in root.attrs:
            if key not in ("initial", "name", "version", "datamodel", "binding", "xmlns"):
                self.report(root, f"the attribute {key!r} of <scxml> is not supported")
        model = root.attrs.get("datamodel", "null")
        if model not in ("ecmascript", "null"):
            self.report(root, f"datamodel={model!r}: only the 'ecmascript' subset (and 'null') is supported")
        name = self.definition_id or root.attrs.get("name") or (
            PurePath(self.source).stem if self.source else "imported")
        self.definition_id = name
        if "name" in root.attrs:
            self.constants["_name"] = root.attrs["name"]
        if not any(el.tag == "invoke" and not el.foreign for el in _iter(root)):
            self.constants["_event.invokeid"] = None  # only an invoked session's events have one
        self.name_states(root, "")
        attrs = [v for el in _iter(root) if not el.foreign for v in el.attrs.values()]
        located = any(_LOCATION.search(v) for v in attrs)
        self.constants["_ioprocessors"] = _io_processors(located)
        if located or any(_SESSIONID.search(v) for v in attrs):
            self.variables.add("_sessionid")
        context = self.datamodel(root)
        if self.init_errors:
            self.variables.add("_sessionid")  # what says the start actions ran (they raise these once)
        # SCXML's error.execution, and done.state.<id> events any state may take
        doc: dict[str, Any] = {"id": name, "action_errors": "raise", "done_events": "scxml"}
        states, initial = self.children(root)
        if initial is not None:
            doc["initial"] = initial
        if "_sessionid" in self.variables and initial is not None:
            context = {"_sessionid": None, **context}
            states[initial].setdefault("entry", []).insert(0, self.session_start())
        if context:
            doc["context"] = context
        doc["states"] = states
        return doc

    def session_start(self) -> dict[str, Any]:
        """What binds ``_sessionid`` (and the ``<data>`` initialised from it) first thing in the execution:
        the id of the start event (``<execution id>:start``), unique to the execution and the same for all
        of it, assigned in the first entry action of the initial state, once (it may be entered again)."""
        # and the error.execution of each <data> SCXML fails to evaluate, each raised on its own (a block)
        return {"choose": [{"guard": {"eq": ["$context._sessionid", None]}, "actions": [
            {"assign": {"_sessionid": "$event.id"}},
            *({"assign": {k: v}} for k, v in self.session_copies.items()),
            *({"block": [_raised_error(error)]} for error in self.init_errors)]}]}

    def datamodel(self, root: _El) -> dict[str, Any]:
        """Every ``<data>`` of the document (SCXML's early binding): the context of a new execution. With
        ``binding="late"`` a state's own ``<data>`` is undefined until the state is first entered (see
        :meth:`late_binding`)."""
        late = root.attrs.get("binding") == "late"
        found: list[_El] = []
        owners: dict[int, _El] = {}  # id(<data>) -> the state whose <datamodel> holds it

        def walk(el: _El) -> None:
            for child in el.children:
                if child.tag == "datamodel" and not child.foreign:
                    found.extend(c for c in child.children if c.tag == "data" and not c.foreign)
                    owners.update((id(c), el) for c in child.children)
                    for c in child.children:
                        if c.tag != "data" or c.foreign:
                            self.report(c, f"<{c.tag}> in <datamodel> is not supported")
                elif child.tag in _STATE_TAGS:
                    walk(child)

        walk(root)
        self.variables |= {d.attrs["id"] for d in found if "id" in d.attrs}
        # a <foreach> item or index that the datamodel does not declare is declared by the loop
        loops = {el.attrs[a] for el in _iter(root) if el.tag == "foreach" and not el.foreign
                 for a in ("item", "index") if _IDENTIFIER.match(el.attrs.get(a, ""))}
        self.variables |= loops
        # a variable a <script> declares (var x = ...) is a global of the session
        self.variables |= {name for el in _iter(root) if el.tag == "script" and not el.foreign
                           for name in _SCRIPT_VAR.findall(el.text)}
        context: dict[str, Any] = {}
        for data in found:
            ident = data.attrs.get("id")
            if not ident:
                self.report(data, "<data> without an id")
                continue
            if "." in ident or ident.startswith("$"):
                self.report(data, f"the variable {ident!r} cannot be a context key (no '.', no leading '$')")
                continue
            if "src" in data.attrs:
                self.report(data, "<data src> is not supported (nothing is fetched): give the value inline")
                continue
            expr = data.attrs.get("expr")
            if expr is None and data.text.strip():
                expr = data.text.strip()
            if expr is None:
                context[ident] = None
                continue
            try:
                ecma.parse(expr)
            except ecma.Invalid as exc:  # SCXML raises error.execution and leaves the variable unbound
                context[ident] = None
                self.init_errors.append(f"<data id={ident!r} expr={expr!r}>: {exc}")
                continue
            except ecma.Unsupported:
                pass  # reported by value()
            value = self.value(data, expr, "expr")
            if value is _NOTHING:
                continue
            owner = owners[id(data)]
            if late and owner is not root:
                context[ident] = None
                self.late_data.setdefault(id(owner), []).append((ident, value))
                continue
            if _reads_only_session(value):
                context[ident] = None
                self.session_copies[ident] = value  # set with _sessionid itself, when the execution starts
                continue
            if _has_reference(value):
                self.report(data, f"the initial value {expr!r} is not a constant; a context default is plain data")
                continue
            context[ident] = _unescape(value)
        for script in (c for c in root.children if c.tag == "script" and not c.foreign):
            self.top_script(script, context)
        return context

    def top_script(self, el: _El, context: dict[str, Any]) -> None:
        """A ``<script>`` of ``<scxml>``, run once when the document is loaded (after the datamodel): its
        assignments of constants are the values the context starts with."""
        for name, value in self.statements(el) or ():
            if _has_reference(value):
                self.report(el, f"<script>: the value of {name} is not a constant (a top-level <script> maps only "
                                "as the initial values of its variables)")
                continue
            context[name] = _unescape(value)

    def script(self, el: _El) -> Any:
        """A ``<script>`` in executable content: its assignments, in order (an ``assign`` each)."""
        found = self.statements(el)
        if found is None:
            return None
        actions = [{"assign": {name: value}} for name, value in found]
        return actions[0] if len(actions) == 1 else {"choose": [{"actions": actions}]}

    def statements(self, el: _El) -> list[tuple[str, Any]] | None:
        """The statements of a ``<script>`` as (variable, value) pairs: only assignments, ``x = expr`` or
        ``var x = expr``, are read (translated like any expression, never run); anything else is reported."""
        if "src" in el.attrs or el.children:
            self.report(el, "<script src> or with elements is not supported (nothing is fetched or run)")
            return None
        out: list[tuple[str, Any]] = []
        for statement in _split_statements(el.text):
            m = _ASSIGNMENT.match(statement)
            if m is None:
                self.report(el, "<script> is not supported: durastate never runs code from a definition, and "
                                f"translates only assignments (x = expr, var x = expr), not {statement[:60]!r}")
                return None
            value = self.value(el, m.group(2), "<script>")
            if value is _NOTHING:
                return None
            out.append((m.group(1), value))
        return out

    def children(self, el: _El) -> tuple[dict[str, Any], str | None]:
        """The states below ``el`` and the name of the one it starts in (``initial``/``<initial>``/first)."""
        states: dict[str, Any] = {}
        first: str | None = None
        initial: str | None = None
        several: str | None = None  # an <initial> whose transition has several targets (and no content)
        for child in el.children:  # first: its content becomes the entry of the state it names
            if child.tag == "initial" and not child.foreign:
                trs = [c for c in child.children if c.tag == "transition" and not c.foreign]
                targets = trs[0].attrs.get("target", "") if len(trs) == 1 == len(child.children) else ""
                if len(targets.split()) > 1 and not trs[0].children:
                    several = targets
                else:
                    initial = self.initial_element(el, child)
        for child in el.children:
            if child.foreign:
                self.report(child, f"an element of another namespace <{child.tag}> is not supported")
                continue
            if child.tag in _STATE_TAGS:
                name = self.names[id(child)]
                states[name] = self.state(child, region=el.tag == "parallel")
                if first is None and child.tag != "history":
                    first = name
            elif child.tag in ("initial", "datamodel") or (child.tag == "script" and el.tag == "scxml"):
                continue  # a top-level <script>: see datamodel()
            elif el.tag == "scxml" or child.tag not in ("onentry", "onexit", "transition", "invoke", "donedata"):
                self.report(child, f"<{child.tag}> is not supported here")
        spec = el.attrs.get("initial")
        if spec is not None:
            initial = self.initial_attribute(el, spec, states)
        elif several is not None:
            initial = self.several_initial(el, several, states, own=True)
        if initial is None:
            initial = first
        return states, initial if states else None

    def initial_attribute(self, el: _El, spec: str, states: dict[str, Any]) -> str | None:
        ids = spec.split()
        if len(ids) != 1:
            return self.several_initial(el, spec, states)
        path = self.paths.get(ids[0])
        name = path.rsplit(".", 1)[-1] if path else None
        if path is None:
            self.report(el, f"initial={spec!r}: no state with that id")
            return None
        if name not in states or self._parent_path(el) + name != path:
            self.report(el, f"initial={spec!r} is not a child of this state; durastate's initial names a child")
            return None
        return name

    def several_initial(self, el: _El, spec: str, states: dict[str, Any], *, own: bool = False) -> str | None:
        """``initial="a b"`` (states in different regions of one child): that child, and the ``initial`` of
        each compound state between it and a target set to the way to that target. Exact when nothing else
        enters the child (no transition targets it or a state in it, no history restores it): then those
        states are entered by default only from here. ``own``: ``spec`` is the target of ``el``'s
        ``<initial>`` transition (which itself enters the child once per target, and nothing else may)."""
        prefix = self._parent_path(el)
        routes: list[list[str]] = []
        for ident in spec.split():
            path = self.paths.get(ident)
            if path is None:
                self.report(el, f"initial={spec!r}: no state with the id {ident!r}")
                return None
            routes.append(path[len(prefix):].split("."))
        child = routes[0][0]
        if self.entries is None:
            self.entries, self.restored = self.entry_counts()
        ancestors = [prefix[:-1].rsplit(".", k)[0] for k in range(prefix.count("."))] if prefix else []
        if any(r[0] != child for r in routes) or self.entries.get(prefix + child, 0) != (len(routes) if own else 0) or \
                any(a in self.restored for a in ancestors):
            self.report(el, f"initial={spec!r} names several states; durastate starts a state in one child (it "
                            "maps only for states inside one child that nothing else enters)")
            return None
        chosen: dict[int, str] = {}  # id(state dict) -> the child it must start in
        for route in routes:
            node = states[child]
            for step in route[1:]:
                if node.get("type") != "parallel":
                    if chosen.setdefault(id(node), step) != step:
                        self.report(el, f"initial={spec!r} names two states of one compound state")
                        return None
                    node["initial"] = step
                node = node["states"][step]
        return child

    def _parent_path(self, el: _El) -> str:
        """The dotted path of state ``el`` plus a dot ('' for the document)."""
        return "" if el is self.root else self.el_paths[id(el)] + "."

    def initial_element(self, parent: _El, el: _El) -> str | None:
        transitions = [c for c in el.children if c.tag == "transition" and not c.foreign]
        if len(transitions) != 1 or len(el.children) != 1:
            self.report(el, "<initial> must hold exactly one <transition>")
            return None
        tr = transitions[0]
        path = self.target(tr, tr.attrs.get("target", ""))
        if path is None:
            return None
        name = path.rsplit(".", 1)[-1]
        if self._parent_path(parent) + name != path:
            self.report(tr, "the <initial> target is not a child of this state; durastate's initial names a child")
            return None
        if tr.children:
            if self.entered_only_by_default(tr, path):
                self.initial_entry[path] = self.actions(tr)
            else:
                self.report(tr, "executable content in an <initial> transition maps only when nothing else "
                                "enters its target (no other transition targets it or a state inside it, no "
                                "history restores it): it then runs first in the target's entry")
        return name

    def entered_only_by_default(self, initial: _El, path: str) -> bool:
        """Whether the state at ``path`` (and every state inside it) is entered only by the ``<initial>``
        transition ``initial``: then that transition's content, which SCXML runs after the parent's onentry
        and before the target's, is exactly the first part of the target's entry."""
        if self.entries is None:
            self.entries, self.restored = self.entry_counts()
        ancestors = [path.rsplit(".", k)[0] for k in range(1, path.count(".") + 1)]
        # the <initial> itself targets ``path`` once; any other transition into it, or a history of one of
        # its ancestors (a recorded configuration restores it without the <initial>), enters it otherwise
        return self.entries.get(path, 0) == 1 and not any(a in self.restored for a in ancestors)

    def entry_counts(self) -> tuple[dict[str, int], set[str]]:
        """How many transitions target each state or a state inside it, and the states that hold a history
        (one walk of the document, so a chart of many ``<initial>`` elements is not read once per each)."""
        entries: dict[str, int] = {}
        restored: set[str] = set()

        def walk(el: _El) -> None:
            for c in el.children:
                if c.foreign:
                    continue
                if c.tag == "transition":
                    for ident in c.attrs.get("target", "").split():
                        target = self.paths.get(ident)
                        while target:
                            entries[target] = entries.get(target, 0) + 1
                            target = target.rpartition(".")[0]
                elif c.tag == "history":
                    restored.add(self.el_paths[id(c)].rpartition(".")[0])
                walk(c)

        walk(self.root)
        return entries, restored

    def state(self, el: _El, *, region: bool = False) -> dict[str, Any]:
        """The durastate state of ``el``; ``region``: ``el`` is a child of a ``<parallel>``."""
        out: dict[str, Any] = {}
        if el.tag == "parallel":
            out["type"] = "parallel"
            out["regions"] = "inline"  # SCXML's parallel semantics: one queue, one configuration
        elif el.tag == "final":
            out["type"] = "final"
        elif el.tag == "history":
            return self.history(el)
        entry_blocks: list[list[Any]] = [self.initial_entry.pop(self.el_paths[id(el)], [])]  # <initial> content
        exit_blocks: list[list[Any]] = []
        on_done: list[Any] = []
        on: list[tuple[str, str, list[Any]]] = []  # (key as written, descriptor, transitions)
        done_error: Any = None
        always: list[Any] = []
        invoked: list[Any] = []  # what the state's <invoke> adds at the end of its entry (scxml_invoke)
        invokes = 0
        for child in el.children:
            if child.foreign:
                continue
            if child.tag == "onentry":
                entry_blocks.append(self.actions(child))
            elif child.tag == "onexit":
                exit_blocks.append(self.actions(child))
            elif child.tag == "transition":
                self.transition(el, child, on, always, on_done)
            elif child.tag == "invoke":
                self.invokes.map_invoke(self, el, child, invokes, out, invoked)
                invokes += 1
            elif child.tag == "donedata" and el.tag == "final" and not any(c is el for c in self.root.children):
                error = self.donedata(el)[1]
                if error is not None:
                    done_error = _raised_error(error)  # SCXML evaluates it once the final state is entered
            elif child.tag == "donedata":
                self.report(child, "<donedata> of a top-level <final> is not supported: a durastate "
                                   "execution's output is its context")
        entry_blocks.insert(1, self.late_binding(el))
        entry, exit_ = _blocks(entry_blocks), _blocks(exit_blocks)
        states, initial = self.children(el)
        if region and el.tag == "state" and not states:
            # SCXML lets a region be an atomic state; a durastate region is compound: one plain leaf inside it,
            # with no actions or transitions of its own, enters, rests and exits exactly as the atomic state
            states, initial = {REGION_LEAF: {}}, REGION_LEAF
        if el.tag == "state" and states:
            out["initial"] = initial
        for key in el.attrs:
            if key not in ("id", "initial"):
                self.report(el, f"the attribute {key!r} of <{el.tag}> is not supported")
        entry += invoked
        if done_error is not None:
            entry.append(done_error)
        if id(el) in self.cond_errors:
            entry.append(self.cond_errors.pop(id(el)))
        if entry:
            out["entry"] = entry
        if exit_:
            out["exit"] = exit_
        if on:
            out["on"] = {**out.get("on", {}), **{key: trs for key, _, trs in on}}
        if always:
            out["always"] = always
        if on_done:
            out["on_done"] = on_done
        if states:
            out["states"] = states
        return out

    def late_binding(self, el: _El) -> list[Any]:
        """With ``binding="late"``, what binds the ``<data>`` of state ``el`` when it is first entered (before its
        ``<onentry>``): each variable is assigned while it is still undefined (``null``: JSON has no
        ``undefined``, so a variable set to ``null`` later is bound again on the next entry)."""
        return [{"choose": [{"guard": {"eq": [f"$context.{ident}", None]}, "actions": [{"assign": {ident: value}}]}]}
                for ident, value in self.late_data.pop(id(el), [])]

    def history(self, el: _El) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "history"}
        kind = el.attrs.get("type", "shallow")
        if kind not in ("shallow", "deep"):
            self.report(el, f"type={kind!r}: a history is 'shallow' or 'deep'")
        elif kind == "deep":
            out["history"] = "deep"
        for child in el.children:
            if child.tag != "transition" or child.foreign:
                self.report(child, f"<{child.tag}> in <history> is not supported")
                continue
            if child.children:
                self.report(child, "executable content in a history's default transition is not supported")
            path = self.target(child, child.attrs.get("target", ""))
            if path is not None:
                out["target"] = path
        return out

    # -- transitions ----------------------------------------------------------------------------------------
    def transition(self, state: _El, el: _El, on: list[tuple[str, str, list[Any]]], always: list[Any],
                   on_done: list[Any]) -> None:
        data = self.done_event_data(state, el)
        if data is _NOTHING:
            return
        if data is None and el.attrs.get("event", "").split() in ([e] for e in self.content_events()):
            data = (ecma.Computed(f"$event.{CONTENT}"),)  # the <content> the event was sent with
        if data is None:
            self.add_transition(state, el, on, always, on_done)
            return
        self.constants["_event.data"] = data[0]  # what _event.data reads in this transition: its donedata
        try:
            self.add_transition(state, el, on, always, on_done)
        finally:
            del self.constants["_event.data"]

    def content_events(self) -> set[str]:
        """The events the document sends with a ``<content>``: its value is the event's data (any JSON value)
        in SCXML, and a durastate event's data is a mapping, so it is sent as ``content`` in it; the
        transitions on exactly that event read ``_event.data`` as ``$event.content``."""
        if self.sent_content is None:
            self.sent_content = {e.attrs["event"] for e in _iter(self.root) if e.tag == "send" and not e.foreign
                                 and "event" in e.attrs and any(c.tag == "content" for c in e.children)}
        return self.sent_content

    def done_event_data(self, source: _El, el: _El) -> Any:
        """For a transition on the ``done.state.<id>`` of a compound ``<state>`` (its own, or handled by
        ``source`` outside it), ``(data,)``: the ``<donedata>`` of its final children, the same for each (a
        constant the import reads for ``_event.data``); ``None`` when none has one or the transition is on
        other events; ``_NOTHING`` when they differ (reported)."""
        descriptors = el.attrs.get("event", "").split()
        if len(descriptors) != 1 or not descriptors[0].startswith("done.state."):
            return None
        state = self.by_id.get(descriptors[0].removeprefix("done.state."))
        if state is None or state.tag != "state":
            return None
        finals = [c for c in state.children if c.tag == "final" and not c.foreign]
        values = [self.donedata(f)[0] for f in finals]
        if all(v is None for v in values):
            return None
        if any(v is _NOTHING for v in values):
            self.report(el, "the <donedata> of the final states it completes on does not map (reported there)")
            return _NOTHING
        if any(v != values[0] for v in values):
            self.report(el, "the final states of the state give different <donedata>: durastate's on_done "
                            "does not know which one was reached")
            return _NOTHING
        return (values[0],)

    def donedata(self, final: _El) -> tuple[Any, str | None]:
        """The value of the ``<donedata>`` of ``final`` (``None``: it has none; ``_NOTHING``: reported) and,
        if SCXML fails to evaluate it (a ``<param location>`` that is not declared), why: SCXML raises
        ``error.execution`` then. The value must be a constant: it is what ``_event.data`` reads in the
        parent's ``done.state`` transitions, bound when the document is imported."""
        key = id(final)
        if key not in self.done_values:
            self.done_values[key] = self._donedata(final)
        return self.done_values[key]

    def _donedata(self, final: _El) -> tuple[Any, str | None]:
        blocks = [c for c in final.children if c.tag == "donedata" and not c.foreign]
        if not blocks:
            return None, None
        block = blocks[0]
        contents = [c for c in block.children if c.tag == "content" and not c.foreign]
        params = [c for c in block.children if c.tag == "param" and not c.foreign]
        if len(blocks) > 1 or (contents and params) or len(contents) > 1 or \
                len(contents) + len(params) != len(block.children):
            self.report(block, "<donedata> holds one <content> or <param>s")
            return _NOTHING, None
        value: Any
        invalid = next((why for el in [*contents, *params] if (why := _invalid(el.attrs.get("expr")))), None)
        if invalid is not None:
            return None, invalid  # SCXML raises error.execution, and the done event has no data
        if contents:
            value = self.content(contents[0])
        else:
            value = {}
            for param in params:
                name, expr, location = (param.attrs.get(k) for k in ("name", "expr", "location"))
                if not name or (expr is None) == (location is None):
                    self.report(param, "<param> needs a name and an expr or a location")
                    return _NOTHING, None
                if location is not None:
                    head = re.split(r"[.\[]", location.strip(), maxsplit=1)[0]
                    if head not in self.variables and head not in self.constants:
                        # SCXML raises error.execution, and the done event has no data
                        return None, f"<param location={location!r}>: {head!r} is not declared"
                value[name] = self.value(param, expr if expr is not None else str(location), "expr")
                if value[name] is _NOTHING:
                    return _NOTHING, None
        if value is _NOTHING:
            return _NOTHING, None
        if _has_reference(value):
            self.report(block, "<donedata> that reads the datamodel or the event is not supported: it maps only "
                               "as a constant (the parent's done.state transitions read it as _event.data)")
            return _NOTHING, None
        return _unescape(value), None

    def content(self, el: _El) -> Any:
        """The value of a ``<content>``: its ``expr``, or its text (JSON if it is JSON, else the text)."""
        if el.children:
            self.report(el, "<content> with elements (XML content) is not supported")
            return _NOTHING
        if "expr" in el.attrs:
            return self.value(el, el.attrs["expr"], "expr")
        text = el.text.strip()
        try:
            return escape(json.loads(text))
        except ValueError:
            return escape(text)

    def add_transition(self, state: _El, el: _El, on: list[tuple[str, str, list[Any]]], always: list[Any],
                       on_done: list[Any]) -> None:
        tr: dict[str, Any] = {}
        ok = True
        for key in el.attrs:
            if key not in ("event", "cond", "target", "type"):
                self.report(el, f"the attribute {key!r} of <transition> is not supported")
        if "target" in el.attrs:
            path = self.target(el, el.attrs["target"])
            ok = ok and path is not None
            if path is not None:
                tr["target"] = path
        error = self.cond_error(state, el)
        if error is not None:
            self.cond_errors.setdefault(id(state), _raised_error(error))
            return  # never taken: its cond is false each time it is evaluated, which is once, on entry
        if "cond" in el.attrs:
            guard = self.guard(el, el.attrs["cond"])
            ok = ok and guard is not _NOTHING
            if guard is not _NOTHING:
                tr["guard"] = guard
        alternatives = self.branches(el.children)
        ok = ok and alternatives is not None
        kind = el.attrs.get("type", "external")
        if kind == "internal":
            tr["internal"] = True
        elif kind != "external":
            self.report(el, f"type={kind!r}: a transition is 'internal' or 'external'")
        if not ok or alternatives is None:
            return  # reported: a transition without its guard or target would do something else
        trs = [_guarded(tr, conds, actions) for conds, actions in alternatives]
        if state.tag == "final":
            self.report(el, "a transition out of a <final> state is never taken")
            return
        event = el.attrs.get("event")
        if event is None:
            always.extend(trs)
            return
        descriptors = event.split()
        if not descriptors:
            self.report(el, "event='' names no event")
        own_done = f"done.state.{state.attrs.get('id')}"
        for descriptor in descriptors:
            if descriptor == ".*":
                descriptor = "*"  # the optional ".*" suffix on the empty prefix of every event: the wildcard
            problem = descriptor_problem(descriptor)
            if problem is not None:
                self.report(el, f"event descriptor {descriptor!r}: {problem}")
                continue
            d = descriptor.removesuffix(".*")
            if d == own_done and state.tag in ("state", "parallel") and len(descriptors) == 1:
                on_done.extend(trs)  # the state's own completion: durastate's on_done
                continue
            platform = next((p for p in _PLATFORM_EVENTS if d == p or d.startswith(p + ".")), None)
            if platform is not None:
                self.report(el, f"event descriptor {descriptor!r}: durastate never raises {platform}.* events (it "
                                "raises done.state.<id> and error.execution; an <invoke> does not map)")
                continue
            for one in trs:
                self.add_on(el, on, descriptor, one)

    def cond_error(self, state: _El, el: _El) -> str | None:
        """Why the ``cond`` of eventless transition ``el`` is no ECMAScript expression, where SCXML evaluates it
        exactly once each time ``state`` is entered: ``state`` is atomic and outside a ``<parallel>``, ``el``
        its first eventless transition and a later one has no ``cond`` (so the state is left right after
        its entry). SCXML then raises ``error.execution`` and takes the cond as false: the import raises it
        at the end of the state's entry and leaves the transition out. ``None``: not that case."""
        cond = el.attrs.get("cond")
        if cond is None or "event" in el.attrs or state.tag != "state" or self.in_parallel(state) or any(
                c.tag in _STATE_TAGS and not c.foreign for c in state.children):
            return None
        eventless = [c for c in state.children if c.tag == "transition" and not c.foreign and "event" not in c.attrs]
        if eventless[0] is not el or not any("cond" not in c.attrs for c in eventless[1:]):
            return None
        try:
            ecma.parse(cond)
        except ecma.Invalid as exc:
            return f"cond={cond!r}: {exc}"
        except ecma.Unsupported:
            return None
        return None

    def add_on(self, el: _El, on: list[tuple[str, str, list[Any]]], descriptor: str, tr: dict[str, Any]) -> None:
        """Add ``tr`` under ``descriptor`` so that durastate tries the state's transitions in SCXML's document
        order: durastate orders by ``on`` key first, so a descriptor seen again after an overlapping one gets
        a new, equivalent key (``foo.*`` is ``foo``) at the end; if none is left, it is reported."""
        d = descriptor[:-2] if descriptor.endswith(".*") else descriptor
        spellings = [d] if d == "*" else [d, f"{d}.*"]
        for pos, (_, desc, trs) in enumerate(on):
            if desc == d and not any(_overlap(d, later) for _, later, _ in on[pos + 1:]):
                trs.append(tr)
                return
        used = {key for key, _, _ in on}
        for key in spellings:
            if key not in used:
                on.append((key, d, [tr]))
                return
        self.report(el, f"the document order of the transitions for {descriptor!r} cannot be kept (durastate "
                        "orders them by event descriptor first); reorder them in the source")

    # -- executable content ---------------------------------------------------------------------------------
    def branches(self, content: list[_El]) -> list[tuple[list[Any], list[Any]]] | None:
        """A transition's executable content as alternatives ``(conditions, actions)``, one per path through
        its ``<if>``s, in document order (``None``: something was reported). durastate actions have no
        branches, so the transition becomes one guarded transition per alternative, its ``cond`` and the
        branch conditions together: the same choice SCXML makes, as long as no ``<assign>`` runs before an
        ``<if>`` (its conditions are then tested on the datamodel the transition starts from)."""
        found = self._sequence(content)
        if found is None:
            return None
        alternatives, _ = found
        return alternatives

    def _sequence(self, content: list[_El], branch: str = "block") -> tuple[list[tuple[list[Any], list[Any]]],
                                                                           bool] | None:
        """The alternatives of ``content`` and whether it assigns (a later ``<if>`` would see the change);
        ``branch``: the tag of the ``<if>`` branch it is the content of (``block``: the transition's own)."""
        alternatives: list[tuple[list[Any], list[Any]]] = [([], [])]
        assigns, ok = False, True
        for el in content:
            if el.tag != "if" or el.foreign:
                actions = self.actions(_El(branch, {}, el.line, el.path, children=[el]))
                if self.static_error(el) is not None and branch == "block":
                    # error.execution raised: the rest of the transition's content is skipped
                    return [(conds, [*done, *actions]) for conds, done in alternatives], assigns
                alternatives = [(conds, [*done, *actions]) for conds, done in alternatives]
                assigns = assigns or (el.tag == "assign" and not el.foreign)
                continue
            if assigns:
                # its conditions must see what the content before it assigned: a choose action, tested then
                choice = self.choose(el)
                ok = ok and choice is not None
                alternatives = [(conds, [*done, choice]) for conds, done in alternatives]
                continue
            arms = self._if_arms(el)
            if arms is None:
                ok = False
                continue
            arm_alternatives, arm_assigns = arms
            if len(alternatives) * len(arm_alternatives) > MAX_BRANCHES:
                self.report(el, f"more than {MAX_BRANCHES} paths through the <if>s of one transition; split it")
                return None
            alternatives = [([*c1, *c2], [*a1, *a2]) for c1, a1 in alternatives for c2, a2 in arm_alternatives]
            assigns = assigns or arm_assigns
        return (alternatives, assigns) if ok else None

    def _if_arms(self, el: _El) -> tuple[list[tuple[list[Any], list[Any]]], bool] | None:
        """The alternatives of one ``<if>``: each branch guarded by its condition and the negation of every
        earlier one (an ``<else>``, or nothing when there is none, by the negations only)."""
        segments: list[tuple[_El, list[_El]]] = [(el, [])]  # (<if>/<elseif>/<else>, its content)
        for child in el.children:
            if child.tag in ("elseif", "else") and not child.foreign:
                segments.append((child, []))
            else:
                segments[-1][1].append(child)
        if segments[-1][0].tag != "else":
            segments.append((_El("else", {}, el.line, el.path), []))  # no <else>: a branch that does nothing
        if len(segments) > MAX_BRANCHES:
            self.report(el, f"more than {MAX_BRANCHES} branches in one <if>; split the transition")
            return None
        out: list[tuple[list[Any], list[Any]]] = []
        earlier: list[Any] = []
        assigns, ok = False, True
        for marker, content in segments:  # every branch is read, so that each problem in it is reported
            conds = [{"not": g} for g in earlier]
            cond = marker.attrs.get("cond")
            if marker.tag != "else" and cond is None:
                self.report(marker, f"<{marker.tag}> without a cond")
                ok = False
            if cond is not None:
                guard = self.guard(marker, cond)
                ok = ok and guard is not _NOTHING
                conds.append(guard)
                earlier.append(guard)
            found = self._sequence(content, marker.tag)
            if found is None or not ok:
                ok = False
                continue
            alternatives, arm_assigns = found
            assigns = assigns or arm_assigns
            out.extend(([*conds, *c], a) for c, a in alternatives)
            if len(out) > MAX_BRANCHES:
                self.report(el, f"more than {MAX_BRANCHES} paths through one <if>; split the transition")
                return None
        return (out, assigns) if ok else None

    def actions(self, block: _El) -> list[Any]:
        """The executable content of ``block`` as durastate actions."""
        out: list[Any] = []
        for el in block.children:
            if el.foreign:
                self.report(el, f"an element of another namespace <{el.tag}> is not supported")
                continue
            if el.tag == "send":
                el = _literal_delay(el)
            error = self.static_error(el)
            if error is not None:
                # SCXML raises error.execution and skips the rest of the content around it (enclosing loops
                # and branches too): the fail action does, when it runs
                out.extend(self.failed_send(el, error))
                break
            action = self.action(el)
            if action is not None:
                out.append(action)
        return out

    def failed_send(self, el: _El, error: str) -> list[Any]:
        """The actions of an element SCXML fails on (``error``): a ``fail`` action; for a ``<send>`` with an
        ``id`` or ``idlocation``, the ``error.execution`` carries the send's id (``_event.sendid``), an
        ``idlocation`` one the import names after the element's line (SCXML lets the processor choose it)."""
        if el.tag != "send" or el.foreign:
            return [_raised_error(error)]
        location = el.attrs.get("idlocation")
        if location is not None and _IDENTIFIER.match(location) and location in self.variables:
            send_id = f"send.line{el.line}"
            return [{"assign": {location: send_id}}, _raised_error(error, send_id)]
        if "id" in el.attrs:
            return [_raised_error(error, escape(el.attrs["id"]))]
        return [_raised_error(error)]

    def static_error(self, el: _El) -> str | None:
        """Why ``el`` is an error SCXML meets when it runs it (then it raises ``error.execution``), seen in
        the document itself: a ``<send>`` to a target that is no URI nor ``#_...`` or of a type other than the
        SCXML event processor (the one durastate has), an ``<assign>`` to a
        variable the datamodel does not declare or to a system variable, a ``<foreach>`` whose item or index
        is no variable name or whose array is a constant, or a variable that only ever holds constants, that
        is no array."""
        if el.tag == "send":
            target = el.attrs.get("target")
            if target is not None and not target.startswith("#") and not _URI.match(target):
                return f"<send target={target!r}>: not a valid target"
            kind = el.attrs.get("type")
            if kind is not None and kind not in _SCXML_PROCESSOR:
                # what an SCXML processor without that event I/O processor does (SCXML 6.2.4)
                return f"<send type={kind!r}>: durastate has only the SCXML event processor"
            for var in el.attrs.get("namelist", "").split():
                try:
                    ecma.parse(var)
                except ecma.Invalid as exc:
                    return f"<send namelist={el.attrs['namelist']!r}>: {exc}"
                except ecma.Unsupported:
                    pass  # reported where the data is mapped
        elif el.tag == "assign":
            head = re.split(r"[.\[]", el.attrs.get("location", "").strip(), maxsplit=1)[0]
            if head in _SYSTEM_VARIABLES:
                return f"<assign location={el.attrs.get('location')!r}>: the system variable {head} is read-only"
            if _IDENTIFIER.match(head) and not head.startswith("_") and head not in self.variables:
                return f"<assign location={el.attrs.get('location')!r}>: {head!r} is not declared"
            try:
                ecma.parse(el.attrs.get("expr", "null"))
            except ecma.Invalid as exc:
                return f"<assign expr={el.attrs.get('expr')!r}>: {exc}"
            except ecma.Unsupported:
                pass  # reported where the value is mapped
        elif el.tag == "foreach":
            for attr in ("item", "index"):
                name = el.attrs.get(attr)
                if name is not None and not _IDENTIFIER.match(name):
                    return f"<foreach {attr}={name!r}>: not a variable name"
            array = el.attrs.get("array", "").strip()
            # a variable that only ever holds constants, none of them an array (constant_values keeps no
            # array), or a constant that is no array: SCXML cannot iterate over it, whenever the loop runs
            values = self.constant_values().get(array) if array in self.variables else None
            try:
                node = ecma.parse(array) if values is None else None
            except ecma.Unsupported:
                node = None
            if values or (node is not None and node[0] == "lit" and not isinstance(node[1], list)):
                return f"<foreach array={array!r}>: not an array"
        return None

    def action(self, el: _El) -> Any:
        tag = el.tag
        if tag == "raise":
            event = el.attrs.get("event")
            if not event or descriptor_problem(event) is not None or "*" in event:
                self.report(el, f"<raise event={event!r}>: not an event name durastate accepts")
                return None
            return {"raise": {"event": event}}
        if tag == "log":
            return self.log(el)
        if tag == "assign":
            return self.assign(el)
        if tag == "send":
            return self.send(el)
        if tag == "script":
            return self.script(el)
        if tag == "if":
            return self.choose(el)
        if tag in ("elseif", "else"):
            self.report(el, f"<{tag}> outside an <if>")
            return None
        if tag == "foreach":
            return self.foreach(el)
        if tag == "cancel":
            return self.cancel(el)
        self.report(el, f"<{tag}> is not executable content durastate supports")
        return None

    def choose(self, el: _El) -> Any:
        """``<if>``/``<elseif>``/``<else>`` as a ``choose`` action: its conditions are tested when it runs."""
        branches: list[dict[str, Any]] = []
        current: dict[str, Any] = {}
        body = _El("if", {}, el.line, el.path)
        ok = True

        def close() -> None:
            current["actions"] = self.actions(body)
            branches.append(dict(current))

        marker = el
        for child in [el, *el.children]:
            if child is el or (child.tag in ("elseif", "else") and not child.foreign):
                if child is not el:
                    close()
                marker, current, body = child, {}, _El(child.tag, {}, child.line, child.path)
                if marker.tag != "else":
                    cond = marker.attrs.get("cond")
                    guard = _NOTHING if cond is None else self.guard(marker, cond)
                    if cond is None:
                        self.report(marker, f"<{marker.tag}> without a cond")
                    ok = ok and guard is not _NOTHING
                    current["guard"] = guard
                continue
            body.children.append(child)
        close()
        return {"choose": branches} if ok else None

    def foreach(self, el: _El) -> Any:
        """``<foreach array item index>``: a ``foreach`` action over a copy of the array, item and index
        assigned to their datamodel variables (declared by the loop if the datamodel has not)."""
        refs: dict[str, str] = {}
        for attr in ("item", "index"):
            name = el.attrs.get(attr)
            if name is None:
                continue
            if not _IDENTIFIER.match(name):
                self.report(el, f"{attr}={name!r} is not a variable name")
                return None
            refs[attr] = name
        if "item" not in refs or "array" not in el.attrs:
            self.report(el, "<foreach> needs an array and an item")
            return None
        array = self.value(el, el.attrs["array"], "array")
        if array is _NOTHING:
            return None
        return {"foreach": {"array": array, **refs, "actions": self.actions(el)}}

    def cancel(self, el: _El) -> Any:
        """``<cancel sendid|sendidexpr>``: a ``cancel`` action, which drops the pending delayed send."""
        if ("sendid" in el.attrs) == ("sendidexpr" in el.attrs):
            self.report(el, "<cancel> needs exactly one of sendid and sendidexpr")
            return None
        if "sendid" in el.attrs:
            return {"cancel": escape(el.attrs["sendid"])}
        value = self.value(el, el.attrs["sendidexpr"], "sendidexpr")
        return None if value is _NOTHING else {"cancel": value}

    def log(self, el: _El) -> Any:
        expr = el.attrs.get("expr")
        label = el.attrs.get("label")
        value: Any = None
        if expr is not None:
            value = self.value(el, expr, "expr")
            if value is _NOTHING:
                return None
        if label:
            return {"log": {label: value}}  # a mapping of values: logged as {'label': value}
        return {"log": value}

    def assign(self, el: _El) -> Any:
        location = el.attrs.get("location", "")
        expr = el.attrs.get("expr")
        if expr is None:
            self.report(el, "<assign> without expr (child content) is not supported")
            return None
        try:
            ref = ecma.to_value(ecma.parse(location), self.variables)
        except ecma.Unsupported as exc:
            self.report(el, f"location={location!r}: {exc}")
            return None
        if not isinstance(ref, str) or not ref.startswith("$context."):
            self.report(el, f"location={location!r} is not a datamodel variable")
            return None
        value = self.value(el, expr, "expr")
        if value is _NOTHING:
            return None
        return {"assign": {ref[len("$context."):]: value}}

    def send(self, el: _El) -> Any:
        attrs = el.attrs
        for attr in ("eventexpr", "targetexpr", "typeexpr", "delayexpr"):
            if attr in attrs and attr.removesuffix("expr") not in attrs:
                return self.send_expr(el, attr)
        for key in attrs:
            if key not in ("event", "target", "type", "id", "delay", "namelist", "idlocation"):
                self.report(el, f"<send {key}=...> is not supported (only constant event, target, type, "
                                "delay, id, idlocation and namelist attributes)")
                return None
        event = attrs.get("event")
        if not event or descriptor_problem(event) is not None or "*" in event:
            self.report(el, f"<send event={event!r}>: not an event name durastate accepts")
            return None
        delay = attrs.get("delay")
        seconds = self.delay_of(el)
        if delay not in (None, "") and seconds is None and _DELAY.match(delay) is None:
            self.report(el, f"<send delay={delay!r}>: not a delay (a number with 's' or 'ms')")
            return None
        data: dict[str, Any] = {}
        for var in attrs.get("namelist", "").split():
            try:
                data[var] = ecma.to_value(ecma.parse(var), self.variables)
            except ecma.Unsupported as exc:
                self.report(el, f"namelist {var!r}: {exc}")
                return None
        for child in el.children:
            if child.tag == "param" and not child.foreign:
                pname = child.attrs.get("name")
                expr = child.attrs.get("expr", child.attrs.get("location"))
                if not pname or expr is None:
                    self.report(child, "<param> needs a name and an expr (or location)")
                    return None
                value = self.value(child, expr, "expr")
                if value is _NOTHING:
                    return None
                data[pname] = value
            elif child.tag == "content" and not child.foreign:
                if data or len([c for c in el.children if c.tag == "content"]) > 1:
                    self.report(child, "<send> holds one <content> or <param>s and a namelist")
                    return None
                value = self.content(child)
                if value is _NOTHING:
                    return None
                data[CONTENT] = value  # what _event.data reads in the transitions on this event
            else:
                self.report(child, f"<{child.tag}> in <send> is not supported (only <param> and <content>)")
                return None
        target = attrs.get("target")
        body: dict[str, Any] = {"event": event}
        if data:
            body["data"] = data
        if not self.send_id(el, body):
            return None
        if seconds is not None:
            # a durable timer of the execution, not of the state: it outlives the state that sent it, as the
            # delayed event does, and <cancel> (or the session's end) drops it
            if target is not None:
                self.report(el, f"<send target={target!r} delay={delay!r}>: a delayed send goes only to the "
                                "session itself")
                return None
            body.update(to="self", delay=int(seconds) if seconds.is_integer() else seconds)
            return {"send": body}
        if target == "#_internal":
            body.pop("id", None)
            body.pop("id_location", None)  # an internal event has no send id (SCXML leaves it blank)
            return {"raise": body}
        if target is None:
            body["to"] = "self"
        elif target == "#_parent":
            body["to"] = "parent"
        elif target in self.invokes.targets:
            body["to"] = self.invokes.targets[target]  # #_<invokeid>: the child that <invoke> started
        elif target.startswith("#_scxml_"):
            # another session's address, written in the document: no execution has it (an execution's is made
            # when it starts, see SESSION_LOCATION), so the event cannot be delivered: SCXML's
            # error.communication, raised as the send would be
            return {"raise": {"event": "error.communication",
                              "data": {"error": f"<send target={target!r}>: no such session"}}}
        else:
            self.report(el, f"<send target={target!r}>: only the session itself, #_internal, #_parent and "
                            "#_<id> of an <invoke id> of the document are supported")
            return None
        return {"send": body}

    def send_id(self, el: _El, body: dict[str, Any]) -> bool:
        """The send's ``id`` (which the event carries as ``_event.sendid``; to the session itself, a send with
        an id is a durable one, which ``<cancel>`` reaches) and ``idlocation`` (the variable the id is stored
        in: ``id_location``, an id the execution gives). ``False``: reported."""
        if "id" in el.attrs:
            body["id"] = escape(el.attrs["id"])
        location = el.attrs.get("idlocation")
        if location is None:
            return True
        if "id" in el.attrs:
            self.report(el, "<send> has both id and idlocation")
            return False
        if not _IDENTIFIER.match(location) or location not in self.variables:
            self.report(el, f"idlocation={location!r} is not a datamodel variable")
            return False
        body["id_location"] = location
        return True

    def send_expr(self, el: _El, attr: str) -> Any:
        """``<send eventexpr|targetexpr|typeexpr|delayexpr>``: a string constant is that attribute; a datamodel variable
        that only ever holds constants (its ``<data>`` and every ``<assign>`` to it) a ``choose`` of one send
        per value, tested when it runs. A value SCXML cannot send with (not a string, a target that is no
        URI), or none of them, raises ``error.execution``, as SCXML does then."""
        expr, plain = el.attrs[attr], attr.removesuffix("expr")
        try:
            node = ecma.parse(expr)
        except ecma.Unsupported as exc:
            self.report(el, f"{attr}={expr!r}: {exc}")
            return None
        values: list[Any] | None = None
        ref: Any = None
        if node[0] == "lit" and isinstance(node[1], str):
            values = [node[1]]
        elif node[0] == "name" and node[1] in self.variables and node[1] in self.constant_values():
            values, ref = self.constant_values()[node[1]], f"$context.{node[1]}"
        if values is None and attr in ("targetexpr", "typeexpr"):
            return self.send_computed(el, attr)
        if values is None:
            self.report(el, f"<send {attr}={expr!r}> is not supported: only a string constant or a datamodel "
                            "variable that only ever holds constants")
            return None
        sends = []
        for value in values:
            if not isinstance(value, str):
                sends.append(_raised_error(f"<send {attr}={expr!r}>: {value!r} is not a string"))
                continue
            attrs = {(plain if k == attr else k): (value if k == attr else v) for k, v in el.attrs.items()}
            one = _El(el.tag, attrs, el.line, el.path, el.foreign, el.children, el.text)
            error = self.static_error(one)
            action = _raised_error(error) if error is not None else self.send(one)
            if action is None:
                return None
            sends.append(action)
        if ref is None:
            return sends[0]
        return {"choose": [*({"guard": {"eq": [ref, value]}, "actions": [action]}
                             for value, action in zip(values, sends, strict=True)),
                           {"actions": [_raised_error(f"<send {attr}={expr!r}>: no value to send with")]}]}

    def send_computed(self, el: _El, attr: str) -> Any:
        """``<send targetexpr|typeexpr>`` of a value computed when it runs: a ``choose`` on it. A type is the
        SCXML event processor's (by either name) or SCXML fails (``error.execution``). A target is the session's
        own address (``#_scxml_`` and its ``_sessionid``, what its processor's ``location`` is), ``#_internal``,
        ``#_parent``, or else an execution id (an ``_event.origin``, which is the sending execution's id);
        none (undefined) is SCXML's ``error.execution``."""
        expr = el.attrs[attr]
        value = self.value(el, expr, attr)
        if value is _NOTHING:
            return None
        if not (isinstance(value, str) and value.startswith("$") and not value.startswith("$$")):
            self.report(el, f"<send {attr}={expr!r}> is not supported: a computed {attr} is a variable or an event "
                            "field, not an expression")
            return None

        def sent(**changes: str | None) -> Any:
            attrs = {k: v for k, v in el.attrs.items() if k != attr}
            attrs.update((k, v) for k, v in changes.items() if v is not None)
            return self.send(_El(el.tag, attrs, el.line, el.path, el.foreign, el.children, el.text))

        failed = _raised_error(f"<send {attr}={expr!r}>: no {attr.removesuffix('expr')} to send with")
        if attr == "typeexpr":
            action = sent()
            return None if action is None else {"choose": [
                {"guard": {"in": [value, list(_SCXML_PROCESSOR)]}, "actions": [action]},
                {"guard": {"in": [value, [None, ""]]}, "actions": [failed]},
                {"actions": [_raised_error(f"<send {attr}={expr!r}>: durastate has only the SCXML event processor")]}]}
        if self.delay_of(el) is not None or "delayexpr" in el.attrs:
            self.report(el, f"<send {attr}={expr!r}> with a delay: a delayed send goes only to the session itself")
            return None
        branches: list[tuple[Any, Any]] = [({"in": [value, [None, ""]]}, failed)]
        if "_sessionid" in self.variables:
            branches.append(({"eq": [value, SESSION_LOCATION]}, sent()))
        branches += [({"eq": [value, target]}, sent(target=target)) for target in ("#_internal", "#_parent")]
        other = sent()
        if other is None or any(action is None for _, action in branches):
            return None
        _retarget(other, value)  # an execution id
        return {"choose": [*({"guard": guard, "actions": [action]} for guard, action in branches),
                           {"actions": [other]}]}

    def constant_values(self) -> dict[str, list[Any]]:
        """The datamodel variables that only ever hold constants (their ``<data>`` value, if any, and every
        ``<assign>`` to them), each with those values in document order; computed once."""
        if self.constants_of is None:
            values: dict[str, list[Any]] = {}
            bad: set[str] = set()

            def add(var: str, expr: str | None) -> None:
                try:
                    node = None if expr is None else ecma.parse(expr)
                except ecma.Unsupported:
                    node = None
                if node is None or node[0] != "lit" or isinstance(node[1], dict | list):
                    bad.add(var)
                elif node[1] not in values.setdefault(var, []):
                    values[var].append(node[1])

            for e in _iter(self.root):
                if e.foreign:
                    continue
                if e.tag == "data" and "id" in e.attrs:
                    if "expr" in e.attrs or e.text.strip():
                        add(e.attrs["id"], e.attrs.get("expr", e.text.strip()))
                    else:
                        values.setdefault(e.attrs["id"], [])
                elif e.tag == "assign":
                    loc = e.attrs.get("location", "").strip()
                    if _IDENTIFIER.match(loc):
                        add(loc, e.attrs.get("expr"))
                    else:
                        bad.add(re.split(r"[.\[]", loc, maxsplit=1)[0])
                else:
                    for attr in ("item", "index", "idlocation"):
                        if attr in e.attrs:
                            bad.add(e.attrs[attr])
            self.constants_of = {k: v for k, v in values.items() if k not in bad and v}
        return self.constants_of

    def delay_of(self, el: _El) -> float | None:
        """The delay of a ``<send delay>`` in seconds (``None``: no constant delay)."""
        m = _DELAY.match(el.attrs.get("delay", ""))
        if m is None:
            return None
        seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
        return seconds if seconds > 0 else None

    # -- expressions ----------------------------------------------------------------------------------------
    def value(self, el: _El, expr: str, attr: str) -> Any:
        try:
            return ecma.to_value(ecma.bind(ecma.parse(expr), self.constants), self.variables)
        except ecma.Unsupported as exc:
            self.report(el, f"{attr}={expr!r}: {exc}")
            return _NOTHING

    def guard(self, el: _El, expr: str) -> Any:
        try:
            return ecma.to_guard(ecma.bind(ecma.parse(expr), self.constants), self.variables, self.paths)
        except ecma.Unsupported as exc:
            self.report(el, f"cond={expr!r}: {exc}")
            return _NOTHING


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SESSIONID = re.compile(r"(?<![\w$.])_sessionid(?![\w$])")
"""A read of the system variable ``_sessionid`` in an attribute (an expression, a location)."""
_LOCATION = re.compile(r"(?<![\w$.])_ioprocessors\b.*\.\s*location\b")
"""A read of an I/O processor's ``location`` in an attribute."""
SESSION_LOCATION = {"add": ["#_scxml_", "$context._sessionid"]}
"""The session's address, ``#_scxml_<_sessionid>``: what its processor's ``location`` is, and a send's
``targetexpr`` that evaluates to it sends to the session itself."""


def _io_processors(located: bool) -> dict[str, Any]:
    """``_ioprocessors``: the one event processor an imported chart has, under both its names; with its
    ``location`` (computed from ``_sessionid``) when the document reads it."""
    entry = {"location": ecma.Computed(SESSION_LOCATION)} if located else {}
    return {_SCXML_PROCESSOR[0]: entry, _SCXML_PROCESSOR[1]: entry}


_SCRIPT_VAR = re.compile(r"(?<![\w$.])var\s+([A-Za-z_][A-Za-z0-9_]*)")
"""A variable a ``<script>`` declares."""
_ASSIGNMENT = re.compile(r"^(?:var\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(.+)$", re.S)
"""One statement of a ``<script>`` that maps: an assignment to a variable."""


def _split_statements(text: str) -> list[str]:
    """The statements of a script: split at ``;`` and line ends outside strings, empty ones dropped."""
    out, current, quote = [], [], ""
    chars = iter(text)
    for c in chars:
        if quote:
            current.append(c)
            if c == "\\":
                current.append(next(chars, ""))
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
            current.append(c)
        elif c in ";\n":
            out.append("".join(current).strip())
            current = []
        else:
            current.append(c)
    out.append("".join(current).strip())
    return [s for s in out if s]


CONTENT = "content"
"""The key of a durastate event's data that holds what an SCXML ``<send>`` sent as its ``<content>``."""


def _invalid(expr: str | None) -> str | None:
    """Why ``expr`` is no ECMAScript expression at all (SCXML fails to evaluate it), or ``None``."""
    try:
        if expr is not None:
            ecma.parse(expr)
    except ecma.Invalid as exc:
        return f"expr={expr!r}: {exc}"
    except ecma.Unsupported:
        pass  # reported where the value is mapped
    return None


def _retarget(action: Any, to: str) -> None:
    """Send the sends of ``action`` (one, or those of a ``choose`` of them) to ``to`` instead."""
    if "send" in action:
        action["send"]["to"] = to
    for branch in action.get("choose", ()):
        for inner in branch["actions"]:
            _retarget(inner, to)


def _reads_only_session(value: Any) -> bool:
    """Whether ``value`` reads the context, and there only ``_sessionid`` (a copy of it, or the location)."""
    refs: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str) and v.startswith("$") and not v.startswith("$$"):
            refs.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return bool(refs) and all(r == "$context._sessionid" for r in refs)
_SYSTEM_VARIABLES = ("_sessionid", "_name", "_ioprocessors", "_event", "_x")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
"""A target with a URI scheme (``http:``...): a real address, reported as not supported, not an error."""
_PLATFORM_EVENTS = ("error.platform",)
"""The events an SCXML processor raises itself that durastate never raises (``error.execution`` it raises
when an action fails, ``done.state.<id>`` when a state completes (``done_events: scxml``),
``error.communication`` the import raises for a send to another session's address)."""
_DELAY = re.compile(r"^\s*(\d*\.?\d+)\s*(ms|s)\s*$")
"""An SCXML delay (CSS2 time): ``1s``, ``.5s``, ``500ms``."""

def _raised_error(error: str | None, send_id: Any = None) -> dict[str, Any]:
    """What an element SCXML would fail on becomes: a ``fail`` action saying why, which (the definition says
    ``action_errors: raise``) raises ``error.execution`` and skips the rest of the executable content
    around it, loops and branches included, as SCXML does; ``send_id``: the id of the send that failed."""
    return {"fail": error if send_id is None else {"error": error, "send_id": send_id}}


def _blocks(blocks: list[list[Any]]) -> list[Any]:
    """The actions of a state's ``<onentry>`` (or ``<onexit>``) elements, in order: each one is an SCXML block
    of its own (an error ends the rest of its block only), so with more than one, each is a ``block``."""
    blocks = [b for b in blocks if b]
    if len(blocks) == 1:
        return blocks[0]
    return [{"block": b} for b in blocks]


def _literal_delay(el: _El) -> _El:
    """``<send delayexpr="'1s'">`` (a string constant, as the W3C tests write it) is ``<send delay="1s">``."""
    expr = el.attrs.get("delayexpr")
    if expr is None or "delay" in el.attrs:
        return el
    try:
        node = ecma.parse(expr)
    except ecma.Unsupported:
        return el
    if node[0] != "lit" or not isinstance(node[1], str):
        return el
    attrs = {("delay" if k == "delayexpr" else k): (node[1] if k == "delayexpr" else v) for k, v in el.attrs.items()}
    return _El(el.tag, attrs, el.line, el.path, el.foreign, el.children, el.text)


def _guarded(tr: dict[str, Any], conds: list[Any], actions: list[Any]) -> dict[str, Any]:
    """Transition ``tr`` (target, guard, flags) for one alternative of its content: its guard and the
    alternative's conditions together, and the alternative's actions."""
    out: dict[str, Any] = {k: v for k, v in tr.items() if k == "target"}
    guards = [*([tr["guard"]] if "guard" in tr else []), *conds]
    if guards:
        out["guard"] = guards[0] if len(guards) == 1 else {"and": guards}
    if actions:
        out["actions"] = actions
    out.update((k, v) for k, v in tr.items() if k not in ("target", "guard"))
    return out


_NOTHING: Any = object()
"""What an expression that could not be mapped gives (it has been reported)."""


def _overlap(a: str, b: str) -> bool:
    """Whether two (normalised) descriptors can match the same event."""
    return a == "*" or b == "*" or a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _has_reference(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith("$") and not value.startswith("$$")
    if isinstance(value, dict):
        return True if len(value) == 1 and next(iter(value)) in VALUE_OPS else any(
            _has_reference(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_reference(v) for v in value)
    return False


def _unescape(value: Any) -> Any:
    """A constant as the context holds it (``$$x`` is how a value spells the text ``$x``)."""
    if isinstance(value, str):
        return value[1:] if value.startswith("$$") else value
    if isinstance(value, dict):
        return {k: _unescape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unescape(v) for v in value]
    return value


def convert(text: str, source: str | None = None, *, resolve: scxml_invoke.Resolve | None = None) -> ImportResult:
    """The durastate definition of the SCXML document ``text`` and what could not be mapped.

    ``source`` (a file name) names the definition when ``<scxml>`` has no ``name``. A document that is not
    well-formed, has a DOCTYPE, or whose root is not ``<scxml>`` raises
    :class:`~durastate.errors.DefinitionError`. The charts its ``<invoke>``s start are definitions of their
    own, in the result's ``invoked``; ``resolve`` reads the document an ``<invoke src>`` names (without it,
    such an invoke is reported).
    """
    return _convert_document(scxml_invoke.ChildSource(_parse(text, source), source, (), external=False), None,
                             resolve)


def _convert_document(found: scxml_invoke.ChildSource, definition_id: str | None,
                      resolve: scxml_invoke.Resolve | None) -> ImportResult:
    """A chart (the top one, or one an ``<invoke>`` starts, under ``definition_id``) and the charts it invokes."""
    invokes = scxml_invoke.Invokes(_convert_document, resolve, found.chain, found.budget)
    invokes.detach(found.root)
    converter = _Converter(found.root, found.source, invokes, definition_id)
    document = converter.document()
    invokes.finish(document)
    return checked(document, converter.issues, invokes.invoked)
