"""A Python task's ``timeout`` is enforced: the timeout wins over an answer that comes after it, and a task
that hangs does not stall the runtime, on every sync store, through ``LocalRuntime`` and ``serve``.

No test here depends on how fast the machine is: a "slow" task blocks on a :class:`threading.Event` that
the test releases only once the timeout has been applied, so its answer is late however fast or slow the
machine; the only wall time spent is the (small) timeout itself, waited out once. The runtime's own
clock is a manual one throughout.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest

from durastate.engine import DefinitionRegistry, load_definition
from durastate.engine.ids import task_id
from durastate.engine.model import Event, Execution
from durastate.runtime import LocalRuntime, ManualClock
from durastate.store.base import Emit, ExecutionStore, Spawn, TimerOp
from tests.wrapped_store import WrappedStore

TIMEOUT = 0.2
"""Seconds a task here may take: waited out once per hanging call (wall time, as for an HTTP task)."""

RELEASE = threading.Event()
"""Set by a test to let the calls that block on it return (late)."""
RETURNED = threading.Event()
"""Set by a blocked call just before it returns its late answer."""
CALLS: list[dict[str, Any]] = []
BLOCKED: list[threading.Thread] = []
"""The threads of the calls that blocked (each task call has a thread of its own): a test's teardown joins
them, so that a late call of one test cannot set RETURNED after the next test has cleared it."""


def hang(doc: dict[str, Any]) -> dict[str, Any]:
    """Blocks until the test releases it; a retry (attempt 2 and later) answers at once."""
    CALLS.append(doc)
    if doc["attempt"] == 1:
        BLOCKED.append(threading.current_thread())
        RELEASE.wait(60)  # a bound only so that a broken test cannot leave the thread behind for ever
        RETURNED.set()
        return {"late": True}
    return {"attempt": doc["attempt"]}


def chart(**invoke: Any) -> dict[str, Any]:
    return {
        "id": "slow",
        "initial": "working",
        "states": {
            "working": {
                "invoke": {"task": {"python": "tests.runtime.test_task_timeouts:hang"}, "input": {},
                           "timeout": TIMEOUT, **invoke},
                "on_done": {"target": "done", "actions": [{"assign": {"result": "$event.output"}}]},
                "on_error": {"target": "gave_up", "actions": [{"assign": {"why": "$event.error"}}]},
            },
            "done": {"type": "final", "outcome": "done"},
            "gave_up": {"type": "final", "outcome": "gave_up"},
        },
    }


COUNTER = {"id": "counter", "initial": "idle", "context": {"n": 0},
           "states": {"idle": {"on": {"inc": {"actions": [{"assign": {"n": {"add": ["$context.n", 1]}}}]}}}}}


@pytest.fixture(autouse=True)
def blocked() -> Iterator[None]:
    RELEASE.clear()
    RETURNED.clear()
    CALLS.clear()
    BLOCKED.clear()
    yield
    RELEASE.set()  # whatever happened, no call stays blocked
    for thread in BLOCKED:
        thread.join(60)  # ...and each has returned before the next test clears the flags


def runtime(store: ExecutionStore, clock: ManualClock, **invoke: Any) -> LocalRuntime:
    reg = DefinitionRegistry([load_definition(chart(**invoke)), load_definition(COUNTER)])
    return LocalRuntime(store, reg, clock=clock)


def first_task(rt: LocalRuntime, eid: str) -> str:
    exe = rt.get(eid)
    assert exe is not None and exe.secret
    return task_id(eid, 1, exe.secret)


def test_a_task_that_answers_after_its_timeout_fails_with_task_timeout(every_store: ExecutionStore,
                                                                       clock: ManualClock) -> None:
    rt = runtime(every_store, clock)
    rt.start("slow", execution_id="s")
    rt.run_until_idle()  # the relay stops waiting at the deadline: the timeout wins
    exe = rt.get("s")
    assert exe is not None and (exe.status, exe.outcome) == ("finished", "gave_up")
    assert exe.context["why"] == f"TaskTimeout: task {first_task(rt, 's')} did not answer within {TIMEOUT:g}s"
    RELEASE.set()
    assert RETURNED.wait(60)  # the call answers now, too late: its answer is never sent
    clock.advance(60)  # the task's durable timer comes due as well: disarmed already, nothing fires
    stats = rt.run_until_idle()
    assert (stats.applied, stats.tasks, stats.fired) == (0, 0, 0)
    after = rt.get("s")
    assert after is not None and (after.outcome, after.context) == (exe.outcome, exe.context)


def test_a_task_timeout_is_retried_by_the_invokes_retry_policy(every_store: ExecutionStore,
                                                               clock: ManualClock) -> None:
    rt = runtime(every_store, clock, retry={"max_attempts": 2, "backoff": {"initial": 10}})
    rt.start("slow", execution_id="r")
    rt.run_until_idle()
    exe = rt.get("r")
    assert exe is not None and exe.active_path == "working" and [c["attempt"] for c in CALLS] == [1]
    clock.advance(10)  # the retry's backoff, on the runtime's clock
    rt.run_until_idle()
    exe = rt.get("r")
    assert exe is not None and (exe.outcome, exe.context["result"]) == ("done", {"attempt": 2})
    RELEASE.set()
    assert RETURNED.wait(60)
    rt.run_until_idle()
    late = rt.get("r")
    assert late is not None and late.context["result"] == {"attempt": 2}  # the first try's answer is not taken


class Committed(WrappedStore):
    """Delegates to a real store; ``wait_for(id, test)`` returns once a commit of ``id`` passes ``test``
    (how the test synchronises with ``serve`` running in another thread, without sleeping)."""

    def __init__(self, inner: ExecutionStore) -> None:
        super().__init__(inner)
        self._cond = threading.Condition()
        self._seen: dict[str, Execution] = {}

    def commit(self, exe: Execution, emits: Sequence[Emit], processed_event_id: str | None = None,
               timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
               trace: dict[str, Any] | None = None, **options: Any) -> None:
        self.inner.commit(exe, emits, processed_event_id, timers, spawns, trace, **options)
        with self._cond:
            self._seen[exe.id] = exe.model_copy(deep=True)
            self._cond.notify_all()

    def wait_for(self, execution_id: str, test: Any) -> Execution:
        with self._cond:
            assert self._cond.wait_for(lambda: execution_id in self._seen and test(self._seen[execution_id]),
                                       timeout=60), f"{execution_id} never got there"
            return self._seen[execution_id]


def test_a_hanging_task_does_not_stall_serve(every_store: ExecutionStore, clock: ManualClock) -> None:
    store = Committed(every_store)
    rt = runtime(store, clock)  # type: ignore[arg-type]
    stop = threading.Event()
    server = threading.Thread(target=rt.serve, kwargs={"stop": stop, "poll_interval": 0.01}, daemon=True)
    server.start()
    try:
        rt.start("slow", execution_id="h")
        gave_up = store.wait_for("h", lambda e: e.outcome == "gave_up")
        assert gave_up.context["why"].startswith("TaskTimeout: task ")
        assert not RETURNED.is_set()  # the task still hangs; serve went on without it
        rt.start("counter", execution_id="c")
        rt.send("c", Event(id="i1", name="inc"))
        assert store.wait_for("c", lambda e: e.context.get("n") == 1).status == "running"
    finally:
        stop.set()
        RELEASE.set()
        server.join(60)
    assert not server.is_alive()
