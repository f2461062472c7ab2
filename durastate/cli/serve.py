"""``durastate serve``: the worker, relay and sweeper of :class:`~durastate.runtime.LocalRuntime` in this process.

It drains the store's durable inbox (what ``start``/``send`` queued, what executions emit, the timeouts
the sweeper fires) until Ctrl-C or SIGTERM. A signal stops it *between* rounds (a round applies at most
``--batch`` events, then relays and sweeps): every claimed event is committed and acknowledged first,
so a clean stop loses and repeats nothing. A second signal stops at once — even
that is safe, since an unfinished claim is retried after its lease and the worker dedupes event ids.
Several ``serve`` processes may share one store: the inbox hands each execution's events to one of
them at a time.

``--until-idle`` and ``--once`` make it a batch job for scripts; ``--advance DURATION`` (``90s``, ``15m``,
``14d``, ``2d 3h``) runs the server through that much time at once, to fire timers in a demo or a test
without waiting for them: what is due now first, then each timer at the time it falls due (what it arms
counts from there), step by step (:func:`_advance`). The store keeps the clock where the advance left it
(:mod:`durastate.cli.clock`), so ``show`` and ``list`` afterwards tell the times ``serve`` committed.

An event that can never apply as it is (a definition missing from ``--definitions``, an event for an
execution that does not exist, …) is kept as a dead letter with its reason — in the store's
``dead_letters`` table, where ``durastate dead-letters list`` shows it and ``… replay`` puts it back once
the cause is fixed — and ``serve`` prints one line per dead letter naming the command that shows it. It
still exits 0: a dead letter is data kept for the user, not a failure of the server, which went on
with everything else (the summary counts them and says where to look).

A round that fails with a transient error (the store unavailable, throttled or locked, the queue not
taking a send: :func:`~durastate.runtime.local.is_transient`) does not end the server: it prints one
warning line saying when it retries, waits — half a second at first, twice as long after each failed
round in a row, at most :data:`MAX_ERROR_WAIT` seconds, jittered — and tries again; a good round resets
the wait. In every mode: ``--until-idle``/``--once`` also wait for a round that succeeds. Any other error
ends it with one line and exit status 1; a signal during the wait stops it cleanly.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer
from rich.text import Text

from durastate.cli import output
from durastate.cli.clock import command_clock, manual_instant, move_offset, store_offset
from durastate.cli.common import DefinitionsOption, StoreOption, parse_duration_option, session
from durastate.cli.dead_letters import command_hint
from durastate.cli.dead_letters import describe as describe_letter
from durastate.cli.schedules import sync_definitions_schedules
from durastate.cli.session import Session, redact
from durastate.engine.durations import format_duration
from durastate.engine.model import FINISHED, Event
from durastate.runtime import HandleResult, LocalRuntime, RunStats, Worker
from durastate.runtime.clock import Backoff
from durastate.runtime.local import is_transient
from durastate.runtime.retention import Retention
from durastate.transport.base import DeadLetter

FIRST_ERROR_WAIT = 0.5
"""Seconds to wait after the first failed round (or ``--poll``, if longer)."""
MAX_ERROR_WAIT = 30.0
"""The longest wait between failed rounds, however many fail in a row."""


def _wait(stop: threading.Event, seconds: float) -> bool:
    """Wait ``seconds``, or less if ``stop`` is set meanwhile; whether it is set. (Tests replace it.)"""
    return stop.wait(seconds)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def serve(
    ctx: typer.Context,
    until_idle: Annotated[bool, typer.Option(
        "--until-idle", help="Stop as soon as there is nothing to do now (timers due later stay armed).")
    ] = False,
    once: Annotated[bool, typer.Option("--once", help="Run one round (claim a batch, relay, sweep) and stop."
                                       )] = False,
    advance: Annotated[float, typer.Option(
        "--advance", metavar="DURATION", parser=parse_duration_option,
        help="Serve through this much time at once: 90s, 15m, 14d, 2d 3h or seconds. What is due now first, then "
             "each timer when it falls due; the store keeps the moved clock (demos, tests).")
    ] = 0.0,
    poll: Annotated[float, typer.Option("--poll", metavar="SECONDS", min=0.01,
                                        help="How long to wait when idle before looking again.")] = 0.2,
    batch: Annotated[int, typer.Option("--batch", min=1, max=1000,
                                       help="Events per round, claimed a batch at a time, least recently served "
                                            "execution first.")] = 32,
    lease: Annotated[float, typer.Option(
        "--lease", metavar="SECONDS", min=0.1,
        help="How long a claimed event is reserved; one a killed server held is retried after this.")
    ] = 30.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No line per event; only the summary.")
                     ] = False,
    exclusive: Annotated[bool, typer.Option(
        "--exclusive",
        help="This is the only server for this store: trust the executions it keeps after committing them "
             "and skip the version read before the next event of the same execution also where the "
             "definition calls Python (SQLite, PostgreSQL). Still exactly-once if it is not, but steps "
             "(and their Python calls) then run twice on stale copies.")
    ] = False,
    trace: Annotated[bool, typer.Option(
        "--trace/--no-trace",
        help="Commit a trace step with every event (the default). --no-trace records one only for a step "
             "that fails (as on AWS): fewer writes per event, and `durastate trace` shows only failures.")
    ] = True,
    retention: Annotated[float | None, typer.Option(
        "--retention", metavar="DURATION", parser=parse_duration_option,
        help="Purge executions that ended longer ago than this (30d, 12h, ...), a bounded batch at a time "
             "between rounds; each leaves a tombstone that still dedupes its events (docs/retention.md).")
    ] = None,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Apply queued events, relay what executions emit and fire due timers, until stopped."""
    sess = session(ctx, store, definitions, creates=True)
    _configure_logging()
    clock = command_clock()  # the store's clock: --advance moves it, step by step (_advance)
    transport = sess.inbox
    if transport is None:
        output.note(f"{sess.scheme}:// has no durable queue here: serving only what this process finds "
                    "(outbox, spawns, due timers)")
    runtime = LocalRuntime(sess.store, sess.registry, transport, clock, batch_size=batch,
                           sink=_PrintSink(quiet), lease_seconds=lease,
                           exclusive=exclusive, trace=trace,
                           on_dead_letter=lambda letter: _print_dead_letter(sess, letter),
                           retention=Retention(sess.store, retention, clock) if retention is not None else None)
    if exclusive and not runtime.worker.keeps:
        output.note(f"--exclusive has no effect on {sess.scheme}:// (its commits cannot check the event "
                    "themselves): every event is read first")
    if not quiet:
        runtime.worker = _ReportingWorker(runtime.worker, sess)
    sync_definitions_schedules(sess, clock())  # the folder's `schedules:`, stored; the sweeps start them
    mode = "until idle" if until_idle else ("one round" if once else "until Ctrl-C")
    shift = f", clock +{format_duration(advance, exact=True)}" if advance else ""
    stop = threading.Event()
    total = RunStats()
    with _stop_on_signals(stop):
        # Printed once Ctrl-C / SIGTERM stop cleanly: a supervisor may wait for this line.
        output.note(f"serving {redact(sess.store_url)} ({mode}{shift})")
        rounds = _Rounds(runtime, stop, total, Backoff(max(poll, FIRST_ERROR_WAIT), max(poll, MAX_ERROR_WAIT)),
                         poll)
        if advance:
            _advance(sess, clock, advance, rounds, once)
            if not stop.is_set():
                output.note(f"clock moved {format_duration(advance, exact=True)}: {_clock_state()}")
        if not stop.is_set() and not (advance and (until_idle or once)):
            rounds.run(until_idle=until_idle, once=once)
    _summary(sess, total, clock, interrupted=stop.is_set())


