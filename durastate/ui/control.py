"""The console's control actions (``durastate ui --allow-control``): send, cancel, suspend, resume,
terminate, reset, redrive, replay, start.

Each action is the command line's own operation, not a second implementation: events (``send``,
``cancel``, ``suspend``, ``resume``, ``reset``, ``start``) go through the ``deliver`` function the console was
given (the CLI hands it its delivery: queued in the store's inbox for ``durastate serve``, or applied in
process for a store without one); ``terminate`` and ``redrive`` are :func:`durastate.store.control.terminate`
and :func:`durastate.store.control.redrive`; ``replay`` checks with :func:`durastate.runtime.local.check_replay`
and moves the letter with its box's ``replay``. ``send`` refuses an event no state of the definition
handles (:func:`durastate.engine.introspect.unhandled_event`, the check of ``durastate send``) unless its
``force`` box is ticked.

Confirmation: a form first posts to the *confirm* page, which changes nothing and shows what will happen,
with a token (:class:`Confirmations`): random, bound to the action, the execution and every field, and good
for one post within :data:`CONFIRMATION_TTL` seconds. Only a post that carries the token of exactly those
values acts, once: a post without one, or with one issued for other values, is refused (400); the same
token posted again (a double click, the browser's back button, a replay) is refused as used (409), so
nothing is queued twice. A page of another site cannot read the token, and :mod:`durastate.ui.guard`
refuses its posts, its frames and its rebound host names, so it cannot make a browser act either.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from durastate.client import start_event
from durastate.engine.definition import Definition
from durastate.engine.durations import format_duration
from durastate.engine.introspect import unhandled_event
from durastate.engine.model import ENDED, RESERVED_PREFIX, Event, Execution, new_id
from durastate.engine.registry import DefinitionRegistry
from durastate.engine.reset import RESET_ACTIONS
from durastate.engine.run_timeout import check_start_timeout
from durastate.engine.values import check_execution_id, check_json, object_from_json
from durastate.engine.versions import definition_version
from durastate.errors import (
    ControlRefused,
    DurastateError,
    InvalidValue,
    MigrationRefused,
    UnknownDefinition,
    UnknownExecution,
)
from durastate.runtime.local import check_replay
from durastate.store.base import ExecutionStore
from durastate.store.control import (
    cancel_event,
    check_reset_of,
    redrive,
    reset_event,
    resume_event,
    suspend_event,
    terminate,
)
from durastate.store.migration import UNVERSIONED, Migration, migrate_executions
from durastate.transport.base import DeadLetterBox, UnknownDeadLetter

ACTIONS: dict[str, tuple[str, ...]] = {
    "send": ("event", "data", "force"),
    "cancel": ("reason",),
    "suspend": ("reason",),
    "resume": (),
    "terminate": ("reason",),
    "reset": ("to", "actions", "context_patch", "reason"),
    "redrive": (),
    "replay": ("letter",),
    "start": ("definition", "id", "context", "timeout"),
    "migrate": ("mapping",),
}
"""Each action and the form fields it takes (the token covers exactly these)."""
APPLIES: dict[str, Callable[[str], bool]] = {
    "suspend": lambda status: status == "running",
    "resume": lambda status: status == "suspended",
    "terminate": lambda status: status not in ENDED,
    "redrive": lambda status: status == "failed",
    "reset": lambda status: status in ("running", "suspended", "failed"),
    "migrate": lambda status: status in ("running", "suspended"),
}
"""The statuses an action's button is offered for (the others: every status); the engine refuses the rest."""


def offered(action: str, status: str) -> bool:
    """Whether the execution page offers ``action`` for an execution with ``status``."""
    applies = APPLIES.get(action)
    return applies is None or applies(status)

Deliver = Callable[[str, Event], str]
"""Hands an event to the execution; returns what happened, in a few words ("queued", "applied")."""


class ActionRefused(DurastateError):
    """A control action that cannot run as asked (bad input, nothing to do): nothing was changed."""


@dataclass(frozen=True)
class Plan:
    """What a confirmed action will do: the values it acts on and a sentence saying so."""

    action: str
    execution_id: str
    fields: dict[str, str]
    summary: str


CONFIRMATION_TTL = 15 * 60.0
"""Seconds a confirm page's token stays good (on the console's clock)."""
CONFIRMATION_CAP = 1000
"""Tokens kept at most, issued and used each: past it the oldest are forgotten (a forgotten one is refused)."""


class ConfirmationRefused(ActionRefused):
    """A control post without the token of its confirm page: nothing was done."""

    status = 400


class ConfirmationUsed(ConfirmationRefused):
    """A confirm page's token posted again: its action ran once and is not repeated."""

    status = 409


