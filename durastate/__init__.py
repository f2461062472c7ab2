"""durastate: durable Harel statecharts for Python, serverless on AWS.

The names a user needs, in one place::

    import durastate

    registry = durastate.DefinitionRegistry.from_dir("examples")   # or DefinitionRegistry([path, ...])
    runtime = durastate.LocalRuntime(durastate.open_store("sqlite:///durastate.db"), registry)
    exe_id = runtime.start("order", {"customer": "ada"})
    runtime.send(exe_id, durastate.Event(name="submit"))
    runtime.run_until_idle()
    print(runtime.get(exe_id).status)

Every error raised on purpose derives from :class:`DurastateError` (``except durastate.StoreUnavailable:``).

``import durastate`` is cheap: it loads only the error types. Everything else is imported on first use
(module ``__getattr__``), so importing the package never pulls in pydantic models, a store backend, or a
client library of an optional extra (boto3, psycopg, aiobotocore, typer, rich). Lower layers are in their
own subpackages (:mod:`durastate.engine`, :mod:`durastate.store`, :mod:`durastate.transport`,
:mod:`durastate.runtime`); see ``docs/architecture.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from durastate.errors import (
    BackfillRefused,
    ControlRefused,
    DefinitionError,
    DeliveryFailed,
    DurastateError,
    EventAlreadyProcessed,
    ExecutionTooLarge,
    GroupAborted,
    InvalidCursor,
    InvalidValue,
    MalformedEvent,
    MigrationRefused,
    ReservedId,
    ScheduleError,
    StoreConflict,
    StoreThrottled,
    StoreUnavailable,
    TelemetryUnavailable,
    TimerNotDue,
    UnknownDefinition,
    UnknownDefinitionVersion,
    UnknownExecution,
    UnknownSchedule,
)

__version__ = "0.1.0"  # the same as pyproject.toml's (tests/test_public_api.py checks)

if TYPE_CHECKING:
    from durastate.client import DurastateClient
    from durastate.engine.definition import Definition, load_definition
    from durastate.engine.model import Event, Execution
    from durastate.engine.registry import DefinitionRegistry
    from durastate.runtime.local import LocalRuntime
    from durastate.store.base import ExecutionStore
    from durastate.store.urls import open_store

#: Public name -> the module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "Definition": "durastate.engine.definition",
    "load_definition": "durastate.engine.definition",
    "Event": "durastate.engine.model",
    "Execution": "durastate.engine.model",
    "DefinitionRegistry": "durastate.engine.registry",
    "ExecutionStore": "durastate.store.base",
    "open_store": "durastate.store.urls",
    "LocalRuntime": "durastate.runtime.local",
    "DurastateClient": "durastate.client",
}

__all__ = [
    "BackfillRefused",
    "ControlRefused",
    "Definition",
    "DefinitionError",
    "DefinitionRegistry",
    "DeliveryFailed",
    "DurastateClient",
    "DurastateError",
    "Event",
    "EventAlreadyProcessed",
    "Execution",
    "ExecutionStore",
    "ExecutionTooLarge",
    "GroupAborted",
    "InvalidCursor",
    "InvalidValue",
    "LocalRuntime",
    "MalformedEvent",
    "MigrationRefused",
    "ReservedId",
    "ScheduleError",
    "StoreConflict",
    "StoreThrottled",
    "StoreUnavailable",
    "TelemetryUnavailable",
    "TimerNotDue",
    "UnknownDefinition",
    "UnknownDefinitionVersion",
    "UnknownExecution",
    "UnknownSchedule",
    "__version__",
    "load_definition",
    "open_store",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
