"""durastate's kit for store authors: the store conformance checks as plain functions.

A store written outside durastate proves it keeps the :class:`~durastate.store.ExecutionStore` contract
(or the async one) by running the very checks durastate runs over its own backends::

    from durastate.testing import check_store, Capabilities
    print(check_store(MyStore, capabilities=Capabilities(durable=True)))

See :mod:`durastate.testing.conformance` (the checks, the prefix rule) and
:mod:`durastate.testing.pytest_plugin` (one pytest test per check; pytest is needed only there).
"""

from __future__ import annotations

from durastate.testing._kit import Capabilities
from durastate.testing.conformance import (
    CASES,
    GROUPS,
    ConformanceFailed,
    Outcome,
    Report,
    check_commit_cas,
    check_commit_cas_async,
    check_dedupe,
    check_dedupe_async,
    check_listing,
    check_listing_async,
    check_load,
    check_load_async,
    check_outbox_order,
    check_outbox_order_async,
    check_purge,
    check_purge_async,
    check_spawns,
    check_spawns_async,
    check_store,
    check_store_async,
    check_timers,
    check_timers_async,
    check_trace_ring,
    check_trace_ring_async,
)

__all__ = [
    "CASES",
    "GROUPS",
    "Capabilities",
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
]
