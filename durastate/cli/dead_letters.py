"""``durastate dead-letters list | show ID | replay (--all | --id ID …) | drop ID``.

A dead letter is an event the runtime could never apply as it was — malformed, for a definition or an
execution that does not exist, over the backend's limits, refused for good — kept with its reason, the
error, when, and after how many attempts (see :class:`~durastate.transport.DeadLetterBox`). Where:

    sqlite:// and postgresql:// stores   the ``dead_letters`` table next to the store's inbox
    --dlq-url URL (DURASTATE_DLQ_URL)     the AWS stack's SQS dead-letter queue; a replay sends to
                                          --queue-url (DURASTATE_QUEUE_URL), by default the queue whose
                                          redrive policy names the DLQ

``replay`` puts the events back on the queue with their ids: ``durastate serve`` (or the worker on AWS)
applies them, and one that was in fact applied changes nothing. Before anything moves it refuses, in one
line, what would only come back as a dead letter: a start whose definition is still missing, an event for
an execution that does not exist and whose start is neither queued nor replayed with it, a letter without
an event (``--force`` replays anyway). On AWS the definitions are checked only when ``--definitions`` (or
``DURASTATE_DEFINITIONS``) names a folder: the deployed worker has its own copy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from durastate.cli import clock, output
from durastate.cli.aws_queue import aws_errors
from durastate.cli.common import DefinitionsOption, JsonOption, StoreOption, session
from durastate.cli.session import DEFAULT_STORE, DEFINITIONS_ENV, STORE_ENV, Session, UsageError, redact
from durastate.engine import DefinitionRegistry
from durastate.runtime.definitions import load_folder
from durastate.runtime.local import check_replay
from durastate.transport.aws_clients import AwsSetupError, aws_client, configured_endpoint, local_origin
from durastate.transport.base import DeadLetter, DeadLetterBox, UnknownDeadLetter

DLQ_URL_ENV = "DURASTATE_DLQ_URL"
QUEUE_URL_ENV = "DURASTATE_QUEUE_URL"

DlqUrlOption = Annotated[str | None, typer.Option(
    "--dlq-url", metavar="URL", envvar=DLQ_URL_ENV, show_envvar=True,
    help="The AWS stack's SQS dead-letter queue (instead of the local store's dead letters).")]
QueueUrlOption = Annotated[str | None, typer.Option(
    "--queue-url", metavar="URL", envvar=QUEUE_URL_ENV, show_envvar=True,
    help="With --dlq-url: the event queue a replay sends to (default: the queue whose redrive policy "
         "names the DLQ).")]

dead_letters_app = typer.Typer(
    name="dead-letters", no_args_is_help=True, rich_markup_mode="rich",
    help="Events the runtime could never apply, kept with why: list, show, replay or drop them.")


def register(app: typer.Typer) -> None:
    app.add_typer(dead_letters_app, name="dead-letters")


# -- where the letters are ---------------------------------------------------------------------------
class _Place:
    """The box of one command, and what a replay check may consult there."""

    def __init__(self, box: DeadLetterBox, sess: Session | None, where: str) -> None:
        self.box = box
        self.sess = sess
        self.where = where
        self.aws = sess is None


def _place(ctx: typer.Context, store: str | None, dlq_url: str | None, queue_url: str | None,
           definitions: str | None = None) -> _Place:
    dlq = (dlq_url or "").strip()
    if dlq:
        from durastate.transport.sqs import SqsDeadLetters

        return _Place(SqsDeadLetters(_sqs_client(dlq), dlq, (queue_url or "").strip() or None), None, dlq)
    sess = session(ctx, store, definitions)
    inbox = sess.inbox
    box = getattr(inbox, "dead_letter_box", None) if inbox is not None else None
    if box is None:
        raise UsageError(f"{sess.scheme}:// keeps no dead letters: events are applied in the command that "
                         "sends them, and one that cannot apply fails that command; use a sqlite:// or "
                         f"postgresql:// store, or --dlq-url (or {DLQ_URL_ENV}) for the AWS stack's queue")
    return _Place(box, sess, redact(sess.store_url))


def _sqs_client(url: str) -> Any:
    """A boto3 SQS client for a queue URL, built as ``durastate start --queue-url`` builds its own."""
    if not url.startswith(("https://", "http://")):
        raise UsageError(f"--dlq-url {url!r} is not a queue URL (https://sqs.<region>.amazonaws.com/<account>/"
                         "<name>-dlq.fifo)")
    try:
        import boto3  # type: ignore[import-untyped]  # noqa: F401  (only to fail with the extra to install)
    except ImportError as exc:
        raise UsageError(f"--dlq-url needs boto3: pip install 'durastate[aws]' ({exc})") from exc
    with aws_errors("SQS", configured_endpoint("sqs") or local_origin(url) or url):
        return aws_client("sqs", url=url, label=f"SQS queue {url}")


@contextmanager
def _answers(place: _Place) -> Iterator[None]:
    """On AWS: botocore's errors as one line naming the queue (never "unexpected")."""
    if not place.aws:
        yield
        return
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    with aws_errors("SQS", place.where):
        try:
            yield
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise AwsSetupError(f"SQS refused {exc.operation_name} on {place.where}: {err.get('Code', '?')}: "
                                f"{' '.join(str(err.get('Message', '')).split())}") from exc


