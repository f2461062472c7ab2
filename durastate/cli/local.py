"""``durastate local``: the AWS stack on this machine without Docker — moto's server plus the four handlers.

It reads the synthesized template (``cdk synth`` / ``make synth`` write
``cdk.out/DurastateStack.template.json``), creates the stack's tables, queues and bus in moto's HTTP
server, and runs the packaged worker, relay and sweeper the way Lambda would (see
:mod:`durastate.devstack`). Point any AWS client at the endpoint it prints — ``aws --endpoint-url …``,
``durastate send --queue-url …``, boto3 — exactly as at the deployed stack. The lines it prints for that
(:func:`hint`) set dummy credentials and a region too, so they work in a shell with no AWS configuration.

``--endpoint-url`` attaches the handler loop to a server that is already running (for example a second
loop, or one restarted after a crash: what the killed loop had in flight reappears after
``--visibility-timeout`` seconds and is deduplicated). ``--until-idle`` makes it a batch job. Progress
lines go to stdout, one per turn that did work, and ``settled`` once nothing is left to do.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from durastate.cli import output
from durastate.cli.clock import command_clock
from durastate.cli.common import parse_duration_option


def _task_functions(specs: list[str]) -> dict[str, Callable[[dict[str, Any], Any], Any]]:
    """``NAME=module:handler`` options as ``{name: handler}``; a spec that does not resolve is a usage error."""
    import importlib

    found: dict[str, Callable[[dict[str, Any], Any], Any]] = {}
    for spec in specs:
        name, sep, target = spec.partition("=")
        module, colon, attr = target.partition(":")
        try:
            if not (sep and colon and name and module and attr):
                raise ValueError("expected NAME=module:handler")
            handler = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise typer.BadParameter(f"{spec!r}: {exc} (give NAME=module:handler, the module importable "
                                     "on PYTHONPATH)", param_hint="--task-function") from None
        found[name] = handler
    return found


def register(app: typer.Typer) -> None:
    app.command("local")(local)


def local(
    template: Annotated[Path, typer.Option(
        "--template", "-t", metavar="PATH", help="The synthesized stack template (run `make synth` first).")
    ] = Path("cdk.out") / "DurastateStack.template.json",
    host: Annotated[str, typer.Option("--host", help="Address moto's server listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535,
                                      help="Port of moto's server (0: any free port).")] = 4566,
    endpoint_url: Annotated[str | None, typer.Option(
        "--endpoint-url", metavar="URL",
        help="Attach to a server that is already running instead of starting one.")] = None,
    create: Annotated[bool, typer.Option(
        "--create/--no-create", help="Create the template's tables, queues and bus (existing ones are kept).")
    ] = True,
    region: Annotated[str, typer.Option("--region", help="Region of the local resources.")] = "us-east-1",
    retry_delay: Annotated[int, typer.Option(
        "--retry-delay", metavar="SECONDS", min=0,
        help="How soon a record the worker reported as failed is retried (Lambda: the visibility timeout).")
    ] = 1,
    visibility_timeout: Annotated[int | None, typer.Option(
        "--visibility-timeout", metavar="SECONDS", min=1,
        help="Visibility timeout for each receive (default: the queue's, from the template).")] = None,
    advance: Annotated[float, typer.Option(
        "--advance", metavar="DURATION", parser=parse_duration_option,
        help="Run on a clock this far ahead of real time: 90s, 15m, 14d or seconds (fires timers early).")
    ] = 0.0,
    until_idle: Annotated[bool, typer.Option(
        "--until-idle", help="Stop once nothing is left to do (armed timers due later stay armed).")] = False,
    poll: Annotated[float, typer.Option("--poll", metavar="SECONDS", min=0.01,
                                        help="Wait between polls when idle.")] = 0.2,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="The handlers' Powertools logs (INFO) and metrics, as in CloudWatch.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    task_function: Annotated[list[str] | None, typer.Option(
        "--task-function", metavar="NAME=MODULE:HANDLER",
        help="A Lambda function definitions run as tasks (invoke: {task: {lambda: NAME}}), as a handler "
             "importable here (PYTHONPATH); repeatable. moto runs function code only in Docker.")] = None,
) -> None:
    """Run the AWS stack locally on moto's server (no Docker): queues, tables, bus and the four handlers."""
    from durastate.devstack import LocalStack, StepReport

    env = {} if verbose else {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}
    clock = command_clock(advance)
    stack = LocalStack(template, endpoint_url=endpoint_url, host=host, port=port, region=region,
                       clock=clock, retry_delay=retry_delay, visibility_timeout=visibility_timeout,
                       create_resources=create, environment=env,
                       task_functions=_task_functions(task_function or []))
    stop = threading.Event()
    with stack:
        prefix = stack.environment("worker").get("DURASTATE_TABLE_PREFIX", "durastate")
        output.note(f"local stack at {stack.endpoint_url} (tables {prefix}_*, Ctrl-C stops)")
        output.say(f"endpoint   {stack.endpoint_url}")
        output.say(f"queue      {stack.queue_url}")
        output.say(f"dlq        {stack.dlq_url}")
        for line in hint(stack.endpoint_url, stack.region, stack.queue_url, stack.dlq_url, prefix):
            output.note(line)
        busy = True

        def report(step: StepReport) -> None:
            nonlocal busy
            if not step.idle:
                busy = True
                if not quiet:
                    parts = [f"worker {step.worker_received}"]
                    if step.worker_failed:
                        parts.append(f"{step.worker_failed} failed")
                    parts += [f"stream {step.stream_records}", f"relay {step.relay_runs}",
                              f"sweeper {step.sweeper_runs}"]
                    output.say("step " + " ".join(parts))
            elif busy and stack.settled():
                busy = False
                output.say("settled")
                if until_idle:
                    stop.set()

        previous = _stop_on_signals(stop)
        try:
            stack.serve(stop, idle_wait=poll, on_step=report)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


def hint(endpoint: str, region: str, queue_url: str, dlq_url: str, prefix: str) -> list[str]:
    """What to paste in another shell to use the local stack: commands that need no AWS configuration.

    moto accepts any credentials, but botocore refuses to send a request without some; the dummy ones
    also keep a developer's real keys from being used against it. aws-cli v1 ignores ``AWS_ENDPOINT_URL``
    for SQS, hence its explicit ``--endpoint-url``.
    """
    return [
        "try, in another shell (aws, boto3 and durastate alike; moto accepts any credentials):",
        f"  export AWS_ENDPOINT_URL={endpoint} AWS_REGION={region} AWS_DEFAULT_REGION={region} "
        "AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test",
        f"  durastate start order --id o1 --queue-url {queue_url}",
        f"  durastate --store dynamodb://{prefix} show o1",
        f"  aws --endpoint-url {endpoint} sqs get-queue-attributes --queue-url {dlq_url} "
        "--attribute-names ApproximateNumberOfMessages",
    ]


def _stop_on_signals(stop: threading.Event) -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        output.note(f"{signal.Signals(signum).name}: stopping after the current batch "
                    "(again to stop at once)")
        stop.set()

    return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def main() -> None:
    """``python -m durastate.cli.local``: the command on its own (before it is registered on ``durastate``)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(local)
    app()


if __name__ == "__main__":
    main()
