"""The one home of every reserved event name and every id the runtime derives from other ids.

Every id the engine makes up is a function of what the execution already holds (its id, its version, a
sequence number, the triggering event id, its secret), so re-running a step after a crash or a lost race produces
the same events and the same child executions, and every consumer can dedupe by id. Ids are capped at
128 characters (the limit of :class:`~durastate.engine.model.Event` and of the stores' keys); a longer one
is replaced by its SHA-256, which keeps it deterministic. Build ids here and nowhere else, so that the
cap and the format cannot drift apart between the engine, the relay, the worker, the client and the CLI.

**The rule for derived ids.** What the runtime derives belongs to the runtime: a producer (anyone who can
put a message on the queue, the client, the CLI, a replayed dead letter) must never be able to choose one
of those ids first, nor forge the event it names. Per kind:

- *Event ids in the runtime's namespace* — ids starting with ``~``: timeouts and retries
  (``~timeout:…``), finished notices (``~finished:…``), the control events a parent passes to its
  children and the client's cancel (``~cancel:…``, ``~suspend:…``, …), redrives (``~redrive:…``). A
  producer entry (``LocalRuntime.send``, ``DurastateClient.send``, ``durastate send``) refuses any such id,
  and any reserved name the runtime alone sends (``durastate.timeout``, ``durastate.finished``), with
  :class:`~durastate.errors.ReservedId` (:func:`producer_problem`: three prefix tests, once per event). The
  queue itself carries the runtime's own messages too (the relay's, the sweeper's), so the wire refuses
  only what the runtime never sends (:func:`reserved_id_problem`: an id of one kind on another event), and
  the worker checks the rest against the state it holds (:mod:`durastate.runtime.worker`): a timeout
  applies only if its id is the one its data derives, its timer is armed at that time and it is due by
  the worker's clock (up to :data:`TIMER_SKEW` early); a finished notice only if its id is its child's
  and the child's stored state bears it out; a redrive only as the redrive the execution waits for (and
  what applies is the event the execution stored, not the message's copy); a reset
  (``durastate.reset``, which a producer may send like ``terminate``) only under the id its data derives
  (:func:`reset_event_id`: a digest of the data, request nonce included), so a copy sent first under that
  id is exactly the true reset, and one with other data under it is refused. Anything else with such an id
  is refused or left unrecorded, never marked applied — so a copy sent first cannot take the id from the
  real event, which still applies when it comes. Checking, rather than a MAC, because the checks are
  exact where the state exists, and these ids stay readable and derivable (``durastate show`` prints them).
- *Execution ids the runtime derives* contain ``~`` (:data:`CHILD_SEPARATOR`), which no execution id given
  from outside may (:func:`durastate.engine.values.check_execution_id`): children of regions, invokes and
  maps (``{parent}~{n}``; their start is witnessed by the parent), and the runs a schedule starts
  (``<name>~<tick in UTC>``, ``<name>~manual-<time>``: derivable, and started only with a witness that is
  a MAC under the schedule record's secret, :func:`run_witness`).
- *Task ids* carry a MAC under the execution's secret (:func:`task_id`): a task has no stored state a
  forged answer could be checked against, so its unguessable id is the witness.
- *Ids of events an execution emits or forwards* (``<execution>:<version>:<n>:<mac>``,
  ``<event>:<region>:<mac>``: :func:`emit_event_id`, :func:`forwarded_event_id`) carry a MAC under the
  emitting execution's secret. They are in the producers' namespace and the receiver applies them as
  events of its own, with nothing stored to check them against, so only an unguessable id keeps a
  producer from sending the receiver an event under it first and the true one from being dropped as a
  duplicate. The MAC is a function of what the execution holds (its secret is committed with it), so a
  re-run step derives the same ids; ``n`` counts over the whole commit, so two steps of one commit (a
  resume's held events) never share an id.
- *Starts of invoked and mapped children* (``{parent}~{n}``, sent through the queue by the relay) carry a
  witness, :func:`run_witness` of the child's id under the parent's secret; the worker starts one only
  with the parent's true witness, so a start sent first under a child's id with a context of its own is
  refused. Region children are created by the relay itself, never through the queue: a start for one on
  the queue has no witness and is refused.
- *Ids that need neither*, and why: a start's ``<execution>:start`` (a start only ever creates an
  execution that does not exist, and a derived execution's start needs its witness: an earlier start
  under the id is either the producer's own execution or refused); the catch of a failed step
  (``<event>:catch``, applied inside the worker's own step, never on a queue); the relay's
  ``<event>:undeliverable`` notice (published to the notification sink, which no worker dedupes); the
  ids the client and the CLI give the control events they send (the producer's own events). The control
  events a parent passes to its children (``~cancel:…``, ``~suspend:…``, …) are in the runtime's namespace,
  which the producer entries refuse; on the raw queue a producer may send a child the same control event
  under an id of its own anyway, and one that changes nothing is not recorded — so taking such an id
  first does no more than sending that control event, which a producer may.
- *Executions stored before secrets* keep the plain forms (``<execution>:<version>:<n>``,
  ``<event>:<region>``, ``<execution>~<n>``, starts without a witness) until a worker gives them a secret
  (:mod:`durastate.runtime.keys`): at their next step, unless an invoked or mapped child of theirs is
  running (whose start, sent without a witness, may still be on its way), then at the first step after.
- *System records* (``~schedule~<name>``, ``~definition~…``, ``~clock~offset``: :func:`is_system_id`) accept
  no event at all from the queue: the wire refuses every event to one but the timer hop of a schedule's tick (which the
  hop consumer fires by the clock, never through the worker), and the worker refuses (dead-letters, with
  the reason) any event that reaches one anyway.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AFTER_SEPARATOR",
    "CANCEL",
    "CATCH",
    "CHILD_SEPARATOR",
    "CLOCK_RECORD",
    "CLOCK_RECORD_ID",
    "DEFINITION_RECORD",
    "FINISHED",
    "FROM_OUTSIDE",
    "HEARTBEAT",
    "HEARTBEAT_TIMEOUT_PREFIX",
    "MAX_ID_LENGTH",
    "REDRIVE",
    "REINVOKE_PREFIX",
    "RESERVED",
    "RESERVED_PREFIX",
    "RESET",
    "RESUME",
    "RETRY_PATH",
    "RUN_TIMEOUT_PATH",
    "SCHEDULE_RECORD",
    "SEND_PREFIX",
    "START",
    "SUSPEND",
    "SYSTEM_PREFIX",
    "SYSTEM_RECORDS",
    "TASK",
    "TASK_CANCEL",
    "TASK_MAC_CHARS",
    "TASK_TIMEOUT_PREFIX",
    "TERMINATE",
    "TIMEOUT",
    "TIMER_SKEW",
    "after_timer_key",
    "cancel_event_id",
    "child_execution_id",
    "control_event_id",
    "definition_record_id",
    "derived_id",
    "describe_timer_key",
    "emit_event_id",
    "finished_event_id",
    "forwarded_event_id",
    "heartbeat_event_id",
    "is_derived_event_id",
    "is_system_id",
    "producer_problem",
    "redrive_event_id",
    "reserved_event_id",
    "reserved_id_problem",
    "reset_event_id",
    "reset_problem",
    "reset_sent_event_id",
    "retarget_timer_key",
    "retry_event_id",
    "run_witness",
    "start_event_id",
    "task_cancel_id",
    "task_execution_id",
    "task_id",
    "task_request_id",
    "task_seq",
    "terminate_event_id",
    "timeout_event_id",
    "timeout_problem",
    "timer_key_state",
]

MAX_ID_LENGTH = 128

CHILD_SEPARATOR = "~"
"""Joins a parent's id and a child's number in child execution ids. Ids given from outside may not
contain it (:func:`durastate.engine.values.check_execution_id`), so no user id can ever be taken for a
child id, or a child id for a user's execution."""