def _binding(action: str, execution_id: str, fields: Mapping[str, str]) -> str:
    names = ACTIONS.get(action) or tuple(sorted(fields))  # an action of another page (a schedule's): all its fields
    return json.dumps([action, execution_id, [fields.get(name, "") for name in names]])


@dataclass
class Confirmations:
    """The tokens the confirm pages handed out: each random, bound to one action on one execution with
    exactly its values, and spent by the one post that uses it."""

    clock: Callable[[], float]
    ttl: float = CONFIRMATION_TTL
    cap: int = CONFIRMATION_CAP
    _issued: OrderedDict[str, tuple[str, float]] = field(default_factory=OrderedDict)
    _used: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def issue(self, action: str, execution_id: str, fields: Mapping[str, str]) -> str:
        token = secrets.token_hex(32)
        with self._lock:
            self._issued[token] = (_binding(action, execution_id, fields), self.clock())
            while len(self._issued) > self.cap:
                self._issued.popitem(last=False)
        return token

    def redeem(self, action: str, execution_id: str, fields: Mapping[str, str], given: str) -> None:
        """Spend ``given`` on this action, or raise :class:`ConfirmationRefused` (and spend nothing)."""
        with self._lock:
            if given in self._used:
                raise ConfirmationUsed(f"this confirmation was already used: {action} ran once and is not "
                                       "repeated; to do it again, start from the execution's page")
            issued = self._issued.get(given) if given else None
            if issued is None:
                raise ConfirmationRefused(f"{action} needs confirmation: use the button on the execution's "
                                          "page, then confirm")
            binding, at = issued
            if binding != _binding(action, execution_id, fields):
                raise ConfirmationRefused(f"this confirmation does not match: it was given for another action, "
                                          f"execution or values than {action} on {execution_id}; nothing was done")
            del self._issued[given]
            if self.clock() - at > self.ttl:
                raise ConfirmationRefused(f"this confirmation expired (after {self.ttl / 60:.0f} minutes); "
                                          "nothing was done: start again from the execution's page")
            self._used[given] = None
            while len(self._used) > self.cap:
                self._used.popitem(last=False)


def plan(action: str, execution_id: str, form: Mapping[str, str]) -> Plan:
    """Check an action's input and say what it will do (changes nothing)."""
    if action not in ACTIONS or action == "start":
        offers = ", ".join(a for a in ACTIONS if a != "start")
        raise ActionRefused(f"unknown action {action!r} on an execution; the console offers {offers} "
                            "(start an execution from its definition's page)")
    fields = {name: str(form.get(name, "")).strip() for name in ACTIONS[action]}
    if action == "send":
        name = fields["event"]
        if not name:
            raise ActionRefused("name the event to send")
        if name.startswith(RESERVED_PREFIX):
            raise ActionRefused(f"event names starting with {RESERVED_PREFIX!r} are reserved for the runtime; "
                                "use the cancel action to cancel")
        event_data(fields["data"])
        fields["force"] = "yes" if fields["force"] else ""
        summary = f"send {name} to {execution_id}" + (f" with data {fields['data']}" if fields["data"] else "")
        if fields["force"]:
            summary += ", even if no state of its definition handles it"
    elif action == "cancel":
        summary = f"cancel {execution_id}" + (f" ({fields['reason']})" if fields["reason"] else "")
        summary += ": its active states' exit actions run and its children are cancelled"
    elif action == "suspend":
        summary = f"suspend {execution_id}" + (f" ({fields['reason']})" if fields["reason"] else "")
        summary += ": events and due timers that reach it are kept until it is resumed"
    elif action == "resume":
        summary = f"resume {execution_id}: what it kept while suspended applies now, in order"
    elif action == "terminate":
        summary = f"terminate {execution_id}" + (f" ({fields['reason']})" if fields["reason"] else "")
        summary += " now: no action runs, its timers are disarmed and its children are terminated"
    elif action == "reset":
        states = _states(fields["to"])
        fields["actions"] = fields["actions"] or "none"
        if fields["actions"] not in RESET_ACTIONS:
            raise ActionRefused(f"actions {fields['actions']!r}: choose {' or '.join(RESET_ACTIONS)}")
        if fields["context_patch"]:
            json_object(fields["context_patch"], "the context patch")
        summary = (f"reset {execution_id} to {', '.join(states)}"
                   + (f" with the context patch {fields['context_patch']}" if fields["context_patch"] else "")
                   + (" running the exit and entry actions" if fields["actions"] == "transition"
                      else " without running any action")
                   + (f" ({fields['reason']})" if fields["reason"] else "")
                   + ": the timers and children of the states it leaves go, those of the states it enters start")
    elif action == "migrate":
        mapping = migration_mapping(fields["mapping"])
        summary = (f"migrate {execution_id} to the newest version of its definition (the console's definitions "
                   "folder)" + (f", its states renamed {fields['mapping']}" if mapping else ""))
    elif action == "redrive":
        summary = f"redrive {execution_id}: restore it to before its failed step and apply that event again"
    else:
        if not fields["letter"]:
            raise ActionRefused("name the dead letter to replay")
        summary = f"replay dead letter {fields['letter']} of {execution_id}: put its event back on the queue"
    return Plan(action, execution_id, fields, summary)


