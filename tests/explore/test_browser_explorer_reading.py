"""The explorer as a learner reads it, in a real browser (Debian's chromium, headless, Playwright): Chinese labels
stand upright and the Chinese page is in Chinese, a long sentence's heatmaps scroll to their last column, a
sentence that HTML would read as markup keeps the exported page whole, <unk> is marked, the beam's numbers say
what they are, and side by side scores each translation against the reference.

Expected values come from the records (POST /explore, or the exported data) and from sacreBLEU, never from the
page's own script.
"""

from __future__ import annotations

import io
import itertools
import random
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

from attnmt.decode.held_out import held_out_pairs
from attnmt.decode.translator import load
from attnmt.explore.page import STATIC_DIR, build_export, export_page
from attnmt.serve import create_app
from tests.browser import NEEDS_CHROMIUM, open_page, running_server
from tests.conftest import tiny_config
from tests.explore.pages import explore, show, texts
from tests.explore.test_explore import SENTENCE

pytestmark = NEEDS_CHROMIUM

# A small Chinese-English language: subject, time, verb, object.
SUBJECTS = [("我", "I"), ("你", "you"), ("他", "he"), ("她", "she"), ("我们", "we"), ("他们", "they")]
VERBS = [("爱", "love"), ("喜欢", "like"), ("看见", "see"), ("帮助", "help"), ("记得", "remember")]
OBJECTS = [("你", "you"), ("我", "me"), ("他", "him"), ("她", "her"), ("老师", "the teacher"), ("朋友", "the friend"),
           ("这本书", "this book"), ("那只猫", "that cat")]
TIMES = [("", ""), ("今天", " today"), ("昨天", " yesterday"), ("每天", " every day")]
CHINESE = ["我爱你", "我们昨天看见那只猫"]


