"""The console cannot be made to act by another page: each attack tried as a hostile page or client would,
against ``durastate ui`` run as a user runs it, in Debian's Chromium.

* a page of another origin (another local server: another port is another origin) frames the confirm page
  and has the user click "yes" (clickjacking): the frame is blocked, nothing is cancelled;
* DNS rebinding: a name the attacker controls resolves to 127.0.0.1 (Chromium's host resolver rules play
  the attacker's DNS), so the browser sends ``Host: evil.test``: refused, no page, no token;
* a form of another origin posts to the console: refused, nothing queued;
* a confirmation token posted twice: the action runs once, the second post gets a clear page;
* control on an address beyond loopback needs a login token; with one, the console asks for it.
"""

from __future__ import annotations

import http.client
import http.server
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from durastate.transport.sqlite import SqliteTransport

from .conftest import CHROMIUM, CHROMIUM_ARGS, DURASTATE, EXAMPLES, Served, cli_env, durastate, fill
from .test_control import CART, status_of

pytestmark = pytest.mark.slow

TOKEN = "a-login-token-long-enough-for-the-test"


def queued(sqlite_url: str, exe_id: str) -> list[str]:
    """The names of the events waiting in the store's inbox for ``exe_id``."""
    inbox = SqliteTransport(sqlite_url.removeprefix("sqlite:///"))
    try:
        return [event.name for _target, event in inbox.messages(exe_id)]
    finally:
        inbox.close()


