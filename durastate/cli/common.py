"""What every command module shares: its :class:`~durastate.cli.session.Session` and the common options."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from durastate.cli.session import Session, Settings, UsageError
from durastate.engine.durations import parse_duration
from durastate.engine.values import check_json
from durastate.errors import InvalidValue

StoreOption = Annotated[str | None, typer.Option(
    "--store", "-s", metavar="URL", help="Store URL (overrides the global --store and DURASTATE_STORE).")]
DefinitionsOption = Annotated[str | None, typer.Option(
    "--definitions", "-d", metavar="DIR", help="Definitions folder (overrides the global --definitions "
                                               "and DURASTATE_DEFINITIONS).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (for scripts).")]


def session(ctx: typer.Context, store: str | None = None, definitions: str | None = None, *,
            creates: bool = False) -> Session:
    """The command's :class:`Session` (global options + the command's own), closed when it ends.

    ``creates``: the command may create the store (``start``, ``serve``); for every other command a
    SQLite store that does not exist is an error rather than a new empty file."""
    root = ctx.find_root()
    settings = root.obj if isinstance(root.obj, Settings) else Settings()
    sess = Session(settings, store=store, definitions=definitions, creates=creates)
    ctx.call_on_close(sess.close)
    return sess


def parse_duration_option(value: str | float) -> float:
    """A ``DURATION`` option (``90s``, ``15m``, ``14d``, ``2d 3h`` or plain seconds) in seconds; anything else is
    a usage error saying what is accepted (:func:`~durastate.engine.durations.parse_duration`)."""
    try:
        return parse_duration(value, "duration")
    except InvalidValue as exc:
        raise typer.BadParameter(str(exc).removeprefix("duration: ")) from None


def parse_json_object(text: str | None, option: str) -> dict[str, Any]:
    """Parse a ``--context``/``--data`` value: a JSON object, or nothing (an empty object)."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{option} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                         f"{_clip(text)}") from exc
    except (InvalidValue, RecursionError) as exc:
        detail = str(exc) if isinstance(exc, InvalidValue) else "nested too deep"
        raise UsageError(f"{option} cannot be stored: {detail}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{option} must be a JSON object like '{{\"amount\": 10}}', got "
                         f"{type(value).__name__}: {_clip(text)}")
    try:
        check_json(value, option)
    except InvalidValue as exc:
        raise UsageError(str(exc)) from None
    return value


def _no_constant(name: str) -> Any:
    """``json.loads`` accepts ``NaN`` and ``Infinity``, which JSON has not; refuse them."""
    raise InvalidValue(f"{name} is not a JSON number (stores would keep null); send a finite number, a "
                       "string, or null")


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
