"""A store wrapper for tests: delegates everything to a real store, so a test overrides only ``commit``.

Tests wrap a real store to act inside its commit (a concurrent writer slipping in, an injected fault, a
condition a thread waits on). The worker asks a store whether it hands out live objects, and a wrapper must
answer for the store it wraps, or the worker would skip (or add) its copies.
"""

from __future__ import annotations

from typing import Any

from durastate.runtime.worker import returns_live_objects
from durastate.store.base import ExecutionStore


class WrappedStore:
    """Delegates every attribute to ``inner``; subclasses override ``commit``."""

    def __init__(self, inner: ExecutionStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def returns_live_objects(self) -> bool:
        return returns_live_objects(self.inner)
