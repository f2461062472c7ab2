"""The worker: applies one event to one execution, exactly once in effect.

``load_for_event`` → a redelivered event id is a no-op → ``durastate.start`` creates the execution → the
pure ``step`` → one atomic ``commit`` that also records the event id as processed. The commit's version
compare-and-swap is the only concurrency control: a loser reloads and steps again on fresh state, so the
result always equals some serial order of the events.

Kept copies (on by default, on a store whose commit can check an event's dedupe mark itself —
``EventCheckingStore``: the SQL stores): the worker keeps the executions it committed, the most recently
committed first, within a memory budget (``keep_bytes``, :data:`DEFAULT_KEEP_BYTES`, by an estimate of each
one's size: :func:`kept_size`), and applies the next event for one of them without loading and parsing it
again. A budget in bytes, not a count, is what keeps the cost per event flat as the executions active at once
grow: thousands of typical executions fit, and a few huge ones cannot use up memory. ``keep_committed=N``
also caps their number (``0`` turns keeping off). Before
stepping a kept copy it asks the store for the execution's version and whether the event was applied
(``version_for_event``: one indexed read of the row's ``version`` and ``rids``, the data neither sent nor
parsed); a copy another worker has moved on is dropped and the execution loaded as usual, a redelivered
event is a duplicate — so a step never runs on a stale copy, and user actions run once, as on the
read-first path, also when several workers take turns on the same executions. The commit still checks
both (CAS and ``check_event``), which covers a writer that slips in between that read and the commit
exactly as the read-first path's CAS does.

That read protects user code, so it is made only where there is some: when the definition the kept copy
runs on has a Python callable among its guards or actions (``Tables.runs_user_code``: a ``call``, a
``package.module:function`` guard). A declarative step (``assign``, ``send``, ``raise``, ``log``; tasks,
invokes and maps are only recorded) has no effect outside what its commit writes, so the kept copy is
stepped unchecked: if it was stale, the commit refuses it (the version check, or the event's dedupe mark)
and the worker reloads and steps again, as after any lost compare-and-swap — one round trip per event on
the common path, and the result is still some serial order of the events. An execution migrated meanwhile
is caught the same way (a migration is a commit: it moves the version). An error raised on an unchecked
copy (an event refused while suspended, a row grown too large) is raised only after the read confirms the
copy was current; otherwise the event is applied to the stored state instead.

``exclusive=True`` skips that read for every definition (``durastate serve --exclusive``): for a worker that
is the only one applying events to its executions (one embedded process; a deployment partitioned by
execution), one round trip per event instead of two also where user code runs. If it is not, a stale copy
is still caught by the commit — after the step ran, so the step and its actions run twice.

An unchanged context is not written again (on a ``ContextKeepingStore``: the SQL stores): the worker notes
the context's values as the execution was loaded or kept, and tells the commit ``context_unchanged`` when
they are still the very same objects under the same keys — which proves the context unchanged only where no
Python callable runs (``Tables.runs_user_code`` false: ``assign`` and a reset's patch replace values, never
change one in place), so only there. A step that leaves a 100 KB context alone then neither serialises nor
writes it.
"""

from __future__ import annotations

import copy as copy_module
import enum
import hmac
import logging
import math
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from durastate.engine import Definition, DefinitionRegistry, StepResult, control, step
from durastate.engine.ids import (
    CANCEL,
    CATCH,
    CHILD_SEPARATOR,
    FINISHED,
    HEARTBEAT,
    REDRIVE,
    RESERVED,
    RESERVED_PREFIX,
    RESET,
    RESUME,
    RETRY_PATH,
    START,
    SUSPEND,
    SYSTEM_PREFIX,
    TERMINATE,
    TIMEOUT,
    child_execution_id,
    derived_id,
    finished_event_id,
    is_derived_event_id,
    is_system_id,
    reserved_event_id,
    reset_problem,
    reset_sent_event_id,
    run_witness,
    task_seq,
    timeout_problem,
)
from durastate.engine.model import ENDED, Event, Execution, PendingRetry
from durastate.engine.reset import ResetRefused, ResetRequest, reset
from durastate.engine.run_timeout import check_start_timeout
from durastate.engine.schedules import schedule_record_id
from durastate.engine.tracing import step_details
from durastate.engine.values import check_execution_id
from durastate.errors import (
    EventAlreadyProcessed,
    InvalidValue,
    MalformedEvent,
    ReservedId,
    StoreConflict,
    TimerNotDue,
    UnknownDefinition,
    UnknownExecution,
)
from durastate.runtime.clock import Clock
from durastate.runtime.keys import give_secret
from durastate.runtime.sweeper import SWEPT
from durastate.runtime.telemetry import CommitSpan, Telemetry
from durastate.runtime.versions import Versions
from durastate.store.base import (
    ContextKeepingStore,
    Emit,
    EventCheckingStore,
    ExecutionStore,
    Spawn,
    TimerOp,
    keeps_history,
)
from durastate.store.memory.sync import DictCore

__all__ = ["HandleResult", "Worker", "detached_copy", "returns_live_objects"]

log = logging.getLogger("durastate.runtime")


class HandleResult(enum.StrEnum):
    """What :meth:`Worker.handle` did; compares equal to its plain string value."""

    APPLIED = "applied"
    """The event was applied (or the execution was created) and committed."""
    DUPLICATE = "duplicate"
    """The event id was already processed for this execution; nothing changed."""
    IGNORED = "ignored"
    """The event was consumed but changed nothing: unhandled, a stale timeout, a notice that is not true, or
    the execution ended for good (it can never step again)."""
    HELD = "held"
    """The execution is suspended, waits for a retry, or failed and awaits a redrive: the event is kept in it
    and applied later."""


def returns_live_objects(store: object) -> bool:
    """Whether ``store.load`` hands out the stored object itself rather than a fresh copy.

    A store may say so with a ``returns_live_objects`` attribute; the in-memory stores do by design
    (their identity contract).
    """
    flag = getattr(store, "returns_live_objects", None)
    if flag is not None:
        return bool(flag)
    return isinstance(store, DictCore)


