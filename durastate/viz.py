"""Mermaid ``stateDiagram-v2`` for a definition, with an execution's active state(s) marked.

The output is meant to be pasted into a GitHub README, issue or PR (inside a ```` ```mermaid ```` fence),
so it sticks to the subset of Mermaid that GitHub renders reliably:

- every state gets a unique id built from its full path (``active.a`` → ``active__a``) and shows its
  short name as the label: Mermaid ids are global, while state names repeat across parents;
- ``[*] --> x`` marks the initial state of each composite (scoped to its block); ``x --> [*]`` marks a
  final state;
- composite states are ``state "name" as id { … }``; the regions of a parallel state are composites
  separated by ``--``;
- Mermaid cannot draw a transition between states inside two different composites, so each transition
  is drawn in the innermost composite that contains both ends, with each end lifted to its ancestor in
  that composite; the label then names the real end (``pay → shipping.packed``);
- the active state(s) are marked with a ``classDef`` named for the execution's status (``active`` while it
  runs, blue; ``finished`` green; ``failed`` red; ``cancelled``/``terminated`` grey; ``suspended`` amber) and
  the composites holding them with ``active_parent``; each state gets its own ``class id cls`` line, which
  is what GitHub's renderer needs to style a state nested in a composite.

- Mermaid has bugs this avoids: a self-loop on a nested composite fails (mermaid-js/mermaid#4866), so a
  composite's self-transitions and targetless transitions go into its title (``fulfilment · shipped_with
  / internal``); an edge to or from a composite *inside a parallel region* crashes the renderer
  (mermaid-js/mermaid#4052), so such an end is drawn at the composite's initial leaf.

History pseudo-states are drawn as ``H`` / ``H*``; targetless (internal) transitions of a simple state
as text inside it (``ping / internal``); ``after`` / ``always`` / ``on_done`` / ``on_error`` as labelled
edges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from durastate.engine.definition import Definition, State, Transition
from durastate.engine.tasks import invoked
from durastate.engine.timers import timer_label

__all__ = [
    "ACTIVE_PARENT",
    "ACTIVE_STYLE",
    "PARENT_COLOURS",
    "STATUS_COLOURS",
    "Edge",
    "active_parents",
    "edges",
    "guard_text",
    "mermaid_style",
    "resolve_target",
    "state_id",
    "status_class",
    "to_markdown",
    "to_mermaid",
]

STATUS_COLOURS: Mapping[str, tuple[str, str]] = {
    "running": ("#dbeafe", "#1d4ed8"),     # blue
    "finished": ("#dcfce7", "#15803d"),    # green
    "failed": ("#fee2e2", "#b91c1c"),      # red
    "cancelled": ("#e5e7eb", "#4b5563"),   # grey
    "terminated": ("#e5e7eb", "#4b5563"),  # grey
    "suspended": ("#fef3c7", "#b45309"),   # amber
}
"""Execution status -> (fill, stroke) of its active state(s): one palette for Mermaid, SVG and PNG."""
PARENT_COLOURS = ("#eff6ff", "#60a5fa")
"""(fill, stroke) of the composite states that hold an active state (lighter than the state itself)."""
ACTIVE_PARENT = "active_parent"
"""The class of a composite that holds an active state (``active-parent`` in SVG, where ``-`` is allowed)."""


def status_class(status: str) -> str:
    """The class of the active state(s) of an execution with ``status``: ``active`` while it runs."""
    return "active" if status == "running" or status not in STATUS_COLOURS else status


def mermaid_style(cls: str) -> str:
    """The ``classDef`` style of a class made by :func:`status_class` (or :data:`ACTIVE_PARENT`)."""
    if cls == ACTIVE_PARENT:
        fill, stroke = PARENT_COLOURS
        return f"fill:{fill},stroke:{stroke},stroke-width:2px"
    fill, stroke = STATUS_COLOURS["running" if cls == "active" else cls]
    return f"fill:{fill},stroke:{stroke},stroke-width:3px,color:#000"


def active_parents(leaves: Iterable[str]) -> list[str]:
    """The proper ancestors of the active leaves, outermost first, each once."""
    out: dict[str, None] = {}
    for leaf in leaves:
        parts = leaf.split(".")
        for n in range(1, len(parts)):
            out[".".join(parts[:n])] = None
    return list(out)


ACTIVE_STYLE = mermaid_style("active")
_RESERVED_IDS = {"end", "state", "note", "class", "classdef", "direction", "style", "click", "as", "left",
                 "right", "of", "over", "hide", "default"}
_OPS = {"eq": "==", "ne": "!=", "gt": ">", "ge": ">=", "lt": " < ", "le": " <= "}


def state_id(path: str) -> str:
    """A Mermaid-safe, diagram-unique id for a state path."""
    out = []
    for ch in path:
        if ch == ".":
            out.append("__")
        elif ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        else:
            out.append(f"_x{ord(ch):x}_")
    sid = "".join(out) or "state"
    if sid.lower() in _RESERVED_IDS or sid[0].isdigit():
        sid = f"s_{sid}"
    return sid


def _label(text: str) -> str:
    """Text safe inside a transition label or a quoted state name (one line, no Mermaid syntax)."""
    text = " ".join(str(text).split())
    for bad, good in (('"', "'"), (";", ","), ("#", "no."), ("{", "("), ("}", ")"), (":", "\u2236"),
                      ("-->", "\u2192")):
        text = text.replace(bad, good)
    # "<" before a letter could open an HTML tag in the rendered label; "a < 3" is plain text.
    return re.sub(r"<(?=\S)", "\u2039", text)


_ARITHMETIC = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _value(v: Any) -> str:
    """A guard's operand as people write it: ``context.total``, ``'gold'``, ``3``, ``true``,
    ``context.n + 1``, ``len(context.items)``, ``['a', 'b']`` (never a Python dict's repr)."""
    if isinstance(v, str):
        if v.startswith("$$"):
            return repr(v[1:])
        if v.startswith("$"):
            return v[1:]
        return repr(v)
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, dict) and len(v) == 1:
        (op, args), = v.items()
        if op in _ARITHMETIC and isinstance(args, list) and len(args) == 2:
            return f"{_value(args[0])} {_ARITHMETIC[op]} {_value(args[1])}"
        if op in ("min", "max", "len"):
            return f"{op}({', '.join(_value(a) for a in (args if isinstance(args, list) else [args]))})"
    if isinstance(v, list):
        return "[" + ", ".join(_value(a) for a in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(a)}" for k, a in v.items()) + "}"
    return str(v)