def event_data(text: str, what: str = "event data") -> dict[str, object]:
    """The data of a sent event (or a start's context): a JSON object, or nothing."""
    return json_object(text, f"the {what}") if text else {}


def json_object(text: str, what: str) -> dict[str, object]:
    """A form field holding a JSON object (:class:`ActionRefused` saying what is wrong otherwise)."""
    try:
        value = object_from_json(text, what)
        check_json(value, what)
    except json.JSONDecodeError as exc:
        raise ActionRefused(f"{what} is not valid JSON ({exc.msg} at column {exc.colno})") from None
    except InvalidValue as exc:
        raise ActionRefused(str(exc)) from None
    return value


def plan_start(definition_id: str, form: Mapping[str, str], store: ExecutionStore) -> Plan:
    """Check a start's input and say what it will do: the id (a new one unless given, so the confirmation
    names it), the context (a JSON object); an id that exists already is refused, as nothing would start."""
    fields = {name: str(form.get(name, "")).strip() for name in ACTIONS["start"]}
    fields["definition"] = definition_id
    fields["id"] = fields["id"] or new_id()
    try:
        check_execution_id(fields["id"])
    except InvalidValue as exc:
        raise ActionRefused(str(exc)) from None
    event_data(fields["context"], "context")
    timeout = _run_timeout(fields["timeout"])
    existing = store.load(fields["id"])
    if existing is not None:
        raise ActionRefused(f"execution {fields['id']} already exists ({existing.definition_id}, "
                            f"{existing.status}): nothing was started; pick another id, or leave it empty "
                            "for a new one")
    summary = f"start {fields['id']} of {definition_id}" + (
        f" with context {fields['context']}" if fields["context"] else " with the definition's default context")
    if timeout is not None:
        summary += f", ending it (timed out) unless it ends within {format_duration(timeout)}"
    return Plan("start", fields["id"], fields, summary)


def perform_start(todo: Plan, store: ExecutionStore, deliver: Deliver | None) -> str:
    """Start a confirmed execution: the start event ``durastate start`` queues, through the same delivery."""
    exe_id = todo.execution_id
    if deliver is None:
        raise ActionRefused("this console cannot deliver events to this store")
    plan_start(todo.fields["definition"], todo.fields, store)  # checked again: it may exist by now
    event = start_event(exe_id, todo.fields["definition"], event_data(todo.fields["context"], "context"),
                        _run_timeout(todo.fields.get("timeout", "")))
    return f"started {exe_id} ({todo.fields['definition']}): {deliver(exe_id, event)}"


def _run_timeout(text: str) -> float | None:
    """A start form's run timeout (``durastate start --timeout``): empty for the definition's own."""
    if not text:
        return None
    try:
        return check_start_timeout(text, "the run timeout")
    except InvalidValue as exc:
        raise ActionRefused(str(exc)) from None


def migration_mapping(text: str) -> dict[str, str]:
    """A migrate form's renamed states, ``old=new`` pairs separated by commas (``durastate migrate --map``)."""
    out: dict[str, str] = {}
    for pair in (p.strip() for p in text.split(",") if p.strip()):
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ActionRefused(f"renamed states: {pair!r} is not old=new (e.g. waiting=ready)")
        out[old.strip()] = new.strip()
    return out


def migrate_one(store: ExecutionStore, exe_id: str, defn: Definition | None, mapping_text: str,
                dry_run: bool) -> Migration:
    """Migrate (or, ``dry_run``, plan to migrate) one execution to ``defn``'s version with
    :func:`~durastate.store.migration.migrate_executions` and ``ids=[exe_id]``, as ``durastate migrate --id``."""
    exe = store.load(exe_id)
    if exe is None:
        raise UnknownExecution(exe_id)
    if defn is None:
        raise ActionRefused(f"this console has no definition {exe.definition_id!r} to migrate {exe_id} to: start "
                            "it with --definitions")
    to_version = definition_version(defn)
    from_version = exe.definition_version or UNVERSIONED
    if from_version == to_version:
        raise ActionRefused(f"{exe_id} already runs on the newest version of {exe.definition_id} ({to_version})")
    try:
        return migrate_executions(store, exe.definition_id, from_version, defn, migration_mapping(mapping_text),
                                  ids=[exe_id], dry_run=dry_run)
    except MigrationRefused as err:  # said for the command line: here the mapping is the form's field
        raise ActionRefused(str(err).replace("--map ", "the renamed states field: ")) from None


