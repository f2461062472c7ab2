"""The wire format: one message = one event for one execution.

``{"target_id": "<execution id>", "event": {"id": "…", "name": "…", "data": {…}}}`` is the body of an SQS
message, a row of a queue table and what ``durastate send`` enqueues. Everything arriving from outside is
parsed here, once, before it can touch a store: a message that does not fit is rejected with a
:class:`~durastate.errors.MalformedEvent` that says precisely what is wrong, so it can be dead-lettered with
a reason instead of being retried forever.

The queue carries the runtime's own messages as well as producers', so the wire refuses only what the
runtime never sends (:mod:`durastate.engine.ids` has the rule): an id of one reserved kind on another
event, any event to a system record but a schedule tick's timer hop. The worker checks the rest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from durastate.engine.ids import SYSTEM_PREFIX, TIMEOUT, is_system_id, producer_problem
from durastate.engine.model import Event, new_id
from durastate.engine.values import MAX_DEPTH, check_event_id, printable
from durastate.errors import MalformedEvent, ReservedId

__all__ = ["Envelope", "dump_envelope", "new_event", "parse_envelope", "with_traceparent"]

_SNIPPET = 120


class Envelope(BaseModel):
    """A validated message: the execution it is for and the event."""

    model_config = ConfigDict(extra="forbid")

    target_id: str = Field(min_length=1, max_length=128)
    event: Event

    @field_validator("target_id")
    @classmethod
    def _printable_target(cls, v: str) -> str:
        return check_event_id(v, "target_id")


def parse_envelope(body: str | bytes | bytearray | Mapping[str, Any]) -> Envelope:
    """Parse and validate one message body (JSON text, UTF-8 bytes, or an already decoded mapping).

    The event id is required on the wire: it is the dedupe key, and an id invented here would differ on
    every redelivery of the same message, which would apply it twice.
    """
    try:
        if isinstance(body, Mapping):
            env = Envelope.model_validate(body)
        elif isinstance(body, bytes | bytearray):
            try:
                text = bytes(body).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MalformedEvent(f"malformed message: body is not UTF-8 text ({exc.reason} at byte "
                                     f"{exc.start})") from None
            env = Envelope.model_validate_json(text)
        elif isinstance(body, str):
            env = Envelope.model_validate_json(body)
        else:
            raise MalformedEvent(f"malformed message: expected JSON text, bytes or a mapping, got "
                                 f"{type(body).__name__}")
    except RecursionError:
        raise MalformedEvent("malformed message: nested too deep to read (event data may nest at most "
                             f"{MAX_DEPTH} levels)") from None
    except ValidationError as exc:
        raise MalformedEvent(f"malformed message: {_describe(exc)}; body: {_snippet(body)}; expected "
                             '{"target_id": "...", "event": {"id": "...", "name": "...", "data": {...}}}'
                             ) from None
    if "id" not in env.event.model_fields_set:
        raise MalformedEvent("malformed message: event.id is missing; give every event a stable id (it is "
                             f"the dedupe key); body: {_snippet(body)}")
    if env.target_id.startswith(SYSTEM_PREFIX) and env.event.name != TIMEOUT and is_system_id(env.target_id):
        # Only a schedule's tick (its timer hop) is ever sent to a system record, and never to the worker.
        raise ReservedId(producer_problem(env.target_id, env.event.name, env.event.id) or env.target_id)
    return env


def with_traceparent(env: Envelope, traceparent: str | None) -> Envelope:
    """``env``, its event carrying ``traceparent`` (the trace context its message brought besides the body:
    an SQS message attribute) unless the body has one already."""
    if traceparent is None or env.event.traceparent is not None:
        return env
    return Envelope.model_construct(target_id=env.target_id,
                                    event=env.event.model_copy(update={"traceparent": traceparent}))


def new_event(name: str, data: Mapping[str, Any] | None = None, event_id: str | None = None) -> Event:
    """An event built from a caller's parts (the client, the CLI), or :class:`MalformedEvent` saying what
    is wrong with them — the same rules and words as a message arriving on the wire."""
    try:
        return Event(id=event_id or new_id(), name=name, data=dict(data or {}))
    except ValidationError as exc:
        raise MalformedEvent(f"invalid event: {_describe(exc)}") from None


def dump_envelope(target_id: str, event: Event) -> str:
    """The compact JSON body for ``(target_id, event)``; :func:`parse_envelope` reads it back exactly."""
    return Envelope.model_construct(target_id=target_id, event=event).model_dump_json()


def _describe(exc: ValidationError) -> str:
    parts: list[str] = []
    for err in exc.errors(include_url=False):
        kind = err["type"]
        where = ".".join(str(p) for p in err["loc"])
        if kind == "json_invalid":
            parts.append(f"body is not valid JSON ({err['ctx'].get('error', err['msg'])})"
                         if "ctx" in err else f"body is not valid JSON ({err['msg']})")
            continue
        if kind == "model_type" and not where:
            parts.append(f"expected a JSON object, got {_json_type(err['input'])}")
            continue
        if kind == "missing":
            msg = "missing (required)"
        elif kind == "extra_forbidden":
            msg = "unexpected field"
        elif kind == "value_error" and "ctx" in err:  # one of the entry rules: its message names the field
            parts.append(str(err["ctx"]["error"]))
            continue
        else:
            msg = err["msg"][0].lower() + err["msg"][1:] if err["msg"] else kind
        parts.append(f"{where or 'message'}: {msg}")
    return "; ".join(parts)


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__


def _snippet(body: object) -> str:
    if isinstance(body, bytes | bytearray):
        text = bytes(body[: _SNIPPET * 4]).decode("utf-8", "replace")
    elif isinstance(body, str):
        text = body
    else:
        try:
            text = json.dumps(body, default=repr)
        except (TypeError, ValueError, RecursionError):
            text = f"(a {type(body).__name__} that cannot be shown)"
    return printable(text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…")
