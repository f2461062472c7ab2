"""The store conformance checks as plain functions: what every :class:`~durastate.store.ExecutionStore`
(and its async twin) must do, runnable against any store — the ones durastate ships and yours.

Run them all::

    from durastate.testing import check_store
    report = check_store(MyStore)            # a callable returning a fresh store; raises on a failure
    print(report)

or one group over one store (``check_commit_cas(store)``, ``check_dedupe``, ``check_outbox_order``,
``check_timers``, ``check_spawns``, ``check_trace_ring``, ``check_listing``, ``check_purge``, ``check_load``),
each with an ``_async`` twin for an :class:`~durastate.store.AsyncExecutionStore`.

**The prefix rule.** Every execution id a check creates starts with its prefix (system records carry it
after their kind: ``~schedule~<prefix>nightly``), every event id it emits too, and its definition ids are
``<prefix>order``, ``<prefix>payment``, ``<prefix>invoice``. Each check gets its own prefix (the run's
prefix plus a number), so checks never see each other's data. With ``Capabilities(shared=True)`` — a store
over a database that holds other data — every read is narrowed to the prefix, every purge to the check's
definition, and the few checks that need the whole store to themselves are skipped.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from durastate.store.base import AsyncExecutionStore, ExecutionStore
from durastate.testing import cases_commit, cases_effects, cases_listing, cases_purge, cases_search, cases_trace
from durastate.testing._kit import (
    CASES,
    DEFAULT_CAPABILITIES,
    AwaitingStore,
    Capabilities,
    Case,
    SkipCase,
    run_sync,
)

__all__ = [
    "CASES",
    "DEFAULT_CAPABILITIES",
    "GROUPS",
    "Capabilities",
    "Case",
    "ConformanceFailed",
    "Outcome",
    "Report",
    "check_commit_cas",
    "check_commit_cas_async",
    "check_dedupe",
    "check_dedupe_async",
    "check_listing",
    "check_listing_async",
    "check_load",
    "check_load_async",
    "check_outbox_order",
    "check_outbox_order_async",
    "check_purge",
    "check_purge_async",
    "check_spawns",
    "check_spawns_async",
    "check_store",
    "check_store_async",
    "check_timers",
    "check_timers_async",
    "check_trace_ring",
    "check_trace_ring_async",
    "new_prefix",
    "run_case",
    "run_case_async",
    "select",
]

_MODULES = (cases_commit, cases_effects, cases_trace, cases_listing, cases_search, cases_purge)  # registering
GROUPS: tuple[str, ...] = ("commit_cas", "load", "outbox_order", "dedupe", "timers", "spawns", "trace_ring",
                           "listing", "purge")
"""The groups of checks, in the order :func:`check_store` runs them."""
if set(GROUPS) != {c.group for c in CASES.values()}:  # pragma: no cover - a check module out of step
    raise RuntimeError("durastate.testing: GROUPS does not list every group of checks")

Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Outcome:
    """The result of one check: ``passed``, ``failed`` (``message`` says what was expected) or ``skipped``
    (``message`` says why)."""

    check: str
    status: Status
    message: str = ""
    doc: str = ""


@dataclass
class Report:
    """Every check's outcome; ``str(report)`` is the readable summary, failures first."""

    prefix: str
    outcomes: list[Outcome] = field(default_factory=list)

    def of(self, status: Status) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def ok(self) -> bool:
        return not self.of("failed")

    def __str__(self) -> str:
        passed, failed, skipped = self.of("passed"), self.of("failed"), self.of("skipped")
        lines = [f"store conformance (prefix {self.prefix!r}): {len(passed)} passed, {len(failed)} failed, "
                 f"{len(skipped)} skipped"]
        lines += [f"FAILED {o.check} — {o.doc}\n    {o.message}" for o in failed]
        lines += [f"skipped {o.check}: {o.message}" for o in skipped]
        return "\n".join(lines)

    def raise_for_failures(self) -> Report:
        """Raise :class:`ConformanceFailed` (with this report) if a check failed; else return the report."""
        if not self.ok:
            raise ConformanceFailed(self)
        return self


class ConformanceFailed(AssertionError):
    """One or more checks failed; the message is the report (each failing check and what it expected)."""

    def __init__(self, report: Report) -> None:
        super().__init__(str(report))
        self.report = report


