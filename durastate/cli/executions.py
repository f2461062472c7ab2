"""Commands about executions: ``start``, ``send``, ``show``, ``list``, ``trace``, ``history``.

``start`` and ``send`` check what they can before anything is queued — the definition exists, the JSON
parses, the execution exists (or its start is already queued), the definition handles the event — and
then hand the event to :mod:`durastate.cli.delivery`, which queues it in the store's durable inbox (applied
by ``durastate serve``) or, for a store without one, applies it in this process.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from durastate.cli import clock, output, waiting
from durastate.cli.common import (
    DefinitionsOption,
    JsonOption,
    StoreOption,
    parse_duration_option,
    parse_json_object,
    session,
)
from durastate.cli.delivery import QUEUED_UNKNOWN, deliver, queued_start
from durastate.cli.session import Session, UsageError
from durastate.cli.timeline import TraceView
from durastate.engine.control import redrivable
from durastate.engine.ids import MAX_ID_LENGTH, start_event_id
from durastate.engine.introspect import unhandled_event
from durastate.engine.model import CANCEL, ENDED, RESERVED_PREFIX, START, STATUSES, Event, Execution, new_id
from durastate.engine.run_timeout import check_start_timeout
from durastate.engine.search import Condition, typed_where
from durastate.engine.values import check_event_id, check_execution_id
from durastate.errors import InvalidValue, UnknownExecution
from durastate.store.base import ExecutionStore, keeps_history


def register(app: typer.Typer) -> None:
    app.command("start")(start)
    app.command("send")(send)
    app.command("show")(show)
    app.command("list")(list_)
    app.command("trace")(trace)
    app.command("history")(history)


def start(
    ctx: typer.Context,
    definition: Annotated[str, typer.Argument(help="Definition id (the `id:` of a file in the definitions "
                                                   "folder).")],
    execution_id: Annotated[str | None, typer.Option(
        "--id", help="Execution id; starting an id that exists does nothing (idempotent). "
                     "Default: a new uuid.")] = None,
    context: Annotated[str | None, typer.Option(
        "--context", "-c", metavar="JSON", help="Initial context, a JSON object merged over the "
                                                "definition's default context.")] = None,
    timeout: Annotated[str | None, typer.Option(
        "--timeout", metavar="DURATION",
        help="Run timeout (1h, 2d 3h, seconds) instead of the definition's `timeout`: then it fails or is "
             "cancelled, as `on_timeout` says.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the execution id.")] = False,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Start an execution of DEFINITION."""
    seconds = check_start_timeout(timeout, "--timeout") if timeout is not None else None
    sess = session(ctx, store, definitions, creates=True)
    data_context = parse_json_object(context, "--context")
    defn = sess.registry.get(definition)
    exe_id = _check_id(execution_id) if execution_id is not None else new_id()
    existing = sess.store.load(exe_id)
    if existing is not None:
        output.warn(f"execution {exe_id} already exists ({existing.definition_id}, {existing.status}); "
                    "start is idempotent, nothing was queued")
        if quiet:
            output.say(exe_id)
        else:
            output.show_execution(existing)
        return
    data: dict[str, Any] = {"definition_id": defn.id, "context": data_context}
    if seconds is not None:
        data["timeout"] = seconds
    event = Event(id=start_event_id(exe_id), name=START, data=data)
    result = deliver(sess, exe_id, event)
    if quiet:
        output.say(exe_id)
    elif result.queued:
        output.say(f"started {exe_id} ({defn.id}): queued, `durastate serve` applies it")
    else:
        output.say(f"started {exe_id} ({defn.id})")
        if result.execution is not None:
            output.show_execution(result.execution)