class _Rounds:
    """Serve rounds until idle, one round, or until stopped; a transient failure is retried after a wait."""

    def __init__(self, runtime: LocalRuntime, stop: threading.Event, total: RunStats, backoff: Backoff,
                 poll: float) -> None:
        self.runtime, self.stop, self.total, self.backoff, self.poll = runtime, stop, total, backoff, poll

    def run(self, *, until_idle: bool, once: bool) -> None:
        failed = 0  # rounds failed in a row
        while not self.stop.is_set():
            stats = RunStats()
            try:
                self.runtime.run_once(stats)
            except Exception as err:
                _merge(self.total, stats)  # what the round applied before it failed was committed
                if not is_transient(err):
                    raise  # one line and exit status 1, from the app
                failed += 1
                delay = self.backoff.delay(failed)
                reason = " ".join(str(err).split()) or "no details"
                output.warn(f"round failed ({type(err).__name__}: {reason}); retrying in {delay:.1f}s")
                _wait(self.stop, delay)
                continue
            failed = 0
            _merge(self.total, stats)
            if once:
                break
            if stats.idle:
                if until_idle:
                    break
                _wait(self.stop, self.poll)


def _advance(sess: Session, clock: Callable[[], float], advance: float, rounds: _Rounds, once: bool) -> None:
    """``--advance``: serve what is due now, then move the store's clock to the next timer that falls due
    within ``advance`` and serve again, step by step, and at last to the end of ``advance``.

    So a timer fires at its own time, and what it arms (a follow-up timer, a child's timeout) counts from
    then, as if the server had run through those hours; every step's offset is stored before its round
    (:func:`~durastate.cli.clock.move_offset`), so nothing is committed at a time the store's clock has not
    reached, even when a signal stops the run half-way."""
    start = store_offset()
    end = start + advance
    rounds.run(until_idle=not once, once=once)
    while not rounds.stop.is_set() and store_offset() < end:
        now = clock()
        horizon = now + (end - store_offset())
        due = [fire_at for _, _, fire_at in sess.store.due_timers(horizon, since=now) if fire_at > now]
        offset = end if not due else min(end, store_offset() + (min(due) - now))
        move_offset(sess.store, offset, clock() + (offset - store_offset()))
        rounds.run(until_idle=not once, once=once)


