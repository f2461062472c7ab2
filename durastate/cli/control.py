"""Commands that control executions: ``cancel``, ``suspend``, ``resume``, ``reset``, ``terminate``, ``redrive``,
and a task's ``heartbeat``.

``cancel``, ``suspend``, ``resume`` and ``reset`` are events: they queue behind the execution's other events (in
the durable inbox, or on the SQS queue with ``--queue-url``) and apply in order. ``terminate`` and
``redrive`` are commits straight to the store: terminate must work while a failing message blocks the
execution's queue, and redrive restores a failed execution and queues its failed event again through the
outbox (``durastate serve`` delivers and applies it).
"""

from __future__ import annotations

import getpass
import json
from typing import Annotated, Any

import typer

from durastate.cli import output
from durastate.cli.clock import command_clock
from durastate.cli.common import StoreOption, parse_json_object, session
from durastate.cli.delivery import deliver, queued_start
from durastate.cli.session import Session, UsageError
from durastate.engine.introspect import unhandled_event
from durastate.engine.model import Event
from durastate.engine.tasks import heartbeat_message
from durastate.engine.values import check_event_id, object_from_json
from durastate.errors import InvalidValue, UnknownExecution
from durastate.store.control import (
    ControlRefused,
    cancel_event,
    check_reset_of,
    redrive,
    redrive_many,
    reset_event,
    resume_event,
    running_definition,
    suspend_event,
    terminate,
)

ReasonOption = Annotated[str | None, typer.Option("--reason", "-r", help="Why: kept on the execution, shown by "
                                                                         "`durastate show`.")]
EventIdOption = Annotated[str | None, typer.Option(
    "--id", metavar="EVENT_ID", help="Event id (the dedupe key). Default: a new one.")]


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel)
    app.command("suspend")(suspend)
    app.command("resume")(resume)
    app.command("reset")(reset)
    app.command("terminate")(terminate_)
    app.command("redrive")(redrive_)
    app.command("heartbeat")(heartbeat)


def control_event(verb: str, execution_id: str, reason: str | None = None, event_id: str | None = None) -> Event:
    """The event ``cancel``, ``suspend`` or ``resume`` queues for ``execution_id``, whichever way it travels
    (the store's inbox, or the SQS queue with ``--queue-url``): ``--id``, else a new id; a bad id is one
    line of error, not a traceback."""
    check_event_id(execution_id, "execution id")
    if event_id:
        check_event_id(event_id)
    if verb == "resume":
        return resume_event(execution_id, event_id)
    build = {"cancel": cancel_event, "suspend": suspend_event}[verb]
    return build(execution_id, reason, event_id)


def _deliver(sess: Session, execution_id: str, event: Event, verb: str, *, witnessed: bool = False) -> None:
    if sess.store.load(execution_id) is None and queued_start(sess, execution_id) is None:
        raise UnknownExecution(execution_id)  # (a start still queued counts: this queues behind it)
    result = deliver(sess, execution_id, event, witnessed=witnessed)
    if result.queued:
        output.say(f"queued {verb} for {execution_id} (event {event.id}); `durastate serve` applies it")
        return
    output.say(f"{verb} {execution_id}: {result.outcome}")
    if result.execution is not None:
        output.show_execution(result.execution)


def cancel(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    reason: ReasonOption = None,
    event_id: EventIdOption = None,
    store: StoreOption = None,
) -> None:
    """Cancel execution ID: its active states' exit actions run, children are cancelled, the parent is told."""
    _deliver(session(ctx, store), execution_id, control_event("cancel", execution_id, reason, event_id), "cancel")


def suspend(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    reason: ReasonOption = None,
    event_id: EventIdOption = None,
    store: StoreOption = None,
) -> None:
    """Suspend execution ID: events and due timers that reach it are kept until `durastate resume`."""
    _deliver(session(ctx, store), execution_id, control_event("suspend", execution_id, reason, event_id), "suspend")


def resume(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    event_id: EventIdOption = None,
    store: StoreOption = None,
) -> None:
    """Resume suspended execution ID: what it kept meanwhile applies now, in order."""
    _deliver(session(ctx, store), execution_id, control_event("resume", execution_id, event_id=event_id), "resume")


def heartbeat(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(metavar="TASK_ID", help="The task's `task_id` (it receives it).")],
    details: Annotated[str | None, typer.Option("--details", "-D", metavar="JSON", help="Progress the execution "
                                                "keeps as the task's last heartbeat (a JSON object).")] = None,
    execution_id: Annotated[str | None, typer.Option("--execution", metavar="ID", help="The task's execution "
                                                     "(read from TASK_ID unless the id is a hashed one).")] = None,
    store: StoreOption = None,
) -> None:
    """Report that task TASK_ID is alive: a task with a `heartbeat_timeout` must do so that often, or it fails
    with TaskTimeout. A heartbeat for a task that is no longer running is ignored (traced)."""
    sess = session(ctx, store)
    target, event = heartbeat_message(task_id, parse_json_object(details, "--details") if details else None,
                                      execution_id)
    _deliver(sess, target, event, "heartbeat", witnessed=True)


