"""XState v5 machine config (JSON) -> a durastate definition document (``durastate import xstate FILE``).

A machine config in JSON is the data half of an XState machine: the structure, events and targets map
one to one; what XState keeps in code (named actions, guards, actors and delays, whose implementations are
functions passed to ``setup``) has no body in the JSON and is reported at its JSON path
(``states.idle.on.FETCH[0].guard``), never guessed at.

What maps: ``id``, ``initial``, ``context``, ``description``, ``states`` (``type``: ``parallel``,
``final``, ``history`` with ``history: 'deep'`` and a ``target`` default), ``on`` (a target string, a
transition object, or a list of them; ``*`` and ``prefix.*`` descriptors), ``always``, ``after`` (numeric
keys in milliseconds), ``onDone``, ``entry``/``exit`` and transition ``actions`` written as data:
``{type: 'xstate.raise' | 'raise', event: {type: 'E', ...}}``, ``{type: 'xstate.sendTo' | 'sendTo',
to: 'parent' | 'self' | ID, event: {...}}`` / ``{type: 'xstate.sendParent' | 'sendParent', event: ...}``,
``{type: 'xstate.log' | 'log', message: VALUE}`` and ``{type: 'xstate.assign' | 'assign', assignment:
{key: CONSTANT}}``. Targets: a sibling (``'idle'``, ``'idle.child'``), a child (``'.child'``) or an id
path (``'#machine.a.b'``, ``'#someStateId'``). XState v5 transitions do not re-enter their source unless
``reenter: true``: a target inside the source becomes ``internal: true``, and a target equal to the source
exits what is below the source and enters its initial states again (:meth:`_Converter.routed`). A parallel
state (or machine) has ``regions: inline`` (the regions are one actor's), an atomic region being given one
leaf (a durastate region is a compound state); where XState's rules differ from SCXML's, which inline
regions follow, the transitions say so: ``parallel_domain`` (XState does not leave a parallel state a
transition stays in) and ``defer`` (XState takes a state's own transition only when no state below it takes
the event). A ``stateIn`` guard written as data (``{type: 'xstate.stateIn', stateValue: '#id'}``, what
``stateIn('#id')`` holds) is ``in_state`` with the full path. tests/importers/test_xstate_differential.py
checks all this against XState itself.
"""

from __future__ import annotations

import json
import math
from pathlib import PurePath
from typing import Any

from durastate.engine.tables import descriptor_problem
from durastate.errors import DefinitionError
from durastate.importers.result import REGION_LEAF, ImportIssue, ImportResult, checked, escape

__all__ = ["convert"]

_STATE_KEYS = {"id", "type", "initial", "states", "on", "always", "after", "entry", "exit", "onDone",
               "description", "history", "target", "invoke", "tags", "meta", "output", "context"}
_TRANSITION_KEYS = {"target", "guard", "actions", "reenter", "description"}
MAX_NESTING = 100
"""How deeply states may nest (deeper is reported and left out, never a crash)."""