def send(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID", help="The execution to send to.")],
    event_name: Annotated[str, typer.Argument(metavar="EVENT", help="Event name, e.g. `submit`.")],
    data: Annotated[str | None, typer.Option("--data", "-D", metavar="JSON",
                                             help="Event data, a JSON object.")] = None,
    event_id: Annotated[str | None, typer.Option(
        "--id", metavar="EVENT_ID", help="Event id: the dedupe key; sending the same id twice applies it "
                                         "once. Default: a new uuid.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Send even if no state of the definition handles "
                                                        "EVENT or the execution has ended.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the event id.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Send nothing: step a copy of the execution as stored now and print what the event "
                          "would do (transitions, actions, emits, timers, spawns, context).")] = False,
    explain_: Annotated[bool, typer.Option(
        "--explain", help="Send nothing: list the transitions that may take EVENT, in the order they are "
                          "tried, with each guard's value, and which one is taken.")] = False,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """Send EVENT to execution ID (or, with --dry-run / --explain, show what it would do)."""
    from durastate.cli.versions import definition_of

    sess = session(ctx, store, definitions)
    inspect = dry_run or explain_
    payload = parse_json_object(data, "--data")
    if event_name.startswith(RESERVED_PREFIX) and event_name != CANCEL:
        raise UsageError(f"event names starting with {RESERVED_PREFIX!r} are reserved for the runtime "
                         f"(only {CANCEL!r} may be sent by hand)")
    eid = _check_id(event_id, "event id") if event_id is not None else new_id()
    exe = sess.store.load(execution_id)
    definition_id: str | None
    if exe is not None:
        definition_id = exe.definition_id
        if redrivable(exe) and not inspect:
            output.note(f"execution {execution_id} has failed: the event is held, and applies after "
                        f"`durastate redrive {execution_id}`")
        elif exe.status not in ("running", "suspended") and not force and not inspect:  # suspended: holds
            outcome = f" ({exe.outcome})" if exe.outcome else ""
            ended = "was purged" if exe.status == "purged" else f"has {exe.status}"
            raise UsageError(f"execution {execution_id} {ended}{outcome} and takes no more events "
                             "(--force sends it anyway)")
    else:
        definition_id = queued_start(sess, execution_id)
        if definition_id is None:
            raise UnknownExecution(execution_id)
        if inspect:
            raise UsageError(f"execution {execution_id} is queued but not started yet: run `durastate serve`, "
                             "then ask again")
    if event_name != CANCEL and not force:
        if definition_id == QUEUED_UNKNOWN:
            pass  # its start is queued but this inbox cannot show which definition: nothing to check
        elif sess.definitions_dir is None and sess.inbox is not None:
            # Only a check here (serve needs the definitions, send does not): say it was skipped.
            output.note("no definitions folder (--definitions / DURASTATE_DEFINITIONS): event name not checked")
        else:
            defn = definition_of(sess, exe) if exe is not None else sess.registry.get(definition_id)
            problem = unhandled_event(defn, event_name)
            if problem is not None:
                raise UsageError(f"{problem}; --force sends it anyway")
            if exe is not None and not inspect:
                from durastate.cli.explain import warn_if_unhandled_now

                warn_if_unhandled_now(defn, exe, Event(id=eid, name=event_name, data=payload), sess.store.load)
    event = Event(id=eid, name=event_name, data=payload)
    if inspect:
        assert exe is not None
        from durastate.cli.explain import explanations, print_dry_run, print_explanation

        defn = definition_of(sess, exe)  # the version it runs on
        if explain_:
            print_explanation(explanations(defn, exe, event, sess.store.load))
        if dry_run:
            print_dry_run(defn, exe, event, clock.now(), sess.store.load)
        return
    result = deliver(sess, execution_id, event)
    if quiet:
        output.say(eid)
    elif result.queued:
        output.say(f"queued {event_name} for {execution_id} (event {eid})")
    else:
        output.say(f"sent {event_name} to {execution_id} (event {eid}): {result.outcome}")
        if result.execution is not None:
            output.show_execution(result.execution)


def _check_id(value: str, what: str = "execution id") -> str:
    """The entry rules of :mod:`durastate.engine.values`, plus no spaces (ids are typed in shells)."""
    if any(c.isspace() for c in value):
        raise UsageError(f"{what} {value!r} must be 1 to {MAX_ID_LENGTH} characters without spaces")
    try:
        return check_execution_id(value, what) if what == "execution id" else check_event_id(value, what)
    except InvalidValue as exc:
        raise UsageError(str(exc)) from None


def show(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Show execution ID: status, active state(s), context, children, the timers of it and its children,
    and the events queued for it (inbox, outbox, dead letters)."""
    sess = session(ctx, store)
    exe = sess.store.load(execution_id)
    if exe is None:
        pending = queued_start(sess, execution_id)
        if pending is not None:
            what = f" ({pending})" if pending else ""
            raise UsageError(f"execution {execution_id}{what} is queued but not started yet; "
                             "run `durastate serve` to apply it")
        raise UnknownExecution(execution_id)
    found = waiting.gather(sess, exe)
    children = [c for c in found.descendants if c.id in exe.children]
    if as_json:
        output.print_json({**output.execution_json(exe, children), "waiting": found.as_json()})
    else:
        output.show_execution(exe, children)
        waiting.show_waiting(found)


def list_(
    ctx: typer.Context,
    status: Annotated[list[str] | None, typer.Option(
        "--status", help=f"Only this status (repeatable): {', '.join(STATUSES)}.")] = None,
    definition: Annotated[str | None, typer.Option("--definition", help="Only this definition id.")] = None,
    roots: Annotated[bool, typer.Option("--roots", help="Only top-level executions (no region or "
                                                        "invoked children).")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=10_000, help="At most this many.")] = 50,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue a previous listing.")] = None,
    parent: Annotated[str | None, typer.Option("--parent", metavar="ID", help="Only the children of execution "
                                                                              "ID.")] = None,
    since: Annotated[str | None, typer.Option("--since", metavar="DURATION", help="Only executions updated in "
                                              "the last DURATION (90s, 15m, 1h, 2d 3h).")] = None,
    where: Annotated[list[str] | None, typer.Option(
        "--where", metavar="FIELD OP VALUE", help="Only executions whose search field compares so "
        "(customer=c-17, total>100; OP: = != > >= < <=); repeatable, all must hold.")] = None,
    as_json: JsonOption = False,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
) -> None:
    """List executions, optionally filtered by status, definition, parent, last update and search fields."""
    statuses: list[str] = []
    for item in status or []:
        statuses.extend(s.strip() for s in item.split(",") if s.strip())
    bad = [s for s in statuses if s not in STATUSES]
    if bad:
        raise UsageError(f"unknown status {bad[0]!r}; use one of {', '.join(STATUSES)}")
    updated_after = clock.now() - parse_duration_option(since) if since is not None else None
    sess = session(ctx, store, definitions)
    conditions = _where(sess, where or [], definition)
    page = sess.store.list_executions(definition_id=definition, status=statuses or None, roots_only=roots,
                                      limit=limit, cursor=cursor, parent_id=parent, updated_after=updated_after,
                                      where=conditions)
    if as_json:
        output.print_json({"items": [output.summary_json(s) for s in page.items],
                           "next_cursor": page.next_cursor})
        return
    output.list_executions(page.items)
    if page.next_cursor:
        again = "".join(f" {flag} {shlex.quote(str(value))}" for flag, value in (
            ("--limit", limit if limit != 50 else None), ("--definition", definition), ("--parent", parent),
            ("--status", ",".join(statuses) or None), *(("--where", w) for w in where or ())) if value is not None)
        output.note(f"more: durastate list --cursor {page.next_cursor}{again}" + (" --roots" if roots else ""))


def _where(sess: Session, texts: list[str], definition: str | None) -> tuple[Condition, ...]:
    """``--where`` typed by the search fields the definitions declare (``--definition``: its own)."""
    if not texts:
        return ()
    defs = [sess.registry.get(definition)] if definition else list(sess.registry)
    return typed_where(texts, {d.id: d.search for d in defs})


def trace(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    last: Annotated[int | None, typer.Option("--last", "-n", min=1, help="Only the last N steps.")] = None,
    ids: Annotated[bool, typer.Option("--ids/--no-ids", help="Show event ids (default: on).")] = True,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new steps as they are "
                                                                "committed, until Ctrl-C.")] = False,
    until_ended: Annotated[bool, typer.Option("--until-ended", help="With --follow: stop once the execution "
                                                                    "has ended and its last step is printed.")] = False,
    poll: Annotated[str, typer.Option("--poll", metavar="DURATION", help="With --follow: how often to read "
                                                                         "the trace (default 0.5s).")] = "0.5s",
    as_json: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Print the recorded steps of execution ID, oldest first, as a timeline (--json: the raw steps)."""
    interval = parse_duration_option(poll)
    if interval <= 0:
        raise UsageError("--poll must be more than 0 seconds")
    if until_ended and not follow:
        raise UsageError("--until-ended goes with --follow")
    sess = session(ctx, store)
    exe = sess.store.load(execution_id)
    if exe is None:
        raise UnknownExecution(execution_id)
    steps = sess.store.read_trace(execution_id)
    if last is not None:
        steps = steps[-last:]
    view = TraceView(show_ids=ids)
    if not follow:
        said = trace_note(sess.store, exe, steps)
        if as_json:
            output.print_json(steps)
        elif said:
            output.note(said)
        for step in [] if as_json else steps:
            for line in view.render(step):
                output.say(line)
        return
    follow_trace(sess.store, execution_id, steps, view, as_json, interval, until_ended)


_AWS_TRACE = ("on AWS only the steps that fail are recorded unless the deployment traces every step "
              "(DURASTATE_TRACE=1: cdk deploy -c durastate:trace=true)")


def _on_aws(store: ExecutionStore) -> bool:
    return type(store).__module__.startswith("durastate.store.dynamodb.")  # (no import: boto3 is an extra)


def no_trace_note(store: ExecutionStore, execution_id: str) -> str:
    """What an empty trace means: on AWS (a DynamoDB store) the deployment may record only failed steps."""
    if _on_aws(store):
        return f"no trace step recorded for {execution_id}: {_AWS_TRACE}, and none of its steps failed"
    return f"no trace recorded for {execution_id}"


def trace_note(store: ExecutionStore, exe: Execution, steps: Sequence[dict[str, Any]]) -> str | None:
    """What the recorded ``steps`` of ``exe`` leave out, said before they are printed (``None``: nothing).

    On AWS a deployment that does not trace every step still records the ones that fail, so a trace of
    failures only, of an execution that committed more steps than that, is most likely such a deployment's:
    shown bare, it would read as all the execution ever did."""
    if not steps:
        return no_trace_note(store, exe.id)
    if _on_aws(store) and exe.version > len(steps) and all("error" in s for s in steps):
        return f"only the failed steps of {exe.id} are recorded: {_AWS_TRACE}"
    return None


def history(
    ctx: typer.Context,
    execution_id: Annotated[str, typer.Argument(metavar="ID")],
    ids: Annotated[bool, typer.Option("--ids/--no-ids", help="Show event ids (default: on).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="One step a line (JSON Lines), as stored: what "
                                                         "`validate --replay FILE` reads.")] = False,
    store: StoreOption = None,
) -> None:
    """Print every recorded step of execution ID, oldest first — its whole history when the store keeps
    histories (a store URL with ?history=1), not only the trace's newest steps."""
    sess = session(ctx, store)
    exe = sess.store.load(execution_id)
    if exe is None:
        raise UnknownExecution(execution_id)
    steps = sess.store.read_history(execution_id)
    if not keeps_history(sess.store):
        output.warn(f"this store keeps only the newest {sess.store.trace_max} steps of an execution: open it "
                    "with ?history=1 in its URL (DURASTATE_STORE) to keep whole histories")
    elif steps and steps[0].get("index") != 0:
        output.warn(f"the history of {execution_id} begins at step #{steps[0].get('index')}: the steps before "
                    "were trimmed before the store kept histories")
    if as_json:
        for step in steps:
            output.console.file.write(json.dumps(step, default=str) + "\n")
        output.console.file.flush()
        return
    said = trace_note(sess.store, exe, steps)
    if said:
        output.note(said)
    view = TraceView(show_ids=ids)
    for step in steps:
        for line in view.render(step):
            output.say(line)


def follow_trace(store: ExecutionStore, execution_id: str, first: list[dict[str, Any]], view: TraceView,
                 as_json: bool, interval: float, until_ended: bool) -> None:
    """Print ``first``, then every step committed after it, reading the trace every ``interval`` seconds.

    A step is new when its ``index`` is above the last one printed (the index keeps climbing when the
    ring drops old steps). With ``until_ended``, the execution's status is read *before* the trace, so
    once it is seen ended, the trace read after it holds its last step. Ctrl-C stops it (exit 0).
    """
    seen = -1

    def emit(steps: list[dict[str, Any]]) -> None:
        nonlocal seen
        for step in steps:
            index = step.get("index")
            if isinstance(index, int):
                if index <= seen:
                    continue
                seen = index
            if as_json:
                output.console.file.write(json.dumps(step, default=str) + "\n")  # one JSON object a line
            else:
                for line in view.render(step):
                    output.say(line)
        output.console.file.flush()

    try:
        emit(first)
        while True:
            ended = False
            if until_ended:
                exe = store.load(execution_id)
                ended = exe is None or exe.status in ENDED
            emit(store.read_trace(execution_id))
            if ended:
                return
            time.sleep(interval)  # a poll, not a busy loop: the store has no change feed to wait on
    except KeyboardInterrupt:
        output.console.file.flush()