def new_prefix() -> str:
    """A prefix unique to one run (``t`` + 8 hex digits + ``-``): safe on a database shared between runs."""
    return f"t{uuid.uuid4().hex[:8]}-"


def select(only: Iterable[str] | None = None) -> list[Case]:
    """The checks named by ``only`` (a group such as ``"timers"``, or a check's full name), all by default."""
    ordered = sorted(CASES.values(), key=lambda c: GROUPS.index(c.group))
    if only is None:
        return ordered
    wanted = set(only)
    unknown = wanted - set(GROUPS) - set(CASES)
    if unknown:
        raise ValueError(f"no conformance check or group named {sorted(unknown)}; groups: {', '.join(GROUPS)}")
    return [c for c in ordered if c.group in wanted or c.name in wanted]


def _fail_message(exc: BaseException) -> str:
    if isinstance(exc, AssertionError) and str(exc):
        return str(exc)
    return f"raised {type(exc).__name__}: {exc}"


def _outcome(check: Case, exc: BaseException | None) -> Outcome:
    if exc is None:
        return Outcome(check.name, "passed", doc=check.doc)
    if isinstance(exc, SkipCase):
        return Outcome(check.name, "skipped", str(exc), check.doc)
    return Outcome(check.name, "failed", _fail_message(exc), check.doc)


