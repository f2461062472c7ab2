"""The console's pages and their routes: a Starlette app over one store, pages from Jinja2 templates.

    /                                executions: filters, keyset paging, counts per status
    /executions/{id}                 one execution: the chart, status, context, timers, children, events
    /executions/{id}/trace           its trace as a timeline
    /definitions, /definitions/{id}  the definitions, and one with its running executions per state
    /api/executions/{id}/version     what the live view polls: the page reloads its fragment on a change
    /api/definitions/{id}/counts     the same for a definition page
    /api/counts?definition=ID        executions per status (capped), fetched by the pages once loaded
    POST /executions/{id}/confirm/{action}, /executions/{id}/do/{action}
                                     control (``--allow-control`` only; see :mod:`durastate.ui.control`)
    /login                           the login page, when the console asks for a token
                                     (:mod:`durastate.ui.guard`: host names, origins, framing, login)

Route functions are plain (sync) functions: Starlette runs them in its thread pool, and one lock keeps
the store to one request at a time (the console is for a person or two, not a fleet). Errors become
pages: 404 for an unknown id or path, 400 for bad input, 403 for control on a read-only console, 503
with the store's error when it does not answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from durastate.engine.definition import Definition
from durastate.engine.durations import parse_duration
from durastate.engine.model import Event, Execution
from durastate.engine.registry import DefinitionRegistry
from durastate.errors import (
    DefinitionError,
    DurastateError,
    InvalidValue,
    StoreUnavailable,
    UnknownDefinition,
    UnknownExecution,
)
from durastate.runtime.definitions import BrokenFile
from durastate.runtime.versions import Versions
from durastate.store.base import ExecutionPage, ExecutionStore
from durastate.store.schedules import list_schedules
from durastate.transport.base import DeadLetterBox, UnknownDeadLetter
from durastate.ui import control, guard, queries, schedules
from durastate.ui.chart import chart

HERE = Path(__file__).parent


@dataclass
class Console:
    """What the console serves: a store, optionally its inbox and definitions, and whether it may act."""

    store: ExecutionStore
    registry: DefinitionRegistry | None = None
    inbox: Any = None
    """The store's queue (``durastate.transport``), if it has one: queued events and dead letters."""
    deliver: control.Deliver | None = None
    allow_control: bool = False
    store_label: str = ""
    clock: Callable[[], float] = time.time
    active_paths: Callable[[Execution, Callable[[str], Execution | None]], list[str]] | None = None
    """The active leaves of an execution, its regions' included (the CLI passes its own); default: its leaf."""
    access: guard.Access = field(default_factory=guard.Access)
    """The host names it answers to and its login token, if any (:mod:`durastate.ui.guard`)."""
    broken: list[BrokenFile] = field(default_factory=list)
    """Files of the definitions folder that do not load (shown with why; the others are served)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    confirmations: control.Confirmations = field(init=False)

    def __post_init__(self) -> None:
        self.confirmations = control.Confirmations(self.clock)

    @property
    def box(self) -> DeadLetterBox | None:
        """Where the store's queue keeps dead letters (``None``: it keeps none)."""
        box: DeadLetterBox | None = getattr(self.inbox, "dead_letter_box", None)
        return box

    def queued(self) -> Callable[[str], list[tuple[str, Event]]] | None:
        peek = getattr(self.inbox, "messages", None)
        return peek if callable(peek) else None

    def broken_file(self, definition_id: str) -> BrokenFile | None:
        """The file declaring ``definition_id`` that does not load, if one does not."""
        return next((b for b in self.broken if b.definition_id == definition_id), None)

    def definition_ids(self) -> list[str]:
        return sorted(d.id for d in self.registry or [])

    def definition(self, exe_or_id: Execution | str) -> Definition | None:
        """The definition to draw, or ``None`` when the console has none for it (no folder, unknown id)."""
        try:
            if isinstance(exe_or_id, Execution):  # the version it runs on: the folder's, or the store's archive
                return Versions(self.store, self.registry or DefinitionRegistry()).of(exe_or_id)
            return None if self.registry is None else self.registry.get(exe_or_id)
        except (UnknownDefinition, ImportError, DefinitionError):
            return None