def chinese_corpus(directory: Path) -> Path:
    pairs = [(f"{s}{t}{v}{o}", f"{se} {ve} {oe}{te}")
             for (s, se), (v, ve), (o, oe), (t, te) in itertools.product(SUBJECTS, VERBS, OBJECTS, TIMES)]
    random.Random(0).shuffle(pairs)
    directory.mkdir(parents=True)
    for name, part in (("train", pairs[40:]), ("valid", pairs[:40])):
        (directory / f"{name}.src").write_text("".join(s + "\n" for s, _ in part), encoding="utf-8")
        (directory / f"{name}.tgt").write_text("".join(t + "\n" for _, t in part), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def chinese_model(tmp_path_factory) -> Path:
    from attnmt.train.trainer import train

    root = tmp_path_factory.mktemp("zh")
    # 30 updates: the test reads the labels of the source's pieces, which need the trained tokenizer, not a good model
    config = tiny_config(chinese_corpus(root / "corpus"), max_steps=30, valid_every=30, valid_bleu_sample=0)
    config = replace(config, data=replace(config.data, tokenizer="unigram", vocab_size=80, src_lang="zh",
                                          tgt_lang="en"))
    train(config, root / "model", quiet=True)
    return root / "model"


@pytest.fixture(scope="module")
def base_url(tiny_model, tiny_seq2seq) -> Iterator[str]:
    with running_server(create_app({"rnnsearch": tiny_model, "seq2seq": tiny_seq2seq})) as url:
        yield url


def write_export(path: Path, translators: dict, sentences: list[str], compress: bool | None = None,
                 **settings) -> Path:
    data = build_export(translators, sentences, beam=2, **settings)
    path.write_text(export_page(data, compress=compress), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------ Chinese


def ink(png: bytes) -> np.ndarray:
    """The dark pixels of a screenshot, cropped to them and scaled to 32 x 32 (0 white .. 1 black)."""
    from PIL import Image

    gray = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64) / 255.0
    rows, cols = np.nonzero(gray < 0.5)
    assert rows.size, "no glyph drawn"
    glyph = Image.fromarray(np.uint8(255 * gray[rows.min():rows.max() + 1, cols.min():cols.max() + 1]))
    return 1.0 - np.asarray(glyph.resize((32, 32)), dtype=np.float64) / 255.0


def has_chinese_font() -> bool:
    fc_list = shutil.which("fc-list")
    return fc_list is None or bool(subprocess.run([fc_list, ":lang=zh"], capture_output=True, text=True).stdout)


@pytest.mark.skipif(not has_chinese_font(), reason="no Chinese font installed (fonts-noto-cjk)")
def test_chinese_labels_stand_upright_on_the_chinese_page(browser, chinese_model, tmp_path):
    path = write_export(tmp_path / "zh.html", {"zh": load(chinese_model)}, CHINESE, alternatives=0)
    with open_page(browser, path.as_uri(), locale="zh-CN", offline=True) as page:
        page.evaluate("() => { const s = document.createElement('span'); s.id = 'upright-reference';"
                      " s.style.fontSize = '0.85rem'; s.textContent = '爱'; document.body.prepend(s); }")
        reference = ink(page.locator("#upright-reference").screenshot())
        turned = {k: np.abs(reference - np.rot90(reference, k)).mean() for k in (1, 2, 3)}
        for selector in ("#step-heatmap .mx-col", "#heatmap .hm-col", "#step-bars .label"):
            label = page.locator(selector, has_text=re.compile("^爱$"))
            assert label.count() == 1, selector
            style = label.evaluate("e => [getComputedStyle(e).writingMode, getComputedStyle(e).textOrientation]")
            assert style == ["vertical-rl", "upright"], selector
            glyph = ink(label.screenshot())
            # the label's glyph is the upright one, not the glyph turned over or on its side
            assert all(np.abs(glyph - reference).mean() < np.abs(glyph - np.rot90(reference, k)).mean() for k in turned)
        # a label of several characters stands as a column of them: taller than wide
        page.select_option("#export-sentence", index=1)
        boxes = page.eval_on_selector_all("#step-heatmap .mx-col", "els => els.map(e => [e.textContent, "
                                          "e.getBoundingClientRect().width, e.getBoundingClientRect().height])")
        assert any(len(text) == 1 for text, _, _ in boxes)
        assert all(height > width for text, width, height in boxes if len(text) > 1)
        assert texts(page, '.tabs [data-view="compare"]') == ["seq2seq 与注意力"]


def test_the_chinese_page_has_every_string_in_chinese(browser, base_url):
    with open_page(browser, base_url + "/", locale="zh-CN") as page:
        assert page.evaluate("Object.keys(STRINGS.en).filter(k => !(k in STRINGS.zh))") == []
        same = page.evaluate("Object.keys(STRINGS.en).filter(k => STRINGS.zh[k] === STRINGS.en[k])")
        assert set(same) <= {"eq_e", "eq_alpha", "beam_logp", "bleu", "chrf"}  # notation, the same in both
        page.wait_for_selector("#explorer[data-source]")
        example, reference = held_out_pairs_of(base_url)
        show(page, example)
        shown = []
        for view in ("steps", "beam", "whatif", "pin", "neighbours", "compare", "heads", "layers"):
            page.click(f'.tabs [data-view="{view}"]')
            if view == "whatif":
                page.click('#wi-target .tok[data-step="0"]')
            if view == "pin":
                page.click('#pin-target .tok[data-step="0"]')
                page.click('#pin-source button[data-col="0"]')
                page.wait_for_selector("#pin-result:not([hidden])")
            if view == "neighbours":
                page.wait_for_selector("#nb-list li")
            if view == "compare":
                page.wait_for_selector("#cmp-col-b .cmp-scores")
            shown.append(page.inner_text("body"))
        data = data_words(base_url, example) | set(reference.split())
        # a run of letters is data when it is words of data, even chips that stand without a space between
        english = {run for run in re.findall(r"[A-Za-z][A-Za-z'-]*", "\n".join(shown))
                   if run not in NAMES and not made_of(run, data)}
        assert not english, f"English left on the Chinese page: {sorted(english)}"


# Names and notation that stay as they are in Chinese text: the program, model types, HTTP, the methods of
# word links, the equation's letters and the scores' names.
NAMES = {"attnmt", "seq", "seq2seq", "RNNsearch", "rnnsearch", "Transformer", "API", "POST", "GET", "translate",
         "explore", "models", "health", "openapi", "json", "docs", "alignment", "md", "argmax", "shift", "mutual",
         "shift-mutual", "English", "N", "e", "a", "s", "h", "c", "p", "log", "exp", "BLEU", "chrF", "src", "tgt",
         "unk"}


def made_of(run: str, words: set[str]) -> bool:
    """Whether ``run`` is one or more of ``words`` one after the other."""
    ends = {0}
    for end in range(1, len(run) + 1):
        if any(run[start:end] in words for start in ends if start < end):
            ends.add(end)
    return len(run) in ends


def held_out_pairs_of(base_url: str) -> tuple[str, str]:
    """A held-out example of the first model and its reference (the served folder's own valid split)."""
    example = httpx.get(base_url + "/models").json()["models"][0]["examples"][0]
    reference = explore(base_url, example)["reference"]["text"]
    return example, reference


def data_words(base_url: str, text: str) -> set[str]:
    """Every word of data the page can show for ``text``: model names, examples, tokens, top-k, beam pieces."""
    models = httpx.get(base_url + "/models").json()["models"]
    words = {w for m in models for w in [m["name"], m["model_type"], *" ".join(m["examples"]).split()]}
    for m in models:
        record = explore(base_url, text, model=m["name"], neighbours=5)
        words |= set(record["source"]["words"]) | set(record["output"]["words"])
        words |= {w for s in (record["neighbours"] or {"sentences": []})["sentences"]
                  for w in [*s["source"].split(), *s["pieces"]]}
        words |= {c["piece"] for s in record["steps"] for c in s["top_k"]}
        words |= {n["piece"] for n in (record["beam"] or {"nodes": []})["nodes"]}
    return {w for text in words for w in re.findall(r"[A-Za-z][A-Za-z'-]*", text)}


# ---------------------------------------------------------------------------- what a long sentence shows


def test_a_60_token_sentence_scrolls_to_its_last_column(browser, tiny_model, tiny_seq2seq, tmp_path):
    pool = [src for src, _ in held_out_pairs(load(tiny_model))]
    long = " ".join(" ".join(pool).split()[:60])
    path = write_export(tmp_path / "long.html", {"seq2seq": load(tiny_seq2seq), "rnnsearch": load(tiny_model)}, [long],
                        alternatives=1)
    with open_page(browser, path.as_uri(), offline=True) as page:
        page.select_option("#model", value="rnnsearch")
        checked = scrolls(page, "#heatmap-wrap") + scrolls(page, "#step-heatmap-box .matrix-wrap")
        page.click('.tabs [data-view="whatif"]')
        page.click('#wi-target .tok[data-step="0"]')
        page.click("#wi-choices button:not([disabled]):not(.chosen)")
        checked += scrolls(page, "#wi-after")
        page.click('.tabs [data-view="compare"]')
        page.wait_for_selector("#cmp-col-b .matrix-wrap")
        checked += scrolls(page, "#cmp-col-b .matrix-wrap")
        assert checked == 4


def scrolls(page, selector: str) -> int:
    """The heatmap at ``selector`` (or its .matrix-wrap) is wider than its box and scrolls: by the wheel, and as
    far as its last column, with its row labels in view and its box no taller than the window."""
    wrap = page.locator(selector).first
    if "matrix-wrap" not in (wrap.get_attribute("class") or "") and wrap.get_attribute("id") != "heatmap-wrap":
        wrap = page.locator(f"{selector} >> xpath=..")
    wrap.scroll_into_view_if_needed()
    size = wrap.evaluate("e => [getComputedStyle(e).overflowX, e.scrollWidth, e.clientWidth, "
                         "e.getBoundingClientRect().height, window.innerHeight]")
    overflow, scroll_width, client_width, height, window_height = size
    assert overflow in ("auto", "scroll") and scroll_width > client_width, (selector, size)
    assert height <= window_height, f"{selector}: its horizontal scrollbar is out of the window's reach"
    box = wrap.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + min(box["height"] / 2, 100))
    page.mouse.wheel(400, 0)
    page.wait_for_function("e => e.scrollLeft > 0", arg=wrap.element_handle())
    wrap.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    last = wrap.evaluate("e => { const w = e.getBoundingClientRect(); const cols = e.querySelectorAll("
                         "'.mx-col, .hm-col'); const c = cols[cols.length - 1].getBoundingClientRect(); "
                         "const r = e.querySelector('.mx-row, .hm-row').getBoundingClientRect(); "
                         "return [c.left >= w.left - 1 && c.right <= w.right + 1, r.left >= w.left - 1 && "
                         "r.right <= w.right + 1]; }")
    assert last == [True, True], f"{selector}: the last column, or the row labels, out of view"
    return 1