def command_hint(sess: Session | None, *words: str) -> str:
    """``durastate dead-letters WORDS…``, with ``--store URL`` when the store came from an option."""
    extra = ""
    if sess is not None and sess.store_url not in (os.environ.get(STORE_ENV, "").strip(), DEFAULT_STORE):
        extra = f" --store {redact(sess.store_url)}"
    return "durastate dead-letters " + " ".join(words) + extra


def describe(letter: DeadLetter) -> str:
    """What the letter carried, in a few words."""
    if not letter.replayable and letter.body is not None:
        return "a message that is not the wire format"
    return output.describe_event(letter.event)


# -- commands -------------------------------------------------------------------------------------------
@dead_letters_app.command("list")
def list_(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most this many.")] = 100,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue after a previous page (its "
                                                                "next_cursor, printed with --json).")] = None,
    as_json: JsonOption = False,
    store: StoreOption = None,
    dlq_url: DlqUrlOption = None,
    queue_url: QueueUrlOption = None,
) -> None:
    """List dead letters, oldest first: id, execution, event, error, attempts, when, and why."""
    place = _place(ctx, store, dlq_url, queue_url)
    with _answers(place):
        page = place.box.list(limit, cursor)
    if as_json:
        output.print_json({"items": [d.as_dict() for d in page.items], "next_cursor": page.next_cursor})
        return
    if not page.items:
        output.note(f"no dead letters in {place.where}")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("id", "execution", "event", "error", "attempts", "when", "reason"):
        table.add_column(col, justify="right" if col == "attempts" else "left", overflow="fold")
    now = clock.now()
    for d in page.items:
        table.add_row(*(Text(v) for v in (d.id, d.target_id or "-", describe(d), d.error, str(d.attempts),
                                          output.when(d.at, now), _clip(d.reason, 100))))
    output.console.print(table)
    if page.next_cursor:
        output.note(f"more: {command_hint(place.sess, 'list', '--cursor', page.next_cursor)}")
    output.note(f"details: {command_hint(place.sess, 'show', 'ID')}")


@dead_letters_app.command("show")
def show(
    ctx: typer.Context,
    letter_id: Annotated[str, typer.Argument(metavar="ID", help="The dead letter's id (from `list`).")],
    as_json: JsonOption = False,
    store: StoreOption = None,
    dlq_url: DlqUrlOption = None,
    queue_url: QueueUrlOption = None,
) -> None:
    """Show one dead letter: the event it carried and why it could not be applied."""
    place = _place(ctx, store, dlq_url, queue_url)
    with _answers(place):
        letter = place.box.get(letter_id)
    if letter is None:
        raise UnknownDeadLetter(letter_id)
    if as_json:
        output.print_json(letter.as_dict())
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("dead letter", Text(letter.id, style="bold"))
    grid.add_row("execution", Text(letter.target_id or "-"))
    if letter.replayable:
        grid.add_row("event", Text(f"{describe(letter)}, event {letter.event.id}"))
    grid.add_row("error", Text(letter.error, style="red"))
    grid.add_row("reason", Text(letter.reason))
    grid.add_row("attempts", Text(str(letter.attempts)))
    grid.add_row("when", Text(output.when(letter.at)))
    output.console.print(grid)
    if letter.replayable:
        output.console.print(Text("data", style="bold"))
        output.console.print(Text(output.compact(letter.event.data, 2000)))
        output.note(f"after the fix: {command_hint(place.sess, 'replay', '--id', letter.id)}; or forget it: "
                    f"{command_hint(place.sess, 'drop', letter.id)}")
    else:
        output.console.print(Text("body", style="bold"))
        output.console.print(Text(letter.body or ""))
        output.note(f"it cannot be replayed; forget it: {command_hint(place.sess, 'drop', letter.id)}")


