"""The explorer's "Neighbours" view in a real browser (Debian's chromium, headless, Playwright): for a step of the
translation, the nearest decoder states of the model's training sentences with the word each wrote highlighted;
for a source word, the nearest encoder states with the word each read highlighted; in the live page (asked of
the server when the view opens) and in an exported file, in English and in Chinese. Expected values come from
the API or the exported data."""

from __future__ import annotations

from typing import Iterator

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

from attnmt.decode.translator import load
from attnmt.explore.page import build_export, export_page
from attnmt.serve import create_app
from tests.browser import NEEDS_CHROMIUM, open_page, running_server
from tests.explore.pages import explore, show, texts
from tests.explore.test_explore import SENTENCE

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def base_url(tiny_model) -> Iterator[str]:
    with running_server(create_app({"rnnsearch": tiny_model})) as url:
        yield url


def check_step(page, found: dict, i: int) -> None:
    """The list shows step i's neighbours: their similarities, sentences and highlighted words."""
    near = found["steps"][i]
    assert [float(s) for s in texts(page, "#nb-list .nb-sim")] == [n["similarity"] for n in near]
    sentences = [found["sentences"][n["sentence"]] for n in near]
    assert texts(page, "#nb-list .nb-source") == [s["source"] for s in sentences]
    assert texts(page, "#nb-list .nb-word") == [(s["pieces"] + ["</s>"])[n["at"]] for s, n in zip(sentences, near)]


def check_source(page, found: dict, j: int) -> None:
    """The list shows source piece j's neighbours: their similarities, source sentences and highlighted words."""
    near = found["source"][j]
    assert [float(s) for s in texts(page, "#nb-list .nb-sim")] == [n["similarity"] for n in near]
    sentences = [found["sentences"][n["sentence"]] for n in near]
    assert texts(page, "#nb-list .nb-source") == [" ".join(s["pieces"]) for s in sentences]
    assert texts(page, "#nb-list .nb-word") == [s["source_pieces"][n["at"]] for s, n in zip(sentences, near)]


def test_the_nearest_states_of_each_step_and_each_source_word(browser, base_url, tmp_path):
    with open_page(browser, base_url + "/") as page:
        page.wait_for_selector("#explorer[data-source]")
        page.select_option("#units", value="pieces")
        show(page, SENTENCE, beam=2)
        found = explore(base_url, SENTENCE, beam=2, neighbours=5)["neighbours"]
        page.click('.tabs [data-view="neighbours"]')
        page.wait_for_selector("#nb-list li")
        check_step(page, found, 0)
        page.click('#nb-target .tok[data-step="2"]')
        check_step(page, found, 2)
        word = texts(page, "#nb-target .tok")[2]
        assert page.inner_text("#nb-prompt").startswith(f"Step 3 wrote \u201c{word}\u201d")
        page.click('#nb-source .tok[data-at="1"]')
        check_source(page, found, 1)
        word = texts(page, "#nb-source .tok")[1]
        assert page.inner_text("#nb-prompt").startswith(f"The encoder’s state of “{word}”".replace(
            "’", "'"))
        assert page.get_attribute('#nb-source .tok[data-at="1"]', "class") == "tok pickable focus"
        assert "focus" not in page.get_attribute('#nb-target .tok[data-step="2"]', "class")


def test_the_chinese_page(browser, base_url):
    with open_page(browser, base_url + "/", locale="zh-CN") as page:
        page.wait_for_selector("#explorer[data-source]")
        show(page, SENTENCE)
        page.click('.tabs [data-view="neighbours"]')
        page.wait_for_selector("#nb-list li")
        assert page.inner_text('.tabs [data-view="neighbours"]') == "近邻"
        assert page.inner_text("#nb-prompt").startswith("第 1 步写出了")
        page.click('#nb-source .tok[data-at="0"]')
        word = texts(page, "#nb-source .tok")[0]
        assert page.inner_text("#nb-prompt").startswith(f"“{word}”的编码器状态。在训练句子的")
        assert page.locator("#nb-list .nb-word").count() == 5


def test_the_exported_file_carries_the_neighbours(browser, tiny_model, tmp_path):
    data = build_export({"rnnsearch": load(tiny_model)}, [SENTENCE], beam=2, alternatives=0)
    found = data["sentences"][0]["records"]["rnnsearch"]["neighbours"]
    path = tmp_path / "explore.html"
    path.write_text(export_page(data), encoding="utf-8")
    with open_page(browser, path.as_uri(), offline=True) as page:
        page.select_option("#units", value="pieces")
        page.click('.tabs [data-view="neighbours"]')
        check_step(page, found, 0)
        page.click('#nb-target .tok[data-step="1"]')
        check_step(page, found, 1)
        page.click('#nb-source .tok[data-at="2"]')
        check_source(page, found, 2)
        assert page.requests == [path.as_uri()]
