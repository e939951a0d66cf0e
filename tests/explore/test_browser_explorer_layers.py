"""The explorer's "All attention" view in a real browser (Debian's chromium, headless, Playwright): a
Transformer's encoder self-attention, decoder self-attention and cross-attention, every layer and head, as
thumbnails that open into one head drawn as lines and as a heatmap; in the live page and in an exported file,
in English and in Chinese. Expected weights come from the record (POST /explore, or the exported data)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

from attnmt.decode.translator import load
from attnmt.explore.page import build_export, export_page
from attnmt.serve import create_app
from tests.browser import NEEDS_CHROMIUM, open_page, running_server
from tests.conftest import tiny_config
from tests.explore.pages import explore, show
from tests.explore.test_explore import SENTENCE

pytestmark = NEEDS_CHROMIUM
KINDS = ("encoder", "decoder", "cross")


@pytest.fixture(scope="module")
def transformer(tiny_corpus, tmp_path_factory) -> Path:
    """A Transformer of 2 encoder layers, 3 decoder layers and 2 heads, trained for 40 steps (seconds)."""
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, "transformer", max_steps=40, valid_every=40, valid_bleu_sample=0)
    config = replace(config, model=replace(config.model, enc_layers=2, dec_layers=3))
    directory = tmp_path_factory.mktemp("layers") / "transformer"
    train(config, directory, quiet=True)
    return directory


@pytest.fixture(scope="module")
def base_url(transformer, tiny_model) -> Iterator[str]:
    with running_server(create_app({"transformer": transformer, "rnnsearch": tiny_model})) as url:
        yield url


def expected(record: dict, kind: str) -> list:
    """The record's layers [L][H][rows][cols] of one kind of attention."""
    return record["attention"]["pieces"]["layers"] if kind == "cross" else record["self_attention"][kind]


def shown(page, box: str) -> list[float]:
    return [float(w) for w in page.eval_on_selector_all(f"{box} .mx-cell",
                                                        "els => els.map(e => e.style.getPropertyValue('--w'))")]


def check_every_head(page, record: dict) -> None:
    """Each kind's grid has a thumbnail per layer and head, and each opens into its own weights."""
    for kind in KINDS:
        page.select_option("#mv-kind", value=kind)
        layers = expected(record, kind)
        thumbs = page.eval_on_selector_all("#mv-grid .mv-thumb",
                                           "els => els.map(e => [e.dataset.layer, e.dataset.head])")
        assert thumbs == [[str(l), str(h)] for l in range(len(layers)) for h in range(len(layers[0]))]
        for l, heads in enumerate(layers):
            for h, matrix in enumerate(heads):
                page.click(f'#mv-grid .mv-thumb[data-layer="{l}"][data-head="{h}"]')
                assert shown(page, "#mv-heatmap") == pytest.approx([w for row in matrix for w in row], abs=1e-9)
                lines = page.eval_on_selector_all("#mv-lines line", "els => els.map(e => e.style.strokeOpacity)")
                assert sorted(map(float, lines)) == pytest.approx(sorted(w for row in matrix for w in row if w >= 0.02))


def test_every_layer_and_head_of_the_three_attentions_opens_as_lines_and_a_heatmap(browser, base_url, tmp_path):
    with open_page(browser, base_url + "/") as page:
        page.wait_for_selector("#explorer[data-source]")
        page.select_option("#units", value="pieces")
        show(page, SENTENCE, model="transformer", beam=2)
        record = explore(base_url, SENTENCE, model="transformer", beam=2)
        page.click('.tabs [data-view="layers"]')
        assert len(record["self_attention"]["encoder"]) == 2 and len(record["self_attention"]["decoder"]) == 3
        check_every_head(page, record)
        # the decoder's self-attention: step i reads <s> and the output before it, and nothing after
        page.select_option("#mv-kind", value="decoder")
        page.click('#mv-grid .mv-thumb[data-layer="2"][data-head="1"]')
        inputs = ["<s>"] + record["output"]["pieces"]
        assert page.eval_on_selector_all("#mv-lines .mv-query", "els => els.map(e => e.textContent)") == inputs
        assert page.inner_text("#mv-title") == ("decoder self-attention (output so far \u2192 output so far): "
                                                "layer 3, head 2")
        # pointing at a query shows its lines alone
        last = len(inputs) - 1
        page.hover(f'#mv-lines .mv-query[data-k="{last}"]')
        visible = page.eval_on_selector_all("#mv-lines line", "els => els.filter(e => getComputedStyle(e).visibility"
                                            " === 'visible').map(e => e.dataset.i)")
        assert visible and set(visible) == {str(last)}
        page.select_option("#mv-kind", value="encoder")
        page.click('#mv-grid .mv-thumb[data-layer="1"][data-head="0"]')


def test_the_view_in_chinese_and_a_model_without_self_attention(browser, base_url):
    with open_page(browser, base_url + "/", locale="zh-CN") as page:
        page.wait_for_selector("#explorer[data-source]")
        show(page, SENTENCE, model="rnnsearch")
        page.click('.tabs [data-view="layers"]')
        assert page.inner_text('.tabs [data-view="layers"]') == "全部注意力"
        assert page.is_visible("#mv-none") and page.is_hidden("#mv-box")
        assert "Transformer 在三个地方使用注意力" in page.inner_text("#mv-none")
        assert page.get_attribute('.tabs [data-view="layers"]', "class") == "dim"
        show(page, SENTENCE, model="transformer")
        page.click('#mv-grid .mv-thumb[data-layer="0"][data-head="1"]')
        assert page.inner_text("#mv-title") == "编码器自注意力（源句 \u2192 源句）：第 1 层，第 2 个头"
        assert page.eval_on_selector_all("#mv-kind option", "els => els.map(e => e.textContent)") == [
            "编码器自注意力（源句 \u2192 源句）", "解码器自注意力（已写出的部分 \u2192 已写出的部分）",
            "交叉注意力（译文 \u2192 源句）"]
        assert page.inner_text("#mv-grid .mv-label >> nth=0") == "第 1 个头"


def test_the_exported_file_shows_every_head_offline(browser, transformer, tmp_path):
    data = build_export({"transformer": load(transformer)}, [SENTENCE], beam=2, alternatives=0)
    path = tmp_path / "explore.html"
    path.write_text(export_page(data), encoding="utf-8")
    with open_page(browser, path.as_uri(), offline=True) as page:
        page.click('.tabs [data-view="layers"]')
        check_every_head(page, data["sentences"][0]["records"]["transformer"])
        assert page.requests == [path.as_uri()], "the exported page asked the network"
