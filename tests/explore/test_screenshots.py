"""The explorer's pictures in the docs (docs/img/explore_*.png), taken by driving each view in a real browser
(Debian's chromium, headless, Playwright) as a user would, and checked: the view's tab is the one chosen, the
elements it draws are on the page, and the picture is not blank.

By default the pictures go to the test's tmp folder and the models are the tiny session models (a run of the
slow suite). The docs' pictures come from the same code with three environment variables
(CONTRIBUTING.md, "Generated files"):

    attnmt demo --quick --out /tmp/demo
    ATTNMT_SCREENSHOTS=docs/img ATTNMT_SCREENSHOT_DEMO=/tmp/demo ATTNMT_SCREENSHOT_ZH=models/zhen_guided_zh_en \\
        .venv/bin/python -m pytest -m slow -n 0 tests/explore/test_screenshots.py

ATTNMT_SCREENSHOTS: the folder the PNGs are written to. ATTNMT_SCREENSHOT_DEMO: `attnmt demo`'s folder, whose
seq2seq and rnnsearch models (models/*/seed1) and Transformer (models/transformer, trained there on the
rnnsearch model's data when absent, about a minute) translate held-out sentences of its synthetic language.
ATTNMT_SCREENSHOT_ZH: a Chinese-English model (zh -> en) for the Chinese sentences (我爱你 and a longer one): the
guided model of recipes/alignment_chinese (guided_zh_en.yaml), trained on jieba-segmented text with the recipe's
user dictionary, which splits 我爱你 into 我 爱 你.
With ATTNMT_SCREENSHOTS set, a picture whose models are not given is skipped, so that no tiny model's picture
lands in the docs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest
import yaml

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

from attnmt.decode.translator import load
from attnmt.explore.page import length_examples
from attnmt.serve import create_app
from tests.browser import NEEDS_CHROMIUM, open_page, running_server
from tests.conftest import tiny_config
from tests.explore.pages import show
from tests.explore.test_browser_explorer_reading import chinese_corpus

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

OUT, DEMO, ZH = "ATTNMT_SCREENSHOTS", "ATTNMT_SCREENSHOT_DEMO", "ATTNMT_SCREENSHOT_ZH"
# The Chinese sentences: the classic one, and a longer one (the tiny model's language has no other words)
ZH_PAIRS = {"explore_zh_pair": "我爱你", "explore_zh_pair_long": "我们昨天在公园里看见了那只猫。"}
TINY_ZH_PAIRS = {"explore_zh_pair": "我爱你", "explore_zh_pair_long": "我们昨天看见那只猫"}
# the demo's Transformer: small, on the rnnsearch model's data (about a minute on 2 CPU cores)
TRANSFORMER = {"type": "transformer", "enc_layers": 2, "dec_layers": 2, "dropout": 0.1, "d_model": 64, "n_heads": 4,
               "ff_size": 256}
TRANSFORMER_TRAIN = {"max_steps": 1200, "lr": 0.002, "warmup_steps": 100}


def given(name: str) -> Path | None:
    """The folder an environment variable names; a run that writes the docs' pictures needs it."""
    value = os.environ.get(name)
    if value:
        return Path(value)
    if os.environ.get(OUT):
        pytest.skip(f"{OUT} writes the docs' pictures: set {name} too (the tiny models translate nothing meaningful)")
    return None


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    folder = Path(os.environ[OUT]) if os.environ.get(OUT) else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def demo_transformer(rnnsearch: Path, directory: Path) -> Path:
    """A Transformer trained on the data of ``rnnsearch`` into ``directory``, unless one is there already."""
    from attnmt.config.schema import config_from_dict
    from attnmt.train.trainer import train

    if (directory / "checkpoints" / "best.pt").is_file():
        return directory
    raw = yaml.safe_load((rnnsearch / "config.yaml").read_text(encoding="utf-8"))
    raw["name"] = "explorer-transformer"
    raw["model"] = dict(TRANSFORMER)
    raw["train"].update(TRANSFORMER_TRAIN)
    train(config_from_dict(raw, base_dir=rnnsearch), directory, quiet=True)
    return directory


