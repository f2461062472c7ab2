"""``--queue-url`` for the commands that queue an event: enqueue on an SQS FIFO queue (the AWS stack's).

Those commands are ``start`` and ``send``, and the control events ``cancel``, ``suspend``, ``resume`` and
``reset`` (checked first against the store when one is named: ``--store dynamodb://…``).
When a queue URL is given (``--queue-url URL`` or ``DURASTATE_QUEUE_URL``), they do not touch a local store
or inbox at all: they put the event on the queue in the wire format (``MessageGroupId`` = execution id,
``MessageDeduplicationId`` = event id) and the deployed worker applies it — a control event in the
execution's own FIFO group, so it keeps its order with the execution's other events. Without a queue URL
the commands behave exactly as before — this module only *adds* the option. (``terminate`` and ``redrive``
commit straight to the store and take no queue: ``--store dynamodb://…`` on AWS.)

It is loaded like every command module (listed in ``durastate.cli.app.COMMAND_MODULES`` after
``durastate.cli.executions`` and ``durastate.cli.control``); its :func:`register` wraps the registered
callbacks of :data:`_WRAPPED` with one extra parameter instead of redefining the commands, so their own
options, checks and output stay theirs; with a queue URL the wrapper hands the command's arguments to the
command's handler in :data:`_ON_QUEUE`.

Endpoints and region come from the standard AWS variables (``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ENDPOINT_URL_SQS``), which boto3 resolves itself; a queue URL on this machine (``durastate local``
prints one) is its own endpoint when none is set. A local endpoint needs no credentials: when none are
configured, the client gets dummy ones (moto and LocalStack accept anything). Real AWS without
credentials, or an endpoint that does not answer, ends in one line saying what to set or check.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer

from durastate.cli import output
from durastate.cli.common import parse_json_object, session
from durastate.cli.control import control_event, reset_command_event
from durastate.cli.session import UsageError
from durastate.transport.aws_clients import (
    LOCAL_CREDENTIALS,
    SET_CREDENTIALS,
    AwsSetupError,
    aws_client,
    configured_endpoint,
    is_local,
    local_origin,
)

__all__ = ["LOCAL_CREDENTIALS", "SET_CREDENTIALS", "AwsSetupError", "aws_errors", "is_local", "local_origin",
           "missing_credentials", "queue_client", "register"]

QUEUE_URL_ENV = "DURASTATE_QUEUE_URL"
QueueUrlOption = Annotated[str | None, typer.Option(
    "--queue-url", metavar="URL", envvar=QUEUE_URL_ENV, show_envvar=True,
    help="Enqueue on this SQS FIFO queue (the AWS stack's) instead of the local store's inbox; "
         "the deployed worker applies it.")]

_WRAPPED = ("start", "send", "cancel", "suspend", "resume", "reset", "heartbeat")
"""The commands that get ``--queue-url``: those that queue an event for one execution."""


def register(app: typer.Typer) -> None:
    """Add ``--queue-url`` to the already registered commands of :data:`_WRAPPED`."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else None)
        if name in _WRAPPED and info.callback is not None and not getattr(info.callback, "_durastate_queue", 0):
            info.callback = _with_queue_url(name, info.callback)


def _with_queue_url(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    sig = inspect.signature(original, eval_str=True)
    handler = _ON_QUEUE[name]

    @functools.wraps(original)
    def wrapper(*args: Any, queue_url: str | None = None, **kwargs: Any) -> Any:
        url = (queue_url or os.environ.get(QUEUE_URL_ENV) or "").strip()
        if not url or kwargs.get("dry_run") or kwargs.get("explain_"):  # send --dry-run/--explain: send nothing
            return original(*args, **kwargs)
        bound = sig.bind_partial(*args, **kwargs)
        return handler(url, dict(bound.arguments))

    params = list(sig.parameters.values())
    params.append(inspect.Parameter("queue_url", inspect.Parameter.KEYWORD_ONLY, default=None,
                                    annotation=QueueUrlOption))
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**{p.name: p.annotation for p in params}, "return": sig.return_annotation}
    wrapper._durastate_queue = 1  # type: ignore[attr-defined]
    return wrapper


def queue_client(queue_url: str) -> Any:
    """A send-only :class:`~durastate.client.DurastateClient` over the queue (boto3 resolves endpoint/region)."""
    from durastate.client import DurastateClient
    from durastate.transport.sqs import SqsTransport

    if not queue_url.startswith(("https://", "http://")):
        raise UsageError(f"--queue-url {queue_url!r} is not a queue URL (https://sqs.<region>.amazonaws.com/"
                         "<account>/<name>.fifo)")
    try:
        import boto3  # type: ignore[import-untyped]  # noqa: F401  (only to fail with the extra to install)
    except ImportError as exc:
        raise UsageError(f"--queue-url needs boto3: pip install 'durastate[aws]' ({exc})") from exc
    with aws_errors("SQS", _where(queue_url)):
        client = aws_client("sqs", url=queue_url, label=f"SQS queue {queue_url}")
    return DurastateClient(SqsTransport(client, queue_url))


def _configured_endpoint() -> str | None:
    return configured_endpoint("sqs")


def _where(queue_url: str) -> str:
    """The endpoint a queue URL's client talks to, for messages."""
    return _configured_endpoint() or local_origin(queue_url) or queue_url


