"""``--queue-url`` for ``durastate start`` and ``durastate send``: enqueue on an SQS FIFO queue (the AWS stack's).

When a queue URL is given (``--queue-url URL`` or ``DURASTATE_QUEUE_URL``), ``start`` and ``send`` do not
touch a local store or inbox at all: they put the event on the queue in the wire format
(``MessageGroupId`` = execution id, ``MessageDeduplicationId`` = event id) and the deployed worker applies
it. Without a queue URL the commands behave exactly as before — this module only *adds* the option.

It is loaded like every command module (listed in ``durastate.cli.app.COMMAND_MODULES`` after
``durastate.cli.executions``); its :func:`register` wraps the two registered callbacks with one extra
parameter instead of redefining the commands, so their own options, checks and output stay theirs.

Endpoints and region come from the standard AWS variables (``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ENDPOINT_URL_SQS``), which boto3 resolves itself; ``--region`` overrides the region.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Annotated, Any

import typer

from durastate.cli import output
from durastate.cli.common import parse_json_object
from durastate.cli.session import UsageError

QUEUE_URL_ENV = "DURASTATE_QUEUE_URL"

QueueUrlOption = Annotated[str | None, typer.Option(
    "--queue-url", metavar="URL", envvar=QUEUE_URL_ENV, show_envvar=True,
    help="Enqueue on this SQS FIFO queue (the AWS stack's) instead of the local store's inbox; "
         "the deployed worker applies it.")]

_WRAPPED = ("start", "send")


def register(app: typer.Typer) -> None:
    """Add ``--queue-url`` to the already registered ``start`` and ``send`` commands."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else None)
        if name in _WRAPPED and info.callback is not None and not getattr(info.callback, "_durastate_queue", 0):
            info.callback = _with_queue_url(name, info.callback)


def _with_queue_url(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    sig = inspect.signature(original, eval_str=True)
    handler = _start_on_queue if name == "start" else _send_on_queue

    @functools.wraps(original)
    def wrapper(*args: Any, queue_url: str | None = None, **kwargs: Any) -> Any:
        url = (queue_url or os.environ.get(QUEUE_URL_ENV) or "").strip()
        if not url:
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
        transport = SqsTransport.create(queue_url, region=_region(queue_url))
    except ImportError as exc:
        raise UsageError(f"--queue-url needs boto3: pip install 'durastate[aws]' ({exc})") from exc
    return DurastateClient(transport)


def _region(queue_url: str) -> str | None:
    """The region: ``AWS_REGION``/``AWS_DEFAULT_REGION``, else the one in an AWS queue URL."""
    env = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if env:
        return env
    host = queue_url.split("/")[2] if queue_url.count("/") >= 2 else ""
    parts = host.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "sqs" else "us-east-1"


def _start_on_queue(url: str, args: dict[str, Any]) -> None:
    definition = str(args["definition"])
    context = parse_json_object(args.get("context"), "--context")
    client = queue_client(url)
    folder = args.get("definitions") or os.environ.get("DURASTATE_DEFINITIONS")
    if folder:  # checked locally only when a folder is named: the deployed worker has its own copy
        from durastate.engine import DefinitionRegistry

        client.definitions = DefinitionRegistry.from_dir(folder)
    exe_id = client.start(definition, context, execution_id=args.get("execution_id"))
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
    eid = client.send(execution_id, name, data, event_id=args.get("event_id"))
    if args.get("quiet"):
        output.say(eid)
    else:
        output.say(f"sent {name} to {execution_id} (event {eid}): queued on {url}, the worker applies it")