def guard_text(guard: Any) -> str:
    """A compact, readable rendering of a guard: ``event.amount > 100``, ``check_stock()``,
    ``in_state(paying)``: the expression as written, never a Python dict's repr."""
    if guard is None:
        return ""
    if isinstance(guard, str):
        return guard.rsplit(":", 1)[-1].rsplit(".", 1)[-1] + "()"
    if callable(guard):  # a definition built in Python may pass the function itself
        return f"{getattr(guard, '__name__', type(guard).__name__)}()"
    if isinstance(guard, dict) and len(guard) == 1:
        (op, args), = guard.items()
        if op in _OPS and isinstance(args, list) and len(args) == 2:
            sym = _OPS[op].strip()
            return f"{_value(args[0])} {sym} {_value(args[1])}"
        if op == "in" and isinstance(args, list) and len(args) == 2:
            return f"{_value(args[0])} in {_value(args[1])}"
        if op == "exists":
            return f"exists {_value(args)}"
        if op == "in_state":
            return f"in_state({args if isinstance(args, str) else _value(args)})"
        if op == "not":
            return f"not ({guard_text(args)})"
        if op in ("and", "or") and isinstance(args, list):
            return f" {op} ".join(f"({guard_text(g)})" for g in args)
    return _label(_value(guard))


@dataclass(frozen=True)
class Edge:
    """One transition as a diagram draws it: ``target`` is the resolved state path (``None``: targetless,
    an internal transition drawn inside its source) and ``label`` reads ``event [guard]``."""

    source: str
    target: str | None
    label: str


def _state_edges(path: str, state: State) -> list[Edge]:
    """The transitions written on one state, in document order, with their targets as written."""
    out: list[Edge] = []

    def group(event: str, transitions: list[Transition]) -> None:
        guarded_before = False
        for t in transitions:
            # an unguarded transition after guarded ones is their "else"
            cond = guard_text(t.guard) if t.guard is not None else ("else" if guarded_before else "")
            out.append(Edge(path, t.target, event + (f" [{cond}]" if cond else "")))
            guarded_before = guarded_before or t.guard is not None

    for event, transitions in state.on.items():
        group(event, transitions)
    if state.always:
        group("always", state.always)
    for after in state.after:
        cond = guard_text(after.guard)
        label = timer_label(after.seconds, after.at) + (f" [{cond}]" if cond else "")
        out.append(Edge(path, after.target, label))
    if state.on_done:
        group("done", state.on_done)
    if state.on_error:
        group("error", state.on_error)
    return out