@pytest.fixture(scope="module")
def models(request) -> dict[str, Path]:
    demo = given(DEMO)
    if demo is None:
        return {name: request.getfixturevalue(f"tiny_{kind}")
                for name, kind in (("rnnsearch", "model"), ("seq2seq", "seq2seq"), ("transformer", "transformer"))}
    rnnsearch = demo / "models" / "rnnsearch" / "seed1"
    return {"rnnsearch": rnnsearch, "seq2seq": demo / "models" / "seq2seq" / "seed1",
            "transformer": demo_transformer(rnnsearch, demo / "models" / "transformer")}


@pytest.fixture(scope="module")
def base_url(models) -> Iterator[str]:
    with running_server(create_app(models)) as url:
        yield url


@dataclass
class Sentences:
    """Held-out sentences of about 10 words (step by step, what-if), 16 (side by side: the longest whose heatmap
    fits beside the other model's) and 20 (the beam tree: its first ten steps shown, the rest scrolled)."""
    medium: str
    compared: str
    long: str


@pytest.fixture(scope="module")
def sentences(models) -> Sentences:
    pool = length_examples(load(models["rnnsearch"]), n=400)

    def pick(words: int) -> str:
        return min(pool, key=lambda s: (abs(len(s.split()) - words), s))

    return Sentences(pick(10), pick(16), pick(20))


def check_picture(path: Path) -> None:
    """A picture of something: large, many colours, ink on the page."""
    from PIL import Image

    image = Image.open(path).convert("RGB")
    assert image.width >= 600 and image.height >= 300, image.size
    pixels = np.asarray(image, dtype=np.float64)
    gray = pixels.mean(axis=2)
    assert (gray < 128).mean() > 0.005, f"{path.name}: almost no ink"
    assert len(np.unique(pixels.reshape(-1, 3)[::7], axis=0)) > 30, f"{path.name}: too few colours"


def shoot(page, out: Path, name: str, view: str, drawn: list[str]) -> Path:
    """The explorer's picture as ``name``.png, after checking that ``view``'s tab is chosen and its panel shows
    each of the ``drawn`` selectors."""
    assert page.get_attribute(f'.tabs [data-view="{view}"]', "aria-selected") == "true"
    assert page.is_visible(f"#view-{view}")
    for selector in drawn:
        assert page.locator(f"#view-{view} {selector}").count() > 0, f"{name}: nothing at {selector}"
        assert page.locator(f"#view-{view} {selector}").first.is_visible(), f"{name}: {selector} is hidden"
    path = out / f"{name}.png"
    page.locator("#explorer").screenshot(path=str(path))
    check_picture(path)
    return path


def step_to(page, i: int) -> None:
    page.focus("#step")
    for _ in range(i):
        page.keyboard.press("ArrowRight")


def middle(page) -> int:
    return int(page.get_attribute("#step", "max")) // 2


def tab(page, view: str) -> None:
    page.click(f'.tabs [data-view="{view}"]')


# ------------------------------------------------------------------------------------ the views


def steps(page, s: Sentences, out: Path) -> None:
    show(page, s.medium, "rnnsearch", beam=5)
    step_to(page, middle(page))
    shoot(page, out, "explore_steps", "steps", ["#step-bars .bar", "#step-topk li", "#step-heatmap .mx-cell.lit"])


def whatif(page, s: Sentences, out: Path) -> None:
    show(page, s.medium, "rnnsearch", beam=5)
    tab(page, "whatif")
    page.click(f'#wi-target .tok[data-step="{middle(page)}"]')
    page.click("#wi-choices button:not([disabled])")
    page.wait_for_selector("#wi-result:not([hidden])")
    shoot(page, out, "explore_whatif", "whatif", ["#wi-before .mx-cell", "#wi-after .mx-cell"])