# Reserved event names (all start with RESERVED_PREFIX; definitions may not name their own events so).
RESERVED_PREFIX = "durastate."
START = "durastate.start"
TIMEOUT = "durastate.timeout"
FINISHED = "durastate.finished"
CANCEL = "durastate.cancel"
SUSPEND = "durastate.suspend"
RESUME = "durastate.resume"
TERMINATE = "durastate.terminate"
RESET = "durastate.reset"
"""Moves an execution to a named configuration (:mod:`durastate.engine.reset`). Its id is always the one its
data derives (:func:`reset_event_id`): the worker refuses any other (:func:`reset_problem`)."""
HEARTBEAT = "durastate.heartbeat"
"""A running task's sign of life (``DurastateClient.heartbeat``, a Python task's ``current_task().heartbeat``):
its ``data.task_id`` names the task, and that unguessable id (:func:`task_id`) is its witness, as for the
task's answer. Not in :data:`FROM_OUTSIDE`: ``send`` refuses it; the client's own helper builds it."""

FROM_OUTSIDE = frozenset((START, CANCEL, SUSPEND, RESUME, TERMINATE, RESET))
"""The reserved events a client, the CLI or a producer may send. The others (``timeout``, ``finished``)
come from the runtime alone, and the worker checks each against the stored state before it acts on it (a
task's answer, which has no stored state to check, by its unguessable id: :func:`task_id`)."""
RESERVED = frozenset((*FROM_OUTSIDE, TIMEOUT, FINISHED, HEARTBEAT))

