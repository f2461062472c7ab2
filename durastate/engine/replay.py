"""The replay check: would a new definition version have done what a recorded history did?

``replay(definition, steps)`` takes an execution's whole history (``read_history``, ``durastate history
--json``: its trace steps, oldest first) and steps each recorded event through ``definition`` in order,
from the execution's start, at the time the step recorded (``at``: never a clock). After each step it
compares what the new version did with what was recorded — the state it went to and the status, the
transitions taken, the context keys changed, the events emitted, the timers armed or disarmed and the
children spawned — and stops at the first step where they differ, with a :class:`Difference` that says
which of them and how. A deploy gate (``durastate validate --replay``) then checks behaviour, not only
that the state names still exist.

Why from the start and not from each step's recorded state: a step does not record the execution (that
would cost the whole context per event, see :mod:`durastate.engine.tracing`), and it does not need to —
as long as every earlier step matched, the replayed execution is the one the new version would have
built from the same events, which is exactly the question.

What is not stepped: control records (``suspend`` and ``resume`` change only the status, the events a
resume released are replayed as the steps they were; ``terminate`` and ``fail`` end the replayed execution
as they ended the recorded one), events held while suspended, and the attempts of a retry that failed (the
new version is stepped on a copy and must fail too). The replay stops without a verdict — ``stopped`` says
why — where a step cannot be replayed exactly: a redrive, a reset (an operator's move to a configuration,
not something a version decides), a step without its time, or an event whose data was cut in the trace
of a store that did not keep history (``data_full`` missing).

Pure, like :func:`~durastate.engine.interpreter.step`: no clock, no I/O. Actions written in Python run as
they would in a worker, so they must be as deterministic as the engine assumes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from durastate.engine import control
from durastate.engine.definition import Definition
from durastate.engine.ids import CHILD_SEPARATOR, FINISHED, START
from durastate.engine.interpreter import step
from durastate.engine.model import Event, Execution
from durastate.engine.tracing import context_changes, step_details

__all__ = ["Difference", "ReplayReport", "replay"]

_COMPARED = ("to", "status", "ignored", "transitions", "context", "emits", "emits_digest", "timers", "spawns")
"""The fields of a step compared, in the order a difference lists them."""


@dataclass(frozen=True)
class Difference:
    """The first step where the new version does something else: its index and event, and for each field
    that differs, what was recorded and what the new version does (``None``: nothing)."""

    index: int | None
    event: str
    event_id: str | None
    fields: dict[str, tuple[Any, Any]]

    def describe(self) -> str:
        """A few lines a person reads: the step, then one line per differing field."""
        lines = [f"step #{self.index} {self.event} ({self.event_id}) would differ:"]
        for name, (recorded, replayed) in self.fields.items():
            lines.append(f"  {name}: recorded {_text(recorded)}, new version {_text(replayed)}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "event": self.event, "event_id": self.event_id,
                "fields": {k: {"recorded": a, "replayed": b} for k, (a, b) in self.fields.items()}}


@dataclass
class ReplayReport:
    """What a replay of one history found: how many steps it stepped (``checked``), the first
    :class:`Difference` (``None``: the new version does what was recorded), and, if it stopped before the
    end without one, why (``stopped``)."""

    execution_id: str | None
    checked: int = 0
    skipped: int = 0
    difference: Difference | None = None
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.difference is None

    def describe(self) -> str:
        head = f"{self.execution_id or '(history)'}: "
        if self.difference is not None:
            return head + self.difference.describe()
        text = head + f"{self.checked} steps replayed, no difference"
        if self.stopped:
            text += f" (stopped: {self.stopped})"
        return text

    def as_json(self) -> dict[str, Any]:
        return {"execution_id": self.execution_id, "checked": self.checked, "skipped": self.skipped,
                "ok": self.ok, "difference": None if self.difference is None else self.difference.as_json(),
                "stopped": self.stopped}


def replay(defn: Definition, steps: Sequence[Mapping[str, Any]], execution_id: str | None = None) -> ReplayReport:
    """Step the history ``steps`` (oldest first, from the execution's start) through ``defn``; see the
    module docstring. ``execution_id`` names the execution (default: none, the replay makes one up)."""
    report = ReplayReport(execution_id)
    exe: Execution | None = None
    for record, batched in _flatten(steps):
        ctl = record.get("control")
        if ctl is not None:
            if exe is None:
                report.stopped = f"step #{record.get('index')}: a {ctl} record before the start"
                return report
            if ctl == "redrive":
                report.stopped = f"step #{record.get('index')}: a redrive (not replayed past)"
                return report
            if ctl == "reset":
                report.stopped = (f"step #{record.get('index')}: a reset to {record.get('configuration')} "
                                  "(cannot replay past a reset: an operator chose where the execution went)")
                return report
            _control(exe, ctl, record)
            report.skipped += 1
            continue
        if "held" in record or record.get("event") is None:
            report.skipped += 1  # held while suspended: it is applied (and recorded) when released
            continue
        why = _unreplayable(record)
        if why is not None:
            report.stopped = f"step #{record.get('index')} {record.get('event')}: {why}"
            return report
        event = Event.model_construct(id=record.get("event_id") or f"replay-{record.get('index')}",
                                      name=record["event"], data=_data(record, exe))
        at = float(record["at"])
        if exe is None:
            if event.name != START:
                report.stopped = f"step #{record.get('index')}: the history does not begin with its start"
                return report
            exe = _started(defn, execution_id, event, record, at)
        failed_attempt = "retry_at" in record
        target = exe.model_copy(deep=True) if failed_attempt else exe
        before = json.loads(json.dumps(target.context, default=str))  # a deep copy: actions may nest
        res = step(defn, target, event, at, detail=True)
        report.checked += 1
        if failed_attempt:
            if res.retry is None:
                report.difference = Difference(record.get("index"), event.name, event.id, {
                    "error": (record.get("error"), None)})
                return report
            continue  # the attempt fails again; the execution stays where it was, as it did
        if res.retry is not None:
            report.difference = Difference(record.get("index"), event.name, event.id, {
                "error": (record.get("error"), str(res.retry))})
            return report
        step_details(res.trace, at, event, res.emits, res.timers, res.spawns, (before, exe.context), archive=True)
        fields = _compare(record, res.trace, (before, exe.context), batched)
        if fields:
            report.difference = Difference(record.get("index"), event.name, event.id, fields)
            return report
    return report


def _flatten(steps: Sequence[Mapping[str, Any]]) -> Iterator[tuple[Mapping[str, Any], bool]]:
    """Each recorded step, and those a commit batched with it (a resume's released events), in order; the
    flag marks a record whose ``to`` and ``status`` are its batch's last, not its own."""
    for record in steps:
        inner = record.get("steps") or []
        yield record, bool(inner)
        for sub in inner:
            yield sub, False


def _unreplayable(record: Mapping[str, Any]) -> str | None:
    if "at" not in record:
        return "no time recorded (a step from before durastate recorded it)"
    if record.get("data_cut") and "data_full" not in record:
        return "its data was cut in the trace (recorded by a store that did not keep history)"
    return None


def _data(record: Mapping[str, Any], exe: Execution | None) -> dict[str, Any]:
    """The recorded event's exact data; a task's answer renamed to the task id the replay derived."""
    data = record.get("data_full", record.get("data"))
    out = dict(data) if isinstance(data, Mapping) else {}
    child = out.get("child_id")
    if exe is not None and record.get("event") == FINISHED and isinstance(child, str) and child not in exe.children:
        # A task's id is <execution>~<n>~<mac under the execution's secret>; the replay has no secret, so
        # its task is <execution>~<n>: the answer is for that one.
        base = child.rsplit(CHILD_SEPARATOR, 1)[0]
        ref = exe.children.get(base)
        if ref is not None and ref.kind == "task":
            out["child_id"] = base
    return out


def _started(defn: Definition, execution_id: str | None, event: Event, record: Mapping[str, Any],
             at: float) -> Execution:
    """The execution as the worker (a root or invoked child) or the relay (a region child, ``seed``)
    created it before its start step."""
    seed = record.get("seed")
    data = event.data
    if isinstance(seed, Mapping):
        context = dict(seed.get("context") or {})
        refs = {"root_path": seed.get("root_path"), "parent_id": seed.get("parent_id"),
                "child_id": execution_id}
    else:
        context = defn.initial_context(data.get("context") or {})
        refs = {k: data.get(k) for k in ("root_path", "parent_id", "child_id")}
    kwargs: dict[str, Any] = {"definition_id": defn.id, "context": context, "created_at": at, **refs}
    if execution_id is not None:
        kwargs["id"] = execution_id
    return Execution(**kwargs)


def _control(exe: Execution, ctl: str, record: Mapping[str, Any]) -> None:
    """What a control record did to the execution, done to the replayed one."""
    at = float(record.get("at") or 0.0)
    if ctl == "suspend" and exe.status == "running":
        exe.status = "suspended"
    elif ctl == "resume" and exe.status == "suspended":
        exe.status = "running"
    elif ctl == "terminate" and exe.status not in ("finished", "failed", "cancelled", "terminated"):
        control.terminate(exe, record.get("reason"), at)
    elif ctl == "fail":
        control.fail(exe, str(record.get("error") or "failed"), at)


def _compare(recorded: Mapping[str, Any], replayed: dict[str, Any],
             context: tuple[Mapping[str, Any], Mapping[str, Any]], batched: bool) -> dict[str, tuple[Any, Any]]:
    out: dict[str, tuple[Any, Any]] = {}
    for name in _COMPARED:
        if name in ("to", "status") and batched:
            continue  # the batch's last step's, compared there
        if name == "transitions" and name not in recorded:
            continue  # recorded without transition details
        if name == "emits_digest" and name not in recorded:
            continue  # recorded by a store that did not keep history: the names are compared
        old, new = recorded.get(name), replayed.get(name)
        if name == "context" and "context_full" in recorded:
            old, new = recorded["context_full"], context_changes(*context, exact=True)[0]
        if name == "ignored":
            old, new = bool(old), bool(new)
        elif name in ("emits", "spawns"):
            old, new = _without_ids(old), _without_ids(new)
        if old != new and not (old in (None, [], {}) and new in (None, [], {})):
            out[name] = (old, new)
    if "emits_digest" in out and "emits" in out:
        del out["emits_digest"]  # the listed emits say more
    return out


def _without_ids(items: Any) -> Any:
    """Emits and spawns compared without the ids the runtime derives (a task's from a secret)."""
    if not isinstance(items, list):
        return items
    return [{k: v for k, v in item.items() if k not in ("id", "child_id")} if isinstance(item, dict) else item
            for item in items]


def _text(value: Any) -> str:
    if value is None:
        return "nothing"
    return json.dumps(value, separators=(", ", ": "), ensure_ascii=False, default=str)
