"""The nodes of a definition: states, transitions, timers, invokes and maps, as pydantic models.

Below :mod:`durastate.engine.definition` (the whole chart, its loader and its validation, which compiles the
tables): the compilers of tables, tasks, maps and inline regions read these nodes and need not import the
definition that calls them. :class:`Chart` is what the table builder reads of the whole chart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["After", "Chart", "Invoke", "Map", "State", "StateType", "Transition"]

StateType = Literal["atomic", "compound", "parallel", "final", "history"]
_STATE_TYPES: tuple[str, ...] = ("atomic", "compound", "parallel", "final", "history")


def _as_list(v: Any) -> Any:
    """``x`` -> ``[x]``; ``None`` -> ``[]``; lists unchanged (shorthand for one-item lists)."""
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _nulls_as_empty(v: Any) -> Any:
    """A ``states`` mapping with each null child as ``{}``: ``b: {}`` and ``b:`` (YAML null) both mean an
    empty atomic state (a state's children and a definition's top-level states alike)."""
    if isinstance(v, Mapping):
        return {k: ({} if s is None else s) for k, s in v.items()}
    return v


class Transition(BaseModel):
    """``{target?, guard?, actions?, internal?}``; a bare string is a target.

    No target: the actions run and the configuration does not change (no exit, no entry).
    ``internal: true`` with a target strictly inside a compound source: the source is neither exited nor
    re-entered. With any other target (the source itself, or a state outside it) ``internal`` changes
    nothing: the transition is external, as in SCXML.

    ``parallel_domain: true`` takes XState's domain instead of SCXML's: the innermost state holding both the
    source and the target whatever its kind, so a transition between regions of an inline parallel state
    exits and re-enters the regions but not the parallel state itself (SCXML leaves it), and ``internal``
    also keeps an inline parallel source.

    ``defer: true`` (XState's selection, for an ``on`` transition): where several leaves are active (inside
    an inline parallel state), the transition is taken for an event only when no state below its source
    takes one; SCXML lets each leaf pick its own, so a leaf that finds no transition of its own takes its
    ancestor's while another leaf takes a transition of its region.
    """

    model_config = ConfigDict(extra="forbid")

    target: str | None = None
    guard: Any = None
    actions: list[Any] = Field(default_factory=list)
    internal: bool = False
    parallel_domain: bool = False
    defer: bool = False

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"target": data}
        if data is None:
            return {}
        return data

    @field_validator("actions", mode="before")
    @classmethod
    def _actions_list(cls, v: Any) -> Any:
        return _as_list(v)


class After(BaseModel):
    """A delayed transition of a state: armed on entry, cancelled on exit (a state may have several).

    Exactly one of ``seconds`` (a delay: a number, a duration such as ``"15m"`` or ``"2d 3h"``, or an
    expression such as ``$context.backoff``) and ``at`` (a deadline: ISO 8601 text, epoch seconds, or an
    expression such as ``$context.deadline``); constants are checked at load, expressions on entry
    (:mod:`durastate.engine.timers`).
    """

    model_config = ConfigDict(extra="forbid")

    seconds: Any = None
    at: Any = None
    target: str | None = None
    guard: Any = None
    actions: list[Any] = Field(default_factory=list)
    internal: bool = False
    parallel_domain: bool = False
    defer: bool = False

    @model_validator(mode="before")
    @classmethod
    def _empty(cls, data: Any) -> Any:
        return {} if data is None else data  # (what a repair leaves in place of a bad item)

    @field_validator("actions", mode="before")
    @classmethod
    def _actions_list(cls, v: Any) -> Any:
        return _as_list(v)


class Invoke(BaseModel):
    """Start a child execution of another definition (``definition``), or run a task outside the commit
    (``task``: :mod:`durastate.engine.tasks`), while the (atomic) state is active."""

    model_config = ConfigDict(extra="forbid")

    definition: str | None = Field(default=None, min_length=1)
    task: dict[str, Any] | None = None
    """``{python: "module:function"}``, ``{lambda: "<function name or ARN>"}`` or ``{http: "<url>"}``."""
    input: Any = None
    """Tasks only: the JSON the task receives (``$context.x`` references allowed; default ``{}``)."""
    timeout: float | str | None = None
    """Tasks only: abandon the task as failed (``TaskTimeout``) when it has not answered after this long."""
    heartbeat_timeout: float | str | None = None
    """Tasks only: abandon the task as failed (``TaskTimeout``) when this long passes without a heartbeat
    from it (counted from its start, then from each heartbeat)."""
    cancel_url: str | None = None
    """HTTP tasks only: where the relay POSTs a cancel request when the execution stops waiting for the task
    (it left the state, ended, or the task timed out) while it may still run."""
    context: dict[str, Any] = Field(default_factory=dict)
    """Values (``$context.x`` references allowed) that seed the child's context."""
    retry: dict[str, Any] | None = None
    """A retry policy (:mod:`durastate.engine.retry`): a failed child is followed, after the backoff, by a
    new one (its ``on`` names match the child's error type); ``on_error`` runs once the tries run out."""
    parent_close: Literal["cancel", "terminate", "abandon"] | None = None
    """Child executions only (Temporal's ParentClosePolicy): what happens to the child when the parent
    leaves the invoking state or ends: ``cancel`` (the default: its exit actions run), ``terminate`` (at
    once, no action runs) or ``abandon`` (it runs on; its finished notice is ignored, and traced so)."""
    id_key: str | None = Field(default=None, pattern=r"^[^.$\s]+$")
    """Child executions only: the context key the child's execution id is assigned to as it starts, so
    that the parent can send it events (``send: {to: $context.<key>}``; SCXML's ``#_<invokeid>``)."""
    forward: bool = False
    """Child executions only: each event the execution receives from outside while the state is active (not
    the ones it raises) is sent to the running child too, whatever the execution does with it (SCXML's
    ``autoforward``)."""