def resolve_target(states: Collection[str], source: str, target: str) -> str | None:
    """A transition's target path as the engine resolves it: a sibling (or ``sibling.child``) of the
    source first, then an absolute path; ``None`` if neither is a state."""
    parent = _parent(source)
    candidate = f"{parent}.{target}" if parent else target
    if candidate in states:
        return candidate
    return target if target in states else None


def edges(defn: Definition) -> list[Edge]:
    """Every transition of ``defn`` with its target resolved (state document order; an unresolvable target,
    which validation already reports, is left out)."""
    paths = set(defn.paths)
    out: list[Edge] = []

    def walk(states: dict[str, State], prefix: str) -> None:
        for name, state in states.items():
            path = f"{prefix}.{name}" if prefix else name
            for e in _state_edges(path, state):
                if e.target is None:
                    out.append(e)
                elif (dest := resolve_target(paths, path, e.target)) is not None:
                    out.append(Edge(path, dest, e.label))
            walk(state.states, path)

    walk(defn.states, "")
    return out


def _parent(path: str) -> str:
    return path.rpartition(".")[0]


def _is_ancestor(anc: str, path: str) -> bool:
    """Whether ``anc`` is a proper ancestor of ``path`` ("" is the root, ancestor of everything)."""
    return anc == "" or path.startswith(anc + ".")


