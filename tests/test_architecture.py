"""The layering of docs/architecture.md, enforced on every import of every module (parsed with ``ast``).

What counts as an import: every ``import``/``from … import`` statement anywhere in a module — at module
level, inside functions (the lazy imports of optional client libraries), and under ``if TYPE_CHECKING:``.

* The **layer rules** (who may import whom) and the **engine purity** rule count all of them, TYPE_CHECKING
  included: a type-only import still makes the importer's interface depend on the imported layer (an engine
  signature that mentions a store type has the seam upside down), and it is one refactor away from a real
  import. A lazy (function-local) import is still a dependency, just a deferred one.
* The **import-time rule** (a module needs no optional extra to be imported) counts only what runs when the
  module is imported: module-level statements outside ``if TYPE_CHECKING:``, followed transitively through
  the package's own modules (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` too).
* The **private rule** counts all imports: a module or name starting with ``_`` (not a dunder) belongs to
  the package that holds it; nothing outside that package may import it.

Each failure names the file, the line, the importing module and what it imported.
"""

from __future__ import annotations

import ast
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Folders of Python code in the repository (everything but virtualenvs, node_modules and build outputs).
SCANNED = ("durastate", "tests", "bench", "examples", "app.py")
SKIPPED_PARTS = {"__pycache__", "build", "cdk.out", "node_modules", ".venv"}

# -- the whiteboard ---------------------------------------------------------------------------------------

#: Module prefix -> layer (the longest matching prefix wins). A new top-level module of ``durastate`` gets
#: a layer here (and a line in docs/architecture.md), or test_every_module_has_a_layer fails.
LAYER_OF: dict[str, str] = {
    "durastate": "facade",
    "durastate.errors": "errors",
    "durastate._lazy": "errors",
    "durastate.engine": "engine",
    "durastate.db": "db",
    "durastate.store": "store",
    "durastate.transport": "transport",
    "durastate.viz": "viz",
    "durastate.render": "render",
    "durastate.runtime": "runtime",
    "durastate.client": "client",
    "durastate.devstack": "devstack",
    "durastate.cli": "cli",
    "durastate.demo": "demo",
    "durastate.ui": "ui",
    "durastate.importers": "importers",
    "durastate.testing": "testing",
    "durastate.functions": "functions",
    "durastate.cdk": "cdk",
    "app": "infra",
}

#: Layer -> the other layers it may import (its own layer always). Tests, benchmarks and examples are users:
#: they may import anything public.
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "engine": frozenset({"errors"}),
    "db": frozenset({"errors"}),
    "store": frozenset({"engine", "db", "errors"}),
    "transport": frozenset({"engine", "db", "errors"}),
    "viz": frozenset({"engine", "errors"}),
    # statechart pictures (SVG/PNG): the same transitions and colours as viz's Mermaid, laid out in Python
    "render": frozenset({"viz", "engine", "errors"}),
    # importers lazily: the definitions folder's .scxml / .xstate.json files (durastate.runtime.definitions)
    "runtime": frozenset({"engine", "store", "transport", "errors", "importers"}),
    "client": frozenset({"engine", "store", "transport", "errors"}),
    "facade": frozenset({"engine", "store", "runtime", "client", "errors"}),
    "functions": frozenset({"runtime", "engine", "store", "transport", "errors", "facade"}),
    "devstack": frozenset({"runtime", "client", "engine", "store", "transport", "errors"}),
    "cli": frozenset({"devstack", "runtime", "client", "viz", "render", "engine", "store", "transport", "errors",
                      "ui", "importers"}),
    # the web console (`durastate ui`): reads through the store and the transport, controls through the runtime
    "ui": frozenset({"runtime", "client", "render", "viz", "engine", "store", "transport", "errors"}),
    "demo": frozenset({"cli", "runtime", "client", "viz", "render", "engine", "store", "transport", "errors"}),
    # SCXML / XState charts -> definition documents: pure, over the engine's definition model
    "importers": frozenset({"engine", "errors"}),
    # the conformance kit for store authors: checks over the store protocols; nothing in the package imports it
    "testing": frozenset({"engine", "store", "errors"}),
    # the CDK construct, the stack and the layer build: deployment code. Nothing of durastate outside itself,
    # not even lazily (all of it runs during synth, where durastate's run-time dependencies need not be)
    "cdk": frozenset(),
    # the repository's CDK app (app.py): a user of the construct, like anyone's app
    "infra": frozenset({"cdk"}),
}

