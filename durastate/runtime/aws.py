"""The runtime on AWS Lambda: store, transport, sink and definitions built from the environment.

The four handlers in :mod:`durastate.functions` are thin adapters; everything they share lives here so the local
stack and the tests run the very same code. :func:`get_runtime` builds an :class:`AwsRuntime` once per
Lambda container (module-level cache: a warm invocation reuses the boto3 clients and the loaded
definitions) from these variables:

=========================  ===========================================================================
``DURASTATE_TABLE_PREFIX``     prefix of the seven DynamoDB tables (``{prefix}_executions`` …); default durastate
``AWS_REGION``             region of every client (Lambda sets it; ``AWS_DEFAULT_REGION`` also works)
``AWS_ENDPOINT_URL``       endpoint of every service (LocalStack, moto server); botocore reads it
``AWS_ENDPOINT_URL_DYNAMODB`` / ``AWS_ENDPOINT_URL_SQS`` / ``AWS_ENDPOINT_URL_EVENTBRIDGE``
                           per-service endpoints, also resolved by botocore itself (≥ 1.31)
``DURASTATE_QUEUE_URL``        the SQS FIFO queue events go to (relay, sweeper; the worker does not send)
``DURASTATE_DLQ_URL``          its FIFO dead-letter queue, where the worker moves records that can never apply
``DURASTATE_TIMERS_QUEUE_URL`` the standard timers queue: timers due within 15 minutes wait there (a message
                           delay) and the timers function applies them when due, so they fire within a
                           second; unset, the sweeper alone fires them (up to a sweep late)
``DURASTATE_EVENT_BUS_NAME``   EventBridge bus for untargeted emits; unset means they are only logged
``DURASTATE_DEFINITIONS_DIR``  folder of definition files; default: ``definitions`` next to the handler
``DURASTATE_RELAY_BUDGET``     outbox entries + spawns handled per relay pass (default 500)
``DURASTATE_SWEEP_LIMIT``      due timers fired per sweeper run (default 500)
``DURASTATE_TRACE``            ``1`` records a trace step per commit (off by default: it turns every state-only
                           commit into a transaction, about 3x the write cost); off, only a step that failed
                           is recorded (one put after its commit), so ``durastate show``/``trace`` can say why
``DURASTATE_HISTORY``          ``1`` keeps every trace step of an execution (its whole history, for ``durastate
                           history`` and the replay check) instead of a ring of the newest 200; the steps
                           still expire with the trace TTL. Only steps that are recorded are kept: with
                           ``DURASTATE_TRACE`` off, that is the failed ones
``DURASTATE_PROCESSED_TTL_SECONDS`` / ``DURASTATE_TRACE_TTL_SECONDS``
                           lifetime of dedupe marks / trace steps before DynamoDB's TTL may delete them
                           (defaults 14 days / 7 days; a mark must outlive the queue's retention period)
``DURASTATE_SCHEDULES``       JSON of schedules (``{name: spec}``, the construct's ``schedules``), besides the
                           ``schedules:`` files of the definitions folder; the sweeper stores them once per
                           container (cold start) and starts their executions
``DURASTATE_MAX_ATTEMPTS``   receives of a record that fails with an unexpected error (most likely a bug)
                           before the worker dead-letters it with its reason (default 5); a transient
                           failure (the store unavailable or throttled, conflicts) is never dead-lettered
``DURASTATE_CONTEXT_BUCKET``  S3 bucket holding executions too large for a DynamoDB item (the claim check:
                           :mod:`durastate.store.dynamodb.claim_check`); unset, they are refused
``DURASTATE_CLAIM_CHECK_BYTES``  executions whose JSON is larger go to that bucket (default 200000)
``DURASTATE_RETENTION_SECONDS``  the sweeper also purges executions that ended longer ago (unset: never)
``DURASTATE_TOMBSTONE_TTL_SECONDS`` / ``DURASTATE_RETENTION_BATCHES``
                           how long a purged execution's tombstone lives (default 14 days) / purge batches
                           of 500 per sweeper run (default 4)
=========================  ===========================================================================

No endpoint is passed to boto3 explicitly: botocore resolves ``AWS_ENDPOINT_URL_<SERVICE>`` and
``AWS_ENDPOINT_URL`` natively, so the same code runs against AWS, LocalStack and moto.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, assert_never

from durastate.engine import DefinitionRegistry
from durastate.engine.ids import is_system_id
from durastate.engine.model import Event, Execution
from durastate.errors import DefinitionError, DurastateError, MalformedEvent
from durastate.runtime.clock import Backoff, Clock
from durastate.runtime.definitions import load_folder
from durastate.runtime.local import PERMANENT_ERRORS, is_transient
from durastate.runtime.relay import Relay, RelayStats
from durastate.runtime.retention import Retention, RetentionRun
from durastate.runtime.schedules import SyncReport, schedules_from, sync_schedules
from durastate.runtime.sweeper import HOP_HORIZON, Sweeper, timeout_event
from durastate.runtime.worker import HandleResult, Worker
from durastate.store.base import ExecutionStore, TimerOp
from durastate.store.dynamodb.claim_check import DEFAULT_CLAIM_CHECK_BYTES
from durastate.transport.base import Sink, Transport
from durastate.transport.sqs import SqsDeadLetters, dead_letter, sqs_id
from durastate.transport.sqs_timers import SqsTimerQueue, hop_fire_at
from durastate.transport.wire import Envelope, parse_envelope, with_traceparent

__all__ = [
    "PERMANENT_ERRORS",
    "AwsRuntime",
    "AwsSettings",
    "DeadLetterUnavailable",
    "LogSink",
    "Outcome",
    "build_runtime",
    "get_runtime",
    "outcome_of",
    "set_runtime",
]

log = logging.getLogger("durastate.runtime.aws")

DEFAULT_BUDGET = 500
DEFAULT_PROCESSED_TTL = 14 * 86400
DEFAULT_TRACE_TTL = 7 * 86400
DEFAULT_MAX_ATTEMPTS = 5
RETRY_BACKOFF = Backoff(base=2.0, cap=900.0)
"""How long a failed record stays hidden before SQS delivers it again, by its receive count: 1-2 s after the
first failure, doubling, at most 15 minutes. Its execution's FIFO group waits meanwhile, so the first
retries come soon; a longer outage is retried every 15 minutes — the redrive policy's receive count (1000
in the construct) outlasts the queue's retention at that pace, so a transient failure never reaches the
DLQ by its receives."""
MAX_HOP_WAIT = 1.5
"""The longest the timers function waits for a hop to be due (SQS delays in whole seconds); sooner still,
it goes back to the timers queue."""

Outcome = Literal["applied", "duplicate", "ignored", "held", "dead-lettered"]
"""What became of one record. Every one of them is a success for SQS (the record is deleted): ``held`` is
an event kept by its suspended, retrying or failed execution, applied when it resumes, after the retry or
after the redrive — it is in the store, so redelivering the record would only block the execution's FIFO
group (a ``resume`` included)."""


def outcome_of(result: HandleResult) -> Outcome:
    """The record's outcome for what the worker did; exhaustive (``assert_never``), so a new
    :class:`HandleResult` is a type error here rather than a record failed after its commit."""
    match result:
        case HandleResult.APPLIED:
            return "applied"
        case HandleResult.DUPLICATE:
            return "duplicate"
        case HandleResult.IGNORED:
            return "ignored"
        case HandleResult.HELD:
            return "held"
        case _:
            assert_never(result)


class DeadLetterUnavailable(DurastateError):
    """A record can never succeed, but no ``DURASTATE_DLQ_URL`` is configured to move it to."""


@dataclass(frozen=True)
class AwsSettings:
    """Everything the handlers read from the environment (see the module docstring)."""

    table_prefix: str = "durastate"
    region: str | None = None
    queue_url: str | None = None
    dlq_url: str | None = None
    timers_queue_url: str | None = None
    """The standard queue timers due within 15 minutes wait in (``None``: the sweeper fires every timer)."""
    event_bus_name: str | None = None
    definitions_dir: Path = Path("definitions")
    relay_budget: int = DEFAULT_BUDGET
    sweep_limit: int = DEFAULT_BUDGET
    trace: bool = False
    processed_ttl: int = DEFAULT_PROCESSED_TTL
    trace_ttl: int = DEFAULT_TRACE_TTL
    history: bool = False
    """Keep every trace step (``DURASTATE_HISTORY``), not a ring of the newest."""
    schedules: str | None = None
    """The construct's schedules as JSON (``DURASTATE_SCHEDULES``), besides the definitions folder's."""
    retention: int | None = None
    """Seconds after which an ended execution is purged by the sweeper (``None``: never)."""
    tombstone_ttl: int = DEFAULT_PROCESSED_TTL
    retention_batches: int = 4
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    """Receives of a record failing with an unexpected error before the worker dead-letters it."""
    context_bucket: str | None = None
    """The S3 bucket of claim-checked executions (``None``: executions must fit an item)."""
    claim_check_bytes: int = DEFAULT_CLAIM_CHECK_BYTES

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None,
                 default_definitions_dir: str | Path | None = None) -> AwsSettings:
        env = os.environ if environ is None else environ
        defs = env.get("DURASTATE_DEFINITIONS_DIR") or default_definitions_dir or "definitions"
        return cls(
            table_prefix=env.get("DURASTATE_TABLE_PREFIX") or "durastate",
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            queue_url=env.get("DURASTATE_QUEUE_URL") or None,
            dlq_url=env.get("DURASTATE_DLQ_URL") or None,
            timers_queue_url=env.get("DURASTATE_TIMERS_QUEUE_URL") or None,
            event_bus_name=env.get("DURASTATE_EVENT_BUS_NAME") or None,
            definitions_dir=Path(defs),
            relay_budget=_positive_int(env, "DURASTATE_RELAY_BUDGET", DEFAULT_BUDGET),
            sweep_limit=_positive_int(env, "DURASTATE_SWEEP_LIMIT", DEFAULT_BUDGET),
            trace=(env.get("DURASTATE_TRACE") or "0").strip().lower() in ("1", "true", "yes", "on"),
            processed_ttl=_positive_int(env, "DURASTATE_PROCESSED_TTL_SECONDS", DEFAULT_PROCESSED_TTL),
            trace_ttl=_positive_int(env, "DURASTATE_TRACE_TTL_SECONDS", DEFAULT_TRACE_TTL),
            history=(env.get("DURASTATE_HISTORY") or "0").strip().lower() in ("1", "true", "yes", "on"),
            schedules=env.get("DURASTATE_SCHEDULES") or None,
            retention=(_positive_int(env, "DURASTATE_RETENTION_SECONDS", 1)
                       if env.get("DURASTATE_RETENTION_SECONDS") else None),
            tombstone_ttl=_positive_int(env, "DURASTATE_TOMBSTONE_TTL_SECONDS", DEFAULT_PROCESSED_TTL),
            retention_batches=_positive_int(env, "DURASTATE_RETENTION_BATCHES", 4),
            max_attempts=_positive_int(env, "DURASTATE_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS),
            context_bucket=env.get("DURASTATE_CONTEXT_BUCKET") or None,
            claim_check_bytes=_positive_int(env, "DURASTATE_CLAIM_CHECK_BYTES", DEFAULT_CLAIM_CHECK_BYTES),
        )


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{name}={raw!r} must be at least 1")
    return value


class LogSink:
    """The sink when no event bus is configured: untargeted emits are logged, never silently lost."""

    def publish(self, events: Any) -> None:
        for e in events:
            log.info("untargeted emit %s (%s): no DURASTATE_EVENT_BUS_NAME set", e.name, e.id)


class _UnconfiguredTransport:
    """Stands in when ``DURASTATE_QUEUE_URL`` is unset (the worker needs no queue); sending is an error."""

    def send(self, messages: Any) -> None:
        raise DurastateError("no DURASTATE_QUEUE_URL configured: the relay and the sweeper need the SQS queue URL")


@dataclass
class AwsRuntime:
    """The worker, relay and sweeper over one store, plus what the handlers need around them."""

    settings: AwsSettings
    store: ExecutionStore
    registry: DefinitionRegistry
    transport: Transport
    sink: Sink
    sqs: Any
    clock: Clock = time.time
    worker: Worker = field(init=False)
    relay: Relay = field(init=False)
    sweeper: Sweeper = field(init=False)
    schedules_synced: bool = field(default=False, init=False)
    """Whether this container stored its schedules already (once per cold start: see :meth:`sync_schedules`)."""

    timer_hops: SqsTimerQueue | None = field(default=None, init=False)
    """The timers queue (``DURASTATE_TIMERS_QUEUE_URL``), or ``None``: the sweeper alone fires timers."""

    def __post_init__(self) -> None:
        self.worker = Worker(self.store, self.registry, clock=self.clock)
        self.relay = Relay(self.store, self.registry, self.transport, sink=self.sink, clock=self.clock)
        if self.settings.timers_queue_url:
            self.timer_hops = SqsTimerQueue(self.sqs, self.settings.timers_queue_url)
            self.worker.on_commit = self.relay.on_commit = self._hop_armed
        self.sweeper = Sweeper(self.store, self.transport, clock=self.clock, hops=self.timer_hops)

    # -- worker ----------------------------------------------------------------------------------------
    def parse(self, body: str) -> Envelope:
        """Validate a record body against the wire format (raises :class:`MalformedEvent`)."""
        return parse_envelope(body)

    def apply(self, env: Envelope) -> HandleResult:
        """Apply one parsed event; permanent and transient errors both propagate (see :meth:`process`)."""
        return self.worker.handle(env.target_id, env.event)

    def process(self, body: str, *, message_id: str, group_id: str | None = None,
                on_parsed: Callable[[Envelope], None] | None = None, attempts: int = 1,
                traceparent: str | None = None) -> Outcome:
        """One SQS record, end to end: parse, apply, dead-letter what can never succeed.

        Returns the outcome; raises only on a failure that is not permanent, which the handler reports as
        a batch item failure so SQS redelivers the record (and, FIFO, the rest of its group) later, after
        :meth:`back_off`. As in the local runtime: a transient failure (:func:`is_transient`) is never
        dead-lettered, however many receives it takes; an unexpected error (most likely a bug) is, once the
        record was received ``max_attempts`` times — kept with its reason, it stops holding back its
        execution's later events, and a replay applies it once the cause is fixed. ``attempts`` (the
        record's receive count) goes with a dead letter. ``traceparent``: the trace context the record
        brought besides its body (:func:`durastate.transport.tracecontext.from_message_attributes`).
        """
        try:
            env = with_traceparent(self.parse(body), traceparent)
        except MalformedEvent as exc:
            self.dead_letter(body, exc, message_id=message_id, group_id=group_id, attempts=attempts)
            return "dead-lettered"
        if on_parsed is not None:
            on_parsed(env)
        if group_id and group_id != sqs_id(env.target_id):
            log.warning("message %s for %s arrived in group %s: send with MessageGroupId = target_id to keep "
                        "its events ordered", message_id, env.target_id, group_id)
        try:
            result = self.apply(env)
        except PERMANENT_ERRORS as exc:  # malformed start data, unknown definition/execution, too large
            self.dead_letter(body, exc, message_id=message_id, group_id=group_id, target_id=env.target_id,
                             event=env.event, attempts=attempts)
            return "dead-lettered"
        except Exception as exc:
            if is_transient(exc) or attempts < self.settings.max_attempts:
                raise
            log.error("event %s (%s) for %s failed %d times with an unexpected %s: %s; dead-lettering it so "
                      "that it stops holding back its execution's later events (replay it once the cause is "
                      "fixed)", env.event.id, env.event.name, env.target_id, attempts, type(exc).__name__, exc,
                      exc_info=exc)
            self.dead_letter(body, exc, message_id=message_id, group_id=group_id, target_id=env.target_id,
                             event=env.event, attempts=attempts)
            return "dead-lettered"
        return outcome_of(result)

    def back_off(self, failed: Sequence[tuple[str, int]]) -> None:
        """Hide failed records of the event queue for :data:`RETRY_BACKOFF`'s delay for their receive count.

        ``failed``: ``(receipt handle, receive count)`` of each record the worker hands back. Without it,
        SQS would deliver a record again only after the queue's visibility timeout (180 s) every time: too
        late for a short blip, too soon — and a receive too many — for a long outage. Best effort: if the
        change fails, the record comes back after the visibility timeout, as without it.
        """
        if not failed or not self.settings.queue_url:
            return
        entries = [{"Id": str(i), "ReceiptHandle": receipt,
                    "VisibilityTimeout": max(1, math.ceil(RETRY_BACKOFF.delay(count)))}
                   for i, (receipt, count) in enumerate(failed)]
        for start in range(0, len(entries), 10):
            try:
                got = self.sqs.change_message_visibility_batch(QueueUrl=self.settings.queue_url,
                                                               Entries=entries[start:start + 10])
            except Exception:
                log.warning("could not delay %d failed record(s); SQS redelivers them after the visibility "
                            "timeout", len(entries[start:start + 10]), exc_info=True)
                continue
            for fail in got.get("Failed") or []:
                log.warning("could not delay a failed record: %s", fail.get("Message") or fail.get("Code"))

    def dead_letter(self, body: str, exc: BaseException, *, message_id: str, group_id: str | None,
                    target_id: str | None = None, event: Event | None = None, attempts: int = 1) -> None:
        """Move a record that can never succeed to the DLQ, with why, when and after how many receives
        (the attributes :class:`~durastate.transport.sqs.SqsDeadLetters` reads); raise if there is no DLQ."""
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if self.settings.dlq_url is None:
            raise DeadLetterUnavailable(
                f"record {message_id} can never be applied ({reason}) and DURASTATE_DLQ_URL is not set; it "
                "stays on the queue until its redrive policy moves it") from exc
        extra = {"durastate.source_message_id": message_id, "durastate.target_id": target_id or "",
                 "durastate.event_id": event.id if event else "", "durastate.event_name": event.name if event else ""}
        dead_letter(self.sqs, self.settings.dlq_url, body, reason=reason, error=type(exc).__name__,
                    group_id=group_id or (sqs_id(target_id) if target_id else None), dedup_id=message_id,
                    extra=extra, attempts=attempts, at=self.clock())
        log.error("dead-lettered message %s: %s", message_id, reason)

    @property
    def dead_letter_box(self) -> SqsDeadLetters:
        """The DLQ as a :class:`~durastate.transport.DeadLetterBox` (list, replay to the event queue, drop)."""
        if self.settings.dlq_url is None:
            raise DeadLetterUnavailable("no DURASTATE_DLQ_URL configured: there is no dead-letter queue to read")
        return SqsDeadLetters(self.sqs, self.settings.dlq_url, self.settings.queue_url)

    # -- timers ----------------------------------------------------------------------------------------
    def _hop_armed(self, exe: Execution, timers: Sequence[TimerOp]) -> None:
        """After the worker's commit: hop the timers it armed that are due within the horizon (best effort:
        if this process dies first, the timer is still in the timers table and the sweeper fires it)."""
        now = self.clock()
        due = [(exe.id, timeout_event(exe.id, op.path, op.fire_at)) for op in timers
               if op.action == "schedule" and op.fire_at is not None and op.fire_at <= now + HOP_HORIZON
               and not is_system_id(exe.id)]
        if due and self.timer_hops is not None:
            self.timer_hops.send(due, now)

    def fire_timers(self, records: Sequence[tuple[str, str]], *,
                    sleep: Callable[[float], None] = time.sleep) -> tuple[dict[Outcome, int], list[str]]:
        """The timers function: apply the timeouts of ``(message id, body)`` hops that are due.

        They are applied right here, as the worker would (dedupe marks, the execution's compare-and-swap,
        the stale-timer check, dead letters), not forwarded to the FIFO queue: that would be a second
        request per timer. A timeout has no place in a producer's order anyway — it is the clock's event —
        and the compare-and-swap makes its commit and a concurrent worker's serial, in some order.

        SQS delays in whole seconds and the hop was delayed by the whole seconds left, so a hop arrives up
        to a second early: wait out that fraction, so that no timer fires early. A hop that arrives earlier
        still (a clock that moves faster than real time) goes back with the delay left. A body that is
        not a timeout in the wire format is dropped with a warning (only durastate sends here). A schedule
        record's tick (a system id) starts what is due through :meth:`Sweeper.fire_schedule`, which hops the
        next tick. Returns the outcomes and the ids of the records that failed for now (SQS redelivers them).
        """
        hops: list[tuple[float, str, str, Envelope]] = []
        for message_id, body in records:
            try:
                env = parse_envelope(body)
            except MalformedEvent as exc:
                log.warning("dropped a timers-queue message that is not the wire format: %s", exc)
                continue
            fire_at = hop_fire_at(env)
            if fire_at is None:
                log.warning("dropped %s %s from the timers queue: only timeouts hop", env.event.name, env.event.id)
                continue
            if fire_at - self.clock() > MAX_HOP_WAIT:
                if self.timer_hops is not None:
                    self.timer_hops.send([(env.target_id, env.event)], self.clock())
                continue
            hops.append((fire_at, message_id, body, env))
        counts: dict[Outcome, int] = {}
        failed: list[str] = []
        for fire_at, message_id, body, env in sorted(hops, key=lambda h: h[:2]):
            wait = fire_at - self.clock()
            if wait > 0:
                sleep(wait)
            try:
                if is_system_id(env.target_id):  # a schedule's tick: start what is due, hop the next one
                    self.sweeper.fire_schedule(env.target_id, str(env.event.data.get("path")), fire_at)
                    outcome: Outcome = "applied"
                else:
                    outcome = self.process(body, message_id=message_id)
            except Exception:
                log.warning("timeout of hop %s not applied; SQS redelivers it", message_id, exc_info=True)
                failed.append(message_id)
                continue
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts, failed

    # -- relay / sweeper -------------------------------------------------------------------------------
    def run_relay(self, budget: int | None = None,
                  remaining_ms: Callable[[], int] | None = None, reserve_ms: int = 5000,
                  max_passes: int = 20, shards: Collection[int] | None = None) -> tuple[RelayStats, int]:
        """Relay passes (spawns first, then the outbox) of ``budget`` items each.

        Another pass runs only while the previous one used its whole budget (there may be more) and the
        Lambda has more than ``reserve_ms`` left; what remains is picked up by the next stream trigger or
        the scheduled backstop. ``shards``: only the queue shards a stream batch inserted into (see
        :meth:`Relay.run_once`; the backstop reads them all). Returns the summed stats and the number of
        passes.
        """
        per_pass = budget or self.settings.relay_budget
        total = RelayStats(0, 0, 0)
        passes = 0
        while passes < max_passes:
            stats = self.relay.run_once(max_items=per_pass, shards=shards)
            passes += 1
            total = RelayStats(total.spawned + stats.spawned, total.sent + stats.sent,
                               total.published + stats.published, total.tasks + stats.tasks)
            if stats.spawned + stats.sent + stats.published + stats.tasks < per_pass:
                break
            if remaining_ms is not None and remaining_ms() < reserve_ms:
                break
        return total, passes

    def run_sweeper(self, limit: int | None = None) -> int:
        """One bounded sweep: at most ``limit`` due timers fire; a backlog drains over several runs.

        The first run of a container first stores the deployment's schedules (:meth:`sync_schedules`); if
        that fails it is logged, the sweep goes on, and the next run tries again."""
        if not self.schedules_synced:
            try:
                self.sync_schedules()
            except Exception:
                log.exception("schedules were not stored (the next sweeper run tries again)")
        return self.sweeper.run_once(limit=limit or self.settings.sweep_limit)

    def sync_schedules(self) -> SyncReport | None:
        """Store the schedules of the definitions folder and ``DURASTATE_SCHEDULES``: one read per schedule
        (a write only for a new or changed one) and one listing to find removed ones. None when the
        deployment has no schedules source at all (nothing is read)."""
        specs = schedules_from(self.settings.definitions_dir, self.settings.schedules, self.registry.ids())
        report = None if specs is None else sync_schedules(self.store, specs, self.clock())
        self.schedules_synced = True
        if report is not None and (report.created or report.updated or report.removed):
            log.info("schedules stored: added %s, updated %s, removed %s", report.created, report.updated,
                     report.removed)
        return report

    def run_retention(self) -> RetentionRun | None:
        """The sweeper's retention step (``DURASTATE_RETENTION_SECONDS``): a few bounded purge batches,
        so a backlog drains over several runs; ``None`` when retention is off."""
        if self.settings.retention is None:
            return None
        return Retention(self.store, self.settings.retention, self.clock,
                         max_batches=self.settings.retention_batches,
                         tombstone_ttl=self.settings.tombstone_ttl).run_once()


def build_runtime(settings: AwsSettings | None = None, *, clock: Clock = time.time,
                  dynamodb: Any = None, sqs: Any = None, events: Any = None, s3: Any = None,
                  store: ExecutionStore | None = None,
                  registry: DefinitionRegistry | None = None) -> AwsRuntime:
    """Build an :class:`AwsRuntime`; clients (or the store / registry) may be injected, else boto3 is used.

    The tables are expected to exist (the CDK stack owns them); the Lambda roles have no CreateTable.
    """
    settings = settings or AwsSettings.from_env()
    if registry is None:
        registry = _load_registry(settings.definitions_dir)
    if store is None or sqs is None or (events is None and settings.event_bus_name):
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        cfg = Config(retries={"mode": "standard", "max_attempts": 8})
        if store is None and dynamodb is None:
            dynamodb = boto3.client("dynamodb", region_name=settings.region, config=cfg)
        if store is None and s3 is None and settings.context_bucket:
            s3 = boto3.client("s3", region_name=settings.region, config=cfg)
        if sqs is None:
            sqs = boto3.client("sqs", region_name=settings.region, config=cfg)
        if events is None and settings.event_bus_name:
            events = boto3.client("events", region_name=settings.region, config=cfg)
    if store is None:
        from durastate.store.dynamodb.sync import DynamoDBStore

        store = DynamoDBStore(dynamodb, prefix=settings.table_prefix, record_trace=settings.trace,
                              processed_ttl=settings.processed_ttl, trace_ttl=settings.trace_ttl,
                              history=settings.history, context_bucket=settings.context_bucket,
                              claim_check_bytes=settings.claim_check_bytes, s3=s3)
        built_store = True
    else:
        built_store = False
    transport: Transport
    if settings.queue_url:
        from durastate.transport.sqs import SqsTransport

        transport = SqsTransport(sqs, settings.queue_url, dlq_url=settings.dlq_url)
    else:
        transport = _UnconfiguredTransport()
    sink: Sink
    if settings.event_bus_name:
        from durastate.transport.eventbridge import EventBridgeSink

        sink = EventBridgeSink(events, settings.event_bus_name)
    else:
        sink = LogSink()
    runtime = AwsRuntime(settings, store, registry, transport, sink, sqs, clock=clock)
    if built_store and not settings.trace:  # the trace-on-failure mode: only a failed step is recorded
        runtime.worker.trace, runtime.worker.trace_failures = False, True
    return runtime


def _load_registry(folder: Path) -> DefinitionRegistry:
    if not folder.is_dir():
        raise DefinitionError([f"definitions folder {str(folder)!r} does not exist: package your definition "
                               "files with the function or set DURASTATE_DEFINITIONS_DIR"])
    return load_folder(folder)


_cache: AwsRuntime | None = None
_cache_lock = threading.Lock()


def get_runtime(default_definitions_dir: str | Path | None = None) -> AwsRuntime:
    """The container's runtime, built on first use from the environment and reused while warm."""
    global _cache
    with _cache_lock:
        if _cache is None:
            _cache = build_runtime(AwsSettings.from_env(default_definitions_dir=default_definitions_dir))
        return _cache


def set_runtime(runtime: AwsRuntime | None) -> None:
    """Install a runtime for the handlers (the local stack and tests inject clocks), or clear the cache."""
    global _cache
    with _cache_lock:
        _cache = runtime