CATCH = "durastate.catch"
"""Internal only (the worker's, never accepted from a queue): a failure whose retries ran out, handed to
the ``on_error`` of the nearest active state."""

REINVOKE_PREFIX = "~invoke:"
"""The timer path (``~invoke:<state path>``) that starts the next try of a failed invoke with a retry."""

TASK = "durastate.task"
"""The name of a task request in the outbox (``invoke: {task: ...}``): the relay hands it to its task
runner, never to a worker (so it is not in :data:`RESERVED`: no queue accepts it)."""

TASK_TIMEOUT_PREFIX = "~task:"
"""The timer path (``~task:<state path>``) that abandons a task that did not answer within its ``timeout``."""

RUN_TIMEOUT_PATH = "~deadline"
"""The timer path of an execution's run timeout (the definition's ``timeout``, or the start's): armed when
the execution starts, it cancels or fails the whole execution (:mod:`durastate.engine.run_timeout`)."""

HEARTBEAT_TIMEOUT_PREFIX = "~heartbeat:"
"""The timer path (``~heartbeat:<state path>``) that abandons a task whose last heartbeat (or start) is older
than its ``heartbeat_timeout``; every heartbeat re-arms it."""

TASK_CANCEL = "durastate.task_cancel"
"""The name of a cancel request in the outbox: the execution stopped waiting for a task still running (it
left the state, ended, or the task timed out); the relay asks the task to stop (an HTTP task's
``cancel_url``, a Python task's cancellation flag). Like :data:`TASK`, never accepted from a queue."""

SEND_PREFIX = "~send:"
"""The timer path (``~send:<send id>``) of a delayed ``send`` to the execution itself: when it fires, the event
kept in :attr:`~durastate.engine.model.Execution.sends` under the same key is applied. It belongs to no
state (leaving the state that sent it does not cancel it; a ``cancel`` action or the execution's end does)."""

RETRY_PATH = "~retry"
"""The timer path of a pending retry (``~`` cannot occur in a state path, so no state's timer collides)."""

AFTER_SEPARATOR = "~after:"
"""Joins a state path and the index of its ``after`` timer in timer keys: the first timer of a state is
keyed by the state's path alone (as before states could have several), the i-th (i >= 1) by
``<path>~after:<i>``."""