#: From the facade (``durastate/__init__``), modules of the package import only the version: every other name
#: there is a lazy re-export, and importing it from inside the package would hide an upward dependency.
FACADE_NAMES_FOR_THE_PACKAGE = frozenset({"__version__"})

#: What the pure core must never import: database and network clients, processes, threads, event loops and
#: the clock. ``step(definition, execution, event, now)`` is a deterministic function of its arguments — the
#: time comes in as ``now`` — so a step can be replayed, tested without mocks and run inside any store's
#: transaction, sync or async. (Reading a definition *file* with pathlib is allowed: it is the one input the
#: engine loads itself, and it happens before any execution runs.)
ENGINE_FORBIDDEN = frozenset({
    "sqlite3", "psycopg", "psycopg_pool", "boto3", "botocore", "aiobotocore",
    "socket", "ssl", "select", "selectors", "http", "urllib.request", "requests", "httpx", "aiohttp",
    "subprocess", "multiprocessing", "signal", "threading", "_thread", "asyncio", "concurrent", "time",
})

#: Client libraries of the optional extras (and the dev/CDK tools). A module of ``durastate`` may need one at
#: import time only if it is listed below for it; everything else must work on the core install (pydantic and
#: PyYAML) and import these lazily, inside the function that needs them.
OPTIONAL_LIBRARIES = frozenset({
    "boto3", "botocore", "aiobotocore", "psycopg", "psycopg_pool", "typer", "rich", "click",
    "aws_lambda_powertools", "moto", "aws_cdk", "constructs", "cdk_nag", "matplotlib",
    "starlette", "uvicorn", "jinja2", "markupsafe",
    "PIL",  # durastate.render.png, lazily (the `cli` extra)
    "pytest",  # durastate.testing.pytest_plugin, lazily (the kit's plain functions need only durastate)
    "opentelemetry",  # durastate.runtime.telemetry, lazily (the `otel` extra; looked up in sys.modules)
})
IMPORT_TIME_EXTRAS: dict[str, frozenset[str]] = {
    "durastate.cli": frozenset({"typer", "rich", "click"}),  # the `cli` extra
    "durastate.demo": frozenset({"typer", "rich", "click"}),  # drives the CLI: the `cli` extra, nothing more
    "durastate.db.postgres": frozenset({"psycopg", "psycopg_pool"}),
    "durastate.store.postgres": frozenset({"psycopg", "psycopg_pool"}),
    "durastate.transport.postgres": frozenset({"psycopg", "psycopg_pool"}),
    "durastate.store.dynamodb": frozenset({"boto3", "botocore", "aiobotocore"}),
    "durastate.transport.sqs": frozenset({"boto3", "botocore"}),
    "durastate.transport.eventbridge": frozenset({"boto3", "botocore"}),
    "durastate.runtime.aws": frozenset({"boto3", "botocore"}),
    "durastate.devstack": frozenset({"boto3", "botocore", "moto"}),
    "durastate.ui": frozenset({"starlette", "uvicorn", "jinja2", "markupsafe"}),  # the `ui` extra
    "durastate.cdk": frozenset({"aws_cdk", "constructs"}),  # the `cdk` extra
    # the Lambda handlers: Powertools and boto3 (the layer and the Lambda runtime; the `aws` extra)
    "durastate.functions": frozenset({"aws_lambda_powertools", "boto3", "botocore"}),
}

#: Known breaches of the private rule, in files this test's owner does not own. Each must go (make the
#: helper public: drop the underscore); this list may only shrink — test_known_breaches_still_exist fails
#: when one is fixed, so it is removed here too.
KNOWN_PRIVATE_BREACHES = frozenset({
    ("tests.bench.test_bench_smoke", "bench._util"),
    ("tests.store.dynamodb.test_dedupe", "bench._meter"),
})

