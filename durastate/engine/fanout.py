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

Pure, like the rest of the engine: it only changes the execution and adds to the step's result.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durastate.engine.expressions import Issues, Value, compile_value
from durastate.engine.ids import REINVOKE_PREFIX, cancel_event_id, child_execution_id, run_witness, start_event_id
from durastate.engine.model import CANCEL, START, ChildRef, Event, Execution, MapProgress, TimerOp
from durastate.engine.retry import RetryPolicy, parse_retry
from durastate.engine.run_context import ExecutionFailed
from durastate.engine.tasks import task_only

if TYPE_CHECKING:
    from durastate.engine.definition import State
    from durastate.engine.interpreter import Run

__all__ = ["DEFAULT_MAX_CONCURRENCY", "ITEM_EVENT", "CompiledMap", "child_start", "compile_map", "enter", "leave",
           "on_finished", "parse_tolerate", "retry_due", "start"]

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


def enter(run: Run, s: int) -> None:
    """The map state ``s`` was just entered (after its entry actions): evaluate its items.

    Its children start at the end of the step (:func:`start`), if the state is still active then; an empty
    list takes ``on_done`` at once (an internal event, as a compound state's final child does).
    """
    t, exe = run.t, run.exe
    m = t.maps[s]
    run.site = m.site + ".items"
    items = m.items(exe.context, run.event)
    if not isinstance(items, list):
        shown = "null (missing?)" if items is None else type(items).__name__
        raise TypeError(f"map items must evaluate to a JSON array, got {shown}; give a list (such as "
                        "$context.orders)")
    path = t.paths[s]
    exe.maps[path] = MapProgress(total=len(items), pending=copy.deepcopy(items))
    if not items:
        run._queue(_event(run.event.id, t.done_event[s], _done_data(exe.maps[path])))
        return
    if run.fanouts is None:
        run.fanouts = []
    run.fanouts.append(s)


def start(run: Run) -> None:
    """At the end of a step: start the first window of each map state entered and still active."""
    t, leaf = run.t, run.leaf
    for s in dict.fromkeys(run.fanouts or ()):
        progress = run.exe.maps.get(t.paths[s])
        if s == leaf and progress is not None:
            _fill(run, s, progress)
    run.fanouts = None


def _fill(run: Run, s: int, progress: MapProgress) -> None:
    """Start children until ``max_concurrency`` run or no item is left. The contexts of all of them are
    evaluated first, so a value that fails leaves no half-started window behind."""
    m = run.t.maps[s]
    room = min(m.max_concurrency - progress.running, len(progress.pending))
    if room <= 0:
        return
    contexts = [_item_context(run, s, progress.pending[k], progress.started + k) for k in range(room)]
    items = progress.pending[:room]
    del progress.pending[:room]
    for item, child_ctx in zip(items, contexts, strict=True):
        if m.retry is not None:
            progress.running_items[str(progress.started)] = item
        progress.outputs.append(None)  # (grows as the items shrink: the parent holds each item once)
        progress.started += 1
        _start_child(run, s, progress.started - 1, 1, child_ctx)


def _start_child(run: Run, s: int, index: int, attempt: int, child_ctx: dict[str, Any]) -> None:
    """Start the child of item ``index`` (its ``attempt``-th try): a new derived id, its start emitted."""
    t, exe = run.t, run.exe
    m = t.maps[s]
    exe.invoke_seq += 1
    cid = child_execution_id(exe.id, exe.invoke_seq)
    exe.children[cid] = ChildRef(path=t.paths[s], kind="map", index=index, attempt=attempt)
    run.res.emits.append((cid, child_start(exe, cid, m.definition, child_ctx)))


def _item_context(run: Run, s: int, item: Any, index: int) -> dict[str, Any]:
    m = run.t.maps[s]
    run.site = m.site + ".invoke.context"
    child_ctx = m.context(run.exe.context, _event(run.event.id, ITEM_EVENT, {"item": item, "index": index}))
    if not isinstance(child_ctx, dict):
        raise TypeError(f"map invoke context must evaluate to a mapping, got {type(child_ctx).__name__}")
    return copy.deepcopy(child_ctx)


