"""Lambda tasks on the no-Docker local stack: the functions definitions invoke as tasks, called as Lambda
would call them.

moto stores Lambda functions but runs their code only in Docker, so the relay's ``lambda:Invoke`` of a task
(:mod:`durastate.runtime.tasks`) cannot reach moto here. The local stack gives its relay this invoker
instead: it finds the task's handler among the ones the stack was given (by function name, or the name in
an ARN), calls it with the JSON event and a Lambda context as the Lambda runtime does, and answers as
``Invoke`` does — the JSON the handler returned, or ``FunctionError: Unhandled`` with ``errorType`` and
``errorMessage`` when it raised or returned something that is not JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from durastate.devstack.lambda_emulator import FakeLambdaContext, Handler

__all__ = ["LocalTaskFunctions", "function_name"]


def function_name(function: str) -> str:
    """The name in a function name or ARN (``arn:aws:lambda:<region>:<account>:function:<name>[:alias]``)."""
    if function.startswith("arn:"):
        parts = function.split(":")
        return parts[6] if len(parts) > 6 else function
    return function


class LocalTaskFunctions:
    """A :data:`~durastate.runtime.tasks.LambdaInvoker` over handlers in this process."""

    def __init__(self, handlers: Mapping[str, Handler], region: str = "us-east-1", *,
                 authorize: Callable[[str], None] | None = None) -> None:
        self.handlers = dict(handlers)
        self.region = region
        self.authorize = authorize
        """Called with the function name or ARN before each call (IAM's ``lambda:InvokeFunction``
        decision; it raises what ``Invoke`` raises when denied)."""
        self.calls: list[tuple[str, dict[str, Any]]] = []
        """Every call, in order: (function name, event)."""

    def __call__(self, function: str, payload: bytes) -> tuple[bytes, str | None]:
        if self.authorize is not None:
            self.authorize(function)
        name = function_name(function)
        handler = self.handlers.get(name)
        if handler is None:
            return _error("ResourceNotFoundException",
                          f"Function not found: {function} (the local stack runs the task functions it is "
                          f"given: {', '.join(sorted(self.handlers)) or 'none'})")
        event = json.loads(payload)
        self.calls.append((name, event))
        try:
            result = handler(event, FakeLambdaContext(function_name=name, region=self.region))
        except Exception as exc:
            return _error(type(exc).__name__, str(exc))
        try:
            return json.dumps(result, allow_nan=False).encode(), None
        except (TypeError, ValueError) as exc:
            return _error("Runtime.MarshalError", f"Unable to marshal response: {exc}")


def _error(kind: str, message: str) -> tuple[bytes, str | None]:
    return json.dumps({"errorType": kind, "errorMessage": message}).encode(), "Unhandled"