SYSTEM_PREFIX = CHILD_SEPARATOR
"""Execution ids of *system records* kept in the executions table beside user executions (archived
definition versions, schedules) start with ``~`` and their kind: ``~definition~…``, ``~schedule~…``. No
user id contains ``~``, and a child id is ``{parent}~{n}`` or, when that is too long, ``~`` and 64 hex
digits — never ``~`` followed by a kind name — so the namespaces cannot meet. Their definition ids start
with ``~`` too (a definition's own id cannot), so listings leave them out unless asked for them by
definition id."""
DEFINITION_RECORD = "~definition"
"""The definition id of archived definition-version records (``~definition~<definition id>~<version>``)."""
SCHEDULE_RECORD = "~schedule"
"""The definition id of schedule records (``~schedule~<schedule name>``)."""
CLOCK_RECORD = "~clock"
"""The definition id of the record that holds how far ``durastate serve --advance`` moved a store's clock."""
CLOCK_RECORD_ID = f"{CLOCK_RECORD}~offset"
"""The one clock record of a store (``~clock~offset``); the command line reads it (``durastate.cli.clock``)."""
SYSTEM_RECORDS = (DEFINITION_RECORD, SCHEDULE_RECORD, CLOCK_RECORD)


_SYSTEM_ID_PREFIXES = tuple(kind + CHILD_SEPARATOR for kind in SYSTEM_RECORDS)

REDRIVE = "redrive"
"""The kind of a redrive's event id (``~redrive:<event id>:<n>``): the event keeps its own name, so unlike
the reserved events' kinds this one is not tied to a name (:func:`redrive_event_id`)."""

TIMER_SKEW = 5.0
"""How many seconds before its ``fire_at`` (by the worker's clock) a ``durastate.timeout`` is still
applied: room for the clocks of the sweeper (or the timer hop) and the worker to differ a little. One
that comes earlier is refused (:class:`~durastate.errors.TimerNotDue`) and its timer stays armed, so the
true one still fires on time."""


def is_system_id(execution_id: str) -> bool:
    """Whether ``execution_id`` names a system record rather than an execution."""
    return execution_id.startswith(_SYSTEM_ID_PREFIXES)


def is_derived_event_id(event_id: str) -> bool:
    """Whether ``event_id`` is in the namespace of the event ids the runtime derives (it starts with ``~``:
    ``~timeout:…``, ``~finished:…``, ``~cancel:…``, ``~redrive:…``; see the module docstring)."""
    return event_id.startswith(SYSTEM_PREFIX)


def producer_problem(target_id: str, name: str, event_id: str) -> str | None:
    """Why a producer may not send event ``name`` with id ``event_id`` to ``target_id`` (``None``: it may).

    The check of every producer entry (``LocalRuntime.send``, ``DurastateClient.send``, ``durastate send``),
    made once per event and cheap (prefix tests): no event to a system record, no reserved name the
    runtime alone sends, no id in the runtime's namespace. The client's and the CLI's own control helpers
    (``cancel`` and the like) build their events themselves and do not go through it.
    """
    if target_id.startswith(_SYSTEM_ID_PREFIXES):
        return (f"{target_id!r} is a system record (a schedule, an archived definition version or the clock "
                "offset), not an execution: it accepts no events; use `durastate schedules pause/resume/trigger` "
                "for a schedule")
    if name.startswith(RESERVED_PREFIX) and name not in FROM_OUTSIDE:
        return (f"{name!r} is a reserved event only durastate itself sends; a producer may send "
                f"{', '.join(sorted(FROM_OUTSIDE))} and its own events")
    if event_id.startswith(SYSTEM_PREFIX):
        return (f"event id {event_id!r} starts with {SYSTEM_PREFIX!r}, the namespace of the event ids durastate "
                f"derives itself (timeouts, finished notices, redrives, control events); choose an id that "
                f"does not start with {SYSTEM_PREFIX!r}")
    return None


def timeout_problem(target_id: str, event_id: str, data: dict[str, object], now: float) -> str | None:
    """Why the ``durastate.timeout`` ``event_id`` for ``target_id`` with ``data`` is refused at ``now``
    (``None``: its id is the one its data derives and it is due, up to :data:`TIMER_SKEW` early).

    Whether its timer is armed is the worker's to check, against the execution it holds."""
    path, fire_at = data.get("path"), data.get("fire_at")
    if not isinstance(path, str) or not isinstance(fire_at, int | float) or isinstance(fire_at, bool):
        return "a durastate.timeout needs data.path (a string) and data.fire_at (a number)"
    if event_id != timeout_event_id(target_id, path, fire_at):
        return (f"timeout {event_id!r} does not have the id durastate derives for the timer {path!r} of "
                f"{target_id!r} at {fire_at!r}: durastate.timeout is sent by durastate itself")
    if fire_at > now + TIMER_SKEW:
        return (f"timeout {event_id!r} of the timer {path!r} is not due: it fires at {fire_at!r}, "
                f"{fire_at - now:.1f} s from now (at most {TIMER_SKEW:g} s early is accepted)")
    return None