@pytest.mark.parametrize("compress", [False, True])  # the data as JSON, and gzip-compressed as a large export's
def test_a_sentence_that_html_reads_as_markup_keeps_the_exported_page_whole(browser, tiny_model, tmp_path, compress):
    hostile = "gupo <!--<script> pelido </script><b>duno</b> & gute -->"
    path = write_export(tmp_path / "hostile.html", {"rnnsearch": load(tiny_model)}, [hostile], compress=compress,
                        alternatives=1)
    assert ('data-encoding="gzip+base64"' in path.read_text("utf-8")) == compress
    with open_page(browser, path.as_uri(), offline=True) as page:
        assert texts(page, "#export-sentence option") == [hostile]
        record = explore_offline(tiny_model, hostile)
        rows, cols = len(record["output"]["words"]) + 1, len(record["source"]["words"])
        assert page.eval_on_selector_all("#step-heatmap .mx-cell", "els => els.length") == rows * cols
        assert texts(page, "#step-heatmap .mx-col") == record["source"]["words"]
        scripts = (STATIC_DIR / "index.html").read_text("utf-8").count("<script src=")
        assert page.eval_on_selector_all("script:not([src])", "els => els.length") == 1 + scripts  # the data too


def explore_offline(model: Path, text: str) -> dict:
    return build_export({"m": load(model)}, [text], beam=2, alternatives=0)["sentences"][0]["records"]["m"]


