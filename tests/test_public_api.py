"""``import durastate``: the names a user needs, each the same object as in its home module, imported cheaply."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import durastate
import durastate.errors

ROOT = Path(__file__).resolve().parents[1]

#: What a user reaches for first: load definitions, run them, talk to a deployed engine, catch errors.
REQUIRED = {
    "__version__",
    "load_definition",
    "Definition",
    "Event",
    "Execution",
    "DefinitionRegistry",
    "LocalRuntime",
    "open_store",
    "DurastateClient",
    "DurastateError",
}

#: Where each public name lives; ``durastate.X`` must be that very object.
HOMES = {
    "load_definition": "durastate.engine",
    "Definition": "durastate.engine",
    "Event": "durastate.engine",
    "Execution": "durastate.engine",
    "DefinitionRegistry": "durastate.engine",
    "ExecutionStore": "durastate.store",
    "open_store": "durastate.store",
    "LocalRuntime": "durastate.runtime",
    "DurastateClient": "durastate.client",
}

#: Client libraries of the optional extras (and the heavy dev/bench tools): never loaded by ``import durastate``.
HEAVY = ("boto3", "botocore", "aiobotocore", "psycopg", "psycopg_pool", "rich", "typer", "click",
         "aws_lambda_powertools", "moto", "matplotlib", "opentelemetry")


def user_errors() -> set[str]:
    """Every error type durastate raises on purpose (``durastate.errors``), by name."""
    return {name for name, obj in vars(durastate.errors).items()
            if inspect.isclass(obj) and issubclass(obj, durastate.DurastateError)}


def test_required_names_are_exported() -> None:
    missing = (REQUIRED | user_errors()) - set(durastate.__all__)
    assert not missing, f"durastate.__all__ lacks {sorted(missing)}"


def test_every_exported_name_resolves_to_its_home_object() -> None:
    for name in durastate.__all__:
        value = getattr(durastate, name)
        if name in HOMES:
            assert value is getattr(importlib.import_module(HOMES[name]), name), name
        elif name in user_errors():
            assert value is getattr(durastate.errors, name), name
    assert set(durastate.__all__) <= set(dir(durastate))


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = durastate.Nope  # type: ignore[attr-defined]
    assert not hasattr(durastate, "SqliteStore")  # backends stay in durastate.store


def test_version_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "durastate"
    assert durastate.__version__ == project["version"]


def _modules_after(code: str) -> set[str]:
    """The top-level modules loaded by running ``code`` in a fresh interpreter (this checkout first on the path)."""
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); {code}; import json; "
              "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_import_durastate_is_cheap() -> None:
    loaded = _modules_after("import durastate")
    assert not loaded & set(HEAVY), f"`import durastate` loaded {sorted(loaded & set(HEAVY))}"
    # Lazy for real: not even the engine's pydantic models or a store are imported up front.
    assert not loaded & {"pydantic", "yaml", "sqlite3"}, sorted(loaded & {"pydantic", "yaml", "sqlite3"})


def test_public_names_need_no_extra() -> None:
    """Touching every public name (runtime, client and store included) still loads no optional library."""
    loaded = _modules_after("import durastate; [getattr(durastate, n) for n in durastate.__all__]")
    assert not loaded & set(HEAVY), f"the public names loaded {sorted(loaded & set(HEAVY))}"
