"""Checkpoints a user can ship: best.pt holds the weights and what translating needs; last.pt the full
training state that --resume needs. (Resuming exactly from last.pt: tests/train/test_end_to_end.py and
tests/train/test_reliability.py.)"""

from __future__ import annotations

import shutil

import torch

import attnmt
from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint
from attnmt.train.trainer import train
from tests.conftest import tiny_config


def test_best_holds_the_weights_without_the_optimizer_and_is_smaller_than_last(tiny_model):
    best, last = tiny_model / "checkpoints" / "best.pt", tiny_model / "checkpoints" / "last.pt"
    shipped = torch.load(best, map_location="cpu", weights_only=True)
    full = torch.load(last, map_location="cpu", weights_only=True)
    assert "optimizer" not in shipped and "rng" not in shipped and "scheduler" not in shipped
    assert {"optimizer", "rng", "scheduler"} <= set(full)
    assert set(shipped["model"]) == set(full["model"]) and shipped["vocab_sizes"] == full["vocab_sizes"]
    # Adam keeps two moments per weight: the full state is about three times the weights
    weights = sum(t.numel() * t.element_size() for t in full["model"].values())
    assert best.stat().st_size < 1.5 * weights < 2.5 * weights < last.stat().st_size
    assert attnmt.load(tiny_model, checkpoint="best").translate("a b c").text is not None
    assert attnmt.load(tiny_model, checkpoint="last").translate("a b c").text is not None


def test_ema_export_holds_no_training_state(tiny_corpus, tmp_path):
    model_dir = tmp_path / "m"
    train(tiny_config(tiny_corpus, max_steps=10, valid_every=10, valid_bleu_sample=0, ema_decay=0.9), model_dir,
          quiet=True)
    ema = torch.load(model_dir / "checkpoints" / "ema.pt", map_location="cpu", weights_only=True)
    assert "optimizer" not in ema and "ema" not in ema and "model" in ema
    assert "ema" not in load_checkpoint(model_dir / "checkpoints" / "best.pt")
    assert "ema" in load_checkpoint(model_dir / "checkpoints" / "last.pt")  # resuming keeps the average going
    assert isinstance(attnmt.load(model_dir, checkpoint="ema").translate("a b").text, str)


def test_a_best_checkpoint_with_the_full_training_state_still_loads(tiny_model, tmp_path):
    """best.pt as attnmt wrote it before shipping checkpoints: the whole of last.pt under that name."""
    old = tmp_path / "old"
    shutil.copytree(tiny_model, old)
    full = load_checkpoint(old / "checkpoints" / "last.pt")
    assert "optimizer" in full
    save_checkpoint({k: v for k, v in full.items() if k not in ("format_version", "checksum")},
                    old / "checkpoints" / "best.pt")
    sentences = ["a b c", "d e f g"]
    expected = [t.text for t in attnmt.load(tiny_model, checkpoint="last").translate(sentences, beam=2)]
    assert [t.text for t in attnmt.load(old).translate(sentences, beam=2)] == expected