# ----------------------------------------------------------------------------------- <unk>, the beam


def test_unk_is_marked_in_the_output_and_the_source(browser, tiny_corpus, tmp_path):
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, max_steps=40, valid_every=40, valid_bleu_sample=0)
    train(replace(config, data=replace(config.data, max_vocab=12)), tmp_path / "small", quiet=True)
    translator = load(tmp_path / "small")
    sentence = "gupo pelido duno xyzzy"  # xyzzy: a word of no language the model read
    record = build_export({"small": translator}, [sentence], beam=2, alternatives=0)["sentences"][0]["records"]["small"]
    assert "<unk>" in record["output"]["words"] and record["source"]["unknown"]
    path = write_export(tmp_path / "unk.html", {"small": translator}, [sentence], alternatives=0)
    with open_page(browser, path.as_uri(), offline=True) as page:
        unknown_words = sorted({record["source"]["words"][record["source"]["piece_word"][k]]
                                for k in record["source"]["unknown"]})
        assert sorted(texts(page, "#step-heatmap .mx-col.unk")) == unknown_words
        assert sorted(texts(page, "#step-bars .label.unk")) == unknown_words
        for selector in ("#step-heatmap .mx-row", "#step-target .tok", "#translation .unk, #translation"):
            shown = page.eval_on_selector_all(selector, "els => els.map(e => [e.textContent, e.classList.contains("
                                                        "'unk') || Boolean(e.querySelector('.unk'))])")
            assert any(marked for text, marked in shown if "<unk>" in text), selector
            assert all(marked for text, marked in shown if "<unk>" in text), selector
        page.click('.tabs [data-view="beam"]')
        nodes = page.eval_on_selector_all("#beam-svg g.node", "els => els.map(e => [e.querySelector('.piece')"
                                                             ".textContent, e.classList.contains('unk')])")
        assert any(piece == "<unk>" for piece, _ in nodes)
        assert all(marked == (piece == "<unk>") for piece, marked in nodes)