# -- parsing ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    importer: str  # dotted name of the importing module
    target: str  # dotted name imported: a module, or module.name for `from module import name`
    type_only: bool  # under `if TYPE_CHECKING:`
    local: bool  # inside a function

    @property
    def import_time(self) -> bool:
        return not (self.type_only or self.local)

    def where(self) -> str:
        kind = " (TYPE_CHECKING)" if self.type_only else " (function-local)" if self.local else ""
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.importer} imports {self.target}{kind}"


def module_files() -> Iterator[Path]:
    for entry in SCANNED:
        path = ROOT / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIPPED_PARTS)  # prune layers/build & co.
                yield from (Path(folder, f) for f in sorted(files) if f.endswith(".py"))


def module_name(path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path``, and whether it is a package (``__init__``)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def collect(path: Path) -> list[Import]:
    """Every import statement of the file at ``path``, wherever it is (statements only: imports are statements)."""
    module, is_package = module_name(path)
    package = module if is_package else module.rpartition(".")[0]
    found: list[Import] = []

    def add(node: ast.stmt, target: str, type_only: bool, local: bool) -> None:
        found.append(Import(path, node.lineno, module, target, type_only, local))

    def walk(body: list[ast.stmt], type_only: bool, local: bool) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(node, alias.name, type_only, local)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source != "__future__":
                    for alias in node.names:
                        add(node, source if alias.name == "*" else f"{source}.{alias.name}", type_only, local)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                walk(node.body, True, local)
                walk(node.orelse, type_only, local)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                walk(node.body, type_only, True)
            else:  # class bodies, if/for/while/with/try/match blocks: same context
                for field in ("body", "orelse", "finalbody"):
                    block = getattr(node, field, None)
                    if isinstance(block, list):
                        walk([b for b in block if isinstance(b, ast.stmt)], type_only, local)
                for sub in [*getattr(node, "handlers", ()), *getattr(node, "cases", ())]:
                    walk(sub.body, type_only, local)

    walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body, False, False)
    return found


@cache
def all_imports() -> tuple[Import, ...]:
    return tuple(imp for path in module_files() for imp in collect(path))


@cache
def project_modules() -> frozenset[str]:
    return frozenset(module_name(p)[0] for p in module_files())


def layer_of(name: str) -> str | None:
    """The layer of a dotted name (module or module attribute) of durastate or app.py, else None."""
    parts = name.split(".")
    if parts[0] not in {p.split(".")[0] for p in LAYER_OF}:
        return None
    for n in range(len(parts), 0, -1):
        layer = LAYER_OF.get(".".join(parts[:n]))
        if layer is not None:
            if layer == "facade" and len(parts) > 1 and f"durastate.{parts[1]}" in project_modules():
                return "unassigned"  # durastate.<module> that the whiteboard does not know
            return layer
    return None