def detached_copy(exe: Execution, *, shared_values: bool = False) -> Execution:
    """An independent deep copy of ``exe``; ``shared_values``: the context is copied at its top level only,
    its values shared — for an execution whose definition runs no Python callable (``Tables.runs_user_code``
    false): its step replaces context values and never changes one in place (``assign`` and reset's patch
    copy what they write into: copy-on-write), so a shared value stays what it was.

    Stepping a copy keeps a step that fails to commit from leaving half-applied state in a live store,
    and gives the store's compare-and-swap a *different* object at the loaded version, which is what lets
    it detect a concurrent writer.

    Why hand-written: an execution is validated JSON data (pydantic models, dicts, lists and scalars), so
    copying its containers is all a deep copy has to do. Building the copy without re-validation
    measures ~2.5x faster than a ``model_dump``/``model_validate`` round trip and ~10x faster than
    ``model_copy(deep=True)``; on ``DictStore`` that is the difference between the copy costing a third of
    an event and a tenth of one.
    """
    fields = dict(exe.__dict__)
    fields["context"] = dict(exe.context) if shared_values else _json_copy(exe.context)
    fields["history"] = dict(exe.history)
    fields["timers"] = dict(exe.timers)
    fields["children"] = {cid: _model_copy(ref) for cid, ref in exe.children.items()} if exe.children else {}
    if exe.held:
        fields["held"] = list(exe.held)
    if exe.sends:
        fields["sends"] = dict(exe.sends)  # the pending events themselves are never changed in place
    if exe.maps:
        fields["maps"] = {path: _model_copy(m, _json_copy(m.__dict__)) for path, m in exe.maps.items()}
    if exe.trace_links:
        fields["trace_links"] = dict(exe.trace_links)
    return _model_copy(exe, fields)


_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
_setattr = object.__setattr__


def _model_copy(model: _M, fields: dict[str, Any] | None = None) -> _M:
    """A new instance of ``model``'s class holding ``fields`` (default: a shallow copy of its own)."""
    copy = _new(type(model))
    _setattr(copy, "__dict__", dict(model.__dict__) if fields is None else fields)
    _setattr(copy, "__pydantic_fields_set__", set(model.__pydantic_fields_set__))
    _setattr(copy, "__pydantic_extra__", None)
    _setattr(copy, "__pydantic_private__", None)
    return copy


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON data: containers copied, scalars (immutable) shared."""
    if type(value) is dict:
        return {k: _json_copy(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if type(value) is list:
        return [_json_copy(v) if type(v) in _CONTAINERS else v for v in value]
    if isinstance(value, dict | list):  # a subclass: keep its type, copy through copy.deepcopy
        return copy_module.deepcopy(value)
    return value


_CONTAINERS = (dict, list)
_MISSING = object()


def _same_values(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether ``after`` holds the very objects ``before`` held, under the same keys: by identity, O(keys), never
    by comparing or serialising the values — a proof that the context did not change only for a step that
    changes no value in place (see :func:`detached_copy`)."""
    if len(before) != len(after):
        return False
    get = after.get
    return all(get(key, _MISSING) is value for key, value in before.items())

DEFAULT_KEEP_BYTES = 64 * 1024 * 1024
"""The memory a worker's kept executions may take (``keep_bytes``'s default), by :func:`kept_size`: some
15,000 small executions; past it the least recently committed are dropped, and loaded again when next
needed."""

KEPT_OVERHEAD = 4096
"""What :func:`kept_size` counts for an execution besides its values: the model object, its dicts, its id and
strings — what a small execution kept takes in memory, with what the store remembers of its row (measured
with ``tracemalloc``: about 4.2 KB for a counter with one context key)."""

_ENTRY = 64
"""What :func:`kept_size` counts per item of a dict or list (the item's slot and a small value)."""


def kept_size(exe: Execution, sizes: dict[str, tuple[Any, int]] | None = None) -> int:
    """An estimate of the memory ``exe`` takes, for the kept-copies budget — cheap, never a serialisation:
    :data:`KEPT_OVERHEAD`, plus for its context, children, timers, history, maps and held events the
    length of each string and :data:`_ENTRY` per item, counted down to the second level of nesting (deeper
    containers count by their length alone). An estimate: a context holding large values nested deeper
    is under-counted.

    ``sizes``: the sizes of the context's values at the last count, ``{key: (value, size)}``, updated here; a
    container value that is the very object counted then is not counted again. Only for an execution whose
    step never changes a value in place (see :func:`detached_copy`): then an event costs what it changes,
    not what the context holds."""
    size = KEPT_OVERHEAD + _ENTRY * (len(exe.children) + len(exe.timers) + len(exe.history) + len(exe.maps)
                                     + 4 * len(exe.held))
    if sizes is None:
        return size + _value_size(exe.context, 2)
    counted = dict(sizes)
    sizes.clear()
    total = _ENTRY
    for key, value in exe.context.items():
        last = counted.get(key)
        n = last[1] if last is not None and last[0] is value else _value_size(value, 1)
        if type(value) in _CONTAINERS:
            sizes[key] = (value, n)
        total += len(key) + n
    return size + total


