"""The in-memory store, ``DictStore``, and its async twin: tests, notebooks, the embedded default."""

from durastate.store.memory.aio import AsyncDictStore
from durastate.store.memory.sync import DictCore, DictStore

__all__ = ["AsyncDictStore", "DictCore", "DictStore"]
