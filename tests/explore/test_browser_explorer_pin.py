"""The explorer's "Edit attention" view in a real browser (Debian's chromium, headless, Playwright): a step and a
source word chosen, the page shows the translation decoded with the attention at that step pinned to the word
(POST /explore with prefix_tokens and pin), for an RNNsearch model and for a Transformer (every head of every
layer pinned); a model without attention says why, in English and in Chinese. An exported file shows the outcomes
decoded in advance with no server, and says which steps it holds. Expected values come from the API or the
exported data."""

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
def base_url(tiny_model, tiny_transformer, tiny_seq2seq) -> Iterator[str]:
    models = {"rnnsearch": tiny_model, "transformer": tiny_transformer, "seq2seq": tiny_seq2seq}
    with running_server(create_app(models)) as url:
        yield url


def cells(page, box: str) -> list[float]:
    return [float(w) for w in page.eval_on_selector_all(f"{box} .mx-cell",
                                                        "els => els.map(e => e.style.getPropertyValue('--w'))")]


def test_pinning_a_steps_attention_to_a_source_word_decodes_the_rest_again(browser, base_url, tmp_path):
    with open_page(browser, base_url + "/") as page:
        page.wait_for_selector("#explorer[data-source]")
        page.select_option("#units", value="pieces")
        show(page, SENTENCE, model="rnnsearch", beam=1)
        record = explore(base_url, SENTENCE, beam=1)
        page.click('.tabs [data-view="pin"]')
        assert page.is_hidden("#pin-none") and page.is_hidden("#pin-result")
        step, column = 1, 3
        page.click(f'#pin-target .tok[data-step="{step}"]')
        assert texts(page, "#pin-source button") == record["source"]["pieces"]
        page.click(f'#pin-source button[data-col="{column}"]')
        page.wait_for_selector("#pin-result:not([hidden])")
        pinned = explore(base_url, SENTENCE, beam=1, prefix_tokens=record["output"]["pieces"][:step], pin=[column])
        assert texts(page, "#pin-after-text .tok") == pinned["output"]["pieces"]
        assert cells(page, "#pin-after") == pytest.approx([w for row in pinned["attention"]["pieces"]["mean"]
                                                           for w in row], abs=1e-9)
        lit = page.eval_on_selector_all("#pin-after .mx-cell.lit", "els => els.map(e => Number(e.style."
                                        "getPropertyValue('--w')))")
        assert lit == [1.0 if j == column else 0.0 for j in range(len(record["source"]["pieces"]))]
        assert cells(page, "#pin-before") == pytest.approx([w for row in record["attention"]["pieces"]["mean"]
                                                            for w in row], abs=1e-9)
        said = page.inner_text("#pin-said")
        assert said.startswith(f"At step {step + 1}, all attention on \u201c{record['source']['pieces'][column]}\u201d")


def test_a_transformers_cross_attention_is_pinned_in_every_layer_and_head_in_the_chinese_page(browser, base_url):
    with open_page(browser, base_url + "/", locale="zh-CN") as page:
        page.wait_for_selector("#explorer[data-source]")
        page.select_option("#units", value="pieces")
        show(page, SENTENCE, model="transformer", beam=1)
        record = explore(base_url, SENTENCE, model="transformer", beam=1)
        page.click('.tabs [data-view="pin"]')
        assert page.inner_text('.tabs [data-view="pin"]') == "编辑注意力"
        assert page.get_attribute('.tabs [data-view="pin"]', "class") in ("", None)
        assert page.is_hidden("#pin-none") and page.is_visible("#pin-heads")
        assert page.inner_text("#pin-heads").startswith("这是 Transformer：注意力在解码器每一层的每一个头里")
        assert page.inner_text("#pin-prompt") == "点击译文中的一个词，选择它的那一步。"
        step, column = 1, 0
        page.click(f'#pin-target .tok[data-step="{step}"]')
        assert page.inner_text("#pin-prompt").startswith("第 2 步写出了")
        page.click(f'#pin-source button[data-col="{column}"]')
        page.wait_for_selector("#pin-result:not([hidden])")
        pinned = explore(base_url, SENTENCE, model="transformer", beam=1,
                         prefix_tokens=record["output"]["pieces"][:step], pin=[column])
        assert texts(page, "#pin-after-text .tok") == pinned["output"]["pieces"]
        lit = page.eval_on_selector_all("#pin-after .mx-cell.lit", "els => els.map(e => Number(e.style."
                                        "getPropertyValue('--w')))")
        assert lit == [1.0 if j == column else 0.0 for j in range(len(record["source"]["pieces"]))]
        assert cells(page, "#pin-after") == pytest.approx([w for row in pinned["attention"]["pieces"]["mean"]
                                                           for w in row], abs=1e-9)
        assert page.inner_text("#pin-said").startswith(f"第 {step + 1} 步的注意力全部放在")