def _arm_retry(run: Run, s: int, progress: MapProgress) -> None:
    """The map's one retry timer at its earliest waiting retry (cancelled when none waits)."""
    key = REINVOKE_PREFIX + run.t.paths[s]
    timers = run.exe.timers
    if progress.retries:
        at = min(float(r["at"]) for r in progress.retries)
        if timers.get(key) != at:
            timers[key] = at
            run._timer(TimerOp("schedule", key, at))
    elif timers.pop(key, None) is not None:
        run._timer(TimerOp("cancel", key))


def retry_due(run: Run, s: int) -> bool:
    """The retry timer of map state ``s`` fired: start the next try of every item whose backoff is over."""
    progress = run.exe.maps.get(run.t.paths[s])
    if progress is None:
        return False
    due = [r for r in progress.retries if float(r["at"]) <= run.now]
    if not due and progress.retries:  # fired a little early (the worker's skew): the earliest is due
        first = min(float(r["at"]) for r in progress.retries)
        due = [r for r in progress.retries if float(r["at"]) == first]
    contexts = [_item_context(run, s, r["item"], int(r["index"])) for r in due]
    progress.retries = [r for r in progress.retries if r not in due]
    for r, child_ctx in zip(due, contexts, strict=True):
        progress.running_items[str(r["index"])] = r["item"]
        _start_child(run, s, int(r["index"]), int(r["attempt"]), child_ctx)
    _arm_retry(run, s, progress)
    return True


def _done_data(progress: MapProgress) -> dict[str, Any]:
    """What ``on_done`` sees: copies, so a context that keeps them shares nothing with the progress (which
    stays as long as the state does)."""
    return {"outputs": copy.deepcopy(progress.outputs), "failed": copy.deepcopy(progress.failures),
            "total": progress.total, "done": progress.done}


def _cancel_running(run: Run, path: str) -> int:
    """Cancel the running children of the map at ``path`` and forget them (late news is then ignored)."""
    exe = run.exe
    n = 0
    for cid, ref in list(exe.children.items()):
        if ref.kind == "map" and ref.path == path:
            if ref.status == "running":
                run.res.emits.append((cid, _event(cancel_event_id(cid), CANCEL, {})))
                n += 1
            del exe.children[cid]
    return n


def leave(run: Run, s: int) -> None:
    """The map state ``s`` is exited: cancel its running children and drop its progress."""
    path = run.t.paths[s]
    _cancel_running(run, path)
    run.exe.maps.pop(path, None)
    if run.exe.timers.pop(REINVOKE_PREFIX + path, None) is not None:
        run._timer(TimerOp("cancel", REINVOKE_PREFIX + path))


def on_finished(run: Run, cid: str, ref: ChildRef, ev: Event) -> bool:
    """A map child's ``durastate.finished``: record it, start the next item, and end the map when due."""
    t, exe = run.t, run.exe
    s = t.index.get(ref.path, -1)
    progress = exe.maps.get(ref.path)
    del exe.children[cid]
    if s < 0 or progress is None or ref.index is None or s not in t.maps:
        return False
    m = t.maps[s]
    status = ev.data.get("status", "finished")
    item = progress.running_items.pop(str(ref.index), None)
    error = ev.data.get("error") or status
    if status == "failed" and m.retry is not None and ref.attempt < m.retry.max_attempts \
            and m.retry.covers(str(error)):
        progress.retries.append({"index": ref.index, "attempt": ref.attempt + 1, "item": item,
                                 "at": run.now + m.retry.delay(ref.attempt)})
        _arm_retry(run, s, progress)
        return True
    if status == "finished":
        run.site = m.site + ".output"
        progress.outputs[ref.index] = copy.deepcopy(m.output(exe.context, ev))
        progress.done += 1
    else:
        progress.failed += 1
        progress.failures.append({"index": ref.index, "child_id": cid, "status": status, "error": error})
        if progress.failed > m.tolerated(progress.total):
            progress.cancelled += _cancel_running(run, ref.path) + len(progress.retries)
            progress.retries.clear()
            progress.running_items.clear()
            _arm_retry(run, s, progress)
            progress.pending.clear()
            if not run.dispatch(_event(ev.id, t.error_event[s], {**ev.data, "index": ref.index})):
                raise ExecutionFailed(f"map child {cid} (item {ref.index}) {status}: {error} (no on_error on "
                                      f"{t.paths[s]})")
            return True
    if progress.done + progress.failed == progress.total:
        run.dispatch(_event(ev.id, t.done_event[s], _done_data(progress)))
        return True
    _fill(run, s, progress)
    return True
