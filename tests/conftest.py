"""Shared fixtures: a tiny synthetic corpus and a tiny trained model, made once per test session."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.ci_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 (CI=true: skips fail)

if TYPE_CHECKING:
    from attnmt.config.schema import Config

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_configure(config) -> None:
    """A test process ends as the `attnmt` command does, without the last walk over the objects torch left
    (about a second per worker)."""
    from attnmt.runtime.process import ends_without_final_collection

    ends_without_final_collection()


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> None:
    """Tiny models are fastest on one thread, and a second thread only competes with other processes. A fixture
    rather than a line at import, so that pytest-xdist's controller, which runs no test, never imports torch."""
    import torch

    torch.set_num_threads(1)


def tiny_config(data_dir: Path, model_type: str = "rnnsearch", **train) -> Config:
    """A model small enough to train for a few seconds on two cores."""
    from attnmt.config.schema import Config, DataConfig, DecodeConfig, TrainConfig
    from attnmt.models import model_config

    return Config(
        name=f"tiny-{model_type}",
        data=DataConfig(train_src=str(data_dir / "train.src"), train_tgt=str(data_dir / "train.tgt"),
                        valid_src=str(data_dir / "valid.src"), valid_tgt=str(data_dir / "valid.tgt"),
                        tokenizer="word", max_len=30),
        model=model_config(model_type, emb_size=32, hidden_size=48, dropout=0.1, reverse_source=True,
                               d_model=32, n_heads=2, ff_size=64, enc_layers=1, dec_layers=1),
        train=TrainConfig(**{"seed": 3, "batch_tokens": 400, "lr": 0.005, "max_steps": 120, "valid_every": 40,
                             "valid_bleu_sample": 20, "log_every": 10, "progress": False, "tensorboard": False,
                             "scheduler": "none", "threads": 1, **train}),
        decode=DecodeConfig(beam=3),
    )


def made_once(tmp_path_factory, name: str, make: Callable[[Path], object]) -> Path:
    """The folder `name`, made by `make(folder)` once per test run. Under pytest-xdist each worker is a process with
    session fixtures of its own: the first worker to ask makes the folder in the run's temporary folder, which all
    workers share, and the others wait for it (a lock file) and read it."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp(name)
        make(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent
    folder, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when a worker dies
        if not done.exists():
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    from attnmt.data.synthetic_corpus import make_splits, write_corpus

    def make(directory: Path) -> None:
        directory.mkdir(exist_ok=True)
        for name, pairs in make_splits(600, 40, 40, min_len=3, max_len=10, seed=5).items():
            write_corpus(pairs, directory, name)

    return made_once(tmp_path_factory, "corpus", make)


@pytest.fixture(scope="session")
def tiny_model(tiny_corpus, tmp_path_factory) -> Path:
    from attnmt.train.trainer import train

    models = made_once(tmp_path_factory, "rnnsearch", lambda d: train(tiny_config(tiny_corpus), d / "rnnsearch",
                                                                       quiet=True))
    return models / "rnnsearch"


@pytest.fixture(scope="session")
def tiny_transformer(tiny_corpus, tmp_path_factory) -> Path:
    """A 1-layer, 2-head Transformer trained for 60 steps (about two seconds), for the tests that need one model with
    heads and self-attention."""
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, "transformer", max_steps=60, valid_bleu_sample=0)
    models = made_once(tmp_path_factory, "transformer", lambda d: train(config, d / "transformer", quiet=True))
    return models / "transformer"


@pytest.fixture(scope="session")
def tiny_seq2seq(tiny_corpus, tmp_path_factory) -> Path:
    """A tiny seq2seq model (no attention), trained 40 updates: the browser tests' model without attention."""
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, "seq2seq", max_steps=40, valid_every=40, valid_bleu_sample=0)
    return made_once(tmp_path_factory, "seq2seq", lambda d: train(config, d / "seq2seq", quiet=True)) / "seq2seq"


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright, one per test session; tests take its page for their locale
    (tests/browser.py open_page)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    from tests.browser import CHROMIUM, CHROMIUM_ARGS, Browser

    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield Browser(chromium)
        chromium.close()