@dead_letters_app.command("replay")
def replay(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Replay every dead letter that carries an event.")] = False,
    ids: Annotated[list[str] | None, typer.Option("--id", metavar="ID", help="Replay this one (repeatable).")
                   ] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replay even what would only come back as a dead letter (a definition still missing, "
                        "an execution that does not exist).")] = False,
    store: StoreOption = None,
    definitions: DefinitionsOption = None,
    dlq_url: DlqUrlOption = None,
    queue_url: QueueUrlOption = None,
) -> None:
    """Put dead letters back on the queue, keeping their event ids (one already applied changes nothing)."""
    wanted = list(dict.fromkeys(ids or []))
    if all_ == bool(wanted):
        raise UsageError("say which: --all, or --id ID (repeatable), not both")
    place = _place(ctx, store, dlq_url, queue_url, definitions)
    with _answers(place):
        chosen, unreplayable = _chosen(place.box, wanted or None)
        if not chosen:
            if unreplayable:
                output.warn(f"{unreplayable} dead letter(s) carry no event and cannot be replayed: drop them")
            output.say(f"no dead letters to replay in {place.where}")
            return
        if not force:
            _check(ctx, place, chosen, definitions)
        done = place.box.replay([d.id for d in chosen])
    for d in done:
        output.say(f"replayed {d.id}: {describe(d)} for {d.target_id} (event {d.event.id})")
    who = "the worker applies them" if place.aws else "`durastate serve` applies them"
    output.say(f"{len(done)} dead letter(s) replayed; {who}")
    if unreplayable:
        output.warn(f"{unreplayable} dead letter(s) carry no event and were left: drop them")


@dead_letters_app.command("drop")
def drop(
    ctx: typer.Context,
    letter_id: Annotated[str, typer.Argument(metavar="ID", help="The dead letter's id (from `list`).")],
    store: StoreOption = None,
    dlq_url: DlqUrlOption = None,
    queue_url: QueueUrlOption = None,
) -> None:
    """Forget a dead letter for good (its event is not applied)."""
    place = _place(ctx, store, dlq_url, queue_url)
    with _answers(place):
        letter = place.box.drop(letter_id)
    output.say(f"dropped {letter.id}: {describe(letter)} for {letter.target_id or '-'}")


# -- helpers --------------------------------------------------------------------------------------------
def _chosen(box: DeadLetterBox, ids: list[str] | None) -> tuple[list[DeadLetter], int]:
    """The letters to replay and how many of those asked for (``--all``) cannot be; unknown ids raise."""
    if ids is not None:
        letters = []
        for letter_id in ids:
            letter = box.get(letter_id)
            if letter is None:
                raise UnknownDeadLetter(letter_id)
            letters.append(letter)
        return letters, 0
    every: list[DeadLetter] = []
    cursor: str | None = None
    while True:
        page = box.list(1000, cursor)
        every += page.items
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    chosen = [d for d in every if d.replayable]
    return chosen, len(every) - len(chosen)


def _check(ctx: typer.Context, place: _Place, letters: list[DeadLetter], definitions: str | None) -> None:
    """Refuse a replay that could only come back (see :func:`~durastate.runtime.check_replay`)."""
    sess = place.sess
    if sess is not None:
        inbox = sess.inbox
        messages = getattr(inbox, "messages", None)
        queued = list(messages()) if callable(messages) else []
        check_replay(letters, sess.registry, sess.store, queued)
        return
    # On AWS the deployed worker has its own definitions: checked against a folder only when one is named.
    folder = definitions or _global_definitions(ctx) or os.environ.get(DEFINITIONS_ENV)
    registry: DefinitionRegistry | None = None
    if folder:
        if not Path(folder).is_dir():
            raise UsageError(f"definitions folder {folder!r} does not exist; pass --definitions DIR or set "
                             f"{DEFINITIONS_ENV}")
        registry = load_folder(folder)
    check_replay(letters, registry, None)


def _global_definitions(ctx: typer.Context) -> str | None:
    """The global ``--definitions`` given before the command, if any."""
    value = getattr(ctx.find_root().obj, "definitions", None)
    return value if isinstance(value, str) else None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
