"""The in-memory store's search index: per index key and value the sorted ids, per number key the sorted
(value, id) pairs, so a ``where`` listing reads the executions it returns and not every one stored.

The store keeps it in its commit (:meth:`SearchIndex.update`, under the store's lock) and drops an
execution from it when a purge deletes it; a migration is a commit, so it moves the execution like one.
The index holds its own copy of each execution's entries: an embedded caller mutates ``exe.search`` in
place, and the old entries must still be found to be removed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import Any

from durastate.engine.search import IndexPlan, index_entries

Entry = tuple[str, str | float]  # (index key, text or number)


class SearchIndex:
    """Ids by search value (equality, id order) and by number (ranges, value then id order)."""

    def __init__(self) -> None:
        self._ids: dict[Entry, list[str]] = {}
        self._numbers: dict[str, list[tuple[float, str]]] = {}
        self._of: dict[str, frozenset[Entry]] = {}

    def update(self, execution_id: str, values: Mapping[str, Any] | None) -> None:
        """Bring the index of one execution up to its search values (a no-op when none changed)."""
        if not values and execution_id not in self._of:
            return  # no search values, none indexed: what most commits of most definitions are
        new = frozenset(_entry(key, text, num) for key, text, num in index_entries(values or {}))
        old = self._of.get(execution_id, frozenset())
        if new == old:
            return
        for entry in old - new:
            self._remove(execution_id, entry)
        for entry in new - old:
            bisect.insort(self._ids.setdefault(entry, []), execution_id)
            if isinstance(entry[1], float):
                bisect.insort(self._numbers.setdefault(entry[0], []), (entry[1], execution_id))
        if new:
            self._of[execution_id] = new
        else:
            self._of.pop(execution_id, None)

    def drop(self, execution_id: str) -> None:
        """Forget a deleted execution."""
        for entry in self._of.pop(execution_id, ()):
            self._remove(execution_id, entry)

    def _remove(self, execution_id: str, entry: Entry) -> None:
        ids = self._ids[entry]
        del ids[bisect.bisect_left(ids, execution_id)]
        if not ids:
            del self._ids[entry]
        if isinstance(entry[1], float):
            pairs = self._numbers[entry[0]]
            del pairs[bisect.bisect_left(pairs, (entry[1], execution_id))]
            if not pairs:
                del self._numbers[entry[0]]

    def equal(self, plan: IndexPlan, after: str | None) -> Iterator[str]:
        """The ids with the plan's value, in id order, after ``after``."""
        assert plan.equal is not None
        ids = self._ids.get((plan.key, plan.equal), [])
        start = bisect.bisect_right(ids, after) if after is not None else 0
        for pos in range(start, len(ids)):  # by position, no copy: the caller holds the store's lock
            yield ids[pos]

    def within(self, plan: IndexPlan, after: tuple[float, str] | None) -> Iterator[tuple[float, str]]:
        """The (number, id) pairs within the plan's bounds, in that order, after ``after``."""
        pairs = self._numbers.get(plan.key, [])
        start = 0
        if plan.low is not None:
            find = bisect.bisect_left if plan.low_inclusive else bisect.bisect_right
            start = find(pairs, plan.low, key=lambda p: p[0])
        if after is not None:
            start = max(start, bisect.bisect_right(pairs, after))
        for pos in range(start, len(pairs)):
            pair = pairs[pos]
            if not plan.admits(pair[0]):
                return
            yield pair


def _entry(key: str, text: str | None, num: float | None) -> Entry:
    """An index entry's (key, value): its text, else its number (every entry holds one)."""
    if text is not None:
        return key, text
    assert num is not None
    return key, num