def run_witness(secret: str, execution_id: str) -> str:
    """The witness the start of a derived execution ``execution_id`` carries: the HMAC-SHA256 of the id
    under the secret of whoever starts it (a schedule record, of its runs; a parent, of its invoked and
    mapped children), cut to :data:`TASK_MAC_CHARS` hex characters. Their ids are derivable and in the
    namespace no start from outside may take; the worker starts one only with a true witness."""
    return _mac(secret, execution_id)


def _mac(secret: str, text: str) -> str:
    """The HMAC-SHA256 of ``text`` under ``secret``, cut to :data:`TASK_MAC_CHARS` hex characters: the
    unguessable part of every id the rule makes a producer unable to derive."""
    return hmac.digest(secret.encode(), text.encode(), "sha256").hex()[:TASK_MAC_CHARS]


def definition_record_id(definition_id: str, version: str) -> str:
    """The id of the record archiving ``version`` of definition ``definition_id``:
    ``~definition~<definition id>~<version>``; over 128 characters, ``~definition~`` and the SHA-256 hex of
    that text (still deterministic, still a system id)."""
    text = f"{DEFINITION_RECORD}{SYSTEM_PREFIX}{definition_id}{SYSTEM_PREFIX}{version}"
    if len(text) <= MAX_ID_LENGTH:
        return text
    return f"{DEFINITION_RECORD}{SYSTEM_PREFIX}{hashlib.sha256(text.encode()).hexdigest()}"


def after_timer_key(path: str, index: int) -> str:
    """The timer key of the ``index``-th ``after`` timer of the state at ``path``."""
    return path if index == 0 else f"{path}{AFTER_SEPARATOR}{index}"


_STATE_TIMER_PREFIXES = (REINVOKE_PREFIX, TASK_TIMEOUT_PREFIX, HEARTBEAT_TIMEOUT_PREFIX)
"""The prefixes of the timer keys that belong to one state without being one of its ``after`` timers."""


def timer_key_state(key: str) -> str:
    """The state path a timer key belongs to (``""`` for an execution-wide timer such as the retry's)."""
    for prefix in _STATE_TIMER_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    if key in (RETRY_PATH, RUN_TIMEOUT_PATH) or key.startswith(SEND_PREFIX):
        return ""
    return key.split(AFTER_SEPARATOR, 1)[0]


def retarget_timer_key(key: str, new_path: str) -> str:
    """The same timer key for the state now at ``new_path`` (a migration renames states)."""
    for prefix in _STATE_TIMER_PREFIXES:
        if key.startswith(prefix):
            return prefix + new_path
    if key in (RETRY_PATH, RUN_TIMEOUT_PATH) or key.startswith(SEND_PREFIX):
        return key
    _, sep, index = key.partition(AFTER_SEPARATOR)
    return f"{new_path}{sep}{index}"


def describe_timer_key(key: str) -> str:
    """A timer key as a person reads it: ``waiting``, ``waiting after[1]`` (its second ``after`` timer),
    ``charging (retry of the invoke)``, ``charging (task timeout)``, ``(retry of the failed step)``."""
    if key.startswith(REINVOKE_PREFIX):
        return f"{key[len(REINVOKE_PREFIX):]} (retry of the invoke)"
    if key.startswith(TASK_TIMEOUT_PREFIX):
        return f"{key[len(TASK_TIMEOUT_PREFIX):]} (task timeout)"
    if key.startswith(HEARTBEAT_TIMEOUT_PREFIX):
        return f"{key[len(HEARTBEAT_TIMEOUT_PREFIX):]} (task heartbeat timeout)"
    if key == RETRY_PATH:
        return "(retry of the failed step)"
    if key == RUN_TIMEOUT_PATH:
        return "(run timeout)"
    if key.startswith(SEND_PREFIX):
        return f"(delayed send {key[len(SEND_PREFIX):]})"
    path, sep, index = key.partition(AFTER_SEPARATOR)
    return f"{path} after[{index}]" if sep else key


