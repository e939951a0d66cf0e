"""The page's explorer in a real browser (Debian's chromium, headless, Playwright): step by step, the beam
tree, what-if, two models side by side, a Transformer's heads, the language switch, and the file that
`attnmt explore --export` writes, opened from file:// with every network request blocked.

Expected values come from the API (POST /explore, the record the page is given) and from the contract's
rules (a beam of 5 keeps 5 hypotheses per step; alpha is the softmax of e), never from the page's own
script. The docs' pictures of the views (docs/img/explore_*.png) come from tests/explore/test_screenshots.py.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import httpx
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

from attnmt.decode.translator import load
from attnmt.explore.page import build_export, export_page
from attnmt.serve import create_app
from tests.browser import NEEDS_CHROMIUM, open_page, running_server
from tests.conftest import tiny_config
from tests.explore.pages import explore, show, texts
from tests.serve.test_serve import SENTENCE

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def models(tiny_model, tiny_transformer, tiny_seq2seq) -> dict[str, Path]:
    return {"rnnsearch": tiny_model, "seq2seq": tiny_seq2seq, "transformer": tiny_transformer}


@pytest.fixture(scope="module")
def base_url(models) -> Iterator[str]:
    with running_server(create_app(models)) as url:
        yield url


@pytest.fixture
def page(browser, base_url):
    with open_page(browser, base_url + "/") as page:
        yield page


TAB_LINE = """() => { const bar = document.querySelector('.tabs'), box = bar.getBoundingClientRect();
  const tabs = Array.from(bar.querySelectorAll('button')).map((b) => b.getBoundingClientRect());
  return { tops: tabs.map((r) => Math.round(r.top)), height: Math.round(box.height),
           inside: tabs.map((r) => r.left >= box.left - 1 && r.right <= box.right + 1),
           scrolls: bar.scrollWidth > bar.clientWidth }; }"""


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_the_tab_bar_is_one_line_at_1100_px_and_scrolls_when_narrower(browser, base_url, locale):
    with open_page(browser, base_url + "/", locale=locale) as page:  # 1100 px wide
        line = page.evaluate(TAB_LINE)
        assert len(line["tops"]) == 8 and len(set(line["tops"])) == 1 and line["height"] < 50, line
        assert all(line["inside"]) and not line["scrolls"], line  # every tab seen, none scrolled away
        page.set_viewport_size({"width": 600, "height": 900})
        page.click('.tabs [data-view="layers"]')  # the last tab: scrolled into view
        line = page.evaluate(TAB_LINE)
        assert len(set(line["tops"])) == 1 and line["scrolls"] and line["inside"][-1], line
        assert page.is_visible("#view-layers")


def test_the_page_opens_with_an_example_translated(page, base_url):
    first = httpx.get(base_url + "/models").json()["models"][0]["examples"][0]
    page.wait_for_function("text => document.getElementById('explorer').dataset.source === text", arg=first)
    assert page.input_value("#source") == first
    assert page.inner_text("#translation") == explore(base_url, first, beam=3)["output"]["text"]


def test_the_step_slider_moves_the_lit_row_the_bars_and_the_top_k(page, base_url, tmp_path):
    show(page, SENTENCE, beam=3)
    record = explore(base_url, SENTENCE, beam=3)
    steps = record["steps"]
    assert page.get_attribute("#step", "max") == str(len(steps) - 1)
    for i, step in enumerate(steps):
        if i:
            page.focus("#step")
            page.keyboard.press("ArrowRight")
        assert page.eval_on_selector_all("#step-heatmap .mx-row.lit", "els => els.map(e => e.dataset.i)") == [str(i)]
        lit_cells = page.eval_on_selector_all("#step-heatmap .mx-cell.lit", "els => els.length")
        assert lit_cells == len(record["source"]["words"])
        assert texts(page, "#step-topk .word") == [c["piece"] for c in step["top_k"]]
        assert texts(page, "#step-topk li.chosen .word") == [step["output"]]
        bars = [float(w) for w in page.eval_on_selector_all("#step-bars .bar", "els => els.map(e => e.dataset.w)")]
        assert bars == pytest.approx(record["attention"]["words"]["mean"][i], abs=1e-9)
        # the equation: alpha_ij is the softmax of e_ij over the source (worked out here from e)
        e = step["equation"]["e"]
        j = max(range(len(e)), key=lambda k: e[k])
        alpha = math.exp(e[j]) / sum(math.exp(x) for x in e)
        assert page.inner_text("#step-equation .eq-alpha").endswith(f"{alpha:.4f}")
        assert alpha == pytest.approx(record["attention"]["pieces"]["mean"][i][j], abs=2e-4)
    # another source word chosen for the equation: its own e
    page.click('#step-bars .bar[data-j="0"]')
    assert page.inner_text("#step-equation .eq-e").endswith(f"{steps[-1]['equation']['e'][0]:.3f}")
    # play starts from the first step and moves on by itself
    page.click("#play")
    page.wait_for_function("() => Number(document.getElementById('step').value) >= 1", timeout=5000)
    page.click("#play")
    page.click('#step-target .tok[data-row="1"]')
    assert page.input_value("#step") == "1"


def long_sentence(base_url: str, words: int = 20) -> str:
    """``words`` words of the synthetic language: held-out sentences joined."""
    examples = httpx.get(base_url + "/models").json()["models"][0]["examples"]
    joined = " ".join(examples * 4).split()
    assert len(joined) >= words
    return " ".join(joined[:words])


def test_the_beam_tree_keeps_the_beam_per_step_and_stays_readable(page, base_url, tmp_path):
    text = long_sentence(base_url)
    show(page, text, beam=5)
    page.click('.tabs [data-view="beam"]')
    tree = explore(base_url, text, beam=5)["beam"]
    shown = page.eval_on_selector_all("#beam-svg g.node", "els => els.map(e => [e.dataset.step, e.dataset.status])")
    assert sorted(shown) == sorted([str(n["step"]), n["status"]] for n in tree["nodes"])
    last = max(n["step"] for n in tree["nodes"])
    for step in range(last + 1):  # a beam of 5: five hypotheses kept or finished at each step
        in_beam = [s for s, status in shown if s == str(step) and status in ("kept", "finished")]
        assert len(in_beam) == 5, f"step {step}"
    best = page.eval_on_selector_all("#beam-svg g.node.best", "els => els.map(e => Number(e.dataset.id))")
    assert sorted(best) == sorted(tree["best"])
    # readable: no two boxes overlap, and every word fits its box
    boxes = page.eval_on_selector_all("#beam-svg g.node rect", "els => els.map(e => { const r = "
                                      "e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })")
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            (l1, t1, r1, b1), (l2, t2, r2, b2) = boxes[a], boxes[b]
            assert r1 <= l2 or r2 <= l1 or b1 <= t2 or b2 <= t1, f"boxes {a} and {b} overlap"
    widths = page.eval_on_selector_all("#beam-svg g.node", "els => els.map(e => [e.querySelector('text.piece')"
                                       ".getComputedTextLength(), e.querySelector('rect').getBBox().width])")
    assert all(text_w <= box_w for text_w, box_w in widths)
    # hiding the pruned runners-up hides exactly them
    page.uncheck("#beam-pruned")
    visible = page.eval_on_selector_all("#beam-svg g.node", "els => els.filter(e => getComputedStyle(e).display !== "
                                        "'none').map(e => e.dataset.status)")
    assert "pruned" not in visible and len(visible) == sum(n["status"] != "pruned" for n in tree["nodes"])
    page.check("#beam-pruned")


def test_what_if_forces_the_chosen_word_and_re_decodes_the_rest(page, base_url, tmp_path):
    show(page, SENTENCE, beam=3)
    before = explore(base_url, SENTENCE, beam=3)
    page.click('.tabs [data-view="whatif"]')
    page.click('#wi-target .tok[data-step="1"]')
    choices = page.eval_on_selector_all("#wi-choices button:not([disabled])", "els => els.map(e => e.dataset.piece)")
    assert choices and before["steps"][1]["output"] not in choices and "</s>" not in choices
    page.click(f'#wi-choices button[data-piece="{choices[0]}"]')
    page.wait_for_selector("#wi-result:not([hidden])")
    prefix = [before["steps"][0]["output"], choices[0]]
    after = explore(base_url, SENTENCE, beam=3, prefix_tokens=prefix)
    assert texts(page, "#wi-after-text .tok") == after["output"]["words"]
    assert texts(page, "#wi-after-text .tok.swapped") == [choices[0]]
    assert texts(page, "#wi-after-text .tok.forced") == prefix
    assert texts(page, "#wi-after-text .tok")[1:] != before["output"]["words"][1:]
    rows = page.eval_on_selector_all("#wi-after .mx-row", "els => els.map(e => e.textContent)")
    assert rows == after["output"]["words"] + ["</s>"]


def test_side_by_side_shows_both_models_and_the_length_slider_changes_the_sentence(page, base_url, tmp_path):
    text = long_sentence(base_url, words=12)
    show(page, text, beam=3)
    page.click('.tabs [data-view="compare"]')
    page.wait_for_selector("#cmp-col-b h3")
    assert page.inner_text("#cmp-source") == text  # it starts at the sentence on show
    assert page.input_value("#cmp-a") == "seq2seq" and page.input_value("#cmp-b") == "rnnsearch"
    page.fill("#cmp-length", page.get_attribute("#cmp-length", "max"))
    longest = max(httpx.get(base_url + "/models").json()["models"][0]["examples"] + [page.input_value("#source")],
                  key=lambda s: len(s.split()))
    page.wait_for_function("text => document.getElementById('cmp-source').textContent === text", arg=longest)
    for column, model in (("#cmp-col-a", "seq2seq"), ("#cmp-col-b", "rnnsearch")):
        page.wait_for_function("([sel, model]) => document.querySelector(sel).dataset.model === model",
                               arg=[column, model])
        record = explore(base_url, longest, model=model, beam=3)
        assert page.inner_text(f"{column} .cmp-text") == record["output"]["text"]
    assert page.is_visible("#cmp-col-a .fixed-vector")  # seq2seq: one fixed vector, no attention map
    assert page.eval_on_selector_all("#cmp-col-b .mx-cell", "els => els.length") == (
        (len(record["output"]["words"]) + 1) * len(longest.split()))


def test_choosing_a_head_changes_the_heatmap(page, base_url, tmp_path):
    show(page, SENTENCE, model="transformer", beam=2)
    page.click('.tabs [data-view="heads"]')
    layers = explore(base_url, SENTENCE, model="transformer", beam=2)["attention"]["words"]["layers"]
    heads = layers[-1]

    def shown() -> list[float]:
        return [float(w) for w in page.eval_on_selector_all(
            "#hv-heatmap .mx-cell", "els => els.map(e => e.style.getPropertyValue('--w'))")]

    assert page.eval_on_selector_all("#hv-grid .head-card", "els => els.length") == len(heads) + 1
    for h in range(len(heads)):
        page.select_option("#hv-head", value=str(h))
        assert shown() == pytest.approx([w for row in heads[h] for w in row], abs=1e-9)
    page.click('#hv-grid .head-card[data-head="mean"]')
    assert page.input_value("#hv-head") == "mean"
    mean = [sum(heads[h][i][j] for h in range(len(heads))) / len(heads)
            for i in range(len(heads[0])) for j in range(len(heads[0][0]))]
    assert shown() == pytest.approx(mean, abs=1e-9)
    page.click('#hv-grid .head-card[data-head="1"]')
    assert page.input_value("#hv-head") == "1"


def test_the_language_follows_the_browser_and_the_switch(browser, base_url, tmp_path):
    with open_page(browser, base_url + "/", locale="zh-CN") as page:
        assert page.inner_text("#tagline") == "翻译一个句子，看看模型关注了什么。"
        assert page.inner_text('.tabs [data-view="beam"]') == "束搜索"
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        page.wait_for_selector("#explorer[data-source]")
        page.focus("#step")
        page.keyboard.press("ArrowRight")
        assert page.inner_text("#step-label").startswith("第 2 步")
        page.select_option("#lang", value="en")
        assert page.inner_text("#tagline") == "Translate a sentence and see what the model looked at."
        assert page.inner_text('.tabs [data-view="beam"]') == "Beam search"
        assert page.inner_text("#step-label").startswith("step 2 of")


def test_the_exported_file_works_from_file_urls_with_the_network_blocked(browser, models, tmp_path):
    translators = {name: load(models[name]) for name in ("seq2seq", "rnnsearch")}
    sentences = ["gupo pelido duno gute", "bosa memosu renadu"]
    data = build_export(translators, sentences, beam=3, alternatives=3)
    path = tmp_path / "explore.html"
    path.write_text(export_page(data), encoding="utf-8")
    with open_page(browser, path.as_uri(), offline=True) as page:
        assert page.is_hidden("#source") and page.is_visible("#export-sentence")
        assert texts(page, "#export-sentence option") == sentences
        page.select_option("#model", value="rnnsearch")
        record = data["sentences"][0]["records"]["rnnsearch"]
        assert page.inner_text("#translation") == record["output"]["text"]
        # step by step
        page.focus("#step")
        page.keyboard.press("ArrowRight")
        assert page.eval_on_selector_all("#step-heatmap .mx-row.lit", "els => els.map(e => e.dataset.i)") == ["1"]
        assert texts(page, "#step-topk .word") == [c["piece"] for c in record["steps"][1]["top_k"]]
        # the beam tree
        page.click('.tabs [data-view="beam"]')
        assert page.eval_on_selector_all("#beam-svg g.node", "els => els.length") == len(record["beam"]["nodes"])
        # what if: only the precomputed choices can be taken, and they show the precomputed re-decoding
        page.click('.tabs [data-view="whatif"]')
        page.click('#wi-target .tok[data-step="1"]')
        alternatives = record["alternatives"]["1"]
        enabled = page.eval_on_selector_all("#wi-choices button:not([disabled])",
                                            "els => els.map(e => e.dataset.piece)")
        assert sorted(enabled) == sorted(r["prefix"][-1] for r in alternatives)
        page.click(f'#wi-choices button[data-piece="{alternatives[0]["prefix"][-1]}"]')
        assert texts(page, "#wi-after-text .tok") == alternatives[0]["output"]["words"]
        # side by side: both models, the second sentence
        page.click('.tabs [data-view="compare"]')
        page.fill("#cmp-length", "1")
        page.wait_for_function("text => document.getElementById('cmp-source').textContent === text", arg=sentences[1])
        for column, model in (("#cmp-col-a", "seq2seq"), ("#cmp-col-b", "rnnsearch")):
            assert page.inner_text(f"{column} .cmp-text") == data["sentences"][1]["records"][model]["output"]["text"]
        assert page.requests == [path.as_uri()], "the exported page asked the network"


def test_words_by_default_and_pieces_on_request(browser, tiny_corpus, tmp_path):
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, max_steps=40, valid_every=40, valid_bleu_sample=0)
    train(replace(config, data=replace(config.data, tokenizer="unigram", vocab_size=120)), tmp_path / "sp", quiet=True)
    data = build_export({"sp": load(tmp_path / "sp")}, ["bosa memosu renadu pani deme"], beam=2, alternatives=0)
    record = data["sentences"][0]["records"]["sp"]
    assert record["source"]["pieces"] != record["source"]["words"]  # the words are made of several pieces
    path = tmp_path / "sp.html"
    path.write_text(export_page(data), encoding="utf-8")
    with open_page(browser, path.as_uri(), offline=True) as page:
        assert texts(page, "#step-heatmap .mx-col") == ["bosa", "memosu", "renadu", "pani", "deme"]
        assert texts(page, "#step-heatmap .mx-row") == record["output"]["words"] + ["</s>"]
        assert texts(page, "#step-bars .label") == record["source"]["words"]
        page.select_option("#units", value="pieces")
        assert texts(page, "#step-heatmap .mx-col") == record["source"]["pieces"]
        assert texts(page, "#step-heatmap .mx-row") == [s["output"] for s in record["steps"]]