def pin(page, s: Sentences, out: Path) -> None:
    show(page, s.medium, "rnnsearch", beam=5)
    tab(page, "pin")
    page.click(f'#pin-target .tok[data-step="{middle(page)}"]')
    page.click('#pin-source button[data-col="0"]')
    page.wait_for_selector("#pin-result:not([hidden])")
    shoot(page, out, "explore_pin", "pin", ["#pin-before .mx-cell", "#pin-after .mx-cell.lit", "#pin-said"])


def pin_transformer(page, s: Sentences, out: Path) -> None:
    show(page, s.medium, "transformer", beam=5)
    tab(page, "pin")
    page.click(f'#pin-target .tok[data-step="{middle(page)}"]')
    page.click(f'#pin-source button[data-col="{page.locator("#pin-source button").count() // 2}"]')  # the middle word
    page.wait_for_selector("#pin-result:not([hidden])")
    shoot(page, out, "explore_pin_transformer", "pin", ["#pin-heads", "#pin-after .mx-cell.lit", "#pin-said"])


def neighbours(page, s: Sentences, out: Path, name: str = "explore_neighbours") -> None:
    show(page, s.medium, "rnnsearch", beam=5)
    tab(page, "neighbours")
    page.wait_for_selector("#nb-list li")
    page.click(f'#nb-target .tok[data-step="{middle(page)}"]')
    shoot(page, out, name, "neighbours", ["#nb-list .nb-word", "#nb-target .tok.focus"])


def neighbours_source(page, s: Sentences, out: Path) -> None:
    show(page, s.medium, "rnnsearch", beam=5)
    tab(page, "neighbours")
    page.wait_for_selector("#nb-list li")
    words = page.locator("#nb-source .tok").count()
    page.click(f"#nb-source .tok >> nth={words // 2}")
    shoot(page, out, "explore_neighbours_source", "neighbours", ["#nb-list .nb-word", "#nb-source .tok.focus"])


def compare(page, s: Sentences, out: Path) -> None:
    show(page, s.compared, "rnnsearch", beam=5)
    tab(page, "compare")
    page.wait_for_function("text => document.getElementById('cmp-source').textContent === text", arg=s.compared)
    for column in ("#cmp-col-a", "#cmp-col-b"):
        page.wait_for_selector(f"{column} .cmp-text")
    shoot(page, out, "explore_compare", "compare", ["#cmp-col-a .cmp-text", "#cmp-col-b .mx-cell"])


def beam(page, s: Sentences, out: Path) -> None:
    show(page, s.long, "rnnsearch", beam=5)
    tab(page, "beam")
    page.wait_for_selector("#beam-svg g.node")
    shoot(page, out, "explore_beam", "beam", ["#beam-svg g.node"])


def heads(page, s: Sentences, out: Path) -> None:
    show(page, s.medium, "transformer", beam=5)
    tab(page, "heads")
    page.click('#hv-grid .head-card[data-head="0"]')
    shoot(page, out, "explore_heads", "heads", ["#hv-heatmap .mx-cell", "#hv-grid .head-card"])


def layers(page, s: Sentences, out: Path, name: str = "explore_layers", kind: str = "encoder",
           at: tuple[int, int] = (1, 0)) -> None:
    show(page, s.medium, "transformer", beam=5)
    tab(page, "layers")
    page.select_option("#mv-kind", value=kind)
    last = int(page.locator("#mv-grid .mv-thumb").last.get_attribute("data-layer"))
    page.click(f'#mv-grid .mv-thumb[data-layer="{min(at[0], last)}"][data-head="{at[1]}"]')
    shoot(page, out, name, "layers", ["#mv-grid .mv-thumb", "#mv-lines svg", "#mv-heatmap .mx-cell"])


def steps_zh(page, s: Sentences, out: Path) -> None:
    show(page, s.medium, "rnnsearch", beam=5)
    step_to(page, middle(page))
    shoot(page, out, "explore_zh", "steps", ["#step-bars .bar", "#step-heatmap .mx-cell.lit"])


def neighbours_zh(page, s: Sentences, out: Path) -> None:
    neighbours(page, s, out, "explore_neighbours_zh")