class _Diagram:
    def __init__(self, defn: Definition) -> None:
        self.defn = defn
        self.states: dict[str, State] = {}
        self._index(defn.states, "")
        self.edges: dict[str, list[str]] = {}
        """scope path ("" = top) -> edge lines drawn inside that scope"""
        self.notes: dict[str, list[str]] = {}
        """atomic state path -> internal transitions shown inside it"""
        for path, state in self.states.items():
            self._collect(path, state)

    def _index(self, states: dict[str, State], prefix: str) -> None:
        for name, state in states.items():
            path = f"{prefix}.{name}" if prefix else name
            self.states[path] = state
            self._index(state.states, path)

    # -- transitions ----------------------------------------------------------------------------------
    def resolve(self, source: str, target: str) -> str | None:
        return resolve_target(self.states, source, target)

    def _collect(self, path: str, state: State) -> None:
        for edge in _state_edges(path, state):
            self._edge(path, edge.target, edge.label)

    def _edge(self, source: str, target: str | None, label: str) -> None:
        composite = self.states[source].kind in ("compound", "parallel")
        if target is None:
            self.notes.setdefault(source, []).append(f"{label} / internal")
            return
        dest = self.resolve(source, target)
        if dest is None:
            return
        if dest == source and composite:
            # Mermaid fails on a self-loop of a nested composite (mermaid-js/mermaid#4866): say it in
            # the composite's title instead.
            self.notes.setdefault(source, []).append(f"{label} ↺")
            return
        scope = _parent(source) if source == dest else self._scope(source, dest)
        src_end, dst_end = self._lift(source, scope), self._lift(dest, scope)
        notes = []
        if src_end != source:
            notes.append(f"from {source[len(src_end) + 1:]}")
        if dst_end != dest:
            notes.append(f"→ {dest}")
        # Mermaid crashes on an edge to or from a composite inside a parallel region
        # (mermaid-js/mermaid#4052): draw it from/to the composite's initial leaf instead.
        src_safe, dst_safe = self._region_safe(src_end), self._region_safe(dst_end)
        if src_safe != src_end and src_end == source:
            notes.append(f"from {source.rpartition('.')[2]}")
        if notes:
            label += " (" + ", ".join(notes) + ")"
        self._add_edge(scope, src_safe, dst_safe, label)

    def _region_safe(self, path: str) -> str:
        """``path``, or for a composite inside a parallel region its initial leaf."""
        if not self._in_region(path):
            return path
        state = self.states[path]
        while state.kind in ("compound", "parallel") and state.states:
            first = state.initial if state.kind == "compound" and state.initial else next(iter(state.states))
            path = f"{path}.{first}"
            state = self.states[path]
        return path

    def _in_region(self, path: str) -> bool:
        anc = _parent(path)
        while anc:
            if self.states[anc].kind == "parallel":
                return True
            anc = _parent(anc)
        return False

    def _scope(self, a: str, b: str) -> str:
        """The innermost state that is a proper ancestor of both ``a`` and ``b`` ("" = the top)."""
        scope = _parent(a)
        while scope and not (_is_ancestor(scope, a) and _is_ancestor(scope, b)):
            scope = _parent(scope)
        return scope

    @staticmethod
    def _lift(path: str, scope: str) -> str:
        """``path``'s ancestor (or itself) that is a direct child of ``scope``."""
        rest = path[len(scope) + 1:] if scope else path
        head = rest.split(".", 1)[0]
        return f"{scope}.{head}" if scope else head

    def _add_edge(self, scope: str, src: str, dst: str, label: str) -> None:
        self.edges.setdefault(scope, []).append(f"{state_id(src)} --> {state_id(dst)} : {_label(label)}")

    # -- rendering ------------------------------------------------------------------------------------
    def render(self, active: Iterable[str], status: str = "running") -> str:
        lines = ["stateDiagram-v2"]
        if self.defn.description:
            lines.append(f"    %% {_label(self.defn.description)}")
        self._block(lines, "", self.defn.initial, self.defn.states, 1)
        leaves = [p for p in dict.fromkeys(active) if p in self.states]
        parents = [p for p in active_parents(leaves) if p not in leaves]
        used: list[tuple[str, list[str]]] = []
        if leaves:
            used.append((status_class(status), leaves))
        if parents:
            used.append((ACTIVE_PARENT, parents))
        for cls, _ in used:
            lines.append(f"    classDef {cls} {mermaid_style(cls)}")
        for cls, paths in used:
            # one `class` line per state: GitHub's Mermaid ignores a class list that names a state nested
            # in a composite together with others, but styles each one named on its own line
            lines.extend(f"    class {state_id(p)} {cls}" for p in paths)
        return "\n".join(lines) + "\n"

    def _block(self, lines: list[str], scope: str, initial: str | None, children: dict[str, State],
               depth: int) -> None:
        pad = "    " * depth
        parallel = bool(scope) and self.states[scope].kind == "parallel"
        if initial and not parallel:
            start = self.resolve(f"{scope}.{initial}" if scope else initial, initial)
            if start is not None:
                lines.append(f"{pad}[*] --> {state_id(start)}")
        for i, (name, state) in enumerate(children.items()):
            path = f"{scope}.{name}" if scope else name
            sid = state_id(path)
            if parallel and i:
                lines.append(f"{pad}--")
            kind = state.kind
            if kind in ("compound", "parallel"):
                title = self._name(name, state)
                if self.notes.get(path):
                    # Mermaid shows no description on a composite (mermaid-js/mermaid#5522): use the title.
                    title += " · " + ", ".join(self.notes[path])
                lines.append(f'{pad}state "{_label(title)}" as {sid} {{')
                self._block(lines, path, state.initial, state.states, depth + 1)
                lines.append(f"{pad}}}")
                continue
            label = self._name(name, state)
            if label != sid:
                lines.append(f'{pad}state "{_label(label)}" as {sid}')
            else:
                lines.append(f"{pad}{sid}")
            for note in self.notes.get(path, []):
                lines.append(f"{pad}{sid} : {_label(note)}")
            if kind == "final":
                lines.append(f"{pad}{sid} --> [*]")
        lines.extend(f"{pad}{edge}" for edge in self.edges.get(scope, []))

    @staticmethod
    def _name(name: str, state: State) -> str:
        if state.kind == "history":
            return "H*" if state.history == "deep" else "H"
        if state.invoke is not None:
            return f"{name} (invokes {invoked(state.invoke)})"
        if state.kind == "final" and state.outcome and state.outcome != name:
            return f"{name} ({state.outcome})"
        return name


def to_mermaid(defn: Definition, active: Iterable[str] = (), status: str = "running") -> str:
    """The Mermaid ``stateDiagram-v2`` text of ``defn``; the states in ``active`` (and their parents, less
    strongly) are highlighted in the colour of the execution's ``status``."""
    return _Diagram(defn).render(active, status)



def to_markdown(defn: Definition, active: Iterable[str] = (), status: str = "running") -> str:
    """The diagram inside a ```` ```mermaid ```` fence, ready to paste into GitHub markdown."""
    return "```mermaid\n" + to_mermaid(defn, active, status) + "```\n"
