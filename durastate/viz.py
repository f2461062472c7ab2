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
- the active state(s) are marked with ``classDef active`` + ``class … active``. Mermaid styles only
  simple states, so for a composite that is active as a whole (a parallel state whose regions have not
  been looked up) the marking falls back to a comment.

- Mermaid has bugs this avoids: a self-loop on a nested composite fails (mermaid-js/mermaid#4866), so a
  composite's self-transitions and targetless transitions go into its title (``fulfilment · shipped_with
  / internal``); an edge to or from a composite *inside a parallel region* crashes the renderer
  (mermaid-js/mermaid#4052), so such an end is drawn at the composite's initial leaf.

History pseudo-states are drawn as ``H`` / ``H*``; targetless (internal) transitions of a simple state
as text inside it (``ping / internal``); ``after`` / ``always`` / ``on_done`` / ``on_error`` as labelled
edges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from durastate.engine.definition import Definition, State, Transition

__all__ = ["ACTIVE_STYLE", "guard_text", "state_id", "to_markdown", "to_mermaid"]

ACTIVE_STYLE = "fill:#ffd166,stroke:#d62828,stroke-width:3px,color:#000"
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


def _value(v: Any) -> str:
    if isinstance(v, str):
        if v.startswith("$$"):
            return repr(v[1:])
        if v.startswith("$"):
            return v[1:]
        return repr(v)
    if isinstance(v, dict) and len(v) == 1:
        (op, args), = v.items()
        if op in ("add", "sub") and isinstance(args, list) and len(args) == 2:
            sign = "+" if op == "add" else "-"
            return f"{_value(args[0])} {sign} {_value(args[1])}"
    return str(v)


def guard_text(guard: Any) -> str:
    """A compact, readable rendering of a guard: ``event.amount > 100``, ``check_stock()``."""
    if guard is None:
        return ""
    if isinstance(guard, str):
        return guard.rsplit(":", 1)[-1].rsplit(".", 1)[-1] + "()"
    if isinstance(guard, dict) and len(guard) == 1:
        (op, args), = guard.items()
        if op in _OPS and isinstance(args, list) and len(args) == 2:
            sym = _OPS[op].strip()
            return f"{_value(args[0])} {sym} {_value(args[1])}"
        if op == "in" and isinstance(args, list) and len(args) == 2:
            return f"{_value(args[0])} in {args[1]!r}"
        if op == "exists":
            return f"exists {_value(args)}"
        if op == "not":
            return f"not ({guard_text(args)})"
        if op in ("and", "or") and isinstance(args, list):
            return f" {op} ".join(f"({guard_text(g)})" for g in args)
    return _label(str(guard))


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
        parent = _parent(source)
        candidate = f"{parent}.{target}" if parent else target
        if candidate in self.states:
            return candidate
        return target if target in self.states else None

    def _collect(self, path: str, state: State) -> None:
        for event, transitions in state.on.items():
            self._group(path, event, transitions)
        if state.always:
            self._group(path, "always", state.always)
        if state.after is not None:
            after = state.after
            label = f"after {after.seconds:g}s"
            self._edge(path, after.target, label, guard=after.guard)
        if state.on_done:
            self._group(path, "done", state.on_done)
        if state.on_error:
            self._group(path, "error", state.on_error)

    def _group(self, path: str, event: str, transitions: list[Transition]) -> None:
        guarded_before = False
        for t in transitions:
            guard = guard_text(t.guard) if t.guard is not None else ("else" if guarded_before else "")
            self._edge(path, t.target, event, guard_label=guard)
            guarded_before = guarded_before or t.guard is not None

    def _edge(self, source: str, target: str | None, event: str, guard: Any = None,
              guard_label: str | None = None) -> None:
        cond = guard_label if guard_label is not None else guard_text(guard)
        label = event + (f" [{cond}]" if cond else "")
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
    def render(self, active: Iterable[str]) -> str:
        lines = ["stateDiagram-v2"]
        if self.defn.description:
            lines.append(f"    %% {_label(self.defn.description)}")
        self._block(lines, "", self.defn.initial, self.defn.states, 1)
        marked: list[str] = []
        unmarked: list[str] = []
        for path in active:
            state = self.states.get(path)
            if state is None:
                continue
            (marked if state.kind in ("atomic", "final", "history") else unmarked).append(path)
        if marked or unmarked:
            lines.append(f"    classDef active {ACTIVE_STYLE}")
        if marked:
            lines.append(f"    class {','.join(state_id(p) for p in dict.fromkeys(marked))} active")
        for path in unmarked:
            lines.append(f"    %% active: {path} (composite; Mermaid cannot style it)")
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
            return f"{name} (invokes {state.invoke.definition})"
        if state.kind == "final" and state.outcome and state.outcome != name:
            return f"{name} ({state.outcome})"
        return name


def to_mermaid(defn: Definition, active: Iterable[str] = ()) -> str:
    """The Mermaid ``stateDiagram-v2`` text of ``defn``; the states in ``active`` are highlighted."""
    return _Diagram(defn).render(active)



def to_markdown(defn: Definition, active: Iterable[str] = ()) -> str:
    """The diagram inside a ```` ```mermaid ```` fence, ready to paste into GitHub markdown."""
    return "```mermaid\n" + to_mermaid(defn, active) + "```\n"