class DefinitionUnavailable(DurastateError):
    """A definition whose file is in the folder but does not load (a Python module it names does not
    import): its page says why, instead of "no such definition"."""

    def __init__(self, broken: BrokenFile) -> None:
        super().__init__(f"definition {broken.definition_id!r} ({broken.file}) does not load: "
                         + "; ".join(broken.issues))
        self.broken = broken


def create_app(console: Console) -> Starlette:
    """The console's ASGI app (serve it with uvicorn: ``durastate ui`` does)."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(console=console, stamp=queries.stamp, ended=queries.ENDED_LIKE)

    def page(request: Request, name: str, status_code: int = 200, **values: Any) -> Response:
        return templates.TemplateResponse(request, name, values, status_code=status_code)

    def load(execution_id: str) -> Execution:
        exe = console.store.load(execution_id)
        if exe is None:
            raise UnknownExecution(execution_id)
        return exe

    # -- pages -------------------------------------------------------------------------------------------
    def executions(request: Request) -> Response:
        filt = _filter(request)
        search = None
        with console.lock:
            if filt.id:
                search = queries.search_ids(console.store, filt, console.clock())
                listing = ExecutionPage(search.items)
            else:
                listing = queries.list_page(console.store, filt, console.clock(), console.registry or ())
        definitions = console.definition_ids()
        return page(request, "executions.html", filt=filt, items=listing.items, next_cursor=listing.next_cursor,
                    search=search, scan_cap=queries.ID_SCAN_CAP,
                    cap=queries.COUNT_CAP, statuses=queries.all_statuses(),
                    page_sizes=queries.PAGE_SIZES, definitions=definitions)

    def execution(request: Request) -> Response:
        exe_id = request.path_params["execution_id"]
        with console.lock:
            exe = load(exe_id)
            view = queries.execution_view(console.store, exe, console.clock(), console.queued(), console.box)
            active = (console.active_paths(exe, console.store.load) if console.active_paths is not None
                      else exe.leaves or ([exe.active_path] if exe.active_path else []))
        defn = console.definition(exe)
        child_status = {cid: summary.status for cid, _kind, _path, summary in view.children if summary}
        return page(request, "execution.html", exe=exe, view=view, steps=queries.trace_steps(view.trace),
                    chart=chart(defn, exe, child_status, active) if defn is not None else None,
                    actions=control.ACTIONS, offered=control.offered, notice=request.query_params.get("done", ""))

    def trace(request: Request) -> Response:
        exe_id = request.path_params["execution_id"]
        with console.lock:
            exe = load(exe_id)
            steps = queries.trace_steps(console.store.read_trace(exe_id))
        return page(request, "trace.html", exe=exe, steps=steps)

    def definitions(request: Request) -> Response:
        rows = sorted(console.registry or [], key=lambda d: d.id)
        return page(request, "definitions.html", rows=rows, broken=console.broken)

    def definition(request: Request) -> Response:
        def_id = request.path_params["definition_id"]
        defn = known_definition(def_id)
        with console.lock:
            counts = queries.state_counts(console.store, def_id)
        return page(request, "definition.html", defn=defn, chart=chart(defn), counts=counts,
                    notice=request.query_params.get("done", ""),
                    paths=queries.state_paths(defn), statuses=queries.all_statuses(), cap=queries.STATE_SCAN_CAP)

    # -- what the live view polls -------------------------------------------------------------------------
    def execution_version(request: Request) -> Response:
        with console.lock:
            exe = load(request.path_params["execution_id"])
        return JSONResponse({"version": exe.version, "status": exe.status})

    def status_counts(request: Request) -> Response:
        """Executions per status (of ``?definition=``), each capped: fetched by the pages after they load, so
        a page itself is one keyset read whatever the size of the store."""
        definition_id = request.query_params.get("definition", "").strip() or None
        with console.lock:
            counts = queries.status_counts(console.store, definition_id)
        return JSONResponse({"cap": queries.COUNT_CAP, "counts": [
            {"status": c.status, "n": c.n, "capped": c.capped, "label": c.label} for c in counts]})

    def definition_counts(request: Request) -> Response:
        def_id = request.path_params["definition_id"]
        if console.definition(def_id) is None:
            raise UnknownDefinition(def_id)
        with console.lock:
            counts = queries.state_counts(console.store, def_id)
        return JSONResponse({"counts": dict(sorted(counts.counts.items())), "scanned": counts.scanned,
                             "capped": counts.capped})

    # -- control --------------------------------------------------------------------------------------------
    async def confirm(request: Request) -> Response:
        exe_id, action = request.path_params["execution_id"], request.path_params["action"]
        form = await _form(request)
        todo = control.plan(action, exe_id, form)
        if action == "send":
            with console.lock:
                exe = load(exe_id)
            control.check_send(console.definition(exe), todo)
        if action == "migrate":  # planned first: a stranded execution is refused here, before any confirmation
            with console.lock:
                exe = load(exe_id)
                planned = control.migrate_one(console.store, exe_id, control.newest(console.registry, exe),
                                              todo.fields["mapping"], True)
            todo = control.Plan(todo.action, exe_id, todo.fields,
                                todo.summary.replace("to the newest version", f"from version {planned.from_version} "
                                                     f"to {planned.to_version}", 1))
        return page(request, "confirm.html", todo=todo, exe_id=exe_id,
                    do_url=f"/executions/{quote(exe_id, safe='')}/do/{action}",
                    back_url=f"/executions/{quote(exe_id, safe='')}",
                    token=console.confirmations.issue(action, exe_id, todo.fields))

    def known_definition(def_id: str) -> Definition:
        defn = console.definition(def_id)
        if defn is not None:
            return defn
        broken = console.broken_file(def_id)
        if broken is not None:
            raise DefinitionUnavailable(broken)
        raise UnknownDefinition(def_id)

    async def confirm_start(request: Request) -> Response:
        def_id = request.path_params["definition_id"]
        form = await _form(request)
        known_definition(def_id)
        with console.lock:
            todo = control.plan_start(def_id, form, console.store)
        return page(request, "confirm.html", todo=todo, exe_id=todo.execution_id,
                    do_url=f"/definitions/{quote(def_id, safe='')}/do/start",
                    back_url=f"/definitions/{quote(def_id, safe='')}",
                    token=console.confirmations.issue("start", todo.execution_id, todo.fields))

    async def start(request: Request) -> Response:
        def_id = request.path_params["definition_id"]
        form = await _form(request)
        known_definition(def_id)
        with console.lock:
            todo = control.plan_start(def_id, form, console.store)
        console.confirmations.redeem("start", todo.execution_id, todo.fields, form.get("confirm", ""))
        said = await _perform(console, lambda: control.perform_start(todo, console.store, console.deliver))
        with console.lock:  # applied in process: its page; queued for `durastate serve`: back here, saying so
            started = console.store.load(todo.execution_id) is not None
        where = (f"/executions/{quote(todo.execution_id, safe='')}" if started
                 else f"/definitions/{quote(def_id, safe='')}")
        return RedirectResponse(f"{where}?done={quote(said)}", status_code=303)

    async def act(request: Request) -> Response:
        exe_id, action = request.path_params["execution_id"], request.path_params["action"]
        form = await _form(request)
        todo = control.plan(action, exe_id, form)
        console.confirmations.redeem(action, exe_id, todo.fields, form.get("confirm", ""))
        said = await _perform(console, lambda: control.perform(
            todo, console.store, console.deliver, console.registry, console.box, _all_queued(console),
            console.definition))
        return RedirectResponse(f"/executions/{quote(exe_id, safe='')}?done={quote(said)}", status_code=303)

    # -- schedules ------------------------------------------------------------------------------------------
    def schedules_page(request: Request) -> Response:
        with console.lock:
            rows = list_schedules(console.store)
        return page(request, "schedules.html", rows=rows, notice=request.query_params.get("done", ""))

    async def confirm_schedule(request: Request) -> Response:
        name, action = request.path_params["name"], request.path_params["action"]
        form = await _form(request)
        with console.lock:
            todo = schedules.plan_schedule(action, name, form, console.store)
        return page(request, "confirm.html", todo=todo, exe_id=name,
                    do_url=f"/schedules/{quote(name, safe='')}/do/{action}", back_url="/schedules",
                    token=console.confirmations.issue(todo.action, name, todo.fields))

    async def act_schedule(request: Request) -> Response:
        name, action = request.path_params["name"], request.path_params["action"]
        form = await _form(request)
        with console.lock:
            todo = schedules.plan_schedule(action, name, form, console.store)
        console.confirmations.redeem(todo.action, name, todo.fields, form.get("confirm", ""))
        said = await _perform(console, lambda: schedules.perform_schedule(todo, console.store, console.clock()))
        return RedirectResponse(f"/schedules?done={quote(said)}", status_code=303)

    # -- login (only when the console asks for a token) ---------------------------------------------------
    def login_page(request: Request) -> Response:
        if console.access.login_token is None:
            return RedirectResponse("/", status_code=303)
        return page(request, "login.html", public=True, wrong=False,
                    next=guard.local_path(request.query_params.get("next", "/")))

    async def login(request: Request) -> Response:
        form = await _form(request)
        target = guard.local_path(form.get("next", "/"))
        if not console.access.token_matches(form.get("token", "")):
            return page(request, "login.html", status_code=401, public=True, next=target, wrong=True)
        answer = RedirectResponse(target, status_code=303)
        answer.headers["set-cookie"] = console.access.cookie_header()
        return answer

    # -- errors --------------------------------------------------------------------------------------------
    def error_page(request: Request, status: int, title: str, message: str) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return page(request, "error.html", status_code=status, title=title, message=message, status=status)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error_page(request, 404, "Not found", f"there is no page at {request.url.path}")
        if exc.status_code == 405 and request.method == "POST" and not console.allow_control:
            return read_only(request)
        return error_page(request, exc.status_code, "Refused" if exc.status_code < 500 else "Error",
                          str(exc.detail))

    async def durastate_error(request: Request, exc: Exception) -> Response:
        message = " ".join(str(exc).split())
        if isinstance(exc, DefinitionUnavailable):
            return page(request, "definition_broken.html", status_code=503, broken=exc.broken)
        if isinstance(exc, UnknownExecution | UnknownDefinition | UnknownDeadLetter):
            return error_page(request, 404, "Not found", message)
        if isinstance(exc, StoreUnavailable):
            return store_down(request, exc)
        if isinstance(exc, control.ConfirmationRefused):
            return error_page(request, exc.status, "Refused", message)
        return error_page(request, 400, "Refused", message)

    def store_down(request: Request, exc: BaseException) -> Response:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        return error_page(request, 503, "Store unavailable",
                          f"the store {console.store_label} did not answer: {detail[:500]}")

    def read_only(request: Request) -> Response:
        return error_page(request, 403, "Read-only console",
                          "this console is read-only: start it with `durastate ui --allow-control` to act")

    class ReadOnly:
        """Every POST is 403 on a read-only console, whatever its path (the buttons are absent too)."""

        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if (scope["type"] == "http" and scope["method"] not in ("GET", "HEAD") and not console.allow_control
                    and scope["path"] != guard.LOGIN_PATH):
                response = read_only(Request(scope, receive))
                await response(scope, receive, send)
                return
            await self.app(scope, receive, send)

    def guarded(endpoint: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """A store's own errors (a driver's, a dropped connection) become a 503 page, not a traceback."""

        def run(request: Request) -> Response:
            try:
                return endpoint(request)
            except (HTTPException, DurastateError):
                raise
            except Exception as exc:
                raise _unavailable(exc) from exc

        return run

    routes = [
        Route("/", guarded(executions)),
        Route("/executions", guarded(executions)),
        Route("/executions/{execution_id:path}/trace", guarded(trace)),
        Route("/executions/{execution_id:path}/confirm/{action}", confirm, methods=["POST"]),
        Route("/executions/{execution_id:path}/do/{action}", act, methods=["POST"]),
        Route("/executions/{execution_id:path}", guarded(execution)),
        Route(guard.LOGIN_PATH, login_page, methods=["GET"]),
        Route(guard.LOGIN_PATH, login, methods=["POST"]),
        Route("/definitions", guarded(definitions)),
        Route("/schedules", guarded(schedules_page)),
        Route("/schedules/{name}/confirm/{action}", confirm_schedule, methods=["POST"]),
        Route("/schedules/{name}/do/{action}", act_schedule, methods=["POST"]),
        Route("/definitions/{definition_id:path}/confirm/start", confirm_start, methods=["POST"]),
        Route("/definitions/{definition_id:path}/do/start", start, methods=["POST"]),
        Route("/definitions/{definition_id:path}", guarded(definition)),
        Route("/api/executions/{execution_id:path}/version", guarded(execution_version)),
        Route("/api/definitions/{definition_id:path}/counts", guarded(definition_counts)),
        Route("/api/counts", guarded(status_counts)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    # The guard outermost: a refused host, origin or login never reaches the read-only check or a route.
    middleware = [Middleware(guard.Guard, access=lambda: console.access, error_page=error_page),
                  Middleware(ReadOnly)]
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={HTTPException: http_error, DurastateError: durastate_error})


MAX_FORM_BYTES = 64 * 1024


async def _form(request: Request) -> dict[str, str]:
    """The fields of a control form (``application/x-www-form-urlencoded``: the console's forms post nothing
    else), the last value of each."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(413, f"a control form is at most {MAX_FORM_BYTES // 1024} KiB")
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        raise HTTPException(400, "the form is not URL-encoded UTF-8") from None


def _unavailable(exc: Exception) -> StoreUnavailable:
    """A store's own error (a driver's, a dropped connection) as the console's 503: its message on one line,
    else its type's name."""
    return StoreUnavailable(" ".join(str(exc).split()) or type(exc).__name__)


async def _perform(console: Console, work: Callable[[], str]) -> str:
    """Run a confirmed action (``work``, returning what to say) off the event loop, under the console's lock:
    a :class:`DurastateError` is the user's to read, anything else the store's (:func:`_unavailable`)."""
    from starlette.concurrency import run_in_threadpool

    def run() -> str:
        with console.lock:
            try:
                return work()
            except DurastateError:
                raise
            except Exception as exc:
                raise _unavailable(exc) from exc

    return await run_in_threadpool(run)


def _all_queued(console: Console) -> Callable[[], list[tuple[str, Event]]] | None:
    peek = console.queued()
    if peek is None:
        return None
    return lambda: list(peek(None))  # type: ignore[arg-type]


def _filter(request: Request) -> queries.ListFilter:
    params = request.query_params
    statuses: list[str] = []
    for item in params.getlist("status"):
        statuses.extend(s.strip() for s in item.split(",") if s.strip())
    bad = [s for s in statuses if s not in queries.all_statuses()]
    if bad:
        raise HTTPException(400, f"unknown status {bad[0]!r}; use one of {', '.join(queries.all_statuses())}")
    since = params.get("since", "").strip()
    if since:
        try:
            parse_duration(since, "since")
        except InvalidValue as exc:
            raise HTTPException(400, str(exc)) from None
    try:
        limit = int(params.get("limit") or 50)
    except ValueError:
        raise HTTPException(400, f"limit {params.get('limit')!r} is not a whole number") from None
    if not 1 <= limit <= 500:
        raise HTTPException(400, f"limit must be 1 to 500, got {limit}")
    return queries.ListFilter(status=tuple(dict.fromkeys(statuses)), definition=params.get("definition", "").strip(),
                              parent=params.get("parent", "").strip(), since=since, id=params.get("id", "").strip(),
                              cursor=params.get("cursor", "").strip(), limit=limit,
                              where=" ".join(params.get("where", "").split()))