def _capped(text: str) -> str:
    if len(text) <= MAX_ID_LENGTH:
        return text
    return hashlib.sha256(text.encode()).hexdigest()


def derived_id(*parts: object) -> str:
    """``a:b:c`` from its parts, or its SHA-256 hex when over 128 characters."""
    return _capped(":".join(str(p) for p in parts))


def child_execution_id(parent_id: str, seq: int) -> str:
    """The id of the ``seq``-th child (region or invoke) of ``parent_id``: ``f"{parent_id}~{seq}"``.

    Over 128 characters it is ``~`` and the SHA-256 hex of that text: still deterministic, and still
    holding the separator no user id may contain.
    """
    return _capped_child_id(f"{parent_id}{CHILD_SEPARATOR}{seq}")


def _capped_child_id(text: str) -> str:
    """``text``, or ``~`` and its SHA-256 hex when it is over :data:`MAX_ID_LENGTH` characters."""
    if len(text) <= MAX_ID_LENGTH:
        return text
    return CHILD_SEPARATOR + hashlib.sha256(text.encode()).hexdigest()


TASK_MAC_CHARS = 16
"""Hex characters of the unguessable part of a task id (64 bits: no one guesses it by enqueueing)."""


def task_id(execution_id: str, seq: int, secret: str | None) -> str:
    """The id of the task the ``seq``-th invoke of ``execution_id`` runs: ``<execution id>~<n>~<mac>``.

    A task has no stored state a forged answer could be compared with (an invoked child has: its own
    execution), so its id is the witness instead. ``mac`` is an HMAC-SHA256 of ``<execution id>~<n>``
    under the execution's ``secret`` (:attr:`~durastate.engine.model.Execution.secret`, which never leaves
    the store), cut to :data:`TASK_MAC_CHARS` hex characters. The execution, the relay and the callee know
    the id; someone who can only enqueue events cannot derive it, so a ``durastate.finished`` notice naming
    any other id is ignored as one for a child the execution does not know. It is still a pure function of
    what the execution holds, so a re-run step derives the same id. Without a secret (an execution stepped
    by the engine alone, or a task started before executions had one) it is ``<execution id>~<n>``, like a
    child execution's. Over 128 characters: ``~`` and its SHA-256 hex (the mac is hashed in, so it is
    just as unguessable).
    """
    if not secret:
        return child_execution_id(execution_id, seq)
    text = f"{execution_id}{CHILD_SEPARATOR}{seq}"
    return _capped_child_id(f"{text}{CHILD_SEPARATOR}{_mac(secret, text)}")


def task_seq(execution_id: str, task: str, secret: str | None, invoke_seq: int) -> int | None:
    """The invoke number ``n`` for which ``task`` is :func:`task_id` of ``execution_id`` (``None``: it is no
    task of it). How the worker tells the true answer or heartbeat of a task the execution no longer waits
    for (traced as late) from a forged one (left unrecorded): only the store's secret derives the id."""
    prefix = f"{execution_id}{CHILD_SEPARATOR}"
    if task.startswith(prefix):
        n, _, _ = task[len(prefix):].partition(CHILD_SEPARATOR)
        if n.isdigit() and 0 < int(n) <= invoke_seq:
            return int(n) if hmac.compare_digest(task_id(execution_id, int(n), secret), task) else None
        return None
    if task.startswith(CHILD_SEPARATOR):  # a hashed (long) id: recompute the candidates
        return next((n for n in range(invoke_seq, 0, -1)
                     if hmac.compare_digest(task_id(execution_id, n, secret), task)), None)
    return None


def task_execution_id(task: str) -> str | None:
    """The execution a task id belongs to, read from the id itself (``<execution id>~<n>~<mac>``); ``None``
    for an id too long to hold it (hashed: ``~`` and 64 hex digits) or one that is not a task id."""
    head, sep, mac = task.rpartition(CHILD_SEPARATOR)
    exe, sep2, n = head.rpartition(CHILD_SEPARATOR)
    if not (sep and sep2 and exe and n.isdigit() and len(mac) == TASK_MAC_CHARS):
        return None
    return exe