def owning_module(target: str) -> str | None:
    """The project module an import runs: the longest prefix of ``target`` that is a module of the repo."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in project_modules():
            return candidate
    return None


def top(target: str) -> str:
    return target.split(".")[0]


# -- the rules --------------------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    unassigned = sorted(m for m in project_modules() if m.startswith("durastate") and layer_of(m) == "unassigned")
    assert not unassigned, (f"modules with no layer: {unassigned}; add them to LAYER_OF in tests/test_architecture.py "
                            "and to docs/architecture.md")


def layer_breaches() -> list[str]:
    breaches = []
    for imp in all_imports():
        source, target = layer_of(imp.importer), layer_of(imp.target)
        if source in (None, "unassigned") or target is None or source == target:
            continue  # not layered (tests, bench, third party), or reported by test_every_module_has_a_layer
        if target == "unassigned":
            breaches.append(f"{imp.where()}: that module has no layer (add it to LAYER_OF)")
        elif target == "facade" and imp.importer.startswith("durastate."):
            name = imp.target.removeprefix("durastate").lstrip(".")
            if name not in FACADE_NAMES_FOR_THE_PACKAGE:
                breaches.append(f"{imp.where()}: inside the package, import {name or 'a name'!r} from its home "
                                "module, not from the `durastate` facade")
        elif target not in ALLOWED[source]:
            may = ", ".join(sorted(ALLOWED[source])) or "nothing of durastate"
            breaches.append(f"{imp.where()}: the {source} layer may not import the {target} layer "
                            f"({source} may import: {may})")
    return breaches


def test_layers_import_only_downwards() -> None:
    breaches = layer_breaches()
    assert not breaches, "layer rules broken (docs/architecture.md):\n  " + "\n  ".join(breaches)


def test_engine_does_no_io() -> None:
    breaches = []
    for imp in all_imports():
        if layer_of(imp.importer) != "engine":
            continue
        hit = next((f for f in ENGINE_FORBIDDEN if imp.target == f or imp.target.startswith(f + ".")), None)
        if hit:
            breaches.append(f"{imp.where()}: the engine is pure (no I/O, threads, event loops or clock): {hit}")
    assert not breaches, "\n  ".join(["engine purity broken (docs/architecture.md):", *breaches])


def import_time_extras(module: str) -> frozenset[str]:
    for n in range(module.count(".") + 1, 0, -1):
        granted = IMPORT_TIME_EXTRAS.get(".".join(module.split(".")[:n]))
        if granted is not None:
            return granted
    return frozenset()


def test_optional_extras_are_imported_lazily() -> None:
    """Importing any module of durastate needs only the core install, plus the extra its own job needs.

    Followed transitively: `durastate.cli` reaching boto3 through a module-level import of the SQS transport
    would break `durastate --help` (and `make demo`) on an install with only the `cli` extra.
    """
    at_import: dict[str, list[Import]] = {}
    for imp in all_imports():
        if imp.import_time:
            at_import.setdefault(imp.importer, []).append(imp)

    def runs(imp: Import) -> list[str]:
        """The package modules an import runs: importing a.b.c runs a/__init__ and a/b/__init__ first."""
        inner = owning_module(imp.target)
        if inner is None or not inner.startswith("durastate"):
            return []
        parts = inner.split(".")
        return [m for m in (".".join(parts[:n]) for n in range(1, len(parts) + 1)) if m in project_modules()]

    def reaches(module: str) -> dict[str, tuple[Import, ...]]:
        """Optional library -> the shortest chain of import-time imports by which ``module`` loads it."""
        found: dict[str, tuple[Import, ...]] = {}
        chains: dict[str, tuple[Import, ...]] = {module: ()}
        queue = [module]
        while queue:  # breadth first: the package has import cycles (engine <-> its __init__), so no recursion
            current = queue.pop(0)
            for imp in at_import.get(current, ()):
                if top(imp.target) in OPTIONAL_LIBRARIES:
                    found.setdefault(top(imp.target), (*chains[current], imp))
                for nxt in runs(imp):
                    if nxt not in chains:
                        chains[nxt] = (*chains[current], imp)
                        queue.append(nxt)
        return found

    breaches = []
    for module in sorted(project_modules()):
        if not module.startswith("durastate"):
            continue
        granted = import_time_extras(module)
        for lib, chain in sorted(reaches(module).items()):
            if lib not in granted:
                path = " -> ".join(i.where().split(": ", 1)[1] for i in chain)
                breaches.append(f"{module} needs {lib} at import time ({path}); import it inside the function "
                                f"that uses it (allowed at import time here: {sorted(granted) or 'nothing'})")
    assert not breaches, "\n  ".join(["optional extras imported eagerly:", *breaches])


def private_owner(target: str) -> str | None:
    """The package that owns the first private part (``_x``, not ``__x__``) of ``target``, if it has one."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            holder = ".".join(parts[:i])
            if (ROOT / Path(*parts[:i])).with_suffix(".py").is_file():  # a name private to a module:
                return holder.rpartition(".")[0]  # shared with its package's modules
            return holder
    return None


def private_breaches() -> set[tuple[str, str, str]]:
    found = set()
    for imp in all_imports():
        owner = private_owner(imp.target)
        if owner is None or imp.importer == owner or imp.importer.startswith(owner + "."):
            continue
        private = imp.target.split(".")
        cut = next(i for i, p in enumerate(private) if p.startswith("_") and not p.endswith("__"))
        found.add((imp.importer, ".".join(private[: cut + 1]), imp.where()))
    return found