def run_case(check: Case | str, store: ExecutionStore, prefix: str,
             capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Outcome:
    """Run one check over a sync ``store`` with ids starting with ``prefix``; never raises for a failure."""
    check = CASES[check] if isinstance(check, str) else check
    try:
        run_sync(check.run(AwaitingStore(store), prefix, capabilities))
    except Exception as exc:  # every failure of the store becomes the check's outcome
        return _outcome(check, exc)
    return _outcome(check, None)


async def run_case_async(check: Case | str, store: AsyncExecutionStore, prefix: str,
                         capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Outcome:
    """Run one check over an async ``store`` on the running event loop; never raises for a failure."""
    check = CASES[check] if isinstance(check, str) else check
    try:
        await check.run(store, prefix, capabilities)
    except Exception as exc:  # every failure of the store becomes the check's outcome
        return _outcome(check, exc)
    return _outcome(check, None)


def check_store(make_store: Callable[[], ExecutionStore], *, prefix: str | None = None,
                capabilities: Capabilities = DEFAULT_CAPABILITIES, only: Iterable[str] | None = None,
                raise_on_failure: bool = True) -> Report:
    """Run every check (or those in ``only``), each on a fresh store from ``make_store()``, closed after.

    ``prefix`` (default: unique to this run) starts every id the checks create; check ``n`` uses
    ``prefix + n + "-"``. Returns the :class:`Report`; raises :class:`ConformanceFailed` when a check failed
    (unless ``raise_on_failure=False``).
    """
    prefix = new_prefix() if prefix is None else prefix
    report = Report(prefix)
    for n, check in enumerate(select(only)):
        store = make_store()
        try:
            report.outcomes.append(run_case(check, store, f"{prefix}{n}-", capabilities))
        finally:
            store.close()
    return report.raise_for_failures() if raise_on_failure else report


async def check_store_async(make_store: Callable[[], AsyncExecutionStore | Awaitable[AsyncExecutionStore]], *,
                            prefix: str | None = None, capabilities: Capabilities = DEFAULT_CAPABILITIES,
                            only: Iterable[str] | None = None, raise_on_failure: bool = True) -> Report:
    """The async twin of :func:`check_store`: ``make_store()`` returns an async store (or a coroutine that
    makes one, such as ``AsyncSqliteStore.create``-style factories); each is closed with ``await close()``."""
    prefix = new_prefix() if prefix is None else prefix
    report = Report(prefix)
    for n, check in enumerate(select(only)):
        made = make_store()
        store: AsyncExecutionStore = await made if inspect.isawaitable(made) else made
        try:
            report.outcomes.append(await run_case_async(check, store, f"{prefix}{n}-", capabilities))
        finally:
            await store.close()
    return report.raise_for_failures() if raise_on_failure else report


# -- one group over one store ----------------------------------------------------------------------------


def _group(group: str, store: ExecutionStore, prefix: str | None, capabilities: Capabilities) -> Report:
    """Run ``group``'s checks over ONE store: it is shared between them, so reads are narrowed by prefix."""
    prefix = new_prefix() if prefix is None else prefix
    caps = replace(capabilities, shared=True)
    report = Report(prefix, [run_case(c, store, f"{prefix}{n}-", caps) for n, c in enumerate(select([group]))])
    return report.raise_for_failures()


async def _group_async(group: str, store: AsyncExecutionStore, prefix: str | None,
                       capabilities: Capabilities) -> Report:
    prefix = new_prefix() if prefix is None else prefix
    caps = replace(capabilities, shared=True)
    report = Report(prefix)
    for n, c in enumerate(select([group])):
        report.outcomes.append(await run_case_async(c, store, f"{prefix}{n}-", caps))
    return report.raise_for_failures()


def check_commit_cas(store: ExecutionStore, prefix: str | None = None,
                     capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """The version compare-and-swap: inserts, updates, conflicts, and a lost commit writing nothing."""
    return _group("commit_cas", store, prefix, capabilities)


def check_load(store: ExecutionStore, prefix: str | None = None,
        capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """``load`` round-trips every field; durable stores return distinct snapshots."""
    return _group("load", store, prefix, capabilities)


def check_outbox_order(store: ExecutionStore, prefix: str | None = None,
                       capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """The transactional outbox: commit order, seqs, acks, untargeted notifications."""
    return _group("outbox_order", store, prefix, capabilities)


def check_dedupe(store: ExecutionStore, prefix: str | None = None,
        capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """Dedupe marks per execution, ``load_for_event``, and ``check_event`` commits where declared."""
    return _group("dedupe", store, prefix, capabilities)


def check_timers(store: ExecutionStore, prefix: str | None = None,
        capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """Timer arms, re-arms, cancels, due order, exact ``fire_at``, the guarded delete."""
    return _group("timers", store, prefix, capabilities)


def check_spawns(store: ExecutionStore, prefix: str | None = None,
        capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """Child-spawn intents: order, snapshotted context, acks, the parent's child refs."""
    return _group("spawns", store, prefix, capabilities)


def check_trace_ring(store: ExecutionStore, prefix: str | None = None,
                     capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """The trace ring: indexes, trimming to ``trace_max``, no step from a lost commit."""
    return _group("trace_ring", store, prefix, capabilities)


def check_listing(store: ExecutionStore, prefix: str | None = None,
                  capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """``list_executions``: summaries, paging, every filter, system records left out."""
    return _group("listing", store, prefix, capabilities)


def check_purge(store: ExecutionStore, prefix: str | None = None,
        capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    """Retention: tombstones that still dedupe, filters, batches, dry runs, races with commits."""
    return _group("purge", store, prefix, capabilities)


async def check_commit_cas_async(store: AsyncExecutionStore, prefix: str | None = None,
                                 capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("commit_cas", store, prefix, capabilities)


async def check_load_async(store: AsyncExecutionStore, prefix: str | None = None,
                           capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("load", store, prefix, capabilities)


async def check_outbox_order_async(store: AsyncExecutionStore, prefix: str | None = None,
                                   capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("outbox_order", store, prefix, capabilities)


async def check_dedupe_async(store: AsyncExecutionStore, prefix: str | None = None,
                             capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("dedupe", store, prefix, capabilities)


async def check_timers_async(store: AsyncExecutionStore, prefix: str | None = None,
                             capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("timers", store, prefix, capabilities)


async def check_spawns_async(store: AsyncExecutionStore, prefix: str | None = None,
                             capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("spawns", store, prefix, capabilities)


async def check_trace_ring_async(store: AsyncExecutionStore, prefix: str | None = None,
                                 capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("trace_ring", store, prefix, capabilities)


async def check_listing_async(store: AsyncExecutionStore, prefix: str | None = None,
                              capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("listing", store, prefix, capabilities)


async def check_purge_async(store: AsyncExecutionStore, prefix: str | None = None,
                            capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Report:
    return await _group_async("purge", store, prefix, capabilities)
