"""The browser tests' page helpers: a page opened as a block that closes it and fails on any error the page logged,
and a user's actions on the explorer (translate a sentence, read texts) and the API call beside it."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import httpx

from tests.serve.test_browser import TIMEOUT_MS


@contextmanager
def open_page(browser, url: str, locale: str = "en-US", offline: bool = False) -> Iterator:
    """A page at ``url`` that records its errors (and, offline, every request it tries and blocks it); leaving the
    block closes it, and a block that ended without an exception fails if the page logged an error."""
    context = browser.new_context(viewport={"width": 1100, "height": 1000}, locale=locale)
    try:
        page = context.new_page()
        page.errors, page.requests = [], []
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
        if offline:
            def block(route):
                page.requests.append(route.request.url)
                if route.request.url.startswith("file:"):
                    route.continue_()
                else:
                    route.abort()
            context.route("**/*", block)
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]")
        yield page
    finally:
        context.close()
    assert not page.errors, f"the page logged errors: {page.errors}"


def explore(base_url: str, text: str, model: str = "rnnsearch", **body) -> dict:
    answer = httpx.post(base_url + "/explore", json={"text": text, "model": model, "top_k": 10, **body}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["record"]


def show(page, text: str, model: str | None = None, beam: int | None = None) -> None:
    """Translate ``text`` as a user would, and wait until the explorer shows its record."""
    if model is not None:
        page.select_option("#model", value=model)
    if beam is not None:
        page.fill("#beam", str(beam))
    page.fill("#source", text)
    page.press("#source", "Enter")
    page.wait_for_function("([text, model]) => { const e = document.getElementById('explorer');"
                           " return e.dataset.source === text && e.dataset.model === model; }",
                           arg=[text, model or "rnnsearch"])


def texts(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")
