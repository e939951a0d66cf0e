"""Gradient clipping changes the update: one SGD step from trained weights moves them by exactly
lr x train.clip_grad_norm when the gradient is longer than that, and by more without the clip.

SGD without momentum or weight decay updates w <- w - lr * g, so the step's length is lr * |g|, and with
clipping lr * min(|g|, c): the expected lengths come from that formula, not from the trainer. The start
is the trained tiny model (`train --init-from`), whose gradients are small but far above the clip here.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from attnmt.decode.translator import model_config
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.train.trainer import train

LR = 0.5
CLIP = 1e-3


def one_sgd_step(tiny_model: Path, out: Path, clip: float) -> float:
    """The length of the update of one SGD step (lr LR, clip_grad_norm ``clip``) from the tiny model's weights."""
    config = model_config(tiny_model)
    config.train = dataclasses.replace(config.train, optimizer="sgd", lr=LR, momentum=0.0, weight_decay=0.0,
                                       clip_grad_norm=clip, max_steps=1, valid_every=1, valid_bleu_sample=0,
                                       accum_steps=1, ema_decay=None, scheduler="none", label_smoothing=0.0)
    train(config, out, quiet=True, init_from=tiny_model)
    before = load_checkpoint(tiny_model / "checkpoints" / "best.pt")["model"]
    after = load_checkpoint(out / "checkpoints" / "last.pt")["model"]
    assert before.keys() == after.keys()
    return math.sqrt(sum(float(((after[k].double() - before[k].double()) ** 2).sum()) for k in before))


def test_clipping_limits_the_update_to_lr_times_the_norm(tiny_model, tmp_path):
    free = one_sgd_step(tiny_model, tmp_path / "free", clip=0.0)  # 0: no clipping
    clipped = one_sgd_step(tiny_model, tmp_path / "clipped", clip=CLIP)
    assert free > 10 * LR * CLIP  # the gradient is longer than the clip: clipping has something to do
    assert clipped == pytest.approx(LR * CLIP, rel=1e-3)
