"""The local runtime: worker, relay and sweeper in one process over any store and queue transport.

This is what ``durastate serve`` runs and what embedding durastate in a Python program means. Work proceeds in
rounds — claim and apply a batch of messages, relay what they emitted, fire due timers — until a round
finds nothing to do. Failures are sorted once, here:

- a **permanent** one (:data:`PERMANENT_ERRORS`: the message can never succeed as it is — malformed, an
  unknown definition or execution, over the backend's limits, an event refused because the execution's
  held queue is full, a forged reserved event) is acked and kept as a **dead letter** with its reason,
  error type, time and attempts, in the transport's :class:`~durastate.transport.DeadLetterBox`
  (``dead_letter_box``: durable on SQLite and PostgreSQL), where a user lists, shows, replays or drops
  it (``durastate dead-letters …``). A definition that no longer has an execution's state is not one:
  the engine fails that execution, and it is redriven once the definition is fixed;
- a **transient** one (:func:`is_transient`: the store unavailable or throttled, a conflict past the
  worker's bound, SQLite locked) says nothing about the message: it is released for a retry after a
  delay that grows with the message's attempts (:class:`~durastate.runtime.clock.Backoff`: exponential,
  jittered, capped), however many attempts that takes — never dead-lettered, since that would drop it
  (and for a ``durastate.start``, every later event of its execution would be found "unknown"). The
  delay keeps a burst of fast errors from using up attempts within one round; meanwhile the message
  stays its target's next one (the queue's FIFO per target), so the events behind it wait;
- an error that is **neither** (most likely a bug in an action or in durastate) is retried the same way
  until it has failed ``max_attempts`` times, then dead-lettered too: kept durably, it no longer holds
  back its execution's later events forever, and once the bug is fixed a replay applies it.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durastate.engine import DefinitionRegistry
from durastate.engine.ids import producer_problem, start_event_id
from durastate.engine.model import START, Event, Execution, new_id
from durastate.engine.schedules import ScheduleSpec
from durastate.engine.tasks import heartbeat_message
from durastate.engine.values import check_execution_id
from durastate.errors import (
    DefinitionError,
    DeliveryFailed,
    ExecutionTooLarge,
    GroupAborted,
    MalformedEvent,
    ReservedId,
    StoreConflict,
    StoreUnavailable,
    UnknownDefinition,
    UnknownExecution,
)
from durastate.runtime.clock import Backoff, Clock
from durastate.runtime.relay import Relay
from durastate.runtime.retention import Retention
from durastate.runtime.schedules import SyncReport, sync_schedules
from durastate.runtime.sweeper import Sweeper
from durastate.runtime.tasks import TaskRunner
from durastate.runtime.telemetry import Telemetry
from durastate.runtime.worker import DEFAULT_KEEP_BYTES, HandleResult, Worker
from durastate.store.base import ExecutionStore
from durastate.store.control import (
    Redriven,
    cancel_event,
    check_reset_of,
    redrive,
    reset_event,
    resume_event,
    start_data,
    suspend_event,
    terminate,
)
from durastate.transport.base import (
    Claimed,
    DeadLetter,
    DeadLetterBox,
    DeadLetterPage,
    QueueTransport,
    ReplayRefused,
    Sink,
    UnknownDeadLetter,
)
from durastate.transport.memory import InMemoryDeadLetters, InMemoryTransport
from durastate.transport.tracecontext import current_traceparent, stamp

__all__ = [
    "PERMANENT_ERRORS",
    "TRANSIENT_ERRORS",
    "DeadLetter",
    "LocalRuntime",
    "RunStats",
    "check_replay",
    "is_transient",
]

log = logging.getLogger("durastate.runtime")

PERMANENT_ERRORS: tuple[type[Exception], ...] = (
    UnknownExecution, UnknownDefinition, MalformedEvent, DefinitionError, ExecutionTooLarge,
)
"""Errors that no retry can fix: the message is dead-lettered at once."""

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    StoreUnavailable, StoreConflict, DeliveryFailed, ConnectionError, TimeoutError,
)
"""Errors that say the store or the queue failed for now, not that the message is bad (with
:class:`StoreUnavailable` come its subclasses: ``StoreThrottled``, ``GroupAborted``). See :func:`is_transient`."""


def is_transient(err: BaseException) -> bool:
    """Whether ``err`` is a passing failure of the store or the queue, worth retrying as it is.

    :data:`TRANSIENT_ERRORS`, plus driver errors that escaped a backend's own wrapping: SQLite's "database
    is locked"/"busy", psycopg's ``OperationalError`` family (a dropped connection, a serialization
    failure, a deadlock) and botocore's connection errors. Never true of a :data:`PERMANENT_ERRORS` one.
    """
    if isinstance(err, PERMANENT_ERRORS):
        return False
    if isinstance(err, TRANSIENT_ERRORS):
        return True
    if isinstance(err, sqlite3.OperationalError):
        text = str(err).lower()
        return "locked" in text or "busy" in text
    for cls in type(err).__mro__:  # by name: neither driver is a dependency of the core
        module = cls.__module__
        if module.startswith("psycopg") and cls.__name__ == "OperationalError":
            return True
        if module.startswith("botocore") and cls.__name__ in ("ConnectionError", "HTTPClientError"):
            return True
    return False


@dataclass(slots=True)
class RunStats:
    """What :meth:`LocalRuntime.run_until_idle` (or ``serve``) did."""

    rounds: int = 0
    handled: int = 0
    applied: int = 0
    duplicates: int = 0
    ignored: int = 0
    held: int = 0
    """Events kept by a suspended execution, or one waiting for a retry (applied later, in order)."""
    retried: int = 0
    dead_lettered: int = 0
    spawned: int = 0
    sent: int = 0
    published: int = 0
    tasks: int = 0
    """Tasks run (``invoke: {task: ...}``) and answered."""
    fired: int = 0
    purged: int = 0
    """Ended executions turned into tombstones by the runtime's ``retention``."""
    idle: bool = False
    """True when the last round found nothing to do (False: stopped by ``max_rounds``)."""

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class LocalRuntime:
    """Runs executions of ``registry``'s definitions on ``store``, all in this process.

    ``transport`` defaults to an :class:`InMemoryTransport` (pass a durable one, e.g. the SQLite
    transport, so events sent while nothing runs are not lost). ``clock`` drives timers: pass a
    :class:`~durastate.runtime.ManualClock` to fire them by advancing it.

    On a store that hands out live objects (``DictStore``) the worker steps a copy of each execution, so
    a reader in another thread never sees a half-applied step and several workers may share the store.
    ``copy_on_load=False`` skips the copy — measured ~1.8x more events per second on ``DictStore`` — and
    is safe when this runtime is the store's only user and nothing reads it while a round runs.

    A message that fails with anything but a permanent error is released to be retried after
    ``retry_backoff.delay(attempts)`` seconds of the transport's clock (pass the same clock to the
    transport and the runtime: a :class:`~durastate.runtime.ManualClock` then makes retries due by
    advancing it). A transient error is retried for as long as it takes; any other error (a bug) is
    dead-lettered once it has failed ``max_attempts`` times.

    Dead letters go to ``dead_letter_box``: the one given, else the transport's own (the ``dead_letters``
    table of a SQLite or PostgreSQL inbox, a list beside an in-memory queue), else a list in this process
    (a transport without a box: then they do not outlive it, and a warning says so). ``dead_letters``
    lists the ones *this runtime* dead-lettered since it was made, as before; ``on_dead_letter`` is called
    with each, once it is kept.

    ``tracer_provider``: where the OpenTelemetry span of each commit goes (default: the application's global
    provider, when it set one; else no span is made): see :mod:`durastate.runtime.telemetry`.
    """

    def __init__(self, store: ExecutionStore, registry: DefinitionRegistry,
                 transport: QueueTransport | None = None, clock: Clock = time.time, *,
                 sink: Sink | None = None, batch_size: int = 32, max_attempts: int = 5,
                 sweep_limit: int = 500, sweep_interval: float = 1.0, lease_seconds: float = 30.0,
                 max_conflict_retries: int = 8, copy_on_load: bool | None = None,
                 on_dead_letter: Callable[[DeadLetter], None] | None = None,
                 keep_committed: int | None = None, keep_bytes: int = DEFAULT_KEEP_BYTES,
                 exclusive: bool = False, retry_backoff: Backoff | None = None,
                 rand: Callable[[], float] = random.random,
                 dead_letter_box: DeadLetterBox | None = None, retention: Retention | None = None,
                 tasks: TaskRunner | None = None, trace: bool = True, tracer_provider: Any = None) -> None:
        self.store = store
        self.retention = retention
        """Purges old ended executions between rounds (``serve --retention``), when set; one built without
        a clock runs on this runtime's."""
        self.registry = registry
        self.clock = clock
        if retention is not None:
            retention.adopt_clock(clock)
        self.transport: QueueTransport = transport if transport is not None else InMemoryTransport(clock)
        self.sink = sink
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.retry_backoff = retry_backoff or Backoff(0.5, 60.0)
        """The delay before a failed message is tried again, by its attempts (exponential, capped)."""
        self._rand = rand
        self.sweep_limit = sweep_limit
        self.sweep_interval = sweep_interval
        self._last_sweep = float("-inf")
        self.lease_seconds = lease_seconds
        # keep_bytes (the kept copies' memory budget), keep_committed (a cap on their number) and exclusive
        # (trust kept copies unread): see Worker.
        telemetry = Telemetry(tracer_provider)
        self.worker = Worker(store, registry, clock, max_conflict_retries, copy_on_load=copy_on_load,
                             keep_committed=keep_committed, keep_bytes=keep_bytes, exclusive=exclusive, trace=trace,
                             telemetry=telemetry)
        # ``trace=False`` is the deployment choice AWS makes by default: no trace step with each commit, except
        # for a step that failed (``Worker.trace_failures``), so ``show``/``trace`` can still say what happened.
        self.worker.trace_failures = not trace
        self.relay = Relay(store, registry, self.transport, sink, clock, tasks=tasks, telemetry=telemetry)
        self.sweeper = Sweeper(store, self.transport, clock)
        if dead_letter_box is None:
            dead_letter_box = getattr(self.transport, "dead_letter_box", None)
            if dead_letter_box is None:
                log.warning("%s keeps no dead letters: this runtime keeps them in memory, and they are lost "
                            "when the process ends", type(self.transport).__name__)
                dead_letter_box = InMemoryDeadLetters(self.transport)
        self.dead_letter_box: DeadLetterBox = dead_letter_box
        """Where dead letters are kept, listed, replayed and dropped."""
        self.dead_letters: list[DeadLetter] = []
        """The letters this runtime dead-lettered since it was made (all of them: ``dead_letter_box``)."""
        self._settled = False
        self.on_dead_letter = on_dead_letter
        """Called with each dead letter once it is kept (e.g. to print it)."""

    # -- input ----------------------------------------------------------------------------------------
    def send(self, target_id: str, event: Event) -> None:
        """Enqueue ``event`` for execution ``target_id``; it is applied by the next round.

        Refuses, with :class:`~durastate.errors.ReservedId`, what only the runtime may send: an event to a
        system record, ``durastate.timeout``/``durastate.finished``, an event id starting with ``~``
        (:func:`durastate.engine.ids.producer_problem`)."""
        problem = producer_problem(target_id, event.name, event.id)
        if problem is not None:
            raise ReservedId(problem)
        self.transport.send(stamp([(target_id, event)], current_traceparent()))

    def heartbeat(self, task_id: str, details: Any = None, *, execution_id: str | None = None) -> str:
        """Report that task ``task_id`` is alive (:meth:`durastate.client.DurastateClient.heartbeat`):
        applied by the next round; returns the heartbeat's event id."""
        target, event = heartbeat_message(task_id, details, execution_id)
        self.transport.send([(target, event)])
        return event.id

    def start(self, definition_id: str, context: dict[str, Any] | None = None,
              execution_id: str | None = None, *, timeout: float | str | None = None) -> str:
        """Enqueue the start of a new execution and return its id.

        With an ``execution_id`` the start is idempotent: its event id is derived from the execution id,
        so starting the same id twice creates one execution. An unknown definition fails here, at once.
        ``timeout``: the run timeout (seconds or ``"1h"``) instead of the definition's.
        """
        self.registry.get(definition_id)
        eid = check_execution_id(execution_id) if execution_id is not None else new_id()
        self.send(eid, Event(id=start_event_id(eid), name=START, data=start_data(definition_id, context, timeout)))
        return eid

    def get(self, execution_id: str) -> Execution | None:
        """The stored execution (load it again after running: the store may replace the object)."""
        return self.store.load(execution_id)

    # -- control --------------------------------------------------------------------------------------
    def cancel(self, execution_id: str, reason: str | None = None) -> str:
        """Queue ``durastate.cancel`` behind the execution's other events; returns the event id."""
        event = cancel_event(execution_id, reason)
        self.send(execution_id, event)
        return event.id

    def suspend(self, execution_id: str, reason: str | None = None) -> str:
        """Queue ``durastate.suspend``: the events after it are held until a resume. Returns the event id."""
        event = suspend_event(execution_id, reason)
        self.send(execution_id, event)
        return event.id

    def resume(self, execution_id: str) -> str:
        """Queue ``durastate.resume``: what the execution held applies, in order. Returns the event id."""
        event = resume_event(execution_id)
        self.send(execution_id, event)
        return event.id

    def reset(self, execution_id: str, to: list[str], *, actions: str = "none",
              context_patch: dict[str, Any] | None = None, send: tuple[str, dict[str, Any]] | None = None,
              reason: str | None = None, by: str | None = None) -> str:
        """Queue a ``durastate.reset`` to the configuration ``to`` (:mod:`durastate.engine.reset`), checked
        first against the stored execution (:class:`~durastate.errors.ControlRefused`: nothing is queued).
        Returns the event id."""
        check_reset_of(self.store, self.registry, execution_id, to)
        event = reset_event(execution_id, to, actions=actions, context_patch=context_patch, send=send,
                            reason=reason, by=by)
        self.send(execution_id, event)
        return event.id

    def terminate(self, execution_id: str, reason: str | None = None) -> Execution:
        """End the execution now, in the store (works while a failing message blocks its queue)."""
        return terminate(self.store, execution_id, reason, self.clock, self.registry)

    def redrive(self, execution_id: str) -> Redriven:
        """Restore a failed execution and queue its failed event again (the relay delivers it)."""
        return redrive(self.store, execution_id, self.clock)

    # -- schedules ------------------------------------------------------------------------------------
    def sync_schedules(self, specs: Mapping[str, ScheduleSpec]) -> SyncReport:
        """Make ``specs`` this store's schedules (new ones stored, changed ones updated, missing ones marked
        removed; see :func:`durastate.runtime.schedules.sync_schedules`). From then on the sweep of every
        round starts their executions, tick by tick, across restarts."""
        return sync_schedules(self.store, specs, self.clock())

    # -- dead letters ---------------------------------------------------------------------------------
    def list_dead_letters(self, limit: int = 100, cursor: str | None = None) -> DeadLetterPage:
        """One page of the dead letters, oldest first; pass ``next_cursor`` back for the next."""
        return self.dead_letter_box.list(limit, cursor)

    def replay_dead_letters(self, ids: Sequence[str] | None = None, *, check: bool = True) -> list[DeadLetter]:
        """Put dead letters back on the queue (every one for ``None``); the next rounds apply them.

        With ``check`` (the default) a replay that could only be dead-lettered again — a start whose
        definition is still missing, an event for an execution that does not exist and whose start is
        neither queued nor replayed with it — raises :class:`~durastate.transport.ReplayRefused` and
        nothing moves (see :func:`check_replay`).
        """
        if check:
            chosen = _chosen(self.dead_letter_box, ids)
            check_replay(chosen, self.registry, self.store, _queued(self.transport))
        return self.dead_letter_box.replay(ids)

    def drop_dead_letter(self, letter_id: str) -> DeadLetter:
        """Forget a dead letter for good; returns it."""
        return self.dead_letter_box.drop(letter_id)

    # -- running --------------------------------------------------------------------------------------
    def run_until_idle(self, max_rounds: int = 10_000) -> RunStats:
        """Process messages, relay and sweep until a round has nothing to do *now* (or ``max_rounds``).

        Timers due later are left armed, and messages released for a retry later wait in the queue:
        advance the clock and call again to fire or retry them.
        """
        stats = RunStats()
        for _ in range(max_rounds):
            if not self._round(stats) or self._settled:
                stats.idle = True
                return stats
        log.warning("run_until_idle stopped after %d rounds with work left", max_rounds)
        return stats

    def run_once(self, stats: RunStats | None = None) -> RunStats:
        """Exactly one round (claim a batch, relay, sweep); ``idle`` says whether it found nothing to do.

        Counts go into ``stats`` if given — also what a round did before it failed with an exception.
        """
        stats = RunStats() if stats is None else stats
        stats.idle = not self._round(stats)
        return stats

    def serve(self, stop: threading.Event | None = None, poll_interval: float = 0.5,
              error_backoff: Backoff | None = None) -> RunStats:
        """Run until ``stop`` is set (or Ctrl-C), waiting ``poll_interval`` seconds when idle.

        A failing round (the relay or the sweeper failed: the store or the queue unreachable) is logged
        and retried after a wait that grows while rounds keep failing — ``error_backoff``, by default
        from ``poll_interval`` up to 30 seconds — and starts over after a good round; it does not end the
        server. ``run_until_idle`` lets such errors propagate.
        """
        stop = stop or threading.Event()
        backoff = error_backoff or Backoff(poll_interval, max(poll_interval, 30.0))
        stats = RunStats()
        failures = 0
        try:
            while not stop.is_set():
                try:
                    busy = self._round(stats)
                except Exception as err:  # the relay or the sweeper failed (store/queue down): keep serving
                    failures += 1
                    delay = backoff.delay(failures, self._rand)
                    if is_transient(err):
                        log.warning("runtime round failed (%s: %s); retrying in %.1fs", type(err).__name__,
                                    err, delay)
                    else:
                        log.exception("runtime round failed; retrying in %.1fs", delay)
                    stop.wait(delay)
                    continue
                failures = 0
                if not busy or self._settled:  # a settled round: the next would find nothing
                    stop.wait(poll_interval)
        except KeyboardInterrupt:
            log.info("interrupted; stopping")
        stats.idle = True
        return stats

    def _round(self, stats: RunStats) -> bool:
        """One round; True if it did anything.

        A round applies up to ``batch_size`` messages (claiming again as targets free up, so a chain of
        events for one execution does not cost a round each), relays, and sweeps. Sweeping reads every
        due timer, so it runs once per ``sweep_interval`` of clock time while busy, and always before the
        runtime may call itself idle.

        Each claim takes up to the round's remaining budget of heads in one statement, and the messages
        it returned are acked together once they are handled, with the next claim where the transport
        can (``ack_and_claim``: one transaction and one round trip on PostgreSQL; else ``ack_many``, else
        ``ack`` each, then ``claim``) — the acks are what free their targets' next messages. A crash
        between a commit and its ack only redelivers the message, and the worker's dedupe skips it.
        """
        stats.rounds += 1
        handled = 0
        drained = False
        try:
            with self._group():
                claimed = self.transport.claim(self.batch_size, self.lease_seconds)
                while True:
                    if not claimed:
                        drained = True
                        break
                    done = self._handle_claimed(claimed, stats)
                    handled += len(claimed)
                    if handled >= self.batch_size:
                        self._ack(done)
                        break
                    claimed = self._ack_and_claim(done, self.batch_size - handled)
        except BaseException:
            self.worker.forget()  # what it kept may be from commits the group just rolled back
            raise
        relayed = self.relay.run_once()
        stats.spawned += relayed.spawned
        stats.sent += relayed.sent
        stats.published += relayed.published
        stats.tasks += relayed.tasks
        busy = handled > 0 or bool(relayed)
        # Settled: nothing was left to claim, and the relay — which ran after every commit of this
        # round — had nothing to move. Only a due timer can make work now, so the sweep that precedes
        # idleness runs here, and ``run_until_idle`` can stop without a whole empty round.
        settled = drained and not relayed
        now = self.clock()
        fired = 0
        if not busy or settled or now - self._last_sweep >= self.sweep_interval:
            self._last_sweep = now
            fired = self.sweeper.run_once(self.sweep_limit)
            stats.fired += fired
            busy = busy or fired > 0
        if self.retention is not None:  # housekeeping: never what keeps a round busy
            stats.purged += self.retention.run_if_due().purged
        self._settled = settled and fired == 0
        return busy

    def _group(self) -> contextlib.AbstractContextManager[object]:
        """The round's claims, commits and acks as one transaction where the transport can do that
        with the store (``SqliteTransport`` opened on this ``SqliteStore``: one fsync a round); else
        each stands alone."""
        group_with = getattr(self.transport, "group_with", None)
        return group_with(self.store) if group_with is not None else contextlib.nullcontext()

    def _handle_claimed(self, claimed: Sequence[Claimed], stats: RunStats) -> list[Claimed]:
        """Process one claim's messages; the ones to ack (if one raises, those before it are acked now,
        unless the round's transaction is gone)."""
        done: list[Claimed] = []
        try:
            for c in claimed:
                self._process(c, stats, done)
        except GroupAborted:
            raise
        except BaseException:
            with contextlib.suppress(Exception):  # the error that stopped the batch is the one to report
                self._ack(done)
            raise
        return done

    def _ack_and_claim(self, done: Sequence[Claimed], budget: int) -> list[Claimed]:
        both = getattr(self.transport, "ack_and_claim", None)
        if both is not None:
            claimed: list[Claimed] = both(done, budget, self.lease_seconds)
            return claimed
        self._ack(done)
        return self.transport.claim(budget, self.lease_seconds)

    def _ack(self, claims: Sequence[Claimed]) -> None:
        ack_many = getattr(self.transport, "ack_many", None)
        if ack_many is not None:
            ack_many(claims)
        else:
            for c in claims:
                self.transport.ack(c)

    def _process(self, c: Claimed, stats: RunStats, done: list[Claimed]) -> None:
        """Handle one message; one to ack is appended to ``done`` (a retry is released at once)."""
        stats.handled += 1
        try:
            result = self.worker.handle(c.target_id, c.event)
        except GroupAborted:
            raise  # the round's transaction is gone: nothing more can be written in it
        except PERMANENT_ERRORS as err:
            self._dead_letter(c, err, stats)
            done.append(c)
            return
        except Exception as err:  # transient (store unavailable, conflicts past the bound) or a bug
            # Retried later, after a delay that grows with the attempts. Meanwhile the message stays its
            # target's head, so what was sent after it waits behind it. A transient error is never
            # dead-lettered; a bug is, once it has failed max_attempts times (kept: replayable once fixed).
            transient = is_transient(err)
            if not transient and c.attempts >= self.max_attempts:
                log.error("event %s (%s) for %s failed %d times with an unexpected %s: %s; dead-lettering it "
                          "so that it stops holding back its execution's later events (replay it once the "
                          "cause is fixed)", c.event.id, c.event.name, c.target_id, c.attempts,
                          type(err).__name__, err, exc_info=err)
                self._dead_letter(c, err, stats)
                done.append(c)
                return
            delay = self.retry_backoff.delay(c.attempts, self._rand)
            stats.retried += 1
            if transient:
                log.warning("event %s (%s) for %s failed on attempt %d, will retry in %.1fs: %s: %s",
                            c.event.id, c.event.name, c.target_id, c.attempts, delay, type(err).__name__, err)
            else:
                log.warning("event %s (%s) for %s failed on attempt %d with an unexpected %s, will retry "
                            "in %.1fs: %s", c.event.id, c.event.name, c.target_id, c.attempts,
                            type(err).__name__, delay, err)
            self.transport.release(c, delay)
            return
        done.append(c)
        if result is HandleResult.APPLIED:
            stats.applied += 1
        elif result is HandleResult.DUPLICATE:
            stats.duplicates += 1
        elif result is HandleResult.HELD:
            stats.held += 1
        else:
            stats.ignored += 1

    def _dead_letter(self, c: Claimed, err: Exception, stats: RunStats) -> None:
        """Keep the letter — before the caller acks the message, so a crash in between keeps it twice
        (one letter: its id is derived), never zero times."""
        reason = " ".join(str(err).split()) or type(err).__name__
        letter = DeadLetter(c.target_id, c.event, reason, type(err).__name__, c.attempts, self.clock())
        self.dead_letter_box.add(letter)
        self.dead_letters.append(letter)
        stats.dead_lettered += 1
        log.error("dead letter %s: event %s (%s) for %s after %d attempt(s): %s: %s", letter.id, c.event.id,
                  c.event.name, c.target_id, c.attempts, letter.error, letter.reason,
                  extra={"dead_letter": letter.id})
        if self.on_dead_letter is not None:
            self.on_dead_letter(letter)


