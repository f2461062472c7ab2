"""``durastate purge``: delete what is kept of executions that ended long ago (retention, by hand).

Each purged execution leaves a small tombstone (status ``purged``: its id, definition, outcome and times)
that keeps its dedupe marks, so a repeated ``start`` of that id or a late duplicate event is still
recognised and ignored; the tombstone, its marks and trace go when it expires (``--tombstone-ttl``,
14 days by default). Running and suspended executions are never purged. The work is done in bounded
batches, each read from the store's index on the end time; ``--dry-run`` shows the first batch instead.
``durastate serve --retention 30d`` does the same continuously.
"""

from __future__ import annotations

from typing import Annotated

import typer

from durastate.cli import clock, output
from durastate.cli.common import StoreOption, parse_duration_option, session
from durastate.cli.session import UsageError
from durastate.engine.durations import format_duration
from durastate.store.retention import DEFAULT_PURGE_LIMIT, DEFAULT_TOMBSTONE_TTL, PURGEABLE, ended_cutoff

SHOWN = 20
"""Ids listed by name; beyond that only counted."""


def register(app: typer.Typer) -> None:
    app.command("purge")(purge)


def purge(
    ctx: typer.Context,
    older_than: Annotated[float, typer.Option(
        "--older-than", metavar="DURATION", parser=parse_duration_option,
        help="Purge executions that ended longer ago than this: 30d, 12h, 90s, 2d 3h (0s: every ended one).")],
    status: Annotated[list[str] | None, typer.Option(
        "--status", metavar="STATUS",
        help=f"Only these statuses (repeatable or comma-separated); default: {','.join(PURGEABLE)}.")] = None,
    definition: Annotated[str | None, typer.Option("--definition", help="Only executions of this definition.")
                          ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Change nothing; show what the first batch would "
                                                             "purge.")] = False,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Purge at most this many executions "
                                                                     "(default: all that qualify).")] = None,
    tombstone_ttl: Annotated[float, typer.Option(
        "--tombstone-ttl", metavar="DURATION", parser=parse_duration_option,
        help="How long a purged execution's tombstone keeps recognising its events.")] = DEFAULT_TOMBSTONE_TTL,
    store: StoreOption = None,
) -> None:
    """Purge executions that ended more than --older-than ago, keeping a tombstone of each."""
    statuses = _statuses(status)
    sess = session(ctx, store)
    now = clock.now()
    cutoff = ended_cutoff(now, older_than)
    what = f"ended more than {format_duration(older_than)} ago ({', '.join(statuses)}" + (
        f", definition {definition}" if definition else "") + ")"
    batch = min(DEFAULT_PURGE_LIMIT, limit) if limit is not None else DEFAULT_PURGE_LIMIT
    try:
        if dry_run:
            result = sess.store.purge(cutoff, statuses, definition, batch, now, tombstone_ttl, dry_run=True)
            more = " (at least; the first batch only)" if result.more else ""
            output.say(f"would purge {result.purged} execution(s){more} that {what}{_ids(result.ids)}")
            if result.expired:
                output.say(f"would delete {result.expired} expired tombstone(s)")
            return
        purged: list[str] = []
        expired = 0
        while True:
            size = batch if limit is None else min(batch, limit - len(purged))
            result = sess.store.purge(cutoff, statuses, definition, size, now, tombstone_ttl)
            purged += result.ids
            expired += result.expired
            if not result.more or (limit is not None and len(purged) >= limit):
                break
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    output.say(f"purged {len(purged)} execution(s) that {what}{_ids(tuple(purged))}")
    if purged:
        output.say(f"each leaves a tombstone that recognises its events until {output.when(now + tombstone_ttl, now)}")
    if expired:
        output.say(f"deleted {expired} expired tombstone(s) with their dedupe marks")
    if limit is not None and result.more:
        output.note(f"stopped at --limit {limit}; more executions qualify")


def _statuses(values: list[str] | None) -> tuple[str, ...]:
    """``--status finished,failed --status cancelled`` as a checked tuple."""
    if not values:
        return PURGEABLE
    wanted = tuple(dict.fromkeys(s.strip() for v in values for s in v.split(",") if s.strip()))
    bad = [s for s in wanted if s not in PURGEABLE]
    if bad:
        raise UsageError(f"cannot purge status {bad[0]!r}: only ended executions are purged; use "
                         f"{', '.join(PURGEABLE)}")
    return wanted


def _ids(ids: tuple[str, ...]) -> str:
    if not ids:
        return ""
    shown = ", ".join(ids[:SHOWN])
    return f": {shown}" + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")