def test_private_modules_stay_in_their_package() -> None:
    new = sorted(where for importer, private, where in private_breaches()
                 if (importer, private) not in KNOWN_PRIVATE_BREACHES)
    assert not new, "\n  ".join(["private modules/names imported from outside their package:", *new])


def test_known_breaches_still_exist() -> None:
    fixed = KNOWN_PRIVATE_BREACHES - {(importer, private) for importer, private, _ in private_breaches()}
    assert not fixed, f"fixed, so remove them from KNOWN_PRIVATE_BREACHES: {sorted(fixed)}"


def test_the_checks_see_every_kind_of_import() -> None:
    """Self-test: the collector finds local, TYPE_CHECKING and relative imports where they are."""
    by_importer: dict[str, list[Import]] = {}
    for imp in all_imports():
        by_importer.setdefault(imp.importer, []).append(imp)
    assert any(i.type_only for i in by_importer["durastate.store"])  # the backends' names for mypy
    assert any(i.local for i in by_importer["durastate.cli"])  # the typer app, imported in main()
    assert any(i.target == "tests.store.sqlite._procs" for i in by_importer["tests.store.sqlite.test_sqlite_store"])
    assert layer_of("durastate.store.sqlite.sync.SqliteStore") == "store"
    assert layer_of("durastate.__version__") == "facade"
    assert private_owner("bench._util.Series") == "bench"
    assert private_owner("durastate.store.sql._x") == "durastate.store"
    assert private_owner("durastate.__version__") is None


# -- the engine's own layering ----------------------------------------------------------------------------


def engine_graph() -> dict[str, dict[str, Import]]:
    """Module of ``durastate.engine`` -> the engine modules it imports (one import statement as the witness).

    Every import counts, TYPE_CHECKING-only and function-local ones too: they are how a circle hides (a
    signature typed with a higher module's class, an import moved into the function "because of the cycle").
    """
    graph: dict[str, dict[str, Import]] = {}
    for imp in all_imports():
        if layer_of(imp.importer) != "engine":
            continue
        target = owning_module(imp.target)
        if target is not None and target != imp.importer and layer_of(target) == "engine":
            graph.setdefault(imp.importer, {}).setdefault(target, imp)
    return graph


def find_cycle(graph: dict[str, dict[str, Import]]) -> list[Import]:
    """One import cycle of ``graph`` as its edges in order (empty if there is none); depth first, iterative."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done (no cycle through it)
    for start in sorted(graph):
        if state.get(start):
            continue
        path: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph.get(start, {}))))]
        state[start] = 1
        while path:
            node, successors = path[-1]
            nxt = next(successors, None)
            if nxt is None:
                state[node] = 2
                path.pop()
            elif state.get(nxt) == 1:
                names = [n for n, _ in path]
                ring = [*names[names.index(nxt):], nxt]
                return [graph[a][b] for a, b in itertools.pairwise(ring)]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append((nxt, iter(sorted(graph.get(nxt, {})))))
    return []


def test_find_cycle_reports_the_ring() -> None:
    """Self-test of the cycle finder on a made-up graph: a -> b -> c -> a, and d hanging off it."""
    def edge(a: str, b: str) -> Import:
        return Import(ROOT / "x.py", 1, a, b, False, False)

    graph = {"a": {"b": edge("a", "b")}, "b": {"c": edge("b", "c")}, "c": {"a": edge("c", "a")},
             "d": {"a": edge("d", "a")}}
    assert [(i.importer, i.target) for i in find_cycle(graph)] == [("a", "b"), ("b", "c"), ("c", "a")]
    assert find_cycle({"a": {"b": edge("a", "b")}, "d": {"b": edge("d", "b")}}) == []


def test_engine_modules_import_without_a_cycle() -> None:
    """The engine's modules form layers (docs/architecture.md, "Inside the engine"): no import circle.

    A circle means no module of it can be read, tested or changed without the others; the fix is to move
    what the lower module needs (a type, a protocol, a constant) into a module below both.
    """
    cycle = find_cycle(engine_graph())
    assert not cycle, "\n  ".join(["the engine's modules import each other in a circle:",
                                   *(imp.where() for imp in cycle)])
