"""A user's actions on the explorer (translate a sentence, read texts) and the API call beside it; the page they act
on comes from tests/browser.py."""

from __future__ import annotations

import httpx


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