class Map(BaseModel):
    """Fan out: one child execution of ``invoke.definition`` per item of ``items``, at most
    ``max_concurrency`` running at a time (the logic is :mod:`durastate.engine.fanout`).

    ``items`` is evaluated on entry and must be a JSON array; ``invoke.context`` is evaluated when each
    item's child starts, with ``$item`` and ``$index`` beside ``$context``. ``output`` (default
    ``$event.output``: the child's whole final context) is what is kept of each finished child, with
    ``$event`` the child's ``durastate.finished`` notice. ``tolerate``: how many failed children the map
    accepts — a count, or a percentage of the items such as ``"10%"`` (rounded down) — (their output is
    ``null`` and they are listed in ``$event.failed``); one more takes ``on_error`` and cancels the
    children still running. ``invoke.retry``: a failed child's item is started again, as a new child,
    by the same policy as an invoke's retry; it counts as failed only once its tries run out.
    """

    model_config = ConfigDict(extra="forbid")

    items: Any
    invoke: Invoke
    max_concurrency: int = Field(default=10, ge=1, le=1000)
    output: Any = "$event.output"
    tolerate: Any = 0
    """A count of failed children (``3``) or a percentage of the items (``"10%"``); checked at compile."""


class State(BaseModel):
    """One node of the state tree. ``type`` defaults to ``compound`` if it has ``states``, else ``atomic``."""

    model_config = ConfigDict(extra="forbid")

    type: StateType | None = None
    description: str | None = None
    initial: str | None = None
    entry: list[Any] = Field(default_factory=list)
    exit: list[Any] = Field(default_factory=list)
    on: dict[str, list[Transition]] = Field(default_factory=dict)
    always: list[Transition] = Field(default_factory=list)
    after: list[After] = Field(default_factory=list)
    """The state's timers; ``after: {...}`` (one mapping) is a list of one."""
    on_done: list[Transition] = Field(default_factory=list)
    on_error: list[Transition] = Field(default_factory=list)
    invoke: Invoke | None = None
    map: Map | None = None
    """Fan out over a list (:class:`Map`); an atomic state with a ``map`` takes ``on_done`` once every item's
    child has ended, with ``$event.outputs`` in item order."""
    states: dict[str, State] = Field(default_factory=dict)
    history: Literal["shallow", "deep"] | None = None
    """History states only: what is restored (default shallow)."""
    target: str | None = None
    """History states only: the default when nothing was recorded yet (else the parent's ``initial``)."""
    outcome: str | None = None
    """Final states only: the execution's outcome when it finishes here (default: the state's name)."""
    regions: Literal["children", "inline"] | None = None
    """Parallel states only: how the regions run. ``children`` (the default): each region is a child
    execution; ``inline``: the regions run inside this execution (SCXML semantics, one commit per event)."""

    @field_validator("entry", "exit", "always", "on_done", "on_error", "after", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _as_list(v)

    @field_validator("on", mode="before")
    @classmethod
    def _on_lists(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: _as_list(t) for k, t in v.items()}
        return v

    @field_validator("states", mode="before")
    @classmethod
    def _null_children(cls, v: Any) -> Any:
        return _nulls_as_empty(v)

    @property
    def kind(self) -> StateType:
        """The effective type (``type`` or the inferred default)."""
        if self.type is not None:
            return self.type
        return "compound" if self.states else "atomic"


class Chart(Protocol):
    """What building the tables reads of a whole chart (:class:`durastate.engine.definition.Definition`)."""

    @property
    def initial(self) -> str | None: ...

    @property
    def timeout(self) -> float | str | None: ...

    @property
    def on_timeout(self) -> Literal["fail", "cancel"]: ...

    @property
    def action_errors(self) -> Literal["fail", "raise"]: ...

    @property
    def done_events(self) -> Literal["durastate", "scxml"]: ...

    @property
    def states(self) -> dict[str, State]: ...