def terminate_(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    reason: ReasonOption = None,
    store: StoreOption = None,
) -> None:
    """Terminate execution ID now: no action runs, timers are disarmed, children are terminated."""
    sess = session(ctx, store)
    try:
        exe = terminate(sess.store, execution_id, reason)
    except ControlRefused as err:
        raise UsageError(str(err)) from None
    output.say(f"terminated {execution_id}" + (f": {reason}" if reason else ""))
    output.show_execution(exe)


def redrive_(
    ctx: typer.Context,
    execution_id: Annotated[str | None, typer.Argument(metavar="[ID]", help="The failed execution.")] = None,
    definition: Annotated[str | None, typer.Option(
        "--definition", metavar="DEFINITION", help="Redrive the failed executions of DEFINITION.")] = None,
    status: Annotated[str, typer.Option("--status", help="Only `failed` can be redriven.")] = "failed",
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many (with --definition).")] = 100,
    store: StoreOption = None,
) -> None:
    """Redrive failed execution ID (or every failed execution of --definition) from its failed step."""
    if status != "failed":
        raise UsageError(f"--status {status!r}: only failed executions can be redriven")
    if (execution_id is None) == (definition is None):
        raise UsageError("give the ID of a failed execution, or --definition DEFINITION (not both)")
    sess = session(ctx, store)
    if execution_id is not None:
        try:
            done = redrive(sess.store, execution_id, command_clock())
        except ControlRefused as err:
            raise UsageError(str(err)) from None
        output.say(f"redriven {done.execution_id}: {done.event.name} is applied again as event {done.event.id}"
                   + ("" if sess.inbox is None else "; `durastate serve` applies it"))
        return
    count = refused = 0
    for result in redrive_many(sess.store, definition, limit, clock=command_clock()):
        if isinstance(result, ControlRefused):
            refused += 1
            output.warn(str(result))
            continue
        count += 1
        output.say(f"redriven {result.execution_id}: {result.event.name} again as {result.event.id}")
    output.say(f"{count} execution(s) of {definition} redriven" + (f", {refused} refused" if refused else ""))


def _json_object(text: str | None, what: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        return object_from_json(text, what)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what}: not valid JSON ({exc.msg} at column {exc.colno}): {text}") from None
    except InvalidValue as exc:
        raise UsageError(str(exc)) from None


def _operator() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without one)
        return "cli"


def reset(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    to: Annotated[str, typer.Option("--to", metavar="STATE[,STATE…]", help=(
        "The configuration: state paths (one per region of an inline parallel state; a compound state "
        "means its default, regions not named start at theirs)."))],
    actions: Annotated[str, typer.Option("--actions", metavar="none|transition", help=(
        "Run the exit and entry actions of the states left and entered (`transition`) or not (`none`)."))] = "none",
    context_patch: Annotated[str | None, typer.Option("--context-patch", metavar="JSON", help=(
        "A JSON merge patch applied to the context first (null removes a key)."))] = None,
    send: Annotated[str | None, typer.Option("--send", metavar="EVENT", help=(
        "An event applied right after the reset, in the same commit."))] = None,
    data: Annotated[str | None, typer.Option("--data", metavar="JSON", help="The data of the --send event.")] = None,
    force: Annotated[bool, typer.Option("--force", help=(
        "Send the --send event even if no state of the definition handles it."))] = False,
    reason: ReasonOption = None,
    by: Annotated[str | None, typer.Option("--by", help="Who asks (traced; default: your user name).")] = None,
    store: StoreOption = None,
) -> None:
    """Reset execution ID (running, suspended or failed) to a named configuration of its own version."""
    sess = session(ctx, store)
    event = reset_command_event(sess, execution_id, to, actions, context_patch, send, data, reason, by, force)
    _deliver(sess, execution_id, event, "reset")


def reset_command_event(sess: Session | None, execution_id: str, to: str, actions: str, context_patch: str | None,
                        send: str | None, data: str | None, reason: str | None, by: str | None,
                        force: bool = False) -> Event:
    """The ``durastate.reset`` the ``reset`` command sends, checked first against ``sess``'s store (its
    status, the configuration in its version and, unless ``force``, that the version handles the --send
    event, as ``durastate send`` checks) when there is one; a bad option is one line of error."""
    states = [p.strip() for p in to.split(",") if p.strip()]
    check_event_id(execution_id, "execution id")
    patch = _json_object(context_patch, "--context-patch")
    if data is not None and send is None:
        raise UsageError("--data is the data of the --send event: give --send EVENT too")
    sent = None if send is None else (send, _json_object(data, "--data") or {})
    try:
        event = reset_event(execution_id, states, actions=actions, context_patch=patch, send=sent, reason=reason,
                            by=by or _operator())
        if sess is not None:
            exe, _ = check_reset_of(sess.store, sess.registry, execution_id, states)
            defn = running_definition(sess.store, sess.registry, exe) if send and not force else None
            problem = unhandled_event(defn, send) if defn is not None and send else None
            if problem is not None:
                raise UsageError(f"{problem}; --force sends it anyway")
    except ControlRefused as err:
        raise UsageError(str(err)) from None
    return event