def missing_credentials(exc: BaseException) -> bool:
    """Whether botocore's "no credentials" error is ``exc`` or anywhere in its chain of causes."""
    try:
        from botocore.exceptions import NoCredentialsError, PartialCredentialsError  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - nothing AWS ran
        return False
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (NoCredentialsError, PartialCredentialsError)):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


@contextlib.contextmanager
def aws_errors(service: str, where: str) -> Iterator[None]:
    """botocore's configuration and connection errors as one :class:`AwsSetupError` line saying what to do."""
    from botocore import exceptions as bx  # type: ignore[import-untyped]

    try:
        yield
    except (bx.NoCredentialsError, bx.PartialCredentialsError) as exc:
        raise AwsSetupError(f"no AWS credentials for {service} at {where} ({exc}): {SET_CREDENTIALS}") from exc
    except bx.NoRegionError as exc:
        raise AwsSetupError(f"no AWS region for {service}: set AWS_REGION (or AWS_DEFAULT_REGION)") from exc
    except (bx.EndpointConnectionError, bx.ConnectionClosedError) as exc:
        raise AwsSetupError(f"{service} at {where} did not answer ({exc}); check that it is running "
                            "(`durastate local` for a local stack) and the endpoint URL") from exc
    except bx.BotoCoreError as exc:  # a profile that does not exist, a broken config file, …
        raise AwsSetupError(f"AWS configuration for {service}: {' '.join(str(exc).split())}") from exc


def _start_on_queue(url: str, args: dict[str, Any]) -> None:
    definition = str(args["definition"])
    context = parse_json_object(args.get("context"), "--context")
    client = queue_client(url)
    folder = args.get("definitions") or os.environ.get("DURASTATE_DEFINITIONS")
    if folder:  # checked locally only when a folder is named: the deployed worker has its own copy
        from durastate.runtime.definitions import load_folder

        client.definitions = load_folder(folder)
    with aws_errors("SQS", _where(url)):
        exe_id = client.start(definition, context, execution_id=args.get("execution_id"), timeout=args.get("timeout"))
    if args.get("quiet"):
        output.say(exe_id)
    else:
        output.say(f"started {exe_id} ({definition}): queued on {url}, the worker applies it")


def _send_on_queue(url: str, args: dict[str, Any]) -> None:
    name = str(args["event_name"])
    if name.startswith("durastate.") and name != "durastate.cancel":
        raise UsageError("event names starting with 'durastate.' are reserved for the runtime "
                         "(only 'durastate.cancel' may be sent by hand)")
    data = parse_json_object(args.get("data"), "--data")
    client = queue_client(url)
    execution_id = str(args["execution_id"])
    with aws_errors("SQS", _where(url)):
        eid = client.send(execution_id, name, data, event_id=args.get("event_id"))
    if args.get("quiet"):
        output.say(eid)
    else:
        output.say(f"sent {name} to {execution_id} (event {eid}): queued on {url}, the worker applies it")


def _control_on_queue(verb: str) -> Callable[[str, dict[str, Any]], None]:
    """The handler of ``cancel``, ``suspend`` or ``resume``: the very event the command queues in a local
    inbox (:func:`~durastate.cli.control.control_event`), sent in the execution's FIFO group."""

    def handler(url: str, args: dict[str, Any]) -> None:
        execution_id = str(args["execution_id"])
        event = control_event(verb, execution_id, args.get("reason"), args.get("event_id"))
        client = queue_client(url)
        with aws_errors("SQS", _where(url)):
            client.send_many([(execution_id, event)])
        output.say(f"queued {verb} for {execution_id} (event {event.id}) on {url}; the worker applies it")

    return handler


def _reset_on_queue(url: str, args: dict[str, Any]) -> None:
    """``reset`` with a queue URL: the same event, checked against the store when one is named (``--store``
    or ``DURASTATE_STORE``: the stack's tables), else by the worker alone (a bad one is dead-lettered)."""
    execution_id = str(args["execution_id"])
    ctx = args["ctx"]
    root = ctx.find_root().obj
    named = args.get("store") or getattr(root, "store", None) or os.environ.get("DURASTATE_STORE")
    sess = session(ctx, args.get("store")) if named else None
    event = reset_command_event(sess, execution_id, str(args["to"]), str(args.get("actions") or "none"),
                                args.get("context_patch"), args.get("send"), args.get("data"), args.get("reason"),
                                args.get("by"), bool(args.get("force")))
    client = queue_client(url)
    with aws_errors("SQS", _where(url)):
        client.send_many([(execution_id, event)])
    output.say(f"queued reset for {execution_id} (event {event.id}) on {url}; the worker applies it")


def _heartbeat_on_queue(url: str, args: dict[str, Any]) -> None:
    """``heartbeat``: the task's heartbeat, sent in its execution's FIFO group (the task id is its proof)."""
    details = args.get("details")
    client = queue_client(url)
    with aws_errors("SQS", _where(url)):
        eid = client.heartbeat(str(args["task_id"]), parse_json_object(details, "--details") if details else None,
                               execution_id=args.get("execution_id"))
    output.say(f"queued heartbeat for task {args['task_id']} (event {eid}) on {url}; the worker applies it")


_ON_QUEUE: dict[str, Callable[[str, dict[str, Any]], None]] = {
    "start": _start_on_queue,
    "send": _send_on_queue,
    **{verb: _control_on_queue(verb) for verb in ("cancel", "suspend", "resume")},
    "reset": _reset_on_queue,
    "heartbeat": _heartbeat_on_queue,
}
"""What each command of :data:`_WRAPPED` does with a queue URL, given its arguments by name."""