def heartbeat_event_id(task: str, nonce: str) -> str:
    """A heartbeat of task ``task``: ``~heartbeat:<task id>:<nonce>`` (each heartbeat its own id, so none is
    dropped as a duplicate of an earlier one; a redelivered one is)."""
    return reserved_event_id(HEARTBEAT, task, nonce)


def task_cancel_id(task: str) -> str:
    """The outbox entry that asks the relay to stop task ``task`` (once per task)."""
    return reserved_event_id(TASK_CANCEL, task)


def start_event_id(execution_id: str) -> str:
    """The ``durastate.start`` event of ``execution_id``: starting the same id twice applies once."""
    return derived_id(execution_id, "start")


def reserved_event_id(name: str, *parts: object) -> str:
    """The id of an event of the reserved ``name`` the runtime derives: ``~<kind>:<parts>``.

    Runtime-derived ids of reserved events (timeouts, finished notices, cancels and other control events a
    parent passes to its children) live in a namespace of their own, ``~timeout:…``, ``~finished:…``, so
    that no producer can take one by choosing the same id for an event of its own: an event id with the
    prefix ``~<kind>:`` is accepted only on an event named ``durastate.<kind>``
    (:func:`reserved_id_problem`). Without that, a producer's ``{"id": <a timer's timeout id>}`` would be
    marked applied first and the real timeout then dropped as a duplicate. Over 128 characters the text
    after the prefix is its SHA-256 hex, so the prefix always survives.
    """
    return _namespaced(name[len(RESERVED_PREFIX):], ":".join(str(p) for p in parts))


def _namespaced(kind: str, body: str) -> str:
    """``~<kind>:<body>``, the body replaced by its SHA-256 hex when the whole is over 128 characters."""
    prefix = f"{SYSTEM_PREFIX}{kind}:"
    if len(prefix) + len(body) > MAX_ID_LENGTH:
        body = hashlib.sha256(body.encode()).hexdigest()
    return prefix + body


def reserved_id_problem(event_id: str, name: str) -> str | None:
    """Why ``event_id`` may not be the id of an event named ``name`` (``None``: it may).

    An id in the namespace of a reserved event (``~timeout:…``) belongs to that event alone.
    """
    if not event_id.startswith(SYSTEM_PREFIX):
        return None
    kind, sep, _ = event_id[1:].partition(":")
    reserved = RESERVED_PREFIX + kind
    if not sep or reserved not in RESERVED or name == reserved:
        return None
    return (f"event id {event_id!r} is in the namespace durastate keeps for its own {reserved!r} events "
            f"({SYSTEM_PREFIX}{kind}:…); give the event {name!r} an id that does not start with "
            f"{SYSTEM_PREFIX}{kind}:")


def cancel_event_id(execution_id: str) -> str:
    """The ``durastate.cancel`` event sent to ``execution_id`` (by its parent, the client or the CLI)."""
    return reserved_event_id(CANCEL, execution_id)


def terminate_event_id(execution_id: str) -> str:
    """The ``durastate.terminate`` a parent sends a child it invoked with ``parent_close: terminate`` when
    it leaves the invoking state or ends."""
    return reserved_event_id(TERMINATE, execution_id)


def finished_event_id(child_id: str) -> str:
    """The ``durastate.finished`` notice a child sends its parent when it ends (once per child)."""
    return reserved_event_id(FINISHED, child_id)


def control_event_id(execution_id: str, name: str, version: int, seq: int) -> str:
    """A control event (``name``: suspend, resume, terminate) an execution at ``version`` passes on to its
    ``seq``-th child."""
    return reserved_event_id(name, execution_id, version, seq)


def task_request_id(task_id: str) -> str:
    """The outbox entry that asks the relay to run task ``task_id`` (its result comes back as the
    ``durastate.finished`` notice :func:`finished_event_id` names)."""
    return reserved_event_id(TASK, task_id)


