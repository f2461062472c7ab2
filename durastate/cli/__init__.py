"""The ``durastate`` command: drive durable statecharts from a shell.

``main`` is the console-script entry point (``durastate = "durastate.cli:main"``). The typer app lives in
:mod:`durastate.cli.app`; each group of commands in its own module, registered on the app at import time,
so new commands (AWS, the local stack) are added as modules without touching the existing ones.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "run"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit with its status (the console-script entry point)."""
    try:
        from durastate.cli.app import app
    except ImportError as exc:  # the script is installed with the core; the command needs the cli extra
        if exc.name not in ("typer", "rich", "click"):
            raise
        raise SystemExit(f"error: the durastate command needs the cli extra ({exc.name} is missing): "
                         "pip install 'durastate[cli]'") from None

    app(args=list(argv) if argv is not None else None, prog_name="durastate")


@functools.cache
def _command() -> Any:
    """The click command typer builds from the app (once: building it inspects every signature)."""
    import typer.main

    from durastate.cli.app import app

    return typer.main.get_command(app)


def run(argv: Sequence[str]) -> int:
    """Run one ``durastate`` command line in this process and return its exit status instead of exiting.

    This is how the demo drives the CLI exactly as a user would, without paying a process start per
    command: the same parsing, the same error handling, the same output.
    """
    try:
        _command().main(args=list(argv), prog_name="durastate")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return 0