def test_the_beam_says_which_number_is_log_p_and_which_the_final_score(page_en, base_url):
    show(page_en, SENTENCE, beam=3)
    page_en.click('.tabs [data-view="beam"]')
    record = explore(base_url, SENTENCE, beam=3)
    assert f"\u03b1 = {record['decode']['length_penalty']:g}" in page_en.inner_text("#beam-numbers")
    shown = dict(page_en.eval_on_selector_all("#beam-svg g.node", "els => els.map(e => [e.dataset.id, "
                                                                 "e.querySelector('.logp').textContent])"))
    for node in record["beam"]["nodes"]:
        if node["status"] == "finished":
            assert shown[str(node["id"])] == f"score {node['score']:.2f}"
        elif node["status"] != "root":
            assert shown[str(node["id"])] == f"log p {node['log_prob']:.2f}"


@pytest.fixture
def page_en(browser, base_url):
    with open_page(browser, base_url + "/") as page:
        yield page


# ------------------------------------------------------------------------------------- side by side


def test_side_by_side_scores_each_translation_against_the_reference(page_en, base_url):
    from sacrebleu import sentence_bleu, sentence_chrf

    example, reference = held_out_pairs_of(base_url)
    show(page_en, example)
    page_en.click('.tabs [data-view="compare"]')
    page_en.wait_for_function("text => document.getElementById('cmp-source').textContent === text", arg=example)
    page_en.wait_for_selector("#cmp-col-b .cmp-scores")
    assert page_en.inner_text("#cmp-reference .cmp-ref-text") == reference
    records = {model: explore(base_url, example, model=model) for model in ("seq2seq", "rnnsearch")}
    bleu = {m: sentence_bleu(r["output"]["text"], [reference]).score for m, r in records.items()}
    chrf = {m: sentence_chrf(r["output"]["text"], [reference]).score for m, r in records.items()}
    for column, model in (("#cmp-col-a", "seq2seq"), ("#cmp-col-b", "rnnsearch")):
        assert page_en.inner_text(f"{column} .cmp-text") == records[model]["output"]["text"]
        assert page_en.inner_text(f"{column} .cmp-bleu") == f"BLEU {bleu[model]:.1f}"
        assert page_en.inner_text(f"{column} .cmp-chrf") == f"chrF {chrf[model]:.1f}"
        missing = reference.split()
        expected = []
        for word in records[model]["output"]["words"]:
            expected.append(word not in missing)
            if word in missing:
                missing.remove(word)
        marked = page_en.eval_on_selector_all(f"{column} .cmp-word", "els => els.map(e => e.classList"
                                                                     ".contains('miss'))")
        assert marked == expected
    # the model nearer the reference is marked, with its lead
    if round(bleu["seq2seq"], 1) != round(bleu["rnnsearch"], 1):
        nearer, other = sorted(bleu, key=bleu.get, reverse=True)
        column = "#cmp-col-a" if nearer == "seq2seq" else "#cmp-col-b"
        assert page_en.is_visible(f"{column} .cmp-scores.lead")
        lead = round(bleu[nearer], 1) - round(bleu[other], 1)
        assert f"+{lead:.1f} BLEU" in page_en.inner_text(f"{column} .cmp-lead")
        assert page_en.locator(".cmp-scores.lead").count() == 1


def test_seq2seq_opens_with_no_empty_section(page_en, base_url):
    show(page_en, SENTENCE, model="seq2seq")
    for view in ("steps", "compare"):
        page_en.click(f'.tabs [data-view="{view}"]')
        if view == "compare":
            page_en.wait_for_selector("#cmp-col-b h3")
        empty = page_en.evaluate("""() => Array.from(document.querySelectorAll('#explorer .view:not([hidden]) h3'))
            .filter(h => h.offsetParent !== null)
            .filter(h => { const next = h.nextElementSibling;
                           return !next || next.offsetHeight === 0 || !(next.innerText.trim() ||
                                  next.querySelector('.mx-cell, svg')); })
            .map(h => h.textContent)""")
        assert empty == [], f"{view}: headings over nothing: {empty}"
    page_en.click('.tabs [data-view="steps"]')
    assert page_en.is_hidden("#step-heatmap-box") and page_en.is_visible("#step-bars .fixed-vector")