def redrive_event_id(event_id: str, n: int) -> str:
    """The failed event applied again by the ``n``-th redrive: ``~redrive:<event id>:<n>`` (a new id: the
    original is marked done), in the runtime's namespace so no producer can send it first."""
    return _namespaced(REDRIVE, f"{event_id}:{n}")


def retry_event_id(execution_id: str, fire_at: float) -> str:
    """The timeout that fires a pending retry (deterministic, like every timer's)."""
    return timeout_event_id(execution_id, RETRY_PATH, fire_at)


def emit_event_id(execution_id: str, version: int, seq: int, secret: str | None = None) -> str:
    """The ``seq``-th event an execution emits in the commit that moves it on from ``version``:
    ``<execution id>:<version>:<n>:<mac>``.

    ``seq`` counts over the whole commit (a resume that applies held events, a retry that succeeds, are
    several steps in one commit), so no two events of one commit share an id. ``mac`` is an HMAC-SHA256 of
    ``<execution id>:<version>:<n>`` under the execution's ``secret``, cut to :data:`TASK_MAC_CHARS` hex
    characters: the receiver has no stored state to check an emitted event against (it is an ordinary event
    of its own definition), so without the mac a producer could send the receiver an event under the id
    first and the true one would be dropped as a duplicate. It is still a pure function of what the
    execution holds, so a re-run step derives the same id. Without a secret (the engine alone, or an
    execution a worker has not stepped since before emitted ids had one) it is the plain
    ``<execution id>:<version>:<n>``. Over 128 characters: its SHA-256 hex (the mac hashed in).
    """
    text = f"{execution_id}:{version}:{seq}"
    return _capped(f"{text}:{_mac(secret, text)}" if secret else text)


def forwarded_event_id(event_id: str, child_id: str, secret: str | None = None) -> str:
    """An event a parallel state forwards to its region ``child_id``: ``<event id>:<child id>:<mac>``.

    ``mac`` is an HMAC-SHA256 of ``<event id>:<child id>`` under the forwarding (parent) execution's
    ``secret``, for the reason :func:`emit_event_id` gives: a region applies the forwarded event as one of
    its own, so the id must be one no producer can send it first. A leading ``~`` of the event id is left
    out, so that a forwarded redrive (``~redrive:…``) is not taken by the region for a redrive of its own.
    Without a secret: the plain ``<event id>:<child id>``, as before.
    """
    if not secret:
        return derived_id(event_id, child_id)
    text = f"{event_id.lstrip(SYSTEM_PREFIX)}:{child_id}"
    return _capped(f"{text}:{_mac(secret, text)}")


def timeout_event_id(execution_id: str, path: str, fire_at: float) -> str:
    """The id of the ``durastate.timeout`` event for the timer of ``path`` armed to ``fire_at``.

    The sweeper uses it so that sweeping the same due timer twice enqueues one event in effect.
    """
    return reserved_event_id(TIMEOUT, execution_id, path, repr(float(fire_at)))


def _digest(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def reset_event_id(execution_id: str, data: Mapping[str, Any]) -> str:
    """The id of the ``durastate.reset`` of ``execution_id`` with ``data``: ``<id>:reset:<digest of data>``.

    The data carries a request nonce (``request``), so two resets asked separately are two events, and the
    same request sent again (a retried command) is one. Derived from the data rather than chosen, so that
    whoever sends a reset first under this id sends exactly this reset (:func:`reset_problem`)."""
    return derived_id(execution_id, "reset", _digest(data))


def reset_problem(target_id: str, event_id: str, data: Mapping[str, Any]) -> str | None:
    """Why the ``durastate.reset`` ``event_id`` for ``target_id`` is refused (``None``: its id is the one its
    data derives)."""
    if event_id != reset_event_id(target_id, data):
        return (f"reset {event_id!r} does not have the id durastate derives from its data: a durastate.reset "
                "is built by `durastate reset` or DurastateClient.reset, not by hand")
    return None


def reset_sent_event_id(reset_id: str) -> str:
    """The event a reset delivers after it (``--send``), applied in the reset's own commit."""
    return derived_id(reset_id, "send")