def _value_size(value: Any, depth: int) -> int:
    if isinstance(value, str):
        return _ENTRY + len(value)
    if isinstance(value, dict):
        if depth == 0:
            return _ENTRY * (1 + len(value))
        return _ENTRY + sum(len(k) + _value_size(v, depth - 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        if depth == 0:
            return _ENTRY * (1 + len(value))
        return _ENTRY + sum(_value_size(v, depth - 1) for v in value)
    return _ENTRY


class Worker:
    """Applies events to executions in ``store`` using the definitions in ``registry``."""

    def __init__(self, store: ExecutionStore, registry: DefinitionRegistry, clock: Clock = time.time,
                 max_conflict_retries: int = 8, *, copy_on_load: bool | None = None,
                 sleep: Callable[[float], None] = time.sleep, trace: bool = True,
                 keep_committed: int | None = None, exclusive: bool = False,
                 telemetry: Telemetry | None = None, keep_bytes: int = DEFAULT_KEEP_BYTES) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.versions = Versions(store, registry, clock)
        """Each execution's version of its definition (older ones from the store's archive)."""
        self.max_conflict_retries = max_conflict_retries
        self.copy_on_load = returns_live_objects(store) if copy_on_load is None else copy_on_load
        self._sleep = sleep
        self.trace = trace
        """Commit a trace step with every event (the default). ``False`` commits none: the trace ring is
        observability, not part of exactly-once, and on DynamoDB leaving it out turns a state-only commit
        from a two-item transaction into one conditional ``PutItem`` (half the requests' write units)."""
        self.conflicts = 0
        """How many commits lost the compare-and-swap and were retried (a metric)."""
        self.stale = 0
        """How many kept copies were found stale by the version read, and loaded again instead (a metric; an
        unchecked copy found stale by its commit counts in ``conflicts``)."""
        checks = isinstance(store, EventCheckingStore) and bool(store.commit_checks_event)
        if keep_committed is not None and keep_committed < 0:
            raise ValueError(f"keep_committed must be 0 or more (or None: no cap on the number), got "
                             f"{keep_committed}")
        if keep_bytes < 0:
            raise ValueError(f"keep_bytes must be 0 or more, got {keep_bytes}")
        off = not checks or keep_committed == 0 or keep_bytes == 0
        self.keep_committed: int | None = 0 if off else keep_committed
        """At most how many executions this worker keeps after committing them (``None``, the default: as
        many as ``keep_bytes`` holds; 0: none — load before every event, also on a store whose commit cannot
        check the event). See the module docstring."""
        self.keep_bytes = 0 if off else keep_bytes
        """The memory the kept executions may take, by :func:`kept_size` (:data:`DEFAULT_KEEP_BYTES`; 0:
        none kept)."""
        self._kept_bytes = 0
        self._sizes: dict[str, int] = {}
        self._value_sizes: dict[str, dict[str, tuple[Any, int]]] = {}
        """The kept executions' context value sizes (:func:`kept_size`), for those that change none in place."""
        self._taken: tuple[str, dict[str, tuple[Any, int]]] | None = None
        """The value sizes of the kept copy :meth:`_take` took last, for :meth:`_keep` to count it again."""
        self.exclusive = exclusive
        """Trust kept copies without the version read before stepping (see the module docstring)."""
        self._kept: OrderedDict[str, Execution] = OrderedDict()
        self.trace_failures = False
        """With ``trace`` off, still commit the trace step of a step that failed (the execution failed, or an
        attempt failed and will be retried), so ``durastate show``/``trace`` can say what happened; other
        commits stay trace-free (on DynamoDB: one conditional put, no transaction)."""
        self.telemetry = telemetry if telemetry is not None else Telemetry()
        """Where the span of each commit goes (:mod:`durastate.runtime.telemetry`; none without a tracer
        provider)."""
        self._tries = 1
        self._began_ns: int | None = None
        self._keeps_context = checks and bool(getattr(store, "commit_keeps_context", False))
        """The store's commit takes ``context_unchanged`` (a ``ContextKeepingStore``)."""
        self._stored_context: tuple[str, int, dict[str, Any]] | None = None
        """(id, version, the context's values) of the execution being applied, as loaded or kept: what its
        commit compares the context with (see :func:`_same_values`); ``None``: not comparable."""
        self.on_commit: Callable[[Execution, Sequence[TimerOp]], None] | None = None
        """Called after each successful commit with the execution and its timer operations (the AWS runtime
        hops the timers armed within SQS's delay horizon); an exception from it is logged, never raised."""

    def handle(self, target_id: str, event: Event) -> HandleResult:
        """Apply ``event`` to execution ``target_id``.

        Raises :class:`UnknownExecution` (no such execution and the event is not ``durastate.start``),
        :class:`UnknownDefinition`, :class:`MalformedEvent` (a ``durastate.start`` whose data is unusable) —
        all permanent — or :class:`StoreConflict` once ``max_conflict_retries`` reloads all lost the race.
        """
        attempt = 0
        self._tries = 1
        self._began_ns = time.time_ns() if self.telemetry.tracer() is not None else None
        kept = self._take(target_id)
        unchecked = False  # stepping a kept copy nobody checked is current (its commit still checks)
        if kept is not None and not self.exclusive:
            if not self._runs_user_code(kept):
                unchecked = True  # a stale copy's step is thrown away with its refused commit: no read
            else:
                # The kept copy is used only if it is what the store holds: checked before any step runs.
                version, seen = cast(EventCheckingStore, self.store).version_for_event(target_id, event.id)
                if seen:
                    self._keep(kept)
                    return HandleResult.DUPLICATE
                if version != kept.version:
                    kept = None
                    self.stale += 1
        expected = kept.version if kept is not None else None
        exe: Execution | None
        while True:
            if kept is not None:
                exe, blind, kept = kept, True, None
            else:
                exe, seen = self.store.load_for_event(target_id, event.id)
                if seen:
                    return HandleResult.DUPLICATE
                blind = unchecked = False
            try:
                return self._apply(target_id, event, exe, blind)
            except StoreConflict as exc:
                if isinstance(exc, EventAlreadyProcessed):  # a redelivery met by a blind commit
                    continue  # the read now reports it a duplicate
                unchecked = False
                attempt += 1
                self._tries = attempt + 1
                self.conflicts += 1
                if attempt > self.max_conflict_retries:
                    raise
                log.debug("conflict on %s applying %s (attempt %d); reloading", target_id, event.id, attempt)
                if attempt > 1:  # the first retry is immediate; then a tiny jittered backoff
                    self._sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
            except Exception as exc:
                # An error judged on an unchecked copy (an event it would hold refused, a row too large, a
                # derived event left unrecorded) may not be what the stored state says: it stands only if
                # the copy was current.
                if unchecked:
                    unchecked = False
                    version, seen = cast(EventCheckingStore, self.store).version_for_event(target_id, event.id)
                    if seen or version != expected:
                        self.stale += 1  # on a reload: the stored state decides, or reports a duplicate
                        continue
                if isinstance(exc, _NotRecorded):
                    return HandleResult.IGNORED
                raise

    def _runs_user_code(self, exe: Execution) -> bool:
        """Whether stepping ``exe`` may run a Python callable (see the module docstring); an execution whose
        definition cannot be had counts as running one (the step then raises, on checked state)."""
        try:
            return self.versions.of(exe).tables.runs_user_code
        except Exception:
            return True

    def _apply(self, target_id: str, event: Event, exe: Execution | None, blind: bool) -> HandleResult:
        """Step and commit; ``blind``: ``exe`` is a kept copy, so the commit itself checks the event."""
        now = self.clock()
        if event.name.startswith(RESERVED_PREFIX) and event.name not in RESERVED:
            raise MalformedEvent(f"{event.name!r} is not an event durastate knows; names starting with "
                                 f"{RESERVED_PREFIX!r} are reserved (known: {', '.join(sorted(RESERVED))})")
        if target_id.startswith(CHILD_SEPARATOR) and is_system_id(target_id):
            raise ReservedId(f"{target_id!r} is a system record (a schedule, an archived definition version or the "
                             f"clock offset): it accepts no events, and {event.name} {event.id!r} was not applied")
        if event.name == TIMEOUT and not event.id.startswith(_REDRIVE_PREFIX):  # (a redrive's: checked below)
            _check_timeout(target_id, event)
        before: Execution | None = None  # the execution as committed, when the worker has it at hand
        self._stored_context = None
        if exe is not None and self._keeps_context and not self._runs_user_code(exe):
            self._stored_context = (exe.id, exe.version, dict(exe.context))
        if exe is None:
            if event.name != START:
                raise UnknownExecution(target_id)
            created = self._create(target_id, event, now)
            if created is None:
                return HandleResult.APPLIED  # a failed child was recorded and its parent notified
            exe, defn = created
            give_secret(exe)  # before its first step derives an id (see durastate.runtime.keys)
        else:
            if event.name in _CHECKED or is_derived_event_id(event.id):
                event = self._derived(exe, event, now)
            if self.copy_on_load and not blind:  # a kept copy is the worker's own already
                before, exe = exe, detached_copy(exe, shared_values=not self._runs_user_code(exe))
            if exe.secret is None and _may_give_secret(exe):
                give_secret(exe)  # before any step (a resume's held events too): see durastate.runtime.keys
            if event.name == FINISHED and exe.children:
                abandoned = self._abandoned(exe, event, now, blind)
                if abandoned is not None:
                    return abandoned
            controlled = self._control(exe, event, now, blind)
            if controlled is not None:
                return controlled
            defn = self.versions.of(exe)
        batch = _Batch()
        fresh = exe.version == 0
        if fresh:
            before = detached_copy(exe)  # the unstarted execution: what a retry of its start goes back to
        status = batch.step(self, defn, exe, event, now, before, fresh=fresh)
        if exe.held and exe.retry is None and exe.status == "running":
            held, exe.held = exe.held, []
            self._apply_held(batch, exe, held, now)  # the retry went through: what waited for it applies
        timers, fired = _split_fired(event, batch.timers)
        self._commit(exe, batch.emits, event, blind, timers=timers, spawns=batch.spawns, trace=batch.trace(),
                     result=status)
        if fired is not None:
            try:
                self.store.delete_timer(exe.id, *fired)
            except Exception:  # the commit stands; a timer left behind fires a stale timeout, ignored
                log.warning("the fired timer %s of %s was not deleted", fired[0], exe.id, exc_info=True)
        return status

    def _control(self, exe: Execution, event: Event, now: float, blind: bool) -> HandleResult | None:
        """Control events, and events for an execution that is not simply running; ``None``: step it."""
        name, status = event.name, exe.status
        if name == RESET:
            return self._reset(exe, event, now, blind)
        if name == TERMINATE:
            if status in ENDED:
                self._ignore(exe, event, blind, now, f"already {status}")
                return HandleResult.IGNORED
            effects = control.terminate(exe, _reason(event), now)
            self._commit(exe, effects.emits, event, blind, timers=effects.timers,
                         trace=_control_record(exe, event, effects, now))
            return HandleResult.APPLIED
        if control.redrivable(exe):
            if name in (SUSPEND, RESUME, START):  # nothing to pause, resume or start: as for a running one
                self._ignore(exe, event, blind, now, f"{name.removeprefix(RESERVED_PREFIX)} of a failed execution")
                return HandleResult.IGNORED
            if name == HEARTBEAT:
                return self._skip_heartbeat(exe, event, blind, now)
            # Failed, and a redrive can bring it back: kept, and applied after the redriven event (as a
            # fault-free run would have applied it after that step), never dropped.
            return self._hold(exe, event, blind, now)
        if status in ENDED:
            # Ended for good: consumed and ignored (traced), without needing its definition (it may be
            # gone by now). No step can ever apply it: a finished, cancelled, terminated or purged execution
            # never steps again, nor does a failed one that kept nothing a redrive needs.
            self._ignore(exe, event, blind, now, None)
            return HandleResult.IGNORED
        if status == "suspended":
            if name == RESUME:
                effects, held = control.resume(exe, now)
                return self._release(exe, event, held, effects, now, blind)
            if name == SUSPEND:
                self._ignore(exe, event, blind, now, "already suspended")
                return HandleResult.IGNORED
            if name == HEARTBEAT:
                return self._skip_heartbeat(exe, event, blind, now)
            if name != CANCEL:
                return self._hold(exe, event, blind, now)
            dropped = len(exe.held)  # a cancel ends it: what it held is dropped, and the trace says so
            exe.held, exe.retry, exe.status = [], None, "running"
            if dropped:
                log.warning("cancelling suspended %s drops %d held event(s)", exe.id, dropped)
            return None
        # running
        if name == SUSPEND:
            effects = control.suspend(exe, _reason(event), now)
            self._commit(exe, effects.emits, event, blind, timers=effects.timers,
                         trace=_control_record(exe, event, effects, now))
            return HandleResult.APPLIED
        if name == RESUME:
            self._ignore(exe, event, blind, now, "not suspended")
            return HandleResult.IGNORED
        if exe.retry is not None and name != CANCEL and not _fires_retry(exe, event):
            if name == HEARTBEAT:
                return self._skip_heartbeat(exe, event, blind, now)
            return self._hold(exe, event, blind, now)
        return None

    def _abandoned(self, exe: Execution, event: Event, now: float, blind: bool) -> HandleResult | None:
        """The finished notice of a child the execution abandoned (``parent_close: abandon``): consumed,
        traced as ignored with why, and the child forgotten; ``None``: not such a notice."""
        child_id = event.data.get("child_id")
        ref = exe.children.get(child_id) if isinstance(child_id, str) else None
        if ref is None or not ref.abandoned:
            return None
        del exe.children[cast(str, child_id)]
        self._ignore(exe, event, blind, now, f"child {child_id} {event.data.get('status', 'finished')}, but it was "
                     f"abandoned when {exe.id} left {ref.path} (parent_close: abandon): its end is not applied",
                     witnessed=True)  # checked true on arrival (_derived)
        return HandleResult.IGNORED

    def _reset(self, exe: Execution, event: Event, now: float, blind: bool) -> HandleResult:
        """Move ``exe`` to a named configuration (:mod:`durastate.engine.reset`), deliver the reset's own event
        after it and the events it held, all in one commit; a reset that cannot apply is refused (the runtime
        dead-letters it with the reason) and nothing changes."""
        problem = reset_problem(exe.id, event.id, event.data)
        if problem is not None:
            raise MalformedEvent(problem)
        try:
            request = ResetRequest.from_data(event.data)
            defn = self.versions.of(exe)
            res = reset(defn, exe, event, request, now)
        except ResetRefused as err:
            raise MalformedEvent(f"reset of {exe.id} refused: {err}") from None
        batch = _Batch()
        batch.add(res)
        if request.send is not None:
            name, data = request.send
            sent = Event.model_construct(id=reset_sent_event_id(event.id), name=name, data=data)
            if exe.status == "suspended":
                self._hold_event(exe, sent)
            elif exe.status == "running":
                batch.step(self, defn, exe, sent, now, detached_copy(exe), fresh=False)
        if exe.held and exe.retry is None and exe.status == "running":
            held, exe.held = exe.held, []
            self._apply_held(batch, exe, held, now)
        self._commit(exe, batch.emits, event, blind, timers=batch.timers, spawns=batch.spawns,
                     trace=batch.trace(), audit=True)
        return HandleResult.APPLIED

    @staticmethod
    def _hold_event(exe: Execution, event: Event) -> None:
        try:
            control.hold(exe, event)
        except control.ControlError as err:
            raise MalformedEvent(str(err)) from None  # refused for good: the runtime dead-letters it

    def _skip_heartbeat(self, exe: Execution, event: Event, blind: bool, now: float) -> HandleResult:
        """A task's heartbeat while the execution is not running (suspended, waiting for a retry): traced and
        dropped, never held — it is a sign of life, not work, and a long task would fill the held events."""
        self._ignore(exe, event, blind, now, f"a task heartbeat while the execution is {exe.status}"
                     + (" (waiting for a retry)" if exe.retry is not None else ""), witnessed=True)
        return HandleResult.IGNORED

    def _hold(self, exe: Execution, event: Event, blind: bool, now: float) -> HandleResult:
        """Keep ``event`` in ``exe`` (suspended, waiting for a retry, or failed and awaiting a redrive).

        A child's ``finished`` notice was checked on arrival (:meth:`_derived`), while the child's record
        still said how it ended; once held it is true for good, and is not checked again when it is applied
        (retention may have purged the child by then, leaving only a tombstone to compare with)."""
        self._hold_event(exe, event)
        self._commit(exe, [], event, blind, result=HandleResult.HELD, trace={
            "event": event.name, "event_id": event.id, "from": exe.active_path, "to": exe.active_path,
            "status": exe.status, "held": len(exe.held), "at": now})
        return HandleResult.HELD

    def _release(self, exe: Execution, event: Event, held: list[Event], effects: control.Effects, now: float,
                 blind: bool) -> HandleResult:
        """Commit a resume together with the held events it releases, applied in order."""
        batch = _Batch(emits=list(effects.emits), timers=list(effects.timers))
        batch.records.append(_control_record(exe, event, effects, now))
        if held:
            self._apply_held(batch, exe, held, now)
        self._commit(exe, batch.emits, event, blind, timers=batch.timers, spawns=batch.spawns,
                     trace=batch.trace())
        return HandleResult.APPLIED

    def _apply_held(self, batch: _Batch, exe: Execution, held: list[Event], now: float) -> None:
        """Apply held events in arrival order; while a retry is pending, all but its own timer wait."""
        defn = self.versions.of(exe)
        queue = list(held)
        while queue:
            if exe.status != "running":
                if exe.status == "failed":
                    exe.held = queue  # kept: a redrive picks them up after the failed one
                break
            if exe.retry is not None:
                fire = next((e for e in queue if _fires_retry(exe, e)), None)
                if fire is None:
                    exe.held = queue
                    break
                queue.remove(fire)
                batch.step(self, defn, exe, fire, now, detached_copy(exe), fresh=False)
                continue
            ev = queue.pop(0)  # (a held notice was checked when it arrived: see _hold)
            batch.step(self, defn, exe, ev, now, detached_copy(exe), fresh=False)

    def _derived(self, exe: Execution, event: Event, now: float) -> Event:
        """Check a timeout, a finished notice or an event whose id the runtime derives (``~…``) against the
        state of ``exe``; returns the event to apply, or raises :class:`_NotRecorded` (nothing is committed,
        the id is not marked: the true event still applies when it comes) or a typed error (dead-lettered
        with the reason).

        The rule is :mod:`durastate.engine.ids`'s; a copy of a derived event sent first by a producer must
        either be exactly the true one or change nothing.
        """
        name = event.name
        if event.id.startswith(_REDRIVE_PREFIX):
            pending = exe.retry
            if pending is None or pending.attempt != 0 or pending.event.id != event.id:
                raise _NotRecorded  # not the redrive this execution waits for
            return pending.event  # the event the execution stored, whatever the message says
        if name == TIMEOUT:
            path, fire_at = event.data["path"], event.data["fire_at"]  # checked by _check_timeout
            if exe.timers.get(path) != fire_at:
                raise _NotRecorded  # stale (re-armed, fired, cancelled) or never armed: not recorded
            problem = timeout_problem(exe.id, event.id, event.data, now)
            if problem is not None:
                raise TimerNotDue(problem)  # dead-lettered with the reason; the timer stays armed
            return event
        if name == FINISHED:
            child_id = event.data.get("child_id")
            if not isinstance(child_id, str) or event.id != finished_event_id(child_id):
                raise MalformedEvent(f"finished notice {event.id!r} does not have the id of its child "
                                     f"{child_id!r}: durastate.finished is sent by durastate itself")
            if child_id not in exe.children and event.data.get("task_id") == child_id \
                    and self._is_task(exe, child_id):
                return event  # a true answer of a task it forgot (it left the state): the step traces it ignored
            if child_id not in exe.children or not self._finished_is_true(exe, event):
                log.info("%s %s for %s not applied: no such child of it has ended as it claims", name,
                         event.id, exe.id)
                raise _NotRecorded
            return event
        if name == HEARTBEAT:
            task = event.data.get("task_id")
            if not isinstance(task, str) or not event.id.startswith(_HEARTBEAT_PREFIX):
                raise MalformedEvent(f"heartbeat {event.id!r} needs data.task_id and an id in {_HEARTBEAT_PREFIX}…: "
                                     "send heartbeats with DurastateClient.heartbeat (or a Python task's "
                                     "current_task().heartbeat)")
            ref = exe.children.get(task)
            if (ref is None or ref.kind != "task") and not self._is_task(exe, task):
                log.info("heartbeat %s for %s not applied: %s is no task of it", event.id, exe.id, task)
                raise _NotRecorded  # forged (or for another execution): changes nothing, leaves no mark
            return event
        return event

    @staticmethod
    def _is_task(exe: Execution, task: str) -> bool:
        """Whether ``task`` is the id of a task ``exe`` started (its mac checks out under the secret): its
        answer or heartbeat is then the true one, however late, and is traced when ignored."""
        return exe.secret is not None and task_seq(exe.id, task, exe.secret, exe.invoke_seq) is not None

    def _ignore(self, exe: Execution, event: Event, blind: bool, now: float, reason: str | None, *,
                witnessed: bool = False) -> None:
        """Consume ``event`` with a trace record saying it was ignored (and why); a derived event is left
        unrecorded instead (its id stays free for the true one), unless ``witnessed``: checked true already."""
        if is_derived_event_id(event.id) and not witnessed:
            raise _NotRecorded  # a derived event that changes nothing leaves its id for the true one
        record: dict[str, Any] = {"event": event.name, "event_id": event.id, "from": exe.active_path,
                                  "to": exe.active_path, "status": exe.status, "ignored": True, "at": now}
        if reason:
            record["reason"] = reason
        self._commit(exe, [], event, blind, trace=record, result=HandleResult.IGNORED)

    def _commit(self, exe: Execution, emits: Sequence[Emit], event: Event, blind: bool, *,
                timers: Iterable[TimerOp] = (), spawns: Iterable[Spawn] = (),
                trace: dict[str, Any] | None = None, result: HandleResult = HandleResult.APPLIED,
                audit: bool = False) -> None:
        """The one commit of an event; afterwards ``exe`` is what the store holds, so keep it. ``audit``: the
        trace step is committed even with ``trace`` off (an operator's reset says who and why)."""
        event_id = event.id
        failure: dict[str, Any] | None = None
        record = trace
        if not self.trace and not audit:
            if self.trace_failures and trace is not None and (exe.status == "failed" or "error" in trace):
                failure = trace if "error" in trace or not exe.error else {**trace, "error": exe.error}
            trace = None
        timers = list(timers)
        span: CommitSpan | None = None
        tracer = self.telemetry.tracer()
        if tracer is not None:  # the span's context goes into what the commit writes; it ends once committed
            spawns = list(spawns)
            span = CommitSpan.begin(tracer, exe, event, start_ns=self._began_ns)
            emits = span.prepare(exe, emits, timers, spawns)
        if self._keeps_context:
            stored = self._stored_context
            cast(ContextKeepingStore, self.store).commit(
                exe, emits, processed_event_id=event_id, timers=timers, spawns=spawns, trace=trace,
                check_event=blind, context_unchanged=stored is not None and stored[0] == exe.id
                and stored[1] == exe.version and _same_values(stored[2], exe.context))
        elif blind:  # only when keep_committed is on, i.e. the store is an EventCheckingStore
            cast(EventCheckingStore, self.store).commit(
                exe, emits, processed_event_id=event_id, timers=timers, spawns=spawns, trace=trace,
                check_event=True)
        else:
            self.store.commit(exe, emits, processed_event_id=event_id, timers=timers, spawns=spawns,
                              trace=trace)
        if span is not None:
            try:
                span.end(exe, result, record, self._tries)
            except Exception:  # the commit stands; a span is observability
                log.warning("the span of %s on %s was not recorded", event_id, exe.id, exc_info=True)
        if failure is not None:  # after the commit, outside it: the commit stays as cheap as without a trace
            try:
                self.store.append_trace(exe.id, failure)
            except Exception:
                log.warning("the failing step of %s was not traced", exe.id, exc_info=True)
        if self.on_commit is not None and timers:
            try:
                self.on_commit(exe, timers)
            except Exception:  # the commit stands; whatever the hook does is best effort
                log.warning("after-commit hook failed for %s", exe.id, exc_info=True)
        if self.keep_bytes:
            self._keep(exe)

    @property
    def keeps(self) -> bool:
        """Whether this worker keeps the executions it commits (see the module docstring)."""
        return self.keep_bytes > 0

    def _keep(self, exe: Execution) -> None:
        """Keep ``exe`` as the most recently committed; drop the least recently committed past the budget.
        One larger than the whole budget is not kept (rather than dropping every other to make room)."""
        kept, sizes = self._kept, self._sizes
        self._take(exe.id)
        taken, self._taken = self._taken, None
        value_sizes: dict[str, tuple[Any, int]] | None = None
        if not self._runs_user_code(exe):  # its values never change in place: count only new ones
            value_sizes = taken[1] if taken is not None and taken[0] == exe.id else {}
        size = kept_size(exe, value_sizes)
        if size > self.keep_bytes:
            return
        kept[exe.id] = exe
        sizes[exe.id] = size
        if value_sizes is not None:
            self._value_sizes[exe.id] = value_sizes
        self._kept_bytes += size
        cap = self.keep_committed
        while kept and (self._kept_bytes > self.keep_bytes or (cap is not None and len(kept) > cap)):
            old_id, _ = kept.popitem(last=False)
            self._kept_bytes -= sizes.pop(old_id)
            self._value_sizes.pop(old_id, None)

    def _take(self, execution_id: str) -> Execution | None:
        """Remove and return the kept copy of ``execution_id``, if any."""
        exe = self._kept.pop(execution_id, None)
        if exe is not None:
            self._kept_bytes -= self._sizes.pop(execution_id)
            value_sizes = self._value_sizes.pop(execution_id, None)
            if value_sizes is not None:
                self._taken = (execution_id, value_sizes)
        return exe

    @property
    def kept_bytes(self) -> int:
        """What the kept executions take now, by :func:`kept_size` (at most ``keep_bytes``)."""
        return self._kept_bytes

    def forget(self) -> None:
        """Drop every kept execution (the caller rolled back commits this worker made)."""
        self._kept.clear()
        self._sizes.clear()
        self._value_sizes.clear()
        self._taken = None
        self._kept_bytes = 0

    def committed(self, execution_id: str) -> Execution | None:
        """The execution as this worker last committed it, if it still keeps it (do not modify it)."""
        return self._kept.get(execution_id)

    def _create(self, target_id: str, event: Event, now: float) -> tuple[Execution, Definition] | None:
        data = event.data
        definition_id = data.get("definition_id")
        if not isinstance(definition_id, str) or not definition_id:
            raise MalformedEvent(f"durastate.start for {target_id!r} needs data.definition_id (a definition id "
                                 f"string), got {definition_id!r}")
        context = data.get("context") or {}
        if not isinstance(context, dict):
            raise MalformedEvent(f"durastate.start for {target_id!r}: data.context must be a JSON object, got "
                                 f"{type(context).__name__}")
        if data.get("timeout") is not None:
            try:
                check_start_timeout(data["timeout"], f"durastate.start for {target_id!r}: data.timeout")
            except InvalidValue as exc:
                raise MalformedEvent(str(exc)) from None
        refs: dict[str, str | None] = {}
        for key in ("parent_id", "child_id", "root_path"):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise MalformedEvent(f"durastate.start for {target_id!r}: data.{key} must be a string")
            refs[key] = value
        if refs["parent_id"] is None:
            if CHILD_SEPARATOR in target_id and "witness" in data:
                self._check_scheduled(target_id, data.get("witness"))
            else:  # a user's start may not take an id in the runtime's namespace (children, schedule runs)
                check_execution_id(target_id)
        else:
            self._check_invoked(target_id, refs["parent_id"], refs["child_id"], data.get("witness"))
        try:
            defn, version = self.versions.newest(definition_id)
        except UnknownDefinition as err:
            if refs["parent_id"] is None:
                raise
            self._fail_child(target_id, event, definition_id, context, refs, err, now)
            return None
        exe = Execution(id=target_id, definition_id=definition_id, definition_version=version,
                        context=defn.initial_context(context),
                        parent_id=refs["parent_id"], child_id=refs["child_id"], root_path=refs["root_path"],
                        created_at=now)
        return exe, defn

    def _check_invoked(self, target_id: str, parent_id: str, child_id: str | None, witness: object) -> None:
        """A start that says it creates an invoked child must be one its parent really asked for.

        Anyone who can enqueue can write ``parent_id`` into a start, and the child's ``finished`` notice
        would then steer the parent. The parent is the witness: the child's id is derived from the
        parent's id and an invoke number the parent has already used (it may have left the invoking
        state since, and then cancels the child, which is why its ``children`` is not consulted), and a
        parent with a secret signs the starts it sends (:func:`durastate.engine.fanout.child_start`), so a
        start sent first under its child's id, with a context of its own, is refused and the true one
        still creates the child. (A parent without one — stored before secrets, and keeping none while an
        invoked child of it runs: :func:`_may_give_secret` — is taken at its word, as before.)
        """
        parent = self.store.load(parent_id)
        if parent is None:
            raise MalformedEvent(f"durastate.start for {target_id!r} names parent {parent_id!r}, which does "
                                 "not exist; invoked children are started by their parent, not from outside")
        if child_id not in (None, target_id) or not _is_child_of(target_id, parent):
            raise MalformedEvent(f"durastate.start for {target_id!r} names parent {parent_id!r}, which never "
                                 "invoked it; invoked children are started by their parent, not from outside")
        if parent.secret and not (isinstance(witness, str)
                                  and hmac.compare_digest(run_witness(parent.secret, target_id), witness)):
            raise ReservedId(f"durastate.start for {target_id!r} does not carry its parent {parent_id!r}'s "
                             "witness; invoked children are started by their parent, not from outside")

    def _check_scheduled(self, target_id: str, witness: object) -> None:
        """A start of a schedule's run (``<name>~<tick>``) must carry the witness its schedule record
        derives under its secret (:func:`durastate.engine.ids.run_witness`): no one else can start it."""
        name = target_id.partition(CHILD_SEPARATOR)[0]
        record = self.store.load(schedule_record_id(name)) if name else None
        secret = record.secret if record is not None else None
        if not secret or not isinstance(witness, str) or not hmac.compare_digest(run_witness(secret, target_id),
                                                                                 witness):
            raise ReservedId(f"durastate.start for {target_id!r}: ids with {CHILD_SEPARATOR!r} are durastate's "
                             f"(children, schedule runs) and this start is not its schedule's; choose an id "
                             f"without {CHILD_SEPARATOR!r}")

    def _finished_is_true(self, exe: Execution, event: Event) -> bool:
        """A ``durastate.finished`` notice must agree with its child's stored state.

        The child commits its end and the notice together, so a true notice always finds the child
        ended, a child of this execution, with the status it reports. One that does not (forged, or for a
        child id this execution never had) is ignored rather than allowed to steer the parent.
        """
        child_id = event.data.get("child_id")
        if not isinstance(child_id, str) or child_id not in exe.children:
            return True  # the step ignores it as a child it does not (or no longer) know
        if exe.children[child_id].kind == "task":
            # A task's answer (durastate.engine.tasks) has no stored child to compare it with: its witness is
            # the task id itself, unguessable (durastate.engine.ids.task_id), so naming it is proof enough.
            return True
        child = self.store.load(child_id)
        if child is None:
            return False
        ref = exe.children[child_id]
        if child.parent_id != exe.id or (ref.kind == "region" and child.root_path != ref.path):
            # The id is taken by an execution that is not this child (the relay refused to adopt it):
            # the only true notice is that the child failed to start.
            return event.data.get("status") == "failed"
        data = event.data
        return (child.status != "running" and child.status == data.get("status", "finished")
                and data.get("outcome") == child.outcome and data.get("output", child.context) == child.context)

    def _fail_child(self, target_id: str, event: Event, definition_id: str, context: dict[str, Any],
                    refs: dict[str, str | None], err: UnknownDefinition, now: float) -> None:
        """An invoked child of an unknown definition: record it failed and tell the parent.

        Raising instead would dead-letter the start and leave the parent waiting forever; a failed child
        lets the parent's ``on_error`` run, which is what a user of the definition can act on.
        """
        parent_id = refs["parent_id"]
        assert parent_id is not None
        child_id = refs["child_id"] or target_id
        child = Execution(id=target_id, definition_id=definition_id, status="failed", error=str(err),
                          context=dict(context), parent_id=parent_id, child_id=child_id,
                          root_path=refs["root_path"], created_at=now, updated_at=now)
        notice = Event(id=finished_event_id(target_id), name=FINISHED,
                       data={"child_id": child_id, "status": "failed", "outcome": None,
                             "output": dict(context), "error": str(err)})
        log.warning("child %s of %s failed to start: %s", target_id, parent_id, err)
        self._commit(child, [(parent_id, notice)], event, False,
                     trace={"event": event.name, "event_id": event.id, "from": None, "to": None,
                            "status": "failed", "error": str(err), "at": now})




class _NotRecorded(Exception):
    """A derived event not applied and not recorded as processed (:meth:`Worker._derived`); never leaves
    the worker."""


_REDRIVE_PREFIX = f"{SYSTEM_PREFIX}{REDRIVE}:"
_HEARTBEAT_PREFIX = reserved_event_id(HEARTBEAT, "")
_CHECKED = frozenset((TIMEOUT, FINISHED, HEARTBEAT))
"""The events only the runtime sends, checked against the execution whatever their id."""


def _check_timeout(target_id: str, event: Event) -> None:
    """A ``durastate.timeout`` whose id is not the one its data derives is refused (before any read; that it
    is due is checked against the execution, once its timer is known to be armed)."""
    problem = timeout_problem(target_id, event.id, event.data, math.inf)
    if problem is not None:
        raise MalformedEvent(problem)


def _may_give_secret(exe: Execution) -> bool:
    """Whether an execution stored without a secret may get one now: not while an invoked or mapped child
    of it runs, whose start (sent before it had one, so carrying no witness) may still be on its way — with
    a secret the parent would no longer vouch for it (:meth:`Worker._check_invoked`). It gets one at its
    first step after they have ended; until then its ids are the plain ones it always had."""
    return not any(ref.kind in ("invoke", "map") and ref.status == "running" for ref in exe.children.values())


def _is_child_of(child_id: str, parent: Execution) -> bool:
    """Whether ``child_id`` is one of the ids ``parent`` has derived for its children so far."""
    ref = parent.children.get(child_id)
    if ref is not None:  # running now (a map's window): no need to recompute hashed ids
        return ref.kind != "task"  # a task is not an execution: nothing may be started under its id
    prefix = f"{parent.id}{CHILD_SEPARATOR}"
    if child_id.startswith(prefix) and child_id[len(prefix):].isdigit():
        return 0 < int(child_id[len(prefix):]) <= parent.invoke_seq
    if child_id.startswith(CHILD_SEPARATOR):  # a hashed (long) child id: recompute the candidates
        return any(child_execution_id(parent.id, n) == child_id for n in range(parent.invoke_seq, 0, -1))
    return False


def _reason(event: Event) -> str | None:
    reason = event.data.get("reason")
    return str(reason) if reason is not None else None


def _control_record(exe: Execution, event: Event, effects: control.Effects, now: float) -> dict[str, Any]:
    return {"event": event.name, "event_id": event.id, "from": exe.active_path, "to": exe.active_path,
            "status": exe.status, "at": now, **effects.trace}


def _split_fired(event: Event, timers: list[TimerOp]) -> tuple[list[TimerOp], tuple[str, float] | None]:
    """A timeout's cancel of the very timer that fired leaves the commit, as a guarded delete after it.

    Whoever fired the timer deletes it too (the sweeper, after sending, guarded by ``fire_at``; its
    timeouts say ``swept``, and then nothing follows this commit), or it is deleted right after this
    commit (a timer hopped ahead of time is still armed): either way a delete
    guarded by the fired ``fire_at`` is exact — a timer re-armed to another time survives it, and one
    left behind by a crash fires a stale timeout the engine ignores. Out of the commit, a timeout whose
    step writes nothing else is one single-item write instead of a transaction (on DynamoDB 1 write
    unit, not 2 + 2 for a delete of a timer that is usually gone already)."""
    path, fire_at = event.data.get("path"), event.data.get("fire_at")
    if event.name != TIMEOUT or not isinstance(path, str) or not isinstance(fire_at, int | float):
        return timers, None
    kept = [op for op in timers if not (op.action == "cancel" and op.path == path)]
    if len(kept) == len(timers) or event.data.get(SWEPT) is True:
        # a swept timeout: the sweeper deletes the timer after sending it (and, should it crash first,
        # sends it again — a duplicate here — and deletes it then)
        return kept, None
    return kept, (path, float(fire_at))


def _fires_retry(exe: Execution, event: Event) -> bool:
    """Whether ``event`` is what the execution's pending retry waits for: its timer's timeout, or (for a
    redrive) the re-applied event itself coming back through the outbox."""
    if event.name == TIMEOUT and event.data.get("path") == RETRY_PATH:
        return True
    pending = exe.retry
    return pending is not None and pending.attempt == 0 and event.id == pending.event.id


class _Batch:
    """The steps of one commit, usually one: a resume (or a retry that succeeds) also applies the events
    held meanwhile, in order, and commits them all at once."""

    def __init__(self, emits: list[Emit] | None = None, timers: list[TimerOp] | None = None) -> None:
        self.emits: list[Emit] = emits or []
        self.timers: list[TimerOp] = timers or []
        self.spawns: list[Spawn] = []
        self.records: list[dict[str, Any]] = []

    def add(self, res: StepResult | control.Effects) -> None:
        self.emits.extend(res.emits)
        self.timers.extend(res.timers)
        if isinstance(res, StepResult):
            self.spawns.extend(res.spawns)
        if res.trace:
            self.records.append(res.trace)

    def step(self, worker: Worker, defn: Definition, exe: Execution, event: Event, now: float,
             before: Execution | None, *, fresh: bool, attempt: int = 1) -> HandleResult:
        """Step ``event`` (try number ``attempt``); ``before``: the execution before it (``None``: read
        it back from the store if it is needed, i.e. if the step fails)."""
        if _fires_retry(exe, event):
            return self._fire_retry(worker, defn, exe, event, now)
        was_running = exe.status == "running" and exe.active_path is not None
        traced = worker.trace
        # The context before the step, for the trace's changed keys (copied only if none is at hand; at its
        # top level only when the step changes no value in place: see detached_copy).
        context_before = None
        if traced:
            context_before = (before.context if before is not None
                              else dict(exe.context) if not defn.tables.runs_user_code else _json_copy(exe.context))
        res = step(defn, exe, event, now, detail=traced, emitted=len(self.emits))
        if res.retry is not None:
            if before is None:
                before = worker.store.load(exe.id)  # the committed state the step started from
            assert before is not None
            _restore(exe, before)  # the step is thrown away: the execution stays where it was
            failure = res.retry
            if attempt < failure.policy.max_attempts:
                fire_at = now + failure.policy.delay(attempt)
                exe.retry = PendingRetry(event=event, attempt=attempt, error=str(failure), fire_at=fire_at)
                exe.timers[RETRY_PATH] = fire_at
                self.timers.append(TimerOp("schedule", RETRY_PATH, fire_at))
                self.records.append({"event": event.name, "event_id": event.id, "from": exe.active_path,
                                     "to": exe.active_path, "status": exe.status, "attempt": attempt,
                                     "error": str(failure), "retry_at": fire_at, "site": failure.site,
                                     "at": now})
                log.info("%s: %s failed on attempt %d (%s); retry at %.3f", exe.id, event.name, attempt, failure,
                         fire_at)
                return HandleResult.APPLIED
            return self._catch(worker, defn, exe, event, str(failure), attempt, now)
        if exe.status == "failed" and (was_running or fresh):
            if before is None and not fresh:
                before = worker.store.load(exe.id)
            control.record_failure(exe, before if was_running else None, event)
        if exe.status == "cancelled" and event.name == CANCEL:
            exe.reason = _reason(event)
        if exe.status in ENDED:
            exe.retry = None
        if context_before is not None and res.trace:
            step_details(res.trace, now, event, res.emits, res.timers, res.spawns, (context_before, exe.context),
                         archive=keeps_history(worker.store))
        self.add(res)
        return HandleResult.IGNORED if res.ignored else HandleResult.APPLIED

    def _catch(self, worker: Worker, defn: Definition, exe: Execution, event: Event, error: str, attempts: int,
               now: float) -> HandleResult:
        """The attempts ran out: the nearest ``on_error``, else the execution fails (and can be redriven)."""
        data = {"error": error, "event": event.name, "attempts": attempts}
        if exe.active_path is None:  # it failed entering its first state: there is no state to catch it
            self.add(control.fail(exe, error, now))
        else:
            before = detached_copy(exe)
            catch = Event.model_construct(id=derived_id(event.id, "catch"), name=CATCH, data=data)
            res = step(defn, exe, catch, now, detail=worker.trace, emitted=len(self.emits))
            if worker.trace and res.trace:
                step_details(res.trace, now, catch, res.emits, res.timers, res.spawns, (before.context, exe.context),
                             archive=keeps_history(worker.store))
            self.add(res)
            if exe.status != "failed":
                return HandleResult.APPLIED
            control.record_failure(exe, before, event)
            return HandleResult.APPLIED
        control.record_failure(exe, None, event)
        return HandleResult.APPLIED

    def _fire_retry(self, worker: Worker, defn: Definition, exe: Execution, event: Event,
                    now: float) -> HandleResult:
        """The timer of a pending retry fired: apply its event again (a stale or forged one is ignored)."""
        pending = exe.retry
        if pending is not None and pending.attempt == 0:  # a redrive's event is back: apply it
            exe.retry = None
            return self.step(worker, defn, exe, event, now, detached_copy(exe), fresh=False)
        if pending is None or exe.timers.get(RETRY_PATH) != event.data.get("fire_at"):
            self.records.append({"event": event.name, "event_id": event.id, "from": exe.active_path,
                                 "to": exe.active_path, "status": exe.status, "ignored": True, "at": now})
            return HandleResult.IGNORED
        exe.retry = None
        del exe.timers[RETRY_PATH]
        self.timers.append(TimerOp("cancel", RETRY_PATH))
        return self.step(worker, defn, exe, pending.event, now, detached_copy(exe), fresh=False,
                         attempt=pending.attempt + 1)

    def trace(self) -> dict[str, Any] | None:
        if not self.records:
            return None
        if len(self.records) == 1:
            return self.records[0]
        first = self.records[0]
        return {**first, "to": self.records[-1].get("to", first.get("to")),
                "status": self.records[-1].get("status", first.get("status")), "steps": self.records[1:]}


def _restore(exe: Execution, before: Execution) -> None:
    """Put ``exe`` (the object to commit) back to ``before``, keeping its identity and version."""
    version = exe.version
    exe.__dict__.update(detached_copy(before).__dict__)
    exe.__dict__["version"] = version
