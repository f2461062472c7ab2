"""The console's schedules page (``/schedules``) and its two actions, ``backfill`` and ``delete``.

Each action is :mod:`durastate.store.schedules`' own operation (what ``durastate schedules backfill`` and
``durastate schedules delete`` run), behind the same confirmation as every control action
(:class:`~durastate.ui.control.Confirmations`: a token bound to the action, the schedule's name and every
field, good for one post), and offered only by a console started with ``--allow-control``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from durastate.store.base import ExecutionStore
from durastate.store.schedules import ScheduleState, backfill_schedule, delete_schedule, get_schedule
from durastate.ui.control import ActionRefused, Plan

SCHEDULE_ACTIONS: dict[str, tuple[str, ...]] = {
    "backfill": ("from", "to"),
    "delete": (),
}
"""Each schedule action and the form fields it takes (the confirmation token covers exactly these)."""


def binding_action(action: str) -> str:
    """The name a schedule action's token is bound to (never the same as an execution action's)."""
    return f"schedule-{action}"


def plan_schedule(action: str, name: str, form: Mapping[str, str], store: ExecutionStore) -> Plan:
    """Check a schedule action's input and say what it will do (changes nothing)."""
    if action not in SCHEDULE_ACTIONS:
        raise ActionRefused(f"unknown action {action!r} on a schedule; the console offers "
                            f"{', '.join(SCHEDULE_ACTIONS)}")
    state = get_schedule(store, name)  # UnknownSchedule names the known ones
    fields = {f: str(form.get(f, "")).strip() for f in SCHEDULE_ACTIONS[action]}
    if action == "delete":
        summary = (f"delete schedule {name}: its timer is cancelled and no tick starts again (remove it from "
                   "the schedules: file too, or the next `durastate serve` stores it again)")
    else:
        start, end = (_instant(state, label, fields[key]) for key, label in (("from", "from"), ("to", "to")))
        summary = (f"backfill schedule {name} from {_utc(start)} to {_utc(end)}: start each tick in between "
                   "that has no execution yet, once")
    return Plan(binding_action(action), name, fields, summary)


def perform_schedule(todo: Plan, store: ExecutionStore, now: float) -> str:
    """Run a confirmed schedule action; returns what happened, for the page to say."""
    name = todo.execution_id
    if todo.action == binding_action("delete"):
        delete_schedule(store, name, now)
        return f"deleted {name}: its timer is cancelled, no tick starts again"
    state = get_schedule(store, name)
    start, end = _instant(state, "from", todo.fields["from"]), _instant(state, "to", todo.fields["to"])
    done = backfill_schedule(store, name, start, end, now)
    skipped = f"; {len(done.existing)} already ran" if done.existing else ""
    return f"backfilled {name}: started {len(done.started)} tick(s){skipped}"


def _instant(state: ScheduleState, label: str, text: str) -> float:
    if state.spec is None:
        raise ActionRefused(f"schedule {state.name}'s stored spec does not validate: sync it from the "
                            "definitions folder (`durastate serve`) first")
    if not text:
        raise ActionRefused(f"give the {label} time of the backfill (ISO 8601, e.g. 2026-03-01T09:00)")
    try:
        return state.spec.instant(text)
    except ValueError:
        raise ActionRefused(f"{label} {text!r} is not an ISO 8601 time; write e.g. 2026-03-01T09:00 (in the "
                            "schedule's timezone) or 2026-03-01T09:00+01:00") from None


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
