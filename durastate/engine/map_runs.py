"""What entering, filling, retrying, finishing and leaving a ``map`` state do to the execution (see
:mod:`durastate.engine.fanout` for the semantics and the spec): called by the interpreter, on its step.

Beside the spec rather than in it: these take the running step (:class:`~durastate.engine.step_context.StepContext`),
which holds the compiled tables, which hold the compiled maps.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from durastate.engine.fanout import ITEM_EVENT, _event, child_start
from durastate.engine.ids import REINVOKE_PREFIX, cancel_event_id, child_execution_id
from durastate.engine.model import CANCEL, ChildRef, Event, MapProgress, TimerOp
from durastate.engine.run_context import ExecutionFailed

if TYPE_CHECKING:
    from durastate.engine.step_context import StepContext

__all__ = ["enter", "leave", "on_finished", "retry_due", "start"]


def enter(run: StepContext, s: int) -> None:
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


def start(run: StepContext) -> None:
    """At the end of a step: start the first window of each map state entered and still active."""
    t, leaf = run.t, run.leaf
    for s in dict.fromkeys(run.fanouts or ()):
        progress = run.exe.maps.get(t.paths[s])
        if s == leaf and progress is not None:
            _fill(run, s, progress)
    run.fanouts = None


def _fill(run: StepContext, s: int, progress: MapProgress) -> None:
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


def _start_child(run: StepContext, s: int, index: int, attempt: int, child_ctx: dict[str, Any]) -> None:
    """Start the child of item ``index`` (its ``attempt``-th try): a new derived id, its start emitted."""
    t, exe = run.t, run.exe
    m = t.maps[s]
    exe.invoke_seq += 1
    cid = child_execution_id(exe.id, exe.invoke_seq)
    exe.children[cid] = ChildRef(path=t.paths[s], kind="map", index=index, attempt=attempt)
    run.res.emits.append((cid, child_start(exe, cid, m.definition, child_ctx)))


def _item_context(run: StepContext, s: int, item: Any, index: int) -> dict[str, Any]:
    m = run.t.maps[s]
    run.site = m.site + ".invoke.context"
    child_ctx = m.context(run.exe.context, _event(run.event.id, ITEM_EVENT, {"item": item, "index": index}))
    if not isinstance(child_ctx, dict):
        raise TypeError(f"map invoke context must evaluate to a mapping, got {type(child_ctx).__name__}")
    return copy.deepcopy(child_ctx)


def _arm_retry(run: StepContext, s: int, progress: MapProgress) -> None:
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


def retry_due(run: StepContext, s: int) -> bool:
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


def _cancel_running(run: StepContext, path: str) -> int:
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


def leave(run: StepContext, s: int) -> None:
    """The map state ``s`` is exited: cancel its running children and drop its progress."""
    path = run.t.paths[s]
    _cancel_running(run, path)
    run.exe.maps.pop(path, None)
    if run.exe.timers.pop(REINVOKE_PREFIX + path, None) is not None:
        run._timer(TimerOp("cancel", REINVOKE_PREFIX + path))


def on_finished(run: StepContext, cid: str, ref: ChildRef, ev: Event) -> bool:
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
