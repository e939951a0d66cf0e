"""The browser the page tests drive: Debian's chromium, headless, through Playwright for Python, and a server for
the page in a background thread.

A test takes the browser's page for its locale (`open_page`) instead of a browser context of its own: a fresh
context starts a renderer process, which cost about 0.8 s of CPU per test (about 0.2 s to load the page again
in the same tab), and the page tests are the largest part of the suite. Each test still starts from a clean page:
the page is loaded again, the viewport, the mouse, the listeners and the routes are reset, and local storage
(where the page keeps the language a user chose) is cleared when the test ends. A page whose test failed is
closed with its context, so that a broken page never reaches the next test.

Setup (CI): ``apt-get install -y chromium fonts-noto-cjk`` and ``pip install playwright``; no
``playwright install``: the system chromium is used, and nothing is downloaded.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 20_000
VIEWPORT = {"width": 1100, "height": 1000}
NEEDS_CHROMIUM = pytest.mark.skipif(not CHROMIUM.exists(),
                                    reason="Debian's chromium is not installed (apt-get install -y chromium)")


class Browser:
    """A launched chromium and one page per locale, which the tests of one pytest worker take in turn."""

    def __init__(self, chromium) -> None:
        self.chromium = chromium
        self._pages: dict[str, object] = {}

    def page(self, locale: str):
        page = self._pages.get(locale)
        if page is None or page.is_closed():
            page = self._pages[locale] = self.chromium.new_context(viewport=VIEWPORT, locale=locale).new_page()
            page.set_default_timeout(TIMEOUT_MS)
        return page

    def discard(self, locale: str) -> None:
        page = self._pages.pop(locale, None)
        if page is not None:
            page.context.close()


@contextmanager
def open_page(browser: Browser, url: str, locale: str = "en-US", offline: bool = False) -> Iterator:
    """The page at ``url``, loaded afresh in the browser's tab for ``locale``, recording its errors (and, offline,
    every request it tries, which is blocked unless it is a file). A block that ended without an exception fails
    if the page logged an error."""
    page = browser.page(locale)
    page.errors, page.requests = [], []

    def on_error(error) -> None:
        page.errors.append(str(error))

    def on_console(message) -> None:
        if message.type == "error":
            page.errors.append(message.text)

    def block(route) -> None:
        page.requests.append(route.request.url)
        route.continue_() if route.request.url.startswith("file:") else route.abort()

    page.on("pageerror", on_error)
    page.on("console", on_console)
    clean = False
    try:
        page.set_viewport_size(VIEWPORT)
        page.mouse.move(0, 0)  # no hover left over from the last test
        if offline:
            page.route("**/*", block)
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]")
        yield page
        clean = True
    finally:
        _leave(browser, locale, page, offline, clean, on_error, on_console)
    assert not page.errors, f"the page logged errors: {page.errors}"


def _leave(browser: Browser, locale: str, page, offline: bool, clean: bool, on_error, on_console) -> None:
    if not clean:
        browser.discard(locale)
        return
    page.evaluate("() => { try { localStorage.clear(); } catch (e) {} }")
    if offline:
        page.unroute("**/*")
    page.goto("about:blank")  # the page's timers and requests stop before the next test's server starts
    page.remove_listener("pageerror", on_error)
    page.remove_listener("console", on_console)


@contextmanager
def running_server(app) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a background thread; yields the base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # the OS picks a free port, and we keep the socket: no race for it
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