def check_replay(letters: Sequence[DeadLetter], registry: DefinitionRegistry | None,
                 store: ExecutionStore | None, queued: Iterable[tuple[str, Event]] = ()) -> None:
    """Refuse (:class:`~durastate.transport.ReplayRefused`, naming each) a replay of ``letters`` that could
    only come back as dead letters, before anything moves:

    - one without an event (a body that is not the wire format): it can only be dropped;
    - a ``durastate.start`` of a definition ``registry`` does not have (a user's start, not an invoked
      child's: a child of an unknown definition fails and tells its parent);
    - an event for an execution ``store`` does not have, whose start is neither among ``letters`` nor
      ``queued``, or of an execution whose definition ``registry`` no longer has.

    ``registry`` / ``store`` ``None``: that check is skipped (e.g. replaying on AWS without the worker's
    definitions). Other reasons (bad data, a refused control event) cannot be foreseen: such a letter
    comes back, with its reason, if nothing changed.
    """
    starts = {d.target_id for d in letters if d.replayable and d.event.name == START}
    starts |= {t for t, e in queued if e.name == START}
    problems: list[str] = []
    for d in letters:
        event = d.event
        if not d.replayable:
            problems.append(f"{d.id} has no event to replay (its body is not the wire format): drop it")
            continue
        if event.name == START:
            definition_id = event.data.get("definition_id")
            if (registry is not None and isinstance(definition_id, str) and definition_id not in registry
                    and event.data.get("parent_id") is None and (store is None or store.load(d.target_id) is None)):
                problems.append(f"{d.id} starts {d.target_id} from definition {definition_id!r}, which is still "
                                "missing (add its file to the definitions folder)")
            continue
        if store is None:
            continue
        exe = store.load(d.target_id)
        if exe is None:
            if d.target_id not in starts:
                problems.append(f"{d.id} is {event.name} for execution {d.target_id}, which does not exist and "
                                "whose start is neither queued nor replayed with it")
        elif registry is not None and exe.definition_id not in registry and exe.status in ("running",
                                                                                            "suspended"):
            problems.append(f"{d.id} is {event.name} for {d.target_id}, whose definition "
                            f"{exe.definition_id!r} is missing (add its file to the definitions folder)")
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ReplayRefused(f"dead letter {problems[0]}{more}; replayed now, it would only come back as a dead "
                            "letter; nothing was replayed")


def _chosen(box: DeadLetterBox, ids: Sequence[str] | None) -> list[DeadLetter]:
    """The letters a replay of ``ids`` would move (every replayable one for ``None``)."""
    if ids is not None:
        out: list[DeadLetter] = []
        for letter_id in dict.fromkeys(ids):
            letter = box.get(letter_id)
            if letter is None:
                raise UnknownDeadLetter(letter_id)
            out.append(letter)
        return out
    letters: list[DeadLetter] = []
    cursor: str | None = None
    while True:
        page = box.list(500, cursor)
        letters += [d for d in page.items if d.replayable]
        if page.next_cursor is None:
            return letters
        cursor = page.next_cursor


def _queued(transport: object) -> list[tuple[str, Event]]:
    """What waits in the transport, if it can show it (the SQLite, PostgreSQL and in-memory queues can)."""
    messages = getattr(transport, "messages", None)
    return list(messages()) if callable(messages) else []
