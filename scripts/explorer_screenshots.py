"""Take the screenshots of the explorer's views in the docs (docs/img/explore_*.png) from trained models.

    attnmt demo --quick --out /tmp/demo          # the seq2seq and rnnsearch models, 1-2 minutes
    python scripts/explorer_screenshots.py --seq2seq /tmp/demo/models/seq2seq/seed1 \\
        --rnnsearch /tmp/demo/models/rnnsearch/seed1 --transformer /tmp/demo/models/transformer

It starts `attnmt serve` with the models on a free loopback port and drives Debian's chromium (headless,
Playwright for Python) as a user would: step by step at a middle step of a 10-word sentence, the beam tree of
a beam of 5 on a sentence of about 20 words, a what-if choice, the attention of a middle step pinned to the first
source word, that step's nearest held-out decoder states (in English and Chinese), the two models side by side
on a 16-word sentence, the heads and all the attention of a Transformer
(with --transformer DIR: trained there on the same data when DIR holds no model, about a minute; without it
explore_heads.png and explore_layers*.png are left as they are) and the step view in Chinese. The sentences are
the rnnsearch model's held-out sentences.

A maintainer's tool, not part of the package: tests/explore/test_browser_explorer.py checks the views themselves
(its screenshots stay in its tmp folder).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml
from playwright.sync_api import sync_playwright

from attnmt.config.schema import config_from_dict
from attnmt.decode.translator import load
from attnmt.explore.page import length_examples
from attnmt.train.trainer import train

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
WIDTH, HEIGHT = 1100, 1000
# the heads view's model: a small Transformer on the rnnsearch model's data (about a minute on 2 CPU cores)
TRANSFORMER = {"type": "transformer", "enc_layers": 2, "dec_layers": 2, "dropout": 0.1, "d_model": 64, "n_heads": 4,
               "ff_size": 256}
TRANSFORMER_TRAIN = {"max_steps": 1200, "lr": 0.002, "warmup_steps": 100}


def train_transformer(rnnsearch: Path, directory: Path) -> Path:
    """A Transformer trained on the data of ``rnnsearch`` into ``directory``, unless one is there already."""
    if (directory / "checkpoints" / "best.pt").is_file():
        return directory
    raw = yaml.safe_load((rnnsearch / "config.yaml").read_text(encoding="utf-8"))
    raw["name"] = "explorer-transformer"
    raw["model"] = dict(TRANSFORMER)
    raw["train"].update(TRANSFORMER_TRAIN)
    print(f"training a Transformer into {directory} (about a minute)")
    train(config_from_dict(raw, base_dir=rnnsearch), directory, quiet=True)
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(models: dict[str, Path], port: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "attnmt", "serve", "--port", str(port), "--log-level", "warning"]
    for name, path in models.items():
        command += ["--model", f"{name}={path}"]
    server = subprocess.Popen(command)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"attnmt serve stopped (exit code {server.returncode})")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/models", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.terminate()
    raise SystemExit("attnmt serve did not answer within 120 s")


def pick(pool: list[str], words: int) -> str:
    """The held-out sentence whose length is nearest ``words`` words."""
    return min(pool, key=lambda s: (abs(len(s.split()) - words), s))


class Page:
    """One browser page on the server, with the steps a user takes."""

    def __init__(self, browser, url: str, locale: str = "en-US"):
        self.context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale=locale)
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready=true]")
        self.page.wait_for_selector("#explorer[data-source]")

    def show(self, text: str, model: str, beam: int) -> None:
        page = self.page
        page.select_option("#model", value=model)
        page.fill("#beam", str(beam))
        page.fill("#source", text)
        page.press("#source", "Enter")
        page.wait_for_function("([text, model]) => { const e = document.getElementById('explorer');"
                               " return e.dataset.source === text && e.dataset.model === model; }", arg=[text, model])

    def step_to(self, i: int) -> None:
        self.page.focus("#step")
        for _ in range(i):
            self.page.keyboard.press("ArrowRight")

    def middle(self) -> int:
        return int(self.page.get_attribute("#step", "max")) // 2

    def tab(self, view: str) -> None:
        self.page.click(f'.tabs [data-view="{view}"]')

    def shoot(self, out: Path, name: str) -> None:
        path = out / f"{name}.png"
        self.page.locator("#explorer").screenshot(path=str(path))
        print(f"wrote {path}")

    def close(self) -> None:
        self.context.close()


def shoot_views(browser, url: str, pool: list[str], out: Path, transformer: bool) -> None:
    # 10 words: step by step and what-if; 16: the longest whose heatmap fits beside the other model's
    # translation; 20: the beam tree (the page shows its first ten steps and scrolls sideways)
    medium, compared, long_ = pick(pool, 10), pick(pool, 16), pick(pool, 20)
    page = Page(browser, url)
    page.show(medium, "rnnsearch", beam=5)
    page.step_to(page.middle())
    page.shoot(out, "explore_steps")

    page.tab("whatif")
    at = page.middle()
    page.page.click(f'#wi-target .tok[data-step="{at}"]')
    page.page.click("#wi-choices button:not([disabled])")
    page.page.wait_for_selector("#wi-result:not([hidden])")
    page.shoot(out, "explore_whatif")

    page.tab("pin")
    page.page.click(f'#pin-target .tok[data-step="{at}"]')
    page.page.click('#pin-source button[data-col="0"]')
    page.page.wait_for_selector("#pin-result:not([hidden])")
    page.shoot(out, "explore_pin")

    page.tab("neighbours")
    page.page.wait_for_selector("#nb-list li")
    page.page.click(f'#nb-target .tok[data-step="{at}"]')
    page.shoot(out, "explore_neighbours")

    page.show(compared, "rnnsearch", beam=5)
    page.tab("compare")
    page.page.wait_for_function("text => document.getElementById('cmp-source').textContent === text", arg=compared)
    for column in ("#cmp-col-a", "#cmp-col-b"):
        page.page.wait_for_selector(f"{column} .cmp-text")
    page.shoot(out, "explore_compare")

    page.show(long_, "rnnsearch", beam=5)
    page.tab("beam")
    page.page.wait_for_selector("#beam-svg g.node")
    page.shoot(out, "explore_beam")
    page.close()

    if transformer:
        shoot_transformer(browser, url, medium, out)
    shoot_chinese(browser, url, medium, out)


def shoot_transformer(browser, url: str, medium: str, out: Path) -> None:
    """The heads and all the attention of the Transformer (English), and all of it in Chinese."""
    page = Page(browser, url)
    page.show(medium, "transformer", beam=5)
    page.tab("heads")
    page.page.click('#hv-grid .head-card[data-head="0"]')
    page.shoot(out, "explore_heads")
    page.tab("layers")
    page.page.select_option("#mv-kind", value="encoder")
    page.page.click('#mv-grid .mv-thumb[data-layer="1"][data-head="0"]')
    page.shoot(out, "explore_layers")
    page.close()
    page = Page(browser, url, locale="zh-CN")
    page.show(medium, "transformer", beam=5)
    page.tab("layers")
    page.page.select_option("#mv-kind", value="decoder")
    page.page.click('#mv-grid .mv-thumb[data-layer="1"][data-head="1"]')
    page.shoot(out, "explore_layers_zh")
    page.close()


def shoot_chinese(browser, url: str, medium: str, out: Path) -> None:
    """The neighbours and the step view of the RNNsearch model on the Chinese page."""
    page = Page(browser, url, locale="zh-CN")
    page.show(medium, "rnnsearch", beam=5)
    page.tab("neighbours")
    page.page.wait_for_selector("#nb-list li")
    page.page.click(f'#nb-target .tok[data-step="{page.middle()}"]')
    page.shoot(out, "explore_neighbours_zh")
    page.tab("steps")
    page.step_to(page.middle())
    page.shoot(out, "explore_zh")
    page.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq2seq", type=Path, required=True, help="a trained seq2seq model folder")
    parser.add_argument("--rnnsearch", type=Path, required=True, help="a trained rnnsearch model folder "
                        "(of the same data; its held-out sentences are shown)")
    parser.add_argument("--transformer", type=Path, help="a Transformer model folder for the heads and all-attention "
                        "views; trained there on the rnnsearch model's data when it holds none (without "
                        "--transformer, explore_heads.png and explore_layers*.png are not written)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the PNGs go (default: docs/img)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium fonts-noto-cjk")
    models = {"rnnsearch": args.rnnsearch, "seq2seq": args.seq2seq}
    if args.transformer:
        models["transformer"] = train_transformer(args.rnnsearch, args.transformer)
    pool = length_examples(load(args.rnnsearch), n=400)
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = start_server(models, port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                shoot_views(browser, f"http://127.0.0.1:{port}/", pool, args.out, bool(args.transformer))
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
