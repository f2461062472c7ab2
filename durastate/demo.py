"""``python -m durastate.demo`` (what ``make demo`` runs): the example order workflow, driven through the CLI.

Four customers order; the demo types the same ``durastate`` commands a person would — ``start``, ``send``,
``serve --until-idle``, ``show``, ``list``, ``trace``, ``viz`` — against a SQLite store in a fresh folder
(a temporary one, or ``--dir``), and shows their output. It draws o-1001's statechart as an SVG next to the
store and keeps it (even in a temporary folder) for you to open in a browser. Each command runs in this
process through the real command-line app (same parsing, same output, same errors), so the whole story takes
a few seconds.

Time is the one thing it does not wait for: the payment and cart timeouts (15 minutes, an hour) fire
by serving on a clock moved forward (``durastate serve --advance 3700``), never by sleeping.

    o-1001  pays, is held and resumed (deep history), packed and shipped in parallel  → fulfilled
    o-1002  is over the payment limit, so the payment declines                          → payment_failed
    o-1003  never pays: its payment expires after 15 minutes                            → payment_failed
    o-1004  is never submitted: the cart is abandoned after an hour                     → abandoned
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from durastate.cli import run

console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 110)

DIAGRAM = "o-1001.svg"
"""The picture the demo draws of o-1001 while it is packed and shipped (kept after the demo, to open)."""

EXPECTED = {"o-1001": "fulfilled", "o-1002": "payment_failed", "o-1003": "payment_failed",
            "o-1004": "abandoned"}


class DemoFailed(Exception):
    """A command of the demo did not do what the story needs (a bug somewhere: say which command)."""


def find_examples() -> Path:
    """The ``examples/`` folder of the source tree this package runs from (or of the working directory)."""
    for candidate in (Path(__file__).resolve().parents[1] / "examples", Path.cwd() / "examples"):
        if (candidate / "order.yaml").is_file():
            return candidate
    raise DemoFailed("cannot find examples/order.yaml: run the demo from a checkout of the durastate repository")


def durastate(*args: str, expect: int = 0) -> None:
    """Show the command line, run it through the real CLI app, stop the demo if it fails."""
    console.print(f"[bold green]$[/] [bold]durastate {escape(shlex.join(args))}[/]")
    sys.stdout.flush()
    code = run(list(args))
    sys.stdout.flush()
    sys.stderr.flush()
    if code != expect:
        raise DemoFailed(f"`durastate {shlex.join(args)}` exited with {code}, expected {expect}")


def section(title: str) -> None:
    console.print()
    console.print(Rule(f"[bold cyan]{title}[/]", align="left", style="cyan"))


def say(text: str) -> None:
    console.print(f"[italic]{escape(text)}[/]")


def story(workdir: Path) -> None:
    examples = find_examples()
    db = workdir / "durastate.db"
    os.environ["DURASTATE_STORE"] = f"sqlite:///{db}"
    os.environ["DURASTATE_DEFINITIONS"] = str(examples)
    os.environ.pop("DURASTATE_DEBUG", None)
    console.print(f"[bold green]$[/] [bold]export DURASTATE_STORE=sqlite:///{escape(str(db))} "
                  f"DURASTATE_DEFINITIONS={escape(str(examples))}[/]")

    section("1. Check the definitions")
    durastate("validate", str(examples / "order.yaml"), str(examples / "payment.yaml"))

    section("2. Four customers shop (events are queued durably in the SQLite inbox)")
    for oid, who in (("o-1001", "ada"), ("o-1002", "grace"), ("o-1003", "alan"), ("o-1004", "edsger")):
        durastate("start", "order", "--id", oid, "--context", f'{{"customer": "{who}"}}')
    for oid, prices in (("o-1001", (25, 17.5)), ("o-1002", (9000,)), ("o-1003", (12,)), ("o-1004", (3,))):
        for price in prices:
            durastate("send", oid, "add_item", "--data", f'{{"price": {price}}}')
    for oid in ("o-1001", "o-1002", "o-1003"):
        durastate("send", oid, "submit")
    say("o-1004 never submits its cart.")

    section("3. Serve: apply everything queued, start the invoked payments")
    durastate("serve", "--until-idle")
    durastate("list")

    section("4. The payment provider answers (each payment is a child execution: <order>~1)")
    durastate("send", "o-1001~1", "authorize", "--data", '{"receipt": "rcpt-1001"}')
    durastate("send", "o-1002~1", "authorize", "--data", '{"receipt": "rcpt-1002"}')
    say("o-1002 is over the 5000 limit, so its payment declines itself; o-1003's provider never answers.")
    durastate("serve", "--until-idle")
    durastate("show", "o-1001")
    durastate("viz", "--execution", "o-1001", "--output", str(workdir / DIAGRAM))
    say(f"{DIAGRAM}: the order's statechart, its active states (one per parallel region) in blue.")

    section("5. The warehouse: hold, resume (deep history), pick and ship (two regions)")
    durastate("send", "o-1001", "hold")
    durastate("send", "o-1001", "resume")
    durastate("send", "o-1001", "picked")
    durastate("send", "o-1001", "label_printed", "--data", '{"tracking": "TRK-1001"}')
    durastate("serve", "--until-idle")

    section("6. An hour passes (a clock moved forward, not a sleep): timeouts fire")
    durastate("serve", "--until-idle", "--advance", "3700")

    section("7. Outcomes and traces")
    durastate("list", "--roots")
    durastate("trace", "o-1001")
    durastate("trace", "o-1003")
    _check_outcomes(db)


def _check_outcomes(db: Path) -> None:
    """The demo is also a smoke test: every order must end where the story says."""
    from durastate.store.sqlite.sync import SqliteStore

    store = SqliteStore(db)
    try:
        got = {oid: (exe.outcome if exe else None) for oid, exe in
               ((oid, store.load(oid)) for oid in EXPECTED)}
    finally:
        store.close()
    console.print()
    for oid, outcome in got.items():
        mark = "[green]✓[/]" if outcome == EXPECTED[oid] else "[red]✗[/]"
        console.print(f"{mark} {oid}: {outcome}")
    if got != EXPECTED:
        raise DemoFailed(f"unexpected outcomes: {got} (expected {EXPECTED})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m durastate.demo", description=__doc__.split("\n\n")[0]
                                     if __doc__ else None)
    parser.add_argument("--dir", type=Path, help="Keep the demo's store (and diagram) in this folder "
                                                 "(default: a temporary folder, where only the diagram "
                                                 "is kept).")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.dir is not None:
        workdir = args.dir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        for stale in workdir.glob("durastate.db*"):
            stale.unlink()
        keep = True
    else:
        workdir = Path(tempfile.mkdtemp(prefix="durastate-demo-"))
        keep = False
    try:
        story(workdir)
    except DemoFailed as exc:
        console.print(f"[bold red]demo failed:[/] {exc}")
        return 1
    finally:
        if not keep:  # the store goes; the picture stays, for the reader to open
            for item in workdir.iterdir():
                if item.name != DIAGRAM:
                    if item.is_dir():
                        shutil.rmtree(item, ignore_errors=True)
                    else:
                        item.unlink(missing_ok=True)
    took = time.monotonic() - started
    where = f"; the store is in {workdir}" if keep else ""
    console.print(f"\n[bold]Done in {took:.1f}s{where}.[/] Next: `durastate --help`, and the README.")
    diagram = workdir / DIAGRAM
    if diagram.exists():
        console.print(f"o-1001's diagram: open {escape(diagram.as_uri())} in a browser")
    return 0


if __name__ == "__main__":
    sys.exit(main())