class _Converter:
    def __init__(self, config: dict[str, Any], source: str | None) -> None:
        self.config = config
        self.source = source
        self.issues: list[ImportIssue] = []
        # without an id, the file's name: `light.json`, or `light.xstate.json` in a definitions folder
        self.machine_id = str(config.get("id") or (PurePath(source).stem.removesuffix(".xstate") if source
                                                   else "imported"))
        self.by_id: dict[str, str] = {}  # XState state id -> dotted path
        self.paths: set[str] = set()
        self.nodes: dict[str, dict[str, Any]] = {}  # dotted path -> the state's config
        self.parallels: set[str] = set()  # the paths of the parallel states
        self.root = ""
        """The path of the top-level parallel state a parallel machine becomes ('' otherwise)."""

    def report(self, where: str, message: str) -> None:
        self.issues.append(ImportIssue(where, message))

    def index(self, states: Any, prefix: str, site: str) -> None:
        if not isinstance(states, dict):
            return
        for name, node in states.items():
            path = f"{prefix}.{name}" if prefix else name
            here = f"{site}.states.{name}" if site else f"states.{name}"
            if not isinstance(node, dict):
                continue
            if here.count(".states.") >= MAX_NESTING:
                continue  # reported by state()
            if any(c in name for c in ".$~ \t\n"):
                self.report(here, f"the state name {name!r} cannot be a durastate state name (no '.', '$', '~' "
                                  "or spaces)")
            self.paths.add(path)
            self.nodes[path] = node
            if node.get("type") == "parallel":
                self.parallels.add(path)
            if isinstance(node.get("id"), str):
                self.by_id[node["id"]] = path
            self.index(node.get("states"), path, here)

    def document(self) -> dict[str, Any]:
        cfg = self.config
        for key in cfg:
            if key not in ("id", "initial", "context", "states", "description", "version", "on", "type"):
                self.report(key, f"the machine key {key!r} is not supported")
        if "on" in cfg:
            self.report("on", "events handled at the machine's top level are not supported (durastate's root "
                              "has no transitions): put the chart in a top-level compound state")
        parallel = cfg.get("type") == "parallel"
        if cfg.get("type") not in (None, "compound", "parallel"):
            self.report("type", f"a machine of type {cfg.get('type')!r} is not supported")
        # durastate's top level starts in one state: a parallel machine becomes one parallel state in it
        self.root = self.machine_id if parallel else ""
        if parallel and any(c in self.root for c in ".$~ \t\n"):
            self.report("id", f"the machine id {self.root!r} cannot name the top-level parallel state")
        if parallel:
            self.paths.add(self.root)
            self.parallels.add(self.root)
        self.index(cfg.get("states"), self.root, "")
        doc: dict[str, Any] = {"id": self.machine_id}
        if isinstance(cfg.get("description"), str):
            doc["description"] = cfg["description"]
        if "initial" in cfg:
            doc["initial"] = cfg["initial"]
        if "context" in cfg:
            if isinstance(cfg["context"], dict):
                doc["context"] = cfg["context"]
            else:
                self.report("context", "the context must be an object (a context factory is code)")
        states = cfg.get("states")
        if not isinstance(states, dict) or not states:
            self.report("states", "a machine needs states")
            states = {}
        mapped = {name: self.state(node, f"{self.root}.{name}" if self.root else name, f"states.{name}")
                  for name, node in states.items()}
        if parallel:
            if "initial" in cfg:
                self.report("initial", "a parallel machine has no initial state")
            doc = {"id": doc["id"], "initial": self.root, **doc}
            top: dict[str, Any] = {"type": "parallel", "regions": "inline", "states": mapped}
            doc["states"] = {self.root: top}
            if _can_finish(cfg):
                # XState's machine is done once every region is in a final state: durastate's top-level
                # parallel state then goes to a final state, which ends the execution
                done = "_done" if self.root != "_done" else "_done_"
                top["on_done"] = [{"target": done}]
                doc["states"][done] = {"type": "final"}
        else:
            doc["states"] = mapped
        return doc

    def state(self, node: Any, path: str, site: str) -> dict[str, Any]:
        if not isinstance(node, dict):
            self.report(site, "a state is an object")
            return {}
        if site.count(".states.") >= MAX_NESTING:
            self.report(site, f"states nest more than {MAX_NESTING} deep; the rest is left out")
            return {}
        out: dict[str, Any] = {}
        for key in node:
            if key not in _STATE_KEYS:
                self.report(f"{site}.{key}", f"the state key {key!r} is not supported")
        kind = node.get("type")
        if kind == "parallel" and path.rpartition(".")[0] in self.parallels:
            self.report(site, "a parallel state directly inside a parallel state is not supported: XState ends "
                              "the outer one when the inner one is done, durastate (as SCXML) does not; put it "
                              "in a compound state of its own")
        if kind in ("parallel", "final", "history"):
            out["type"] = kind
            if kind == "parallel":
                out["regions"] = "inline"  # XState's parallel semantics: the regions step together, in one actor
        elif kind not in (None, "atomic", "compound"):
            self.report(f"{site}.type", f"type {kind!r} is not a state type")
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        if kind == "history":
            history = node.get("history", "shallow")
            if history == "deep":
                out["history"] = "deep"
            elif history != "shallow":
                self.report(f"{site}.history", "history is 'shallow' or 'deep'")
            if "target" in node:
                target = self.target(node["target"], path, f"{site}.target")
                if target is not None:
                    out["target"] = target
            return out
        for key in ("tags", "meta"):
            if key in node:
                self.report(f"{site}.{key}", f"{key} are not kept (durastate states carry no {key})")
        if "output" in node:
            self.report(f"{site}.output", "output is not supported: a durastate execution's output is its context")
        if "context" in node:
            self.report(f"{site}.context", "a state has no context of its own in XState v5")
        if "invoke" in node and self.in_parallel(path):
            self.report(f"{site}.invoke", "invoke names an actor implemented in code, and inside a parallel state "
                                          "not even a durastate invoke maps: its regions run inline, where a "
                                          "state cannot invoke; invoke from a state around the parallel state")
        elif "invoke" in node:
            self.report(f"{site}.invoke", "invoke names an actor implemented in code; in durastate, invoke a "
                                          "definition (`invoke: {definition: ...}`) on an atomic state")
        if "initial" in node:
            out["initial"] = node["initial"]
        for key, out_key in (("entry", "entry"), ("exit", "exit")):
            if key in node:
                actions = self.actions(node[key], f"{site}.{key}")
                if actions:
                    out[out_key] = actions
        if "on" in node:
            on = node["on"]
            if not isinstance(on, dict):
                self.report(f"{site}.on", "on is an object of event -> transitions")
            else:
                mapped: dict[str, list[Any]] = {}
                # XState tries the exact key first, then the wildcard ones, longest first; durastate tries
                # the keys in the order written
                for event, spec in sorted(on.items(), key=lambda kv: -len(kv[0]) if "*" in kv[0] else -math.inf):
                    where = f"{site}.on.{event}"
                    problem = descriptor_problem(event)
                    if problem is not None:
                        self.report(where, problem)
                        continue
                    trs = self.transitions(spec, path, where)
                    if trs and any(p == path or p.startswith(path + ".") for p in self.parallels):
                        # XState takes a state's own transitions only when no state below it takes the
                        # event: with several leaves active (a parallel state at or below it) that differs
                        # from SCXML's choice, leaf by leaf
                        trs = [{**tr, "defer": True} for tr in trs]
                    if trs:
                        mapped[event] = trs
                if mapped:
                    out["on"] = mapped
        if "always" in node:
            trs = self.transitions(node["always"], path, f"{site}.always")
            if trs:
                out["always"] = trs
        if "after" in node:
            timers = self.after(node["after"], path, f"{site}.after")
            if timers:
                out["after"] = timers
        if "onDone" in node:
            trs = self.transitions(node["onDone"], path, f"{site}.onDone")
            if trs and (kind == "parallel" or _has_final_child(node)):
                out["on_done"] = trs
            # else: XState accepts an onDone on a state without a final child and never takes it; leaving it
            # out is the same chart (durastate refuses a transition that can never be taken)
        children = node.get("states")
        if isinstance(children, dict) and children:
            out["states"] = {name: self.state(child, f"{path}.{name}", f"{site}.states.{name}")
                             for name, child in children.items()}
        elif kind in (None, "atomic") and path.rpartition(".")[0] in self.parallels:
            # XState lets a region be an atomic state; a durastate region is compound: one plain leaf inside
            # it, with no actions or transitions of its own, enters, rests and exits exactly as the atomic one
            out["initial"], out["states"] = REGION_LEAF, {REGION_LEAF: {}}
        return out

    def after(self, spec: Any, path: str, site: str) -> list[Any]:
        if not isinstance(spec, dict):
            self.report(site, "after is an object of delay (ms) -> transitions")
            return []
        timers: list[Any] = []
        for delay, trs in spec.items():
            where = f"{site}.{delay}"
            try:
                ms = float(delay)
            except ValueError:
                self.report(where, f"the delay {delay!r} names an implementation in code; write it in milliseconds")
                continue
            if not math.isfinite(ms) or ms <= 0:
                self.report(where, f"the delay {delay!r} must be a positive number of milliseconds")
                continue
            for tr in self.transitions(trs, path, where):
                seconds = ms / 1000
                timers.append({"seconds": int(seconds) if seconds.is_integer() else seconds, **tr})
        return timers

    def transitions(self, spec: Any, source: str, site: str) -> list[dict[str, Any]]:
        items = spec if isinstance(spec, list) else [spec]
        out: list[dict[str, Any]] = []
        for i, item in enumerate(items):
            where = f"{site}[{i}]" if isinstance(spec, list) else site
            tr = self.transition(item, source, where)
            if tr is not None:
                out.append(tr)
        return out

    def transition(self, item: Any, source: str, site: str) -> dict[str, Any] | None:
        if isinstance(item, str) or item is None:
            item = {"target": item}
        if not isinstance(item, dict):
            self.report(site, "a transition is a target string or an object")
            return None
        ok = True
        for key in item:
            if key not in _TRANSITION_KEYS:
                self.report(f"{site}.{key}", f"the transition key {key!r} is not supported")
        out: dict[str, Any] = {}
        target = item.get("target")
        if target is not None:
            path = self.resolve(target, source, f"{site}.target")
            routed = None if path is None else self.routed(path, source, bool(item.get("reenter")), site)
            if routed is None:
                ok = False
            else:
                out.update(routed)
        if "guard" in item:
            guard = self.guard(item["guard"], f"{site}.guard")
            if guard is None:
                ok = False
            else:
                out["guard"] = guard
        if "actions" in item:
            actions = self.actions(item["actions"], f"{site}.actions")
            if actions:
                out["actions"] = actions
        return out if ok else None

    def in_parallel(self, path: str) -> bool:
        """Whether the state at ``path`` is a parallel state or inside one (then it is in an inline region)."""
        return any(path == p or path.startswith(p + ".") for p in self.parallels)

    def routed(self, path: str, source: str, reenter: bool, site: str) -> dict[str, Any] | None:
        """The durastate target (and ``internal`` / ``parallel_domain``) of an XState transition from
        ``source`` to the state at full ``path`` that exits and enters what XState's does.

        XState's domain (the state it does not leave) is the source when the target is the source or inside
        it and ``reenter`` is false, else the innermost proper ancestor of the source that holds the target,
        of any kind: a parallel state too, where SCXML (durastate's default) goes up to a compound state. A
        target equal to the source exits the source's descendants and enters its initial ones again."""
        out: dict[str, Any] = {}
        if path == source and not reenter:
            node = self.nodes.get(source, {})
            children = [n for n, c in (node.get("states") or {}).items()
                        if not (isinstance(c, dict) and c.get("type") == "history")]
            if not children:
                return out  # an atomic source: nothing is exited or entered, the actions run
            if source in self.parallels:
                path = f"{source}.{children[0]}"  # every region is left and starts again
            else:
                initial = node.get("initial")
                path = f"{source}.{initial if isinstance(initial, str) and initial in children else children[0]}"
        if not reenter and path.startswith(source + "."):
            domain = source
        else:
            domain = source.rpartition(".")[0]
            while domain and not path.startswith(domain + "."):
                domain = domain.rpartition(".")[0]
        written = self.written(path, source, site)
        if written is None:
            return None
        out["target"] = written
        if domain == source:
            out["internal"] = True
        if domain in self.parallels:
            out["parallel_domain"] = True  # XState keeps the parallel state; SCXML would leave it
        return out

    def target(self, spec: Any, source: str, site: str) -> str | None:
        """A history default's ``target``: the state's durastate target from ``source``."""
        path = self.resolve(spec, source, site)
        return None if path is None else self.written(path, source, site)

    def resolve(self, spec: Any, source: str, site: str) -> str | None:
        """The full dotted path of the state an XState target names from ``source`` (``None``: reported)."""
        if isinstance(spec, list):
            if len(spec) != 1:
                self.report(site, "several targets: a durastate transition has one target")
                return None
            spec = spec[0]
        if not isinstance(spec, str) or not spec:
            self.report(site, "a target is a state name, '.child' or '#id'")
            return None
        parent = source.rpartition(".")[0]
        if spec.startswith("#"):
            ident, _, rest = spec[1:].partition(".")
            base = self.root if ident == self.machine_id else self.by_id.get(ident)
            if base is None:
                self.report(site, f"no state with the id {ident!r}")
                return None
            path = f"{base}.{rest}" if base and rest else (base or rest)
        elif spec.startswith("."):
            path = f"{source}{spec}"
        else:
            base = parent  # a sibling (for a history's default: a state inside the history's parent)
            path = f"{base}.{spec}" if base else spec
        if path not in self.paths:
            self.report(site, f"no state {spec!r} (looked for {path!r})")
            return None
        return path

    def written(self, path: str, source: str, site: str) -> str | None:
        """``path`` as a durastate target from ``source``: relative to the source's parent when it is there,
        else the full path, which durastate finds from the top unless a relative reading shadows it."""
        parent = source.rpartition(".")[0]
        if parent and path.startswith(parent + "."):
            return path[len(parent) + 1:]
        if parent and f"{parent}.{path}" in self.paths:
            self.report(site, f"the target {path!r} would be read relative to {parent!r}: rename a state")
            return None
        return path

    def guard(self, spec: Any, site: str) -> Any:
        """A guard written as data: ``stateIn`` (``{type: 'xstate.stateIn', stateValue: '#id'}``, what
        XState's ``stateIn('#id')`` holds) is durastate's ``in_state``; a guard named by a string is code
        (``None``: reported)."""
        name = spec if isinstance(spec, str) else spec.get("type") if isinstance(spec, dict) else None
        if name not in ("stateIn", "xstate.stateIn") or not isinstance(spec, dict):
            self.report(site, _guard_message(spec))
            return None
        params = spec.get("params")
        value = spec.get("stateValue", params.get("stateValue") if isinstance(params, dict) else params)
        leaves = self.state_value(value, site)
        if leaves is None:
            return None
        return {"in_state": leaves[0]} if len(leaves) == 1 else {"and": [{"in_state": p} for p in leaves]}

    def state_value(self, value: Any, site: str) -> list[str] | None:
        """The full paths a ``stateIn`` value requires active: ``'#id'`` (or ``'#id.child'``), a state value
        string from the machine's root (``'a.b'``) or object (``{a: 'b', c: 'd'}``: every leaf of it)."""
        if isinstance(value, str) and value.startswith("#"):
            ident, _, rest = value[1:].partition(".")
            base = self.root if ident == self.machine_id else self.by_id.get(ident)
            path = None if base is None else f"{base}.{rest}" if base and rest else (base or rest)
            if path not in self.paths:
                self.report(site, f"stateIn: no state {value!r}")
                return None
            return [path]
        paths: list[str] = []

        def walk(node: Any, prefix: str) -> bool:
            if isinstance(node, str) and node:
                paths.append(f"{prefix}.{node}" if prefix else node)
                return True
            if not isinstance(node, dict) or not node:
                return False
            for key, sub in node.items():
                here = f"{prefix}.{key}" if prefix else key
                if sub == {}:
                    paths.append(here)  # an atomic region of a parallel state value: {region: {}}
                elif not walk(sub, here):
                    return False
            return True

        if not walk(value, self.root):
            self.report(site, "stateIn needs a state id ('#id') or a state value ('a.b', {a: 'b'})")
            return None
        missing = [p for p in paths if p not in self.paths]
        if missing:
            self.report(site, f"stateIn: no state {missing[0]!r} in the machine")
            return None
        return paths

    def actions(self, spec: Any, site: str) -> list[Any]:
        items = spec if isinstance(spec, list) else [spec]
        out: list[Any] = []
        for i, item in enumerate(items):
            where = f"{site}[{i}]" if isinstance(spec, list) else site
            action = self.action(item, where)
            if action is not None:
                out.append(action)
        return out

    def action(self, item: Any, site: str) -> Any:
        if isinstance(item, str):
            self.report(site, f"the action {item!r} is implemented in code (setup({{actions}})); write it as "
                              "data (raise, sendTo, log, assign) or a durastate 'package.module:function' call")
            return None
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            self.report(site, "an action is a name or an object with a type")
            return None
        kind = item["type"].removeprefix("xstate.")
        if kind == "raise":
            event = self.event(item.get("event"), site)
            if item.get("delay") is not None:
                self.report(f"{site}.delay", "a delayed raise is not supported; use the state's `after`")
                return None
            return None if event is None else {"raise": event}
        if kind in ("sendTo", "sendParent"):
            to = "parent" if kind == "sendParent" else item.get("to")
            if to not in ("parent", "self") and not (isinstance(to, str) and to and "~" not in to
                                                     and not to.startswith("$")):
                self.report(f"{site}.to", "sendTo needs the id of the receiver ('parent', 'self' or an execution id)")
                return None
            if item.get("delay") is not None:
                self.report(f"{site}.delay", "a delayed send is not supported; use the state's `after`")
                return None
            event = self.event(item.get("event"), site)
            return None if event is None else {"send": {**event, "to": to}}
        if kind == "log":
            return {"log": escape(item.get("message", item.get("label")))}
        if kind == "assign":
            assignment = item.get("assignment")
            if not isinstance(assignment, dict) or not assignment:
                self.report(f"{site}.assignment", "assign needs an object of context keys to constant values "
                                                  "(a function assigner is code)")
                return None
            return {"assign": {str(k): escape(v) for k, v in assignment.items()}}
        self.report(site, f"the action {item['type']!r} has no durastate equivalent")
        return None

    def event(self, spec: Any, site: str) -> dict[str, Any] | None:
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
            self.report(f"{site}.event", "the event is an object with a type (an event function is code)")
            return None
        name = spec["type"]
        if descriptor_problem(name) is not None or "*" in name:
            self.report(f"{site}.event.type", f"{name!r} is not an event name durastate accepts")
            return None
        data = {k: escape(v) for k, v in spec.items() if k != "type"}
        return {"event": name, "data": data} if data else {"event": name}


