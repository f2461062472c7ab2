"""What keeps another page from using the console through a browser, as one ASGI middleware.

A console with ``--allow-control`` acts for whoever its pages are shown to, so every request passes here
first:

* **No framing.** Every answer says ``Content-Security-Policy: frame-ancestors 'none'`` and
  ``X-Frame-Options: DENY``: a page of another origin cannot show a console page in a frame and have its
  user click where "yes, cancel" is.
* **Only its own host names (DNS rebinding).** A name an attacker controls can resolve to 127.0.0.1; the
  browser then treats the console as the attacker's origin and sends ``Host: evil.example``. A request is
  answered only if its ``Host`` is one the console was started for (:attr:`Access.hosts`: the loopback
  names, the address it is bound to, and each ``--allowed-host``); any other gets ``421`` and no page.
* **Posts from its own pages only.** A browser says where a post comes from (``Origin``, and
  ``Sec-Fetch-Site``); a post whose origin is not the console's own is refused with ``403`` before it
  reaches a route. A client that is no browser sends neither, and needs the confirm page's token anyway.
* **A login beyond loopback.** With :attr:`Access.login_token` set (always, when the console listens on an
  address other machines reach), a request needs the session cookie that ``POST /login`` with the token
  sets, or ``Authorization: Bearer TOKEN``; a page without it goes to the login page.

The single-use confirmation tokens are :class:`durastate.ui.control.Confirmations`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""The names a console answers to whatever it was started with (a browser on the same machine)."""
COOKIE = "durastate_console"
LOGIN_PATH = "/login"
SECURITY_HEADERS = (
    (b"content-security-policy", b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # not no-referrer: that makes a browser post "Origin: null"
)
SAFE_METHODS = frozenset({"GET", "HEAD"})


def host_name(host_header: str) -> str:
    """The name (or address) of a ``Host`` header without its port, lower case: ``[::1]:80`` → ``::1``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


def is_loopback(address: str) -> bool:
    """Whether a bound address is reachable from this machine only (``127.0.0.1``, ``::1``)."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return address.lower() == "localhost"


def is_unspecified(address: str) -> bool:
    """``0.0.0.0`` or ``::``: every interface of the machine."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_unspecified
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """Who the console answers: the host names it serves under, and the login token, if it asks for one."""

    hosts: frozenset[str] = LOOPBACK_HOSTS
    login_token: str | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    """Signs the session cookie; made when the console starts, so a restart logs everyone out."""

    @classmethod
    def for_address(cls, bound: str, allowed: Iterable[str] = (), login_token: str | None = None) -> Access:
        """The access of a console bound to ``bound``: the loopback names, that address (unless it is every
        interface, which is no name a browser uses) and each allowed host."""
        hosts = set(LOOPBACK_HOSTS) | {host_name(h) for h in allowed if h.strip() and not is_unspecified(h)}
        if not is_unspecified(bound):
            hosts.add(host_name(f"[{bound}]" if ":" in bound else bound))
        return cls(frozenset(hosts), login_token)

    def session(self) -> str:
        """The session cookie's value: derived from the token under the start's secret, never the token."""
        return hmac.new(self.secret, (self.login_token or "").encode(), hashlib.sha256).hexdigest()

    def token_matches(self, given: str) -> bool:
        return self.login_token is not None and hmac.compare_digest(given.encode(), self.login_token.encode())

    def logged_in(self, headers: Headers) -> bool:
        if self.login_token is None:
            return True
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and self.token_matches(auth[7:].strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no session
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), self.session().encode())

    def cookie_header(self) -> str:
        return f"{COOKIE}={self.session()}; Path=/; HttpOnly; SameSite=Strict"


def foreign_origin(headers: Headers, scheme: str) -> str | None:
    """Where a post comes from, if that is not the console itself (``None``: its own page, or no browser)."""
    origin = headers.get("origin")
    own = f"{scheme}://{headers.get('host', '')}".lower()
    if origin is not None:
        return None if origin.strip().lower() == own else origin
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() != "same-origin":
        return f"a {site.lower()} page"
    return None


ErrorPage = Callable[[Request, int, str, str], Response]


class Guard:
    """The middleware: the headers on every answer; the Host, Origin and login checks before any route."""

    def __init__(self, app: Any, access: Callable[[], Access], error_page: ErrorPage) -> None:
        self.app, self.access, self.error_page = app, access, error_page

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        refused = self.refusal(Request(scope, receive))
        if refused is not None:
            await refused(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def refusal(self, request: Request) -> Response | None:
        access = self.access()
        host = request.headers.get("host", "")
        if host_name(host) not in access.hosts:
            # No page, no store label: a rebound page must learn nothing from the answer.
            return PlainTextResponse(
                f"{host_name(host) or 'no host'!r} is not a host this console answers to; start it with "
                "`durastate ui --allowed-host NAME` to serve it under that name", status_code=421)
        path = request.url.path
        exempt = path == LOGIN_PATH or path.startswith("/static/")
        if access.login_token is not None and not exempt and not access.logged_in(request.headers):
            if request.method in SAFE_METHODS and not path.startswith("/api/"):
                target = path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"{LOGIN_PATH}?next={quote(target, safe='')}", status_code=303)
            return PlainTextResponse(f"this console asks for its login token: open {LOGIN_PATH}, or send "
                                     "Authorization: Bearer TOKEN", status_code=401)
        if request.method not in SAFE_METHODS:
            origin = foreign_origin(request.headers, request.url.scheme)
            if origin is not None:
                return self.error_page(request, 403, "Refused",
                                       f"this post comes from another origin ({origin}): the console acts only "
                                       "on posts from its own pages")
        return None


def local_path(target: str) -> str:
    """Where to go after the login: a path of this console, never another site (``//evil``, ``http:``)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target

