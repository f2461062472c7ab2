"""Fan-out: the ``map`` of a state — one child execution per item of a list, in a bounded window.

```yaml
charging:
  map:
    items: $context.orders                                  # evaluated on entry: a JSON array
    invoke: {definition: charge, context: {order: $item, n: $index}}
    max_concurrency: 10                                     # children running at once (default 10)
    tolerate: 0                                             # failed children accepted: a count, or "10%"
  on_done: {target: done, actions: [{assign: {results: $event.outputs}}]}
  on_error: failed
```

How it stays within one stored execution (DynamoDB: 400 KB) however long the list is: the parent keeps
*counters* (:class:`~durastate.engine.model.MapProgress`: items not started yet, started/done/failed,
and one output per item), and a :class:`~durastate.engine.model.ChildRef` only for the children running
now, so at most ``max_concurrency`` of them. Each child is an invoked child like any other — its id
derived from the parent's invoke number (:func:`~durastate.engine.ids.child_execution_id`), its start
and its ``durastate.finished`` notice checked by the worker against the parent and the child's stored
state — so a forged start or notice is refused exactly as for ``invoke``.

The step that applies a child's notice also records its output and starts the next item's child: one
commit, so the window never holds more than ``max_concurrency`` children and a crash between the two
cannot lose an item. When every child has ended the state's ``on_done`` runs with ``$event.outputs`` (in
item order, whatever order the children finished in), ``$event.failed`` (the tolerated failures,
whose outputs are ``null``), ``$event.total`` and ``$event.done``. One failure more than ``tolerate``
cancels the children still running and takes ``on_error`` with that child's notice (``$event.error``,
``$event.child_id``, ``$event.index``); without an ``on_error`` the parent fails, as for ``invoke``.
Leaving the state (any transition out, a cancel, the end of the execution) cancels the running
children.

``tolerate`` is a count or a percentage of the items (``10%``: of 25 items, 2 may fail — rounded down).

A ``retry`` policy on the map's ``invoke`` retries each item by the same policy as an invoke's retry
(:mod:`durastate.engine.retry`: ``max_attempts``, ``backoff``, ``on`` matched against the child's error
type): a failed child whose policy has tries left is followed, after the backoff, by a new child for the
same item (a new derived id, ``attempt`` one more), and only a child whose tries ran out counts as
failed (for ``tolerate`` and ``on_error``). While it waits the item keeps its place in the window, so
``max_concurrency`` still bounds the children running; the map keeps the items of its running children
(:attr:`~durastate.engine.model.MapProgress.running_items`) so it can start one again, and the waiting
ones in ``retries``, with ONE timer for the map state (``~invoke:<path>``) at the earliest of them.

Pure, like the rest of the engine: it only changes the execution and adds to the step's result. This module
holds the spec and its compiler; what a step does with a map state is :mod:`durastate.engine.map_runs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durastate.engine.expressions import Issues, Value, compile_value
from durastate.engine.ids import run_witness, start_event_id
from durastate.engine.model import START, Event, Execution
from durastate.engine.retry import RetryPolicy, parse_retry
from durastate.engine.tasks import task_only

if TYPE_CHECKING:
    from durastate.engine.states import State

__all__ = ["DEFAULT_MAX_CONCURRENCY", "ITEM_EVENT", "CompiledMap", "child_start", "compile_map", "parse_tolerate"]

DEFAULT_MAX_CONCURRENCY = 10
"""Children a map runs at once unless it says otherwise (``max_concurrency``: 1 to 1000)."""

ITEM_EVENT = "durastate.map.item"
"""The name of the event a map's ``invoke.context`` is evaluated with: its data is ``{item, index}``,
which is what ``$item`` and ``$index`` read."""

_ITEM_REFS = {"$item": "$event.item", "$index": "$event.index"}


@dataclass(frozen=True, slots=True)
class CompiledMap:
    """A state's ``map``, compiled at load."""

    definition: str
    items: Value
    context: Value
    """Evaluated with ``(parent context, an ITEM_EVENT)``: ``$item``/``$index`` were rewritten to its data."""
    output: Value
    max_concurrency: int
    tolerate: int | None
    """A count of failed children accepted (None: ``tolerate_percent`` says)."""
    tolerate_percent: float | None
    retry: RetryPolicy | None
    site: str

    def tolerated(self, total: int) -> int:
        """How many failed children a map of ``total`` items accepts."""
        if self.tolerate is not None:
            return self.tolerate
        return int(total * (self.tolerate_percent or 0.0) // 100)


def parse_tolerate(value: Any, where: str, issues: Issues) -> tuple[int | None, float | None]:
    """``tolerate``: a whole number of failed children (``3``) or a percentage of the items (``"10%"``,
    0 to 100); ``(count, None)`` or ``(None, percent)``, an issue appended for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value, None
    if isinstance(value, str) and value.strip().endswith("%"):
        number = value.strip()[:-1].strip()
        try:
            percent = float(number)
        except ValueError:
            percent = -1.0
        if 0 <= percent <= 100 and number:
            return None, percent
    issues.append(f"{where}: must be a whole number of failed children from 0 (e.g. 3) or a percentage of the "
                  f"items from 0% to 100% (e.g. \"10%\"), got {value!r}")
    return 0, None


# -- load -------------------------------------------------------------------------------------------------


def _item_refs(spec: Any, where: str, issues: Issues) -> Any:
    """``spec`` with ``$item…``/``$index`` rewritten to the item event's data; ``$event`` is an issue there
    (a child may start long after entry, when the event in hand is another child's notice)."""
    if isinstance(spec, str):
        if spec.startswith("$$") or not spec.startswith("$"):
            return spec
        head, dot, rest = spec.partition(".")
        if head in _ITEM_REFS:
            return _ITEM_REFS[head] + dot + rest
        if head == "$event":
            issues.append(f"{where}: {spec!r}: a map's invoke context sees $item, $index and $context, not "
                          "$event (children start as others finish); assign what you need from the event to "
                          "the context on entry")
        return spec
    if isinstance(spec, dict):
        return {k: _item_refs(v, f"{where}.{k}", issues) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_item_refs(v, f"{where}[{i}]", issues) for i, v in enumerate(spec)]
    return spec


def compile_map(node: State, kind: str, at: Callable[[str], str], issues: Issues,
                checks: Issues) -> CompiledMap | None:
    """Check and compile ``node.map`` (``at(key)``: the site of a key of the state); ``checks`` gets the
    issues that depend on the state's kind (see :func:`durastate.engine.tables.build_tables`)."""
    spec = node.map
    if spec is None:
        return None
    site = at("map")
    if kind != "atomic":
        checks.append(f"{site}: only an atomic state (without child states) can map")
    if node.invoke is not None:
        issues.append(f"{site}: a state either invokes one child (`invoke`) or maps over a list (`map`), not "
                      "both; put one of them on a state of its own")
    definition = spec.invoke.definition
    if spec.invoke.task is not None or definition is None:
        issues.append(f"{site}.invoke: a map invokes a child definition per item (`definition`, `context`); "
                      "to run a task per item, map over a definition whose state invokes the task")
        definition = ""
    elif task_only(spec.invoke):
        issues.append(f"{site}.invoke: `{task_only(spec.invoke)}` is for tasks; a map's child gets `context`")
    if spec.invoke.id_key is not None:
        issues.append(f"{site}.invoke.id_key: names one child's id; a map starts one child per item")
    if spec.invoke.forward:
        issues.append(f"{site}.invoke.forward: for one invoked child; a map's children get their item")
    if spec.invoke.parent_close is not None:
        issues.append(f"{site}.invoke.parent_close: a map's children are always cancelled when the map state "
                      "is left; invoke from a state of its own to choose terminate or abandon")
    retry = None if spec.invoke.retry is None else parse_retry(spec.invoke.retry, f"{site}.invoke.retry", issues)
    tolerate, percent = parse_tolerate(spec.tolerate, f"{site}.tolerate", issues)
    items = spec.items
    if not (isinstance(items, list) or (isinstance(items, str) and items.startswith("$") and not items.startswith("$$"))
            or (isinstance(items, dict) and len(items) == 1)):
        issues.append(f"{site}.items: must be a list or an expression that gives one (such as "
                      f"$context.orders), got {items!r}")
    ctx_spec = _item_refs(spec.invoke.context, f"{site}.invoke.context", issues)
    return CompiledMap(
        definition=definition,
        items=compile_value(spec.items, f"{site}.items", issues),
        context=compile_value(ctx_spec, f"{site}.invoke.context", issues),
        output=compile_value(spec.output, f"{site}.output", issues),
        max_concurrency=spec.max_concurrency,
        tolerate=tolerate,
        tolerate_percent=percent,
        retry=retry,
        site=site,
    )


# -- run --------------------------------------------------------------------------------------------------


def _event(eid: str, name: str, data: dict[str, Any]) -> Event:
    return Event.model_construct(id=eid, name=name, data=data)


def child_start(exe: Execution, cid: str, definition_id: str, context: dict[str, Any]) -> Event:
    """The ``durastate.start`` of ``exe``'s invoked (or mapped) child ``cid``, which the relay sends through
    the queue. With the parent's secret it carries a witness (:func:`durastate.engine.ids.run_witness` of
    the child's id under it): the worker starts a child only with its parent's true witness, so no producer
    can start it first with a context or a definition of its own."""
    data: dict[str, Any] = {"definition_id": definition_id, "context": context, "parent_id": exe.id,
                            "child_id": cid}
    if exe.secret:
        data["witness"] = run_witness(exe.secret, cid)
    return _event(start_event_id(cid), START, data)