def raw(url: str, method: str, path: str, headers: dict[str, str] | None = None,
        body: str = "") -> tuple[int, dict[str, str], str]:
    """One HTTP request with exactly these headers (``Host`` included: what a rebound browser sends)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})} if body else dict(headers or {})
        conn.request(method, path, body=body.encode() if body else None, headers=sent)
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode()
    finally:
        conn.close()


def confirm_token(url: str, exe_id: str, action: str, body: str = "") -> str:
    """What the confirm page hands out (asked for as the console's own page would)."""
    status, _headers, text = raw(url, "POST", f"/executions/{exe_id}/confirm/{action}", body=body)
    assert status == 200, text
    found = re.search(r'name="confirm" value="([0-9a-f]+)"', text)
    assert found is not None, text
    return found.group(1)


class Foreign:
    """A page of another origin: a second HTTP server on another port of 127.0.0.1, serving one HTML page."""

    def __init__(self) -> None:
        self.html = ""
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = owner.html.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def foreign() -> Iterator[Foreign]:
    site = Foreign()
    yield site
    site.close()


@pytest.fixture(scope="module")
def rebinding_browser(browser: Any) -> Iterator[Any]:
    """Chromium whose DNS answers 127.0.0.1 for ``evil.test``: what a rebinding attacker's DNS does."""
    chromium = browser.browser_type.launch(executable_path=str(CHROMIUM),
                                           args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.test 127.0.0.1"])
    yield chromium
    chromium.close()


def applied_status(sqlite_url: str, exe_id: str) -> str:
    """The execution's status once ``durastate serve`` applied whatever was queued."""
    done = durastate("--store", sqlite_url, "--definitions", str(EXAMPLES), "serve", "--until-idle")
    assert done.returncode == 0, done.stderr
    return status_of(sqlite_url, exe_id)[0]


# -- framing ----------------------------------------------------------------------------------------------
def test_a_page_of_another_origin_cannot_frame_the_confirm_page(
        sqlite_url: str, serve_console: Callable[..., Served], foreign: Foreign, page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    # The attack: post the cancel form into a frame, then get the user to click where "yes, cancel" is.
    foreign.html = (f'<iframe name="victim" width="900" height="600"></iframe>'
                    f'<form id="f" target="victim" method="post" action="{served.url}/executions/o1/confirm/cancel">'
                    '<input name="reason" value="framed"></form>'
                    '<script>document.getElementById("f").submit()</script>')
    answers: list[Any] = []
    page.on("response", lambda r: answers.append(r) if "/confirm/cancel" in r.url else None)
    with page.expect_event("framenavigated", predicate=lambda f: f.name == "victim" and f.url != "about:blank"):
        page.goto(foreign.url)
    frame = page.frame(name="victim")
    assert frame is not None
    frame.wait_for_load_state()
    clickable = frame.locator("#confirm-button")
    if clickable.count():  # the frame shows the confirm page: the attack's one click
        with page.expect_event("framenavigated", predicate=lambda f: f.name == "victim"):
            clickable.click()
        frame.wait_for_load_state()
    assert queued(sqlite_url, "o1") == [], "a click in another origin's frame queued the cancel"
    assert applied_status(sqlite_url, "o1") == "running"
    assert clickable.count() == 0, "the confirm page rendered inside another origin's frame"
    assert answers and "frame-ancestors 'none'" in answers[0].headers.get("content-security-policy", "")
    assert answers[0].headers.get("x-frame-options") == "DENY"


def test_no_page_of_the_console_can_be_framed(sqlite_url: str, serve_console: Callable[..., Served]) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    for path in ("/", "/executions/o1", "/definitions", "/nowhere", "/api/counts"):
        _status, headers, _text = raw(served.url, "GET", path)
        assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), path
        assert headers.get("x-frame-options") == "DENY", path


# -- DNS rebinding: a foreign Host --------------------------------------------------------------------------
def test_a_foreign_host_is_refused_dns_rebinding(
        sqlite_url: str, serve_console: Callable[..., Served], rebinding_browser: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    port = urlsplit(served.url).port
    context = rebinding_browser.new_context()
    try:
        tab = context.new_page()
        answer = tab.goto(f"http://evil.test:{port}/executions/o1")  # the attacker's name, the console's address
        assert answer is not None and answer.status == 421
        expect(tab.locator("body")).to_contain_text("not a host this console answers to")
        assert "o1" not in tab.content() and "cart" not in tab.content()
        # the attacker's page reads the confirm page (same origin, as far as the browser knows): refused
        got = tab.evaluate("""() => fetch('/executions/o1/confirm/cancel', {method: 'POST'})
                              .then(r => r.text().then(t => [r.status, t]))""")
        assert got[0] == 421 and 'name="confirm"' not in got[1]
    finally:
        context.close()

    token = confirm_token(served.url, "o1", "send", "event=add_item&data=")
    for method, path, body in (("GET", "/", ""), ("GET", "/api/executions/o1/version", ""),
                               ("POST", "/executions/o1/confirm/cancel", "reason=x"),
                               ("POST", "/executions/o1/do/send", f"event=add_item&data=&confirm={token}")):
        status, _headers, text = raw(served.url, method, path, {"Host": f"evil.test:{port}",
                                                                "Origin": f"http://evil.test:{port}"}, body)
        assert status == 421, (method, path, status)
        assert 'name="confirm"' not in text and "cart" not in text
    assert queued(sqlite_url, "o1") == []
    # the loopback names answer; another name only when allowed
    assert raw(served.url, "GET", "/executions/o1", {"Host": f"localhost:{port}"})[0] == 200
    assert raw(served.url, "GET", "/executions/o1", {"Host": f"[::1]:{port}"})[0] == 200
    assert raw(served.url, "GET", "/executions/o1", {"Host": f"console.lan:{port}"})[0] == 421


def test_an_allowed_host_is_answered(sqlite_url: str, serve_console: Callable[..., Served]) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allowed-host", "console.lan")
    port = urlsplit(served.url).port
    assert raw(served.url, "GET", "/executions/o1", {"Host": f"console.lan:{port}"})[0] == 200
    assert raw(served.url, "GET", "/executions/o1", {"Host": f"evil.test:{port}"})[0] == 421


# -- a post from another origin ----------------------------------------------------------------------------
def test_a_post_from_another_origin_is_refused(
        sqlite_url: str, serve_console: Callable[..., Served], foreign: Foreign, page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--allow-control")
    foreign.html = (f'<form id="f" method="post" action="{served.url}/executions/o1/confirm/cancel">'
                    '<input name="reason" value="from elsewhere"></form>'
                    '<script>document.getElementById("f").submit()</script>')
    with page.expect_response(lambda r: "/confirm/cancel" in r.url) as posted:
        page.goto(foreign.url)
    assert posted.value.status == 403
    expect(page.locator("#error-message")).to_contain_text("another origin")
    expect(page.locator("#confirm-button")).to_have_count(0)

    # with a token (had it leaked), a post of another origin still does nothing
    token = confirm_token(served.url, "o1", "send", "event=add_item&data=")
    body = f"event=add_item&data=&confirm={token}"
    for headers in ({"Origin": foreign.url.rstrip("/")}, {"Origin": "null"}, {"Sec-Fetch-Site": "same-site"},
                    {"Sec-Fetch-Site": "cross-site"}):
        status, _h, text = raw(served.url, "POST", "/executions/o1/do/send", headers, body)
        assert status == 403 and "another origin" in text, headers
    assert queued(sqlite_url, "o1") == []
    # its own origin acts (the token was not spent by the refusals)
    own = served.url
    status, _h, _t = raw(served.url, "POST", "/executions/o1/do/send",
                         {"Origin": own, "Sec-Fetch-Site": "same-origin"}, body)
    assert status == 303
    assert queued(sqlite_url, "o1") == ["add_item"]


# -- single-use tokens --------------------------------------------------------------------------------------
def test_a_confirmation_acts_once(sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, [*CART, ("o2", "durastate.start", {"definition_id": "order", "context": {}})])
    served = serve_console(sqlite_url, "--allow-control")
    page.goto(served.url + "/executions/o1")
    page.locator('#form-send input[name="event"]').fill("add_item")
    page.locator('#form-send input[name="data"]').fill('{"price": 7}')
    page.locator("#form-send button").click()
    token = page.locator('#confirm input[name="confirm"]').get_attribute("value")
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("queued")
    assert queued(sqlite_url, "o1") == ["add_item"]

    page.go_back()  # the confirm page again, from the history: its "yes" a second time
    expect(page.locator("#confirm-button")).to_be_visible()
    page.locator("#confirm-button").click()
    expect(page.locator("#error-message")).to_contain_text("already used")
    again = page.request.post(served.url + "/executions/o1/do/send",
                              form={"event": "add_item", "data": '{"price": 7}', "confirm": token})
    assert again.status == 409 and "already used" in again.text()
    assert queued(sqlite_url, "o1") == ["add_item"]  # queued once

    # a token is bound to its action and its execution
    cancel = confirm_token(served.url, "o1", "cancel", "reason=")
    for path in ("/executions/o2/do/cancel", "/executions/o1/do/redrive"):
        status, _h, text = raw(served.url, "POST", path, body=f"reason=&confirm={cancel}")
        assert status == 400 and "does not match" in text, path
    assert raw(served.url, "POST", "/executions/o1/do/cancel", body=f"reason=&confirm={cancel}")[0] == 303
    assert queued(sqlite_url, "o2") == []
    assert confirm_token(served.url, "o1", "cancel", "reason=") != cancel  # a fresh one each time


# -- beyond loopback: a login ---------------------------------------------------------------------------------
def test_control_beyond_loopback_without_a_token_is_refused(sqlite_url: str) -> None:
    fill(sqlite_url, CART)
    try:
        done = subprocess.run([*DURASTATE, "ui", "--store", sqlite_url, "--host", "0.0.0.0", "--port", "0",
                               "--allow-control"], capture_output=True, text=True, timeout=60, env=cli_env())
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("durastate ui --host 0.0.0.0 --allow-control started without a login token") from exc
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "DURASTATE_UI_TOKEN" in lines[0], done.stderr
    assert done.stdout == ""


def test_beyond_loopback_the_console_asks_for_its_token(
        sqlite_url: str, serve_console: Callable[..., Served], page: Any) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--host", "0.0.0.0", "--allow-control", env=cli_env(DURASTATE_UI_TOKEN=TOKEN))
    url = served.url.replace("0.0.0.0", "127.0.0.1")
    assert raw(url, "GET", "/executions/o1")[0] == 303  # to the login page
    assert raw(url, "GET", "/api/executions/o1/version")[0] == 401
    status, _h, text = raw(url, "POST", "/executions/o1/confirm/cancel", body="reason=x")
    assert status == 401 and 'name="confirm"' not in text
    assert raw(url, "GET", "/api/executions/o1/version", {"Authorization": f"Bearer {TOKEN}"})[0] == 200

    page.goto(url + "/executions/o1")
    expect(page).to_have_url(re.compile(r"/login"))
    page.locator('#login input[name="token"]').fill("wrong")
    page.locator("#login button").click()
    expect(page.locator("#login-error")).to_contain_text("not the console's token")
    page.locator('#login input[name="token"]').fill(TOKEN)
    page.locator("#login button").click()
    expect(page).to_have_url(re.compile(r"/executions/o1$"))
    page.locator('#form-cancel input[name="reason"]').fill("logged in")
    page.locator("#form-cancel button").click()
    page.locator("#confirm-button").click()
    expect(page.locator("#notice")).to_contain_text("durastate.cancel for o1")
    assert queued(sqlite_url, "o1") == ["durastate.cancel"]


def test_a_read_only_console_beyond_loopback_prints_a_token(
        sqlite_url: str, serve_console: Callable[..., Served]) -> None:
    fill(sqlite_url, CART)
    served = serve_console(sqlite_url, "--host", "0.0.0.0")
    out = served.proc.stdout
    assert out is not None
    # The line after the address. Read through the pipe's text buffer: both lines are flushed together, so the
    # first readline may already hold this one, and a select() on the descriptor would wait for nothing.
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(out.readline()), daemon=True)
    reader.start()
    reader.join(60)
    line = lines[0] if lines else ""
    found = re.match(r"login token: (\S+)", line)
    assert found is not None, line
    url = served.url.replace("0.0.0.0", "127.0.0.1")
    assert raw(url, "GET", "/executions/o1")[0] == 303
    status, headers, _t = raw(url, "POST", "/login", body=f"token={found.group(1)}&next=/executions/o1")
    assert status == 303 and headers["location"] == "/executions/o1"
    cookie = headers["set-cookie"].split(";", 1)[0]
    assert "httponly" in headers["set-cookie"].lower() and "samesite=strict" in headers["set-cookie"].lower()
    assert raw(url, "GET", "/executions/o1", {"Cookie": cookie})[0] == 200
