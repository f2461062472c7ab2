"""Module attributes imported on first use: how a package exports names whose modules need an extra.

``durastate.store`` exports ``PostgresStore`` but must not import psycopg until someone asks for it, and
likewise for the DynamoDB and SQS pieces of ``durastate.store`` and ``durastate.transport``. Each such
package sets ``__getattr__ = lazy_attributes(__name__, {name: module})``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``names[name]`` when ``name`` is first read."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
