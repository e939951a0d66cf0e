"""Learning-rate schedules, through make_scheduler."""

import math

import pytest
import torch

from attnmt.config import Config, TrainConfig
from attnmt.schedulers import make_scheduler


def lrs(scheduler_name, steps, **train):
    config = Config(train=TrainConfig(scheduler=scheduler_name, max_steps=steps, **train))
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=config.train.lr)
    scheduler = make_scheduler(optimizer, config)
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    seen.append(optimizer.param_groups[0]["lr"])
    return seen


def test_cosine_without_warmup_falls_from_lr_to_min_lr():
    seen = lrs("cosine", 100, lr=1e-3, min_lr=1e-5, warmup_steps=0)
    assert seen[0] == pytest.approx(1e-3)
    assert seen[50] == pytest.approx(1e-5 + (1e-3 - 1e-5) * 0.5, rel=1e-6)
    assert seen[100] == pytest.approx(1e-5)
    assert all(a >= b for a, b in zip(seen, seen[1:]))


def test_cosine_warms_up_linearly():
    seen = lrs("cosine", 100, lr=1e-3, min_lr=0.0, warmup_steps=10)
    assert seen[0] == pytest.approx(1e-4) and seen[9] == pytest.approx(1e-3)
    assert seen[55] == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 0.5)))


def test_noam_peaks_at_lr_after_warmup():
    seen = lrs("noam", 400, lr=2e-3, warmup_steps=100)
    assert max(seen) == pytest.approx(2e-3) and seen.index(max(seen)) == 100
    assert seen[400] == pytest.approx(2e-3 * math.sqrt(100 / 400))


def test_an_unknown_scheduler_names_the_closest_one():
    from attnmt.errors import UserError

    with pytest.raises(UserError, match=r"train.scheduler='cosin' is unknown; did you mean 'cosine'\?"):
        TrainConfig(scheduler="cosin")