def check_send(defn: Definition | None, todo: Plan) -> None:
    """Refuse a send no state of the execution's definition handles, unless it is forced (``defn`` is
    ``None`` when the console has no definitions folder: then, as ``durastate send``, nothing is checked)."""
    if todo.action != "send" or todo.fields.get("force") or defn is None:
        return
    problem = unhandled_event(defn, todo.fields["event"])
    if problem is not None:
        raise ActionRefused(f"{problem}; tick \"send even if unhandled\" to send it anyway")


def newest(registry: DefinitionRegistry | None, exe: Execution) -> Definition | None:
    """The newest version of ``exe``'s definition: the console's definitions folder's copy (``None``: none)."""
    if registry is None:
        return None
    try:
        return registry.get(exe.definition_id)
    except UnknownDefinition:
        return None


def _loaded(store: ExecutionStore, exe_id: str) -> Execution:
    exe = store.load(exe_id)
    if exe is None:
        raise UnknownExecution(exe_id)
    return exe


def _states(text: str) -> list[str]:
    states = [p.strip() for p in text.split(",") if p.strip()]
    if not states:
        raise ActionRefused("name the configuration to reset to: one or more state paths, comma-separated")
    return states


def perform(todo: Plan, store: ExecutionStore, deliver: Deliver | None, registry: DefinitionRegistry | None,
            box: DeadLetterBox | None, queued: Callable[[], list[tuple[str, Event]]] | None,
            definition_of: Callable[[Execution], Definition | None] = lambda exe: None) -> str:
    """Run a confirmed action; returns what happened, for the page to say."""
    exe_id = todo.execution_id
    if todo.action in ("send", "cancel", "suspend", "resume"):
        exe = store.load(exe_id)
        if exe is None:
            raise UnknownExecution(exe_id)
        if not offered(todo.action, exe.status):
            raise ActionRefused(f"execution {exe_id} is {exe.status}: {todo.action} does not apply to it")
        if deliver is None:
            raise ActionRefused("this console cannot deliver events to this store")
        reason = todo.fields.get("reason") or None
        if todo.action == "send":
            check_send(definition_of(exe), todo)
            event = Event(id=new_id(), name=todo.fields["event"], data=event_data(todo.fields["data"]))
        elif todo.action == "resume":
            event = resume_event(exe_id)
        else:
            event = {"cancel": cancel_event, "suspend": suspend_event}[todo.action](exe_id, reason)
        outcome = deliver(exe_id, event)
        return f"{event.name} for {exe_id} (event {event.id}): {outcome}"
    if todo.action == "terminate":
        terminate(store, exe_id, todo.fields["reason"] or None, definitions=registry)
        return f"terminated {exe_id}" + (f": {todo.fields['reason']}" if todo.fields["reason"] else "")
    if todo.action == "reset":
        if deliver is None:
            raise ActionRefused("this console cannot deliver events to this store")
        if registry is None:
            raise ActionRefused("this console has no definitions to check the configuration against")
        states = _states(todo.fields["to"])
        patch = todo.fields["context_patch"]
        try:
            check_reset_of(store, registry, exe_id, states)
            event = reset_event(exe_id, states, actions=todo.fields["actions"],
                                context_patch=json_object(patch, "the context patch") if patch else None,
                                reason=todo.fields["reason"] or None, by="console")
        except ControlRefused as err:
            raise ActionRefused(str(err)) from None
        outcome = deliver(exe_id, event)
        return f"reset {exe_id} to {', '.join(states)} (event {event.id}): {outcome}"
    if todo.action == "migrate":
        moved = migrate_one(store, exe_id, newest(registry, _loaded(store, exe_id)), todo.fields["mapping"], False)
        if exe_id not in moved.moved:
            raise ActionRefused(f"{exe_id} was not migrated: {moved.skipped.get(exe_id, 'not selected')}")
        return f"migrated {exe_id} from version {moved.from_version} to {moved.to_version}"
    if todo.action == "redrive":
        done = redrive(store, exe_id)
        return f"redriven {exe_id}: {done.event.name} is applied again as event {done.event.id}"
    if box is None:
        raise ActionRefused("this store keeps no dead letters")
    letter = box.get(todo.fields["letter"])
    if letter is None:
        raise UnknownDeadLetter(todo.fields["letter"])
    check_replay([letter], registry, store, queued() if queued is not None else [])
    box.replay([letter.id])
    return f"replayed {letter.id}: {letter.event.name} for {letter.target_id} (event {letter.event.id})"
