"""The relay: moves what committed steps left behind — spawn intents and outbox entries — onward.

A commit writes emitted events and child-spawn intents into the store atomically with the execution;
the relay delivers them afterwards and acks each one only once it has been delivered. A crash between
delivery and ack delivers it again on the next pass, which changes nothing: child creation is an
insert-if-absent, and the worker dedupes redelivered event ids.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from durastate.engine import DefinitionRegistry, step
from durastate.engine.ids import FINISHED, TASK, finished_event_id, start_event_id
from durastate.engine.model import START, Event, Execution
from durastate.engine.tracing import step_details
from durastate.errors import DeliveryFailed, StoreConflict
from durastate.runtime.clock import Clock
from durastate.runtime.keys import give_secret
from durastate.runtime.tasks import TaskRunner, is_cancel, run_cancels, run_tasks
from durastate.runtime.telemetry import CommitSpan, Telemetry, spawned_by
from durastate.runtime.versions import Versions
from durastate.store.base import ExecutionStore, OutboxEntry, SpawnEntry, TimerOp, keeps_history
from durastate.transport.base import Sink, Transport

__all__ = ["Relay", "RelayStats"]

log = logging.getLogger("durastate.runtime")

UNDELIVERABLE = "durastate.undeliverable"
"""The notification a relay publishes for an emitted event its transport rejected for good."""


@dataclass(frozen=True, slots=True)
class RelayStats:
    spawned: int = 0
    """Spawn intents acked (children created, or found already created)."""
    sent: int = 0
    """Targeted outbox entries handed to the transport and acked."""
    published: int = 0
    """Untargeted outbox entries published to the sink (or dropped with a log line when there is none)."""
    tasks: int = 0
    """Task requests run and answered (:mod:`durastate.runtime.tasks`)."""

    def __bool__(self) -> bool:
        return bool(self.spawned or self.sent or self.published or self.tasks)


class Relay:
    """Drains ``store``'s spawn intents and outbox into ``transport`` (and ``sink``)."""

    def __init__(self, store: ExecutionStore, registry: DefinitionRegistry, transport: Transport,
                 sink: Sink | None = None, clock: Clock = time.time, *, batch_size: int = 10,
                 tasks: TaskRunner | None = None, telemetry: Telemetry | None = None) -> None:
        self.store = store
        self.registry = registry
        self.versions = Versions(store, registry, clock)
        self.transport = transport
        self.sink = sink
        self.clock = clock
        self.batch_size = max(1, batch_size)
        self.tasks = tasks if tasks is not None else TaskRunner()
        """Runs the task requests of the outbox (``invoke: {task: ...}``) before their answers are sent."""
        self.telemetry = telemetry if telemetry is not None else Telemetry()
        """Where the span of a region child's creation goes (:mod:`durastate.runtime.telemetry`)."""
        self.undeliverable: list[tuple[OutboxEntry, str]] = []
        """Outbox entries dropped because the transport can never deliver them, with the reason."""
        self.on_commit: Callable[[Execution, Sequence[TimerOp]], None] | None = None
        """Called after a region child's creation is committed, with its timer operations (the AWS runtime
        hops the timers it armed within SQS's delay horizon); best effort, an exception is logged."""

    def run_once(self, max_items: int | None = None, *, shards: Collection[int] | None = None) -> RelayStats:
        """One pass: spawns first, then the outbox, at most ``max_items`` items in all.

        The outbox is *read* before the spawns, and spawns are *created* before the outbox is sent: an
        event in this outbox snapshot was committed no later than any spawn of the child it targets, so
        that child exists before the event leaves — a region never receives an event before it exists.

        ``shards``: the queue shards known to have work (the DynamoDB stream trigger names them); a store
        that shards its queues (``reads_queue_shards``) then reads only those, others ignore it. Both
        tables are read for each: a parent's spawn intents and the events it forwards to its regions share
        its shard, so the order above holds within a shard.
        """
        # Read only the budget (oldest first): a pass costs what it delivers, not the backlog.
        budget = None if max_items is None else max(0, max_items)
        if shards is not None and getattr(self.store, "reads_queue_shards", False):
            store: Any = self.store
            outbox = store.pending_outbox(budget, shards=shards)
            spawns = store.pending_spawns(budget, shards=shards)
        else:
            outbox = self.store.pending_outbox(budget)
            spawns = self.store.pending_spawns(budget)
        if budget is not None:
            # Spawns spend the budget first; the outbox gets what is left (nothing, if a spawn was deferred,
            # so no event can overtake the creation of the child it targets).
            outbox = outbox[: budget - len(spawns)]
        spawned = self._spawn_all(spawns)
        requests = [e for e in outbox if e.event.name == TASK]
        cancels = [e for e in outbox if is_cancel(e)]
        if requests or cancels:
            outbox = [e for e in outbox if e.event.name != TASK and not is_cancel(e)]
        sent, published = self._drain(outbox)
        ran = run_tasks(self.tasks, requests, self.transport, self.store.ack_outbox) if requests else 0
        if cancels:  # after the requests: a task is still run at least once, even one given up on already
            run_cancels(self.tasks, cancels, self.store.ack_outbox)
        return RelayStats(spawned, sent, published, ran)

    # -- spawns -------------------------------------------------------------------------------------
    def _spawn_all(self, spawns: Sequence[SpawnEntry]) -> int:
        for s in spawns:
            self.create_child(s)
            self.store.ack_spawn(s.seq)
        return len(spawns)

    def create_child(self, s: SpawnEntry) -> None:
        """Create the region child of one spawn intent, unless it exists already (idempotent)."""
        existing = self.store.load(s.child_id)
        if existing is not None:
            if existing.parent_id != s.parent_id or existing.root_path != s.root_path:
                self._refuse_adoption(s, existing)
            return  # created by an earlier pass (idempotent)
        parent = self.store.load(s.parent_id)
        if parent is None:
            log.error("spawn %s: parent %s no longer exists; child %s not created", s.seq, s.parent_id,
                      s.child_id)
            return
        defn = self.versions.of(parent)  # a region runs on its parent's version
        now = self.clock()
        child = Execution(id=s.child_id, definition_id=parent.definition_id,
                          definition_fqn=parent.definition_fqn, definition_version=parent.definition_version,
                          parent_id=parent.id, child_id=s.child_id,
                          root_path=s.root_path, context=dict(s.context), created_at=now)
        give_secret(child)  # its region may emit or start a task in this very step
        start = Event(id=start_event_id(s.child_id), name=START)
        began = time.time_ns()
        res = step(defn, child, start, now, detail=True)
        archive = keeps_history(self.store)
        step_details(res.trace, now, start, res.emits, res.timers, res.spawns, (s.context, child.context),
                     archive=archive)
        if archive:  # a region child's start carries no data: what a replay starts it from
            res.trace["seed"] = {"context": dict(s.context), "root_path": s.root_path, "parent_id": parent.id}
        emits, span = res.emits, None
        tracer = self.telemetry.tracer()
        if tracer is not None:  # the region's root span: a child of the parent's span that spawned it
            span = CommitSpan.begin(tracer, child, start, cause=spawned_by(parent, s.child_id), start_ns=began)
            emits = span.prepare(child, emits, res.timers, res.spawns)
        try:
            self.store.commit(child, emits, processed_event_id=start.id, timers=res.timers,
                              spawns=res.spawns, trace=res.trace)
        except StoreConflict:
            log.debug("spawn %s: child %s already exists", s.seq, s.child_id)
            return
        if span is not None:
            try:
                span.end(child, "applied", res.trace, 1)
            except Exception:  # the commit stands; a span is observability
                log.warning("the span of region %s was not recorded", child.id, exc_info=True)
        if self.on_commit is not None and res.timers:
            try:
                self.on_commit(child, res.timers)
            except Exception:
                log.warning("after-commit hook failed for %s", child.id, exc_info=True)

    def _refuse_adoption(self, s: SpawnEntry, existing: Execution) -> None:
        """A region's id is taken by an execution that is not that region: never adopt it.

        Child ids live in a namespace user ids cannot enter, so this means data written by something
        else. The parent is told its region failed (its ``on_error`` can react) rather than wait forever.
        """
        reason = (f"region {s.root_path} of {s.parent_id}: id {s.child_id} is taken by an execution that is not "
                  f"this region (parent {existing.parent_id!r}, region {existing.root_path!r}); not adopted")
        log.error("spawn %s: %s", s.seq, reason)
        notice = Event(id=finished_event_id(s.child_id), name=FINISHED, data={
            "child_id": s.child_id, "status": "failed", "outcome": None, "output": {}, "error": reason})
        self.transport.send([(s.parent_id, notice)])

    # -- outbox -------------------------------------------------------------------------------------
    def _drain(self, entries: Sequence[OutboxEntry]) -> tuple[int, int]:
        sent = published = 0
        batch: list[OutboxEntry] = []
        notices: list[OutboxEntry] = []
        for entry in entries:
            if entry.target_id is None:
                notices.append(entry)
            else:
                batch.append(entry)
                if len(batch) >= self.batch_size:
                    sent += self._send(batch)
                    batch = []
        if batch:
            sent += self._send(batch)
        if notices:
            published = self._publish(notices)
        return sent, published

    def _send(self, batch: list[OutboxEntry]) -> int:
        try:
            self.transport.send([(e.target_id, e.event) for e in batch if e.target_id is not None])
        except DeliveryFailed as err:
            # Ack what went and what never can (else one poison entry stalls the relay for everyone);
            # leave the rest for the next pass, which sends it again (deduplicated downstream). Per
            # target, nothing after an entry left for the next pass is acked, even if the transport
            # says it went: the re-sent entry would arrive behind it, out of order. (The transports
            # hold such entries back themselves; this keeps a target's order whatever a transport does.)
            failed = {key for key, _, _ in err.failures}
            held: set[str | None] = set()  # targets with an entry left for the next pass
            for e in batch:
                if e.event.id in err.permanent:
                    self._undeliverable(e, err)
                    self.store.ack_outbox(e.seq)
                elif e.event.id in failed or e.target_id in held:
                    held.add(e.target_id)
                else:
                    self.store.ack_outbox(e.seq)
            if held:
                raise
            return len(batch)
        for e in batch:
            self.store.ack_outbox(e.seq)
        return len(batch)

    def _undeliverable(self, e: OutboxEntry, err: DeliveryFailed) -> None:
        """An entry the transport rejects for good: logged, and announced on the sink when there is one."""
        reason = next((f"{code} {msg}".strip() for key, code, msg in err.failures if key == e.event.id), "")
        log.error("outbox %s: event %s (%s) to %s can never be delivered (%s); dropped", e.seq, e.event.id,
                  e.event.name, e.target_id, reason)
        self.undeliverable.append((e, reason))
        if self.sink is not None:
            self.sink.publish([Event(id=f"{e.event.id}:undeliverable", name=UNDELIVERABLE,
                                     data={"target_id": e.target_id, "event": e.event.model_dump(),
                                           "reason": reason})])

    def _publish(self, notices: list[OutboxEntry]) -> int:
        if self.sink is None:
            for e in notices:
                log.info("notification %s (%s) dropped: no sink configured", e.event.name, e.event.id)
        else:
            try:
                self.sink.publish([e.event for e in notices])
            except DeliveryFailed as err:
                # Ack what was published and what never can be; the rest is published again next pass
                # (a notification has no target and a bus no order: nothing else to hold back).
                failed = {key for key, _, _ in err.failures}
                for e in notices:
                    if e.event.id in err.permanent:
                        reason = next((f"{c} {m}".strip() for k, c, m in err.failures if k == e.event.id), "")
                        log.error("notification %s (%s) can never be published (%s); dropped", e.event.name,
                                  e.event.id, reason)
                    elif e.event.id in failed:
                        continue
                    self.store.ack_outbox(e.seq)
                if failed - err.permanent:
                    raise
                return len(notices)
        for e in notices:
            self.store.ack_outbox(e.seq)
        return len(notices)
