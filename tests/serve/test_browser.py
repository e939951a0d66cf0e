"""The page at / in a real browser: Debian's chromium, headless, driven by Playwright for Python.

A uvicorn server runs the app in a background thread on a free loopback port. The test types
sentences as a person would, waits for the translation, hovers target words, source words and heatmap
cells, and checks that the right words are highlighted (by CSS class, and that the class is visible).
The screenshot is a test artifact in the test's tmp folder; with ATTNMT_UPDATE_SCREENSHOTS=1 it also
replaces docs/img/serve.png.
The browser and the server: tests/browser.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import httpx
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

from attnmt.serve import create_app
from tests.browser import NEEDS_CHROMIUM, open_page, running_server
from tests.serve.test_serve import SENTENCE

ATTEND_RATIO = 0.5  # the page's rule (static/app.js): i attends to j when a[i][j] >= 0.5 * max_k a[i][k]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "serve.png"

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def base_url(tiny_model, tiny_transformer) -> Iterator[str]:
    with running_server(create_app({"rnnsearch": tiny_model, "transformer": tiny_transformer})) as url:
        yield url


@pytest.fixture
def page(browser, base_url):
    with open_page(browser, base_url + "/") as page:
        yield page


def translate(page, text: str) -> None:
    """Type the sentence as a user would and press Enter; wait until its tokens are on show."""
    page.fill("#source", "")
    page.type("#source", text)
    page.press("#source", "Enter")
    page.wait_for_function(
        "text => [...document.querySelectorAll('#src-sentence .tok')].map(e => e.textContent).join(' ') === text",
        arg=" ".join(text.split()))


def classed(page, selector: str, attribute: str) -> set[int]:
    return {int(v) for v in page.eval_on_selector_all(selector, f"els => els.map(e => e.dataset.{attribute})")}


def attends(matrix: list[list[float]], i: int, j: int) -> bool:
    return matrix[i][j] >= ATTEND_RATIO * max(matrix[i])


def test_translate_and_hover_the_heatmap(page, base_url, tmp_path):
    # Chinese input shows as typed, and markup in input is shown as text, not run
    translate(page, "我爱你")
    assert page.inner_text("#src-sentence") == "我爱你"
    assert page.inner_text("#heatmap .hm-col") == "我爱你"
    translate(page, "<b>x</b>")
    assert page.inner_text("#src-sentence .tok") == "<b>x</b>" and page.query_selector("#src-sentence b") is None

    page.fill("#beam", "4")
    page.select_option("#n-best", value="3")
    translate(page, SENTENCE)
    expected = httpx.post(base_url + "/translate", json={"text": SENTENCE, "beam": 4, "n_best": 3,
                                                         "attention": True}).json()["translations"][0]
    assert page.inner_text("#translation") == expected["text"]
    assert page.is_hidden("#head-chooser")  # an rnnsearch model has one attention, no heads
    assert page.eval_on_selector_all("#n-best-list li", "els => els.length") == 3
    matrix = expected["attention"]
    n_src = len(expected["src_tokens"])
    assert page.eval_on_selector_all("#heatmap .cell", "els => els.length") == len(matrix) * n_src

    # a target word: the source words it attends to are highlighted, in the heatmap and the sentence
    for i in range(len(matrix)):
        page.hover(f'#heatmap .hm-row[data-tgt="{i}"]')
        want = {j for j in range(n_src) if attends(matrix, i, j)}
        assert classed(page, "#heatmap .hm-col.attended", "src") == want, f"target {i}"
        assert classed(page, "#src-sentence .tok.attended", "src") == want
    # the highlight is visible: the class changes the background (after its 80 ms transition)
    plain = page.eval_on_selector('#heatmap .hm-row[data-tgt="0"]', "e => getComputedStyle(e).backgroundColor")
    page.wait_for_function("plain => getComputedStyle(document.querySelector('#heatmap .hm-col.attended'))"
                           ".backgroundColor !== plain", arg=plain, timeout=2000)
    attended = page.eval_on_selector("#heatmap .hm-col.attended", "e => getComputedStyle(e).backgroundColor")
    assert attended != plain

    # a source word: the target words that attend to it
    for j in range(n_src):
        page.hover(f'#src-sentence .tok[data-src="{j}"]')
        want = {i for i in range(len(matrix)) if attends(matrix, i, j)}
        assert classed(page, "#heatmap .hm-row.attended", "tgt") == want, f"source {j}"
        assert "focus" in page.get_attribute(f'#heatmap .hm-col[data-src="{j}"]', "class")

    # a cell: its target and source word, and the weight
    i, j = 0, max(range(n_src), key=lambda k: matrix[0][k])
    page.hover(f'#heatmap .cell[data-i="{i}"][data-j="{j}"]')
    assert classed(page, "#heatmap .hm-row.focus", "tgt") == {i}
    assert classed(page, "#heatmap .hm-col.focus", "src") == {j}
    assert f"{matrix[i][j]:.3f}" in page.inner_text("#cell-info")

    # for the picture, hover the target word whose attention is the sharpest
    sharpest = max(range(len(expected["tgt_tokens"])), key=lambda k: max(matrix[k]))
    page.hover(f'#tgt-sentence .tok[data-tgt="{sharpest}"]')
    shot = tmp_path / "serve.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("ATTNMT_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


def test_transformer_layer_and_head_chooser(page, base_url):
    assert page.is_hidden("#head-chooser")
    page.select_option("#model", value="transformer")
    translate(page, SENTENCE)
    assert page.is_visible("#head-chooser")
    assert page.eval_on_selector_all("#layer option", "els => els.length") == 1
    assert page.eval_on_selector_all("#head option", "els => els.map(e => e.value)") == ["mean", "0", "1"]
    assert page.eval_on_selector_all("#head option", "els => els.map(e => e.textContent)") == [
        "mean of heads", "head 1", "head 2"]
    beam = int(page.input_value("#beam"))
    heads = httpx.post(base_url + "/translate", json={"text": SENTENCE, "model": "transformer", "beam": beam,
                                                      "attention_heads": True}).json()["translations"][0][
        "attention_heads"]

    def shown() -> list[float]:
        return [float(w) for w in page.eval_on_selector_all(
            "#heatmap .cell", "els => els.map(e => e.style.getPropertyValue('--w'))")]

    for head in (0, 1):
        page.select_option("#head", value=str(head))
        assert shown() == pytest.approx([w for row in heads[0][head] for w in row], abs=1e-6)
    page.select_option("#head", value="mean")
    mean = [(a + b) / 2 for ra, rb in zip(heads[0][0], heads[0][1]) for a, b in zip(ra, rb)]
    assert shown() == pytest.approx(mean, abs=1e-6)


def test_examples_and_word_alignment(page, base_url):
    models = httpx.get(base_url + "/models").json()["models"]
    examples = models[0]["examples"]
    assert examples  # the tiny model's folder has no held-out files: its config's validation file gives them
    page.select_option("#examples", value=examples[1])
    page.wait_for_function(
        "text => [...document.querySelectorAll('#src-sentence .tok')].map(e => e.textContent).join(' ') === text",
        arg=" ".join(examples[1].split()))
    expected = httpx.post(base_url + "/translate", json={"text": examples[1], "alignment": True}).json()
    links = expected["translations"][0]["alignment"]
    assert page.is_visible("#alignment-box")
    # hover a target word: exactly the source words it is linked with are marked
    j = links[0][1]
    page.hover(f'#tgt-words [data-tw="{j}"]')
    marked = classed(page, "#src-words .tok.attended", "sw")
    assert marked == {i for i, jj in links if jj == j}
