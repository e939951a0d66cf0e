"""Learning-rate schedules, through make_scheduler."""

import math

import pytest
import torch

from attnmt.config.schema import Config, TrainConfig
from attnmt.train.schedulers import make_scheduler


def lrs(scheduler_name, steps, seconds_per_step=0.0, **train):
    """The learning rate before each of ``steps`` updates and after the last, on a clock that advances
    ``seconds_per_step`` with every update."""
    config = Config(train=TrainConfig(scheduler=scheduler_name, max_steps=train.pop("max_steps", steps), **train))
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=config.train.lr)
    clock = {"s": 0.0}
    scheduler = make_scheduler(optimizer, config, lambda: clock["s"])
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        clock["s"] += seconds_per_step
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


def test_budget_falls_in_a_straight_line_to_min_lr_at_max_steps():
    seen = lrs("budget", 100, lr=1e-3, min_lr=1e-5, warmup_steps=0)
    assert seen[0] == pytest.approx(1e-3)
    assert seen[25] == pytest.approx(1e-5 + (1e-3 - 1e-5) * 0.75, rel=1e-6)
    assert seen[100] == pytest.approx(1e-5)
    assert all(a > b for a, b in zip(seen, seen[1:]))


def test_budget_follows_the_wall_time_budget_when_it_ends_first():
    # 10 s of budget at 0.5 s per update: the time runs out at update 20, long before max_steps.
    seen = lrs("budget", 30, seconds_per_step=0.5, max_steps=1000, max_time_s=10.0, lr=1e-3, min_lr=0.0,
               warmup_steps=0)
    assert seen[10] == pytest.approx(1e-3 * 0.5)
    assert seen[20] == pytest.approx(0.0) and seen[30] == pytest.approx(0.0)


def test_budget_warms_up_linearly_then_decays():
    seen = lrs("budget", 100, lr=1e-3, min_lr=0.0, warmup_steps=10)
    assert seen[0] == pytest.approx(1e-4) and seen[9] == pytest.approx(1e-3)
    assert seen[50] == pytest.approx(1e-3 * 0.5)


def test_training_with_the_budget_schedule_ends_at_min_lr(tiny_corpus, tmp_path):
    from attnmt.train.trainer import train
    from tests.conftest import tiny_config

    config = tiny_config(tiny_corpus, max_steps=30, valid_every=15, valid_bleu_sample=0, scheduler="budget",
                         lr=0.004, min_lr=0.0004, warmup_steps=0)
    result = train(config, tmp_path / "model", quiet=True)
    assert [round(h["lr"], 7) for h in result.history] == [0.0022, 0.0004]  # halfway, then the floor