def test_a_model_without_attention_says_why_there_is_nothing_to_edit(browser, base_url):
    with open_page(browser, base_url + "/", locale="zh-CN") as page:
        page.wait_for_selector("#explorer[data-source]")
        show(page, SENTENCE, model="seq2seq")
        page.click('.tabs [data-view="pin"]')
        assert page.is_visible("#pin-none") and page.is_hidden("#pin-box")
        assert page.inner_text("#pin-none").startswith("没有注意力的模型（seq2seq）")
        assert page.get_attribute('.tabs [data-view="pin"]', "class") == "dim"


def test_the_exported_file_shows_the_outcomes_decoded_in_advance_offline(browser, tiny_model, tmp_path):
    data = build_export({"rnnsearch": load(tiny_model)}, [SENTENCE], beam=2, alternatives=0, pin_steps=1)
    record = data["sentences"][0]["records"]["rnnsearch"]
    assert len(record["output"]["pieces"]) > 1  # a step with no outcome to offer
    path = tmp_path / "explore.html"
    path.write_text(export_page(data), encoding="utf-8")
    for locale, words in (("en-US", "This file holds the edits of steps 1 to 1"),
                          ("zh-CN", "这个文件里只有第 1 到 1 步预先解码好的编辑")):
        with open_page(browser, path.as_uri(), locale=locale, offline=True) as page:
            page.wait_for_selector("#explorer[data-source]")
            page.select_option("#units", value="pieces")
            page.click('.tabs [data-view="pin"]')
            assert page.is_hidden("#pin-none") and page.is_visible("#pin-box")
            page.click('#pin-target .tok[data-step="1"]')  # not decoded in advance
            assert page.eval_on_selector_all("#pin-source button", "els => els.every(e => e.disabled)")
            assert words in page.inner_text("#pin-source")
            page.click('#pin-target .tok[data-step="0"]')
            assert words not in page.inner_text("#pin-source")
            page.click('#pin-source button[data-col="1"]')
            page.wait_for_selector("#pin-result:not([hidden])")
            outcome = next(o for o in record["pins"]["0"] if o["pin"]["source"] == [1])
            assert texts(page, "#pin-after-text .tok") == outcome["output"]["pieces"]
            assert cells(page, "#pin-after") == pytest.approx([w for row in outcome["attention"]["pieces"]["mean"]
                                                               for w in row], abs=1e-3)
            assert page.requests == [path.as_uri()]


def test_an_exported_file_without_outcomes_says_editing_needs_the_server(browser, tiny_model, tmp_path):
    data = build_export({"rnnsearch": load(tiny_model)}, [SENTENCE], beam=2, alternatives=0, pin_steps=0)
    path = tmp_path / "explore.html"
    path.write_text(export_page(data), encoding="utf-8")
    for locale, words in (("en-US", "it needs the live server (attnmt serve)"),
                          ("zh-CN", "要用在线服务器（attnmt serve）")):
        with open_page(browser, path.as_uri(), locale=locale, offline=True) as page:
            page.click('.tabs [data-view="pin"]')
            assert page.is_visible("#pin-none") and page.is_hidden("#pin-box")
            assert words in page.inner_text("#pin-none")
            assert page.requests == [path.as_uri()]