def layers_zh(page, s: Sentences, out: Path) -> None:
    layers(page, s, out, "explore_layers_zh", kind="decoder", at=(1, 1))


VIEWS: list[tuple[str, Callable]] = [
    ("en-US", steps), ("en-US", beam), ("en-US", whatif), ("en-US", pin), ("en-US", pin_transformer),
    ("en-US", neighbours), ("en-US", neighbours_source), ("en-US", compare), ("en-US", heads), ("en-US", layers),
    ("zh-CN", steps_zh), ("zh-CN", neighbours_zh), ("zh-CN", layers_zh)]


@pytest.mark.parametrize("locale, view", VIEWS, ids=[view.__name__ for _, view in VIEWS])
def test_each_view_makes_its_picture(browser, base_url, sentences, out, locale, view):
    with open_page(browser, base_url + "/", locale=locale) as page:
        page.wait_for_selector("#explorer[data-source]")
        view(page, sentences, out)


# ------------------------------------------------------------------------------------ the Chinese pairs


@pytest.fixture(scope="module")
def chinese(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The Chinese-English model and the pairs it is shown with."""
    folder = given(ZH)
    if folder is not None:
        return folder, ZH_PAIRS
    from attnmt.train.trainer import train

    root = tmp_path_factory.mktemp("zh-pairs")
    config = tiny_config(chinese_corpus(root / "corpus"), max_steps=120, valid_every=120, valid_bleu_sample=0)
    config = replace(config, data=replace(config.data, tokenizer="unigram", vocab_size=80, src_lang="zh",
                                          tgt_lang="en"))
    train(config, root / "model", quiet=True)
    return root / "model", TINY_ZH_PAIRS


@pytest.fixture(scope="module")
def chinese_url(chinese) -> Iterator[str]:
    with running_server(create_app({"zh-en": chinese[0]})) as url:
        yield url


def upright_labels(page, selector: str) -> list[tuple[str, bool]]:
    return page.eval_on_selector_all(selector, "els => els.map(e => [e.textContent, e.classList.contains('upright')"
                                     " && getComputedStyle(e).textOrientation === 'upright'])")


@pytest.mark.parametrize("name", list(ZH_PAIRS))
def test_a_chinese_pair_explored_end_to_end_on_the_chinese_page(browser, chinese, chinese_url, out, name):
    """The sentence typed, translated, and read step by step on the Chinese page: one upright label per word
    (我 / 爱 / 你) over the heatmap's columns and the attention bars, the step in the middle lit."""
    folder, pairs = chinese
    sentence = pairs[name]
    with open_page(browser, chinese_url + "/", locale="zh-CN") as page:
        page.wait_for_selector("#explorer[data-source]")
        show(page, sentence, "zh-en", beam=5)
        words = page.evaluate("() => Array.from(document.querySelectorAll('#step-heatmap .mx-col'))"
                              ".map(e => e.textContent)")
        assert "".join(words) == sentence.replace(" ", "")
        if name == "explore_zh_pair":
            assert words == ["我", "爱", "你"]
        for label, upright in upright_labels(page, "#step-heatmap .mx-col") + upright_labels(page, "#step-bars .label"):
            if any("\u4e00" <= ch <= "\u9fff" for ch in label):
                assert upright, label
        step_to(page, middle(page))
        assert page.inner_text('.tabs [data-view="steps"]') == "逐步解码"
        shoot(page, out, name, "steps", ["#step-bars .bar", "#step-heatmap .mx-cell.lit"])


def test_a_run_for_the_docs_never_takes_the_tiny_models(monkeypatch, tmp_path):
    monkeypatch.setenv(OUT, str(tmp_path))
    monkeypatch.delenv(DEMO, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"set {DEMO} too"):
        given(DEMO)
    monkeypatch.setenv(DEMO, "/tmp/demo")
    assert given(DEMO) == Path("/tmp/demo")
    monkeypatch.delenv(OUT)
    monkeypatch.delenv(DEMO)
    assert given(DEMO) is None