def _can_finish(node: dict[str, Any]) -> bool:
    """Whether a parallel state (or machine) can be in XState's final state: every region is a compound
    state with a final child or a parallel state that can be."""
    regions = [c for c in (node.get("states") or {}).values() if isinstance(c, dict) and c.get("type") != "history"]
    return bool(regions) and all(_can_finish(r) if r.get("type") == "parallel" else _has_final_child(r)
                                 for r in regions)


def _has_final_child(node: dict[str, Any]) -> bool:
    children = node.get("states")
    return isinstance(children, dict) and any(isinstance(c, dict) and c.get("type") == "final"
                                              for c in children.values())


def _guard_message(guard: Any) -> str:
    name = guard if isinstance(guard, str) else guard.get("type") if isinstance(guard, dict) else None
    if name in ("stateIn", "xstate.stateIn"):
        return ("stateIn maps to durastate's in_state only written as data with its state: {type: "
                "'xstate.stateIn', stateValue: '#id'}; the transition is left out")
    return (f"the guard {name!r} is implemented in code (setup({{guards}})); write it as a durastate guard "
            "({eq: [...]}, {gt: [...]}...) by hand; the transition is left out")


def convert(text: str, source: str | None = None) -> ImportResult:
    """The durastate definition of the XState v5 machine config ``text`` (JSON) and what could not be mapped.

    Text that is not JSON, or not an object, raises :class:`~durastate.errors.DefinitionError`.
    """
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DefinitionError([f"(document): invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"],
                              source) from None
    except RecursionError:
        raise DefinitionError(["(document): nests too deeply to parse"], source) from None
    if not isinstance(config, dict):
        raise DefinitionError(["(document): an XState machine config is a JSON object"], source)
    converter = _Converter(config, source)
    document = converter.document()
    return checked(document, converter.issues)
