"""The durable data of durastate: :class:`Execution` (one running statechart instance) and :class:`Event`.

Both are pydantic models whose JSON form is what every store persists and every transport carries, so a
JSON round trip must be exact. They hold data only; the interpreter (``durastate.engine.interpreter``)
is the one place that changes an execution.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from durastate.engine.ids import (
    CANCEL,
    FINISHED,
    RESERVED_PREFIX,
    START,
    SYSTEM_PREFIX,
    TIMEOUT,
    reserved_id_problem,
)
from durastate.engine.values import check_event_id, check_json, printable

EventKind = Literal["external", "internal", "platform"]
"""How an event came to an execution (:attr:`Event.kind`)."""
ParentClose = Literal["cancel", "terminate", "abandon"]
"""What an invoked child does when its parent leaves the invoking state or ends (``invoke.parent_close``)."""
PARENT_CLOSE: tuple[ParentClose, ...] = ("cancel", "terminate", "abandon")

Status = Literal["running", "suspended", "finished", "failed", "cancelled", "terminated", "purged"]
STATUSES: tuple[Status, ...] = (
    "running", "suspended", "finished", "failed", "cancelled", "terminated", "purged"
)
ENDED: frozenset[str] = frozenset(("finished", "failed", "cancelled", "terminated", "purged"))
"""The statuses an execution never leaves (but ``failed``, by a redrive; and every other one but ``purged``
by a purge). ``purged`` marks a tombstone: what a purge leaves of an ended execution (see
``durastate.store.retention``) so that a repeated start or a late event is still recognised."""

__all__ = [
    "CANCEL",
    "ENDED",
    "FINISHED",
    "PARENT_CLOSE",
    "RESERVED_PREFIX",
    "START",
    "STATUSES",
    "TIMEOUT",
    "TRACEPARENT",
    "ChildRef",
    "Emit",
    "Event",
    "EventKind",
    "Execution",
    "Failure",
    "MapProgress",
    "ParentClose",
    "PendingRetry",
    "Spawn",
    "Status",
    "TimerOp",
    "new_id",
]


TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
"""A W3C trace context ``traceparent`` header, version 00: ``00-<trace id>-<parent span id>-<flags>``."""


def new_id() -> str:
    """A fresh execution or event id (uuid4 hex)."""
    return uuid.uuid4().hex


class Event(BaseModel):
    """Something that happens to an execution. ``id`` is the dedupe key: the same id is applied once."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id, min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=256)
    data: dict[str, Any] = Field(default_factory=dict)
    traceparent: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The W3C trace context of the span that sent the event (``00-<trace id>-<span id>-<flags>``), when the
    sender was traced: what links the span that applies it to the one that caused it
    (:mod:`durastate.runtime.telemetry`). Observability only: it never changes what a step does, and it is
    left out of the stored JSON while ``None``."""

    kind: EventKind = Field(default="external", exclude_if=lambda v: v == "external")
    """How the event came (SCXML's ``_event.type``): ``external`` (from outside the step: a client, a timer, a
    ``send``, a child), ``internal`` (a ``raise`` of the same step) or ``platform`` (raised by the engine itself:
    a ``done`` event, ``error.execution``). Set by the engine, read as ``$meta.kind``; left out of the stored
    JSON while ``external``, so events stored before it existed load as what they were."""
    send_id: str | None = Field(default=None, max_length=256, exclude_if=lambda v: v is None)
    """The id of the ``send`` that sent it, when that send had one (SCXML's ``_event.sendid``), or of the send
    whose failure an ``error.execution`` reports; ``$meta.send_id``."""
    origin: str | None = Field(default=None, max_length=128, exclude_if=lambda v: v is None)
    """The execution whose ``send`` action sent it (SCXML's ``_event.origin``): what a reply's ``to`` names;
    ``$meta.origin``. ``None``: it came from outside every execution, or from the step itself."""

    @field_validator("id")
    @classmethod
    def _printable_id(cls, v: str) -> str:
        return check_event_id(v)

    @field_validator("name")
    @classmethod
    def _printable_name(cls, v: str) -> str:
        return check_event_id(v, "event name")

    @field_validator("send_id", "origin")
    @classmethod
    def _printable_ids(cls, v: str | None) -> str | None:
        return None if v is None else check_event_id(v, "send id or origin")

    @field_validator("data")
    @classmethod
    def _storable_data(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_json(v, "event.data")
        return v

    @field_validator("traceparent")
    @classmethod
    def _w3c_traceparent(cls, v: str | None) -> str | None:
        if v is not None and TRACEPARENT.fullmatch(v) is None:
            raise ValueError(f"traceparent {printable(v[:80])!r} is not a W3C trace context (00-<32 hex trace id>-"
                             "<16 hex span id>-<2 hex flags>, lower case); leave it out if there is none")
        return v

    @model_validator(mode="after")
    def _own_namespace(self) -> Event:
        """An id in a reserved event's namespace (``~timeout:…``) is that event's alone: see
        :func:`durastate.engine.ids.reserved_event_id` for why."""
        if self.id.startswith(SYSTEM_PREFIX):
            problem = reserved_id_problem(self.id, self.name)
            if problem is not None:
                raise ValueError(problem)
        return self


class ChildRef(BaseModel):
    """What a parent knows about one child execution it forked (a region) or invoked."""

    model_config = ConfigDict(extra="forbid")

    path: str
    """The parent's state that owns the child: the region's root path, or the invoking state's path."""
    kind: Literal["region", "invoke", "map", "task"] = "region"
    """``map``: a child of a state's ``map`` (:mod:`durastate.engine.fanout`); ``task``: not an execution but a
    task run outside the commit (:mod:`durastate.engine.tasks`)."""
    status: Status = "running"
    outcome: str | None = None
    attempt: int = Field(default=1, exclude_if=lambda v: v == 1)
    """Which try of the invoke this child is (an ``invoke`` with a ``retry`` policy starts a new child
    after a failed one); left out of the stored JSON while it is the first."""
    index: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """A ``map`` child only: the position of its item in the list (:mod:`durastate.engine.fanout`)."""
    parent_close: ParentClose = Field(default="cancel", exclude_if=lambda v: v == "cancel")
    """An invoked child only: what happens to it when the parent leaves the invoking state or ends (the
    invoke's ``parent_close``): ``cancel`` it (the default), ``terminate`` it, or ``abandon`` it."""
    abandoned: bool = Field(default=False, exclude_if=lambda v: not v)
    """The parent left it running (``parent_close: abandon``): kept only so that its ``durastate.finished``
    notice is recognised, traced as ignored, and forgotten."""
    heartbeat: Any = Field(default=None, exclude_if=lambda v: v is None)
    """A ``task`` only: the details of its last heartbeat (JSON the task chose: progress, a checkpoint);
    left out while it has sent none."""
    heartbeat_at: float | None = Field(default=None, exclude_if=lambda v: v is None)
    """A ``task`` only: when its last heartbeat was applied (the worker's clock)."""


def _empty(value: object) -> bool:
    return not value


class MapProgress(BaseModel):
    """The counters and results of one active ``map`` state (:mod:`durastate.engine.fanout`).

    Counters rather than one :class:`ChildRef` per item: only the running children (at most the map's
    ``max_concurrency``) are in ``Execution.children``, so a list of 10,000 items costs the parent its
    items and outputs, not 10,000 references.
    """

    model_config = ConfigDict(extra="forbid")

    total: int
    """How many items the list had on entry."""
    started: int = 0
    """How many children were started so far: the next item to start is ``items[started]``."""
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    """Children the map cancelled itself when it stopped (one failure too many)."""
    pending: list[Any] = Field(default_factory=list)
    """The items not started yet, in order (taken from the front as their children start)."""
    outputs: list[Any] = Field(default_factory=list)
    """One per started item, in item order: what the map keeps of its finished child (``null`` until then,
    and for a failed one). It grows as ``pending`` shrinks, so the parent never holds a slot for an item
    twice."""
    failures: list[dict[str, Any]] = Field(default_factory=list)
    """The failed children (``index``, ``child_id``, ``status``, ``error``), in the order they failed."""
    running_items: dict[str, Any] = Field(default_factory=dict, exclude_if=_empty)
    """A map with a ``retry`` policy only: the item of each running child, by index, so a failed one can
    start again (at most ``max_concurrency`` of them)."""
    retries: list[dict[str, Any]] = Field(default_factory=list, exclude_if=_empty)
    """A map with a ``retry`` policy only: the failed items waiting for their next try (``index``,
    ``attempt``, ``item``, ``at``), in the order they failed; each keeps its place in the window."""

    @property
    def running(self) -> int:
        """Children started and not ended yet (0 once the map stopped after one failure too many)."""
        return self.started - self.done - self.failed - self.cancelled


class Failure(BaseModel):
    """What a failed execution keeps so that it can be redriven: the event whose step failed and the
    execution as it stood before that step (as committed: the stored version the step started from)."""

    model_config = ConfigDict(extra="forbid")

    event: Event
    before: dict[str, Any]
    """The fields a redrive restores: active_path, leaves, history, context, timers, sends, children,
    invoke_seq, maps."""
    redrives: int = 0
    """How many times this execution was redriven so far (names the re-applied event's id)."""


class PendingRetry(BaseModel):
    """A step that failed with a retry policy left: the event to apply again when the retry timer fires."""

    model_config = ConfigDict(extra="forbid")

    event: Event
    attempt: int
    """The attempt that failed (1 = the first try); 0: not a retry but a redrive, whose event comes back
    through the outbox (the execution waits for it, holding later events)."""
    error: str
    fire_at: float


class Execution(BaseModel):
    """One running (or ended) instance of a definition; the unit a store commits atomically."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    id: str = Field(default_factory=new_id, min_length=1, max_length=128)
    definition_id: str
    definition_fqn: str | None = None
    definition_version: str | None = Field(default=None, exclude_if=_empty)
    """The version (:func:`durastate.engine.versions.definition_version`) of its definition it started on
    and keeps running on after the definition file changes; ``None``: started before durastate recorded
    versions, so it runs on the newest. Left out of the stored JSON while ``None``."""
    status: Status = "running"
    outcome: str | None = None
    error: str | None = None
    active_path: str | None = None
    """Dotted path of the active leaf; ``None`` until the start event has been applied.

    Parallel regions run as child executions by default, so the execution has one active leaf: while it
    sits in such a parallel state, the leaf is that parallel state itself. Inside a ``regions: inline``
    parallel state several leaves are active: see :attr:`leaves`.
    """
    leaves: list[str] = Field(default_factory=list, exclude_if=_empty)
    """The active leaves while more than one is active (inside a ``regions: inline`` parallel state), in
    document order; ``active_path`` is then their deepest common ancestor (that parallel state). Empty (and
    left out of the stored JSON) while one leaf is active: ``active_path`` is that leaf."""
    root_path: str | None = None
    """For a region child: the region's path in the shared definition (it runs only that subtree)."""
    history: dict[str, str] = Field(default_factory=dict)
    """History memory: compound state path -> the leaf that was active when it was last exited."""
    context: dict[str, Any] = Field(default_factory=dict)
    version: int = 0
    parent_id: str | None = None
    child_id: str | None = None
    """The key the parent knows this child by (an entry of the parent's ``children``)."""
    children: dict[str, ChildRef] = Field(default_factory=dict)
    invoke_seq: int = 0
    timers: dict[str, float] = Field(default_factory=dict)
    """Armed timers: state path -> fire_at (epoch seconds). A timeout whose fire_at differs is stale."""
    sends: dict[str, Event] = Field(default_factory=dict, exclude_if=_empty)
    """Delayed ``send`` actions not delivered yet: timer key (``~send:<id>``) -> the event, its data evaluated
    when it was sent; the timer of the same key in :attr:`timers` applies it. Left out of the stored JSON
    while empty."""
    maps: dict[str, MapProgress] = Field(default_factory=dict, exclude_if=_empty)
    """The active ``map`` states: state path -> their progress. Left out of the stored JSON while empty."""
    created_at: float | None = None
    updated_at: float | None = None
    search: dict[str, str | float | bool | None] = Field(default_factory=dict, exclude_if=_empty)
    """The values of its definition's search fields (:func:`durastate.engine.search.search_values`) as of
    its last step: what the store indexes with each commit. Empty (and left out of the stored JSON) when
    the definition declares none."""
    secret: str | None = Field(default=None, exclude_if=_empty, repr=False)
    """A random key the runtime gives each execution when it first steps it, from which the engine derives
    its task ids and the ids of the events it emits and forwards (:func:`durastate.engine.ids.task_id`,
    :func:`~durastate.engine.ids.emit_event_id`, :func:`~durastate.engine.ids.forwarded_event_id`): what
    makes a task's answer unforgeable, and those events' ids impossible to claim first, by someone who can
    only enqueue events. It is stored with the execution and nowhere else: no event, trace step, ``show``
    output or emitted data carries it. ``None``: those ids are the plain ``<id>~<n>``, ``<id>:<version>:<n>``
    and ``<event id>:<child id>`` (an execution stepped by the engine alone, or not stepped by a worker since
    before executions had one)."""
    # Recovery and control. Empty on the happy path and then left out of the stored JSON entirely, so
    # an execution that never failed, paused or retried pays nothing for them.
    reason: str | None = Field(default=None, exclude_if=_empty)
    """Why the execution was cancelled, terminated or suspended, as the caller said (``--reason``)."""
    held: list[Event] = Field(default_factory=list, exclude_if=_empty)
    """Events that arrived while the execution was suspended or waiting for a retry, in arrival order;
    they are applied, in order, when it resumes or the retry succeeds."""
    failure: Failure | None = Field(default=None, exclude_if=_empty)
    """What a redrive needs, recorded with the failure (``status == "failed"``)."""
    retry: PendingRetry | None = Field(default=None, exclude_if=_empty)
    """A retry armed by a retry policy and not fired yet."""
    # Retention. Set by the store, left out of the stored JSON while unset.
    ended_at: float | None = Field(default=None, exclude_if=lambda v: v is None)
    """When the execution ended (the ``updated_at`` of the commit that ended it); what a purge's cutoff
    compares. Cleared by a redrive, kept by the ignored events an ended execution still consumes."""
    expires_at: float | None = Field(default=None, exclude_if=lambda v: v is None)
    """A tombstone's (``status == "purged"``) expiry: after it the tombstone and its dedupe marks go."""
    # OpenTelemetry (durastate.runtime.telemetry). Set only while a tracer provider is configured, and left
    # out of the stored JSON otherwise: an untraced execution pays nothing for them.
    traceparent: str | None = Field(default=None, exclude_if=_empty)
    """The W3C trace context of the span of the execution's first traced commit (its start): every later
    span of the execution is its child, so the spans of one execution share one trace."""
    trace_links: dict[str, str] = Field(default_factory=dict, exclude_if=_empty)
    """The span (id, in :attr:`traceparent`'s trace) of the commit that armed each armed timer (by state path)
    and spawned each running region child (by child id): what the timeout's span, and the region's start
    span, link to. Entries go when their timer or child does."""


# -- what a step asks to commit with the execution ------------------------------------------------------
Emit = tuple[str | None, Event]
"""An emitted event: (target execution id or None for an untargeted notification, event)."""
Spawn = tuple[str, str, dict[str, Any]]
"""A spawn intent: (child id, root path of the region in the parent's definition, seed context)."""


@dataclass(frozen=True, slots=True)
class TimerOp:
    """Arm (``schedule``) or disarm (``cancel``) the durable timer of the state at ``path``."""

    action: Literal["schedule", "cancel"]
    path: str
    fire_at: float = 0.0