def _clock_state() -> str:
    """Where the store's clock stands now, for the line after an advance."""
    base = "DURASTATE_CLOCK" if manual_instant() is not None else "real time"
    return (f"this store's clock is {format_duration(store_offset(), exact=True)} ahead of {base}, "
            "for every command on it")


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stop`` (a clean stop after the current round); a second one aborts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        output.note(f"{signal.Signals(signum).name}: stopping after the current round "
                    "(again to stop at once)")
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _merge(total: RunStats, stats: RunStats) -> None:
    for name in ("rounds", "handled", "applied", "duplicates", "ignored", "held", "retried", "dead_lettered",
                 "spawned", "sent", "published", "tasks", "fired", "purged"):
        setattr(total, name, getattr(total, name) + getattr(stats, name))
    total.idle = stats.idle


def _print_dead_letter(sess: Session, letter: DeadLetter) -> None:
    """One line per dead letter, as it happens: what, for whom, why, and the command that shows it."""
    output.warn(f"dead letter {letter.id}: {describe_letter(letter)} for {letter.target_id} could not be applied "
                f"({letter.error}: {letter.reason}); see `{command_hint(sess, 'show', letter.id)}`")


def _summary(sess: Session, total: RunStats, clock: Callable[[], float], interrupted: bool) -> None:
    """One closing line (dead letters were printed as they happened, with their reasons)."""
    parts = [f"{total.applied} applied", f"{total.ignored} ignored", f"{total.duplicates} duplicate",
             f"{total.fired} timer(s) fired", f"{total.spawned} child(ren) spawned"]
    if total.tasks:
        parts.append(f"{total.tasks} task(s) run")
    if total.held:
        parts.append(f"{total.held} held (by suspended or retrying executions)")
    if total.retried:
        parts.append(f"{total.retried} retried")
    if total.purged:
        parts.append(f"{total.purged} purged")
    if total.dead_lettered:
        parts.append(f"{total.dead_lettered} dead-lettered (see `{command_hint(sess, 'list')}`)")
    head = "stopped" if interrupted else "idle"
    output.note(f"{head}: " + ", ".join(parts))
    if not interrupted and sess.scheme in ("sqlite", "memory"):
        # Embedded stores only: listing every armed timer is a scan on a shared server's table.
        now = clock()
        pending = sess.store.due_timers(now + 10 * 365 * 86400.0)
        if pending:
            nxt = min(fire_at for _, _, fire_at in pending)
            output.note(f"{len(pending)} timer(s) armed, next due in {format_duration(max(0.0, nxt - now))} "
                        f"(durastate serve --advance DURATION fires them early)")


class _ReportingWorker(Worker):
    """The runtime's worker, plus one progress line per event: who, what, and where it ended up."""

    def __init__(self, inner: Worker, sess: Session) -> None:
        super().__init__(inner.store, inner.registry, inner.clock, inner.max_conflict_retries,
                         copy_on_load=inner.copy_on_load, trace=inner.trace,
                         keep_committed=inner.keep_committed, keep_bytes=inner.keep_bytes,
                         exclusive=inner.exclusive,
                         telemetry=inner.telemetry)
        self._sess = sess
        self._day = time.strftime("%Y-%m-%d", time.localtime(self.clock()))

    def handle(self, target_id: str, event: Event) -> HandleResult:
        result = super().handle(target_id, event)
        line = Text()
        at = time.localtime(self.clock())  # the command's clock
        # the date too once --advance has moved it past the day the server started on
        shown = "%H:%M:%S " if time.strftime("%Y-%m-%d", at) == self._day else "%Y-%m-%d %H:%M:%S "
        line.append(time.strftime(shown, at), style="dim")
        line.append(f"{target_id:<14}", style="bold")
        line.append(f" ← {output.describe_event(event):<22}")
        if result is HandleResult.APPLIED:
            exe = self.committed(target_id) or self.store.load(target_id)
            if exe is not None:
                line.append(" → ")
                line.append(exe.active_path or "-", style="magenta")
                if exe.status != "running":
                    line.append("  ")
                    line.append_text(output.status_text(exe.status, exe.outcome))
        else:
            line.append(f" ({result})", style="dim")
        output.say(line)
        return result


class _PrintSink:
    """Untargeted emits: shown on the console, since nothing else listens on a developer's machine."""

    def __init__(self, quiet: bool) -> None:
        self._quiet = quiet

    def publish(self, events: Any) -> None:
        if self._quiet:
            return
        for event in events:
            if event.name == FINISHED and not event.data.get("child_id"):
                continue  # a top-level execution ended: its progress line already says so
            output.say(Text(f"notification {event.name} {output.compact(event.data, 100)}", style="cyan"))


def _configure_logging() -> None:
    """The runtime's warnings (retries) to stderr, once; its dead-letter records are printed by
    :func:`_print_dead_letter` instead, as one line each."""
    log = logging.getLogger("durastate")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_not_a_dead_letter)
        log.addHandler(handler)
        log.setLevel(logging.WARNING)


def _not_a_dead_letter(record: logging.LogRecord) -> bool:
    return getattr(record, "dead_letter", None) is None
