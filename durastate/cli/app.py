"""The typer application: global options, error handling, and the command modules it loads.

Every command module exposes ``register(app)``; :data:`COMMAND_MODULES` lists them. A new group of
commands (``durastate local``, queue options for AWS) is a new module added to that tuple.

Errors: whatever a user can cause (a :class:`~durastate.errors.DurastateError`, bad JSON, an unreachable
store) ends as ONE line on stderr and exit status 1 — never a traceback. Usage mistakes caught by the
parser exit 2, as usual for click. Set ``DURASTATE_DEBUG=1`` to see the traceback of an unexpected error.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from durastate.cli import output
from durastate.cli.session import Settings
from durastate.errors import DefinitionError, DurastateError, ScheduleError

COMMAND_MODULES: tuple[str, ...] = (
    "durastate.cli.executions",
    "durastate.cli.control",  # cancel, suspend, resume, terminate, redrive, heartbeat
    "durastate.cli.aws_queue",  # adds --queue-url / DURASTATE_QUEUE_URL to the commands that queue one event
    "durastate.cli.serve",
    "durastate.cli.dead_letters",  # durastate dead-letters list | show | replay | drop
    "durastate.cli.definitions",
    "durastate.cli.local",  # durastate local: the no-Docker AWS stack on moto
    "durastate.cli.console",  # durastate ui: the web console (the `ui` extra)
    "durastate.cli.versions",  # durastate versions list, durastate migrate
    "durastate.cli.schedules",  # durastate schedules list | pause | resume | trigger
    "durastate.cli.purge",  # durastate purge --older-than 30d: retention
    "durastate.cli.importer",  # durastate import scxml | xstate FILE: another tool's chart as a definition
)

EXIT_ERROR = 1


class DurastateGroup(TyperGroup):
    """The root group: turns every error a user can cause into one line on stderr and exit 1."""

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:
            output.error("interrupted")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # `durastate list | head`: the reader left. Point stdout at /dev/null so the exit flush is quiet.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(141) from None
        except DefinitionError as exc:
            output.error(_definition_error_line(exc))
            raise typer.Exit(EXIT_ERROR) from None
        except DurastateError as exc:
            output.error(" ".join(str(exc).split()))
            raise typer.Exit(EXIT_ERROR) from None
        except Exception as exc:
            if os.environ.get("DURASTATE_DEBUG"):
                raise
            output.error(f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())} "
                         "(set DURASTATE_DEBUG=1 to see the traceback, and please report it)")
            raise typer.Exit(EXIT_ERROR) from None


def _definition_error_line(exc: DefinitionError) -> str:
    where = f"{exc.source}: " if exc.source else ""
    first = exc.issues[0] if exc.issues else "invalid definition"
    more = len(exc.issues) - 1
    tail = f" (+{more} more; run `durastate validate` on it to see all)" if more > 0 else ""
    kind = "invalid schedules" if isinstance(exc, ScheduleError) else "invalid definition"
    return f"{where}{kind}: {first}{tail}"


app = typer.Typer(
    name="durastate",
    cls=DurastateGroup,
    help="Durable Harel statecharts: start executions, send them events, serve them, inspect them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from durastate import __version__

        output.say(f"durastate {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    store: Annotated[str | None, typer.Option(
        "--store", "-s", metavar="URL",
        help="Store URL: sqlite:///path.db, postgresql://…, dynamodb://PREFIX?…, memory://. "
             "(env DURASTATE_STORE; default sqlite:///./durastate.db)")] = None,
    definitions: Annotated[str | None, typer.Option(
        "--definitions", "-d", metavar="DIR",
        help="Folder of definition files (*.yaml, *.yml, *.json). "
             "(env DURASTATE_DEFINITIONS; default ./definitions, else ./examples)")] = None,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print the version and exit.")] = False,
    connect_retries: Annotated[int | None, typer.Option(
        "--connect-retries", metavar="N", min=1,
        help="Connection attempts for networked stores before giving up (env DURASTATE_CONNECT_RETRIES; "
             "default 2).")] = None,
) -> None:
    """Options given here apply to every command; a command's own --store/--definitions win."""
    ctx.obj = Settings(store=store, definitions=definitions, connect_retries=connect_retries)


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)
