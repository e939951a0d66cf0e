"""Learning-rate schedulers, one registry (`train.scheduler: NAME`).

A scheduler is a function ``(optimizer, train_config, budget_used) -> torch scheduler or None``,
registered with ``@SCHEDULERS.register("name")``. ``budget_used(step)`` is the share of the training
budget spent after ``step`` updates: the larger of ``step / train.max_steps`` and the elapsed training time
over ``train.max_time_s`` (when set), from 0 to 1. The training loop steps the scheduler after every update,
except a ``ReduceLROnPlateau``, which it steps with each validation loss. A scheduler that needs a warm-up
says so with an attribute, ``min_warmup_steps`` (the config refuses a smaller ``train.warmup_steps``).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from attnmt.config.registry import Registry

SCHEDULERS = Registry("learning-rate scheduler", "train.scheduler", builtins="attnmt.train.schedulers")


@SCHEDULERS.register("plateau")
def plateau(optimizer: torch.optim.Optimizer, t, budget_used=None):
    """Multiply the learning rate by train.lr_decay after train.lr_patience validations without improvement."""
    return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=t.lr_decay, patience=t.lr_patience,
                                                      min_lr=t.min_lr)


@SCHEDULERS.register("noam")
def noam(optimizer: torch.optim.Optimizer, t, budget_used=None):
    """Vaswani et al. (2017), eq. 3, scaled so that the peak learning rate (at train.warmup_steps) is train.lr."""
    warmup = t.warmup_steps

    def factor(step: int) -> float:
        step = max(step, 1)
        return min(step ** -0.5, step * warmup ** -1.5) * warmup ** 0.5

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


noam.min_warmup_steps = 1  # train.warmup_steps below this is refused when the config is read


@SCHEDULERS.register("cosine")
def cosine(optimizer: torch.optim.Optimizer, t, budget_used=None):
    """Linear warm-up, then half a cosine from train.lr down to train.min_lr at train.max_steps."""
    warmup, floor = t.warmup_steps, min(t.min_lr / t.lr, 1.0)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min((step - warmup) / max(t.max_steps - warmup, 1), 1.0)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@SCHEDULERS.register("budget")
def budget(optimizer: torch.optim.Optimizer, t, budget_used: Callable[[int], float]):
    """Linear warm-up over train.warmup_steps, then a straight line from train.lr down to train.min_lr as the
    training budget is spent: lr = min_lr + (lr - min_lr) * (1 - budget_used), where budget_used is the larger
    of step / train.max_steps and the elapsed training time / train.max_time_s. The rate reaches its floor
    when whichever limit stops the run is reached, so a run on a wall-time budget anneals fully on any
    machine (the linear schedule of Li, Yumer and Ramanan 2020, "Budgeted training")."""
    warmup, floor = t.warmup_steps, min(t.min_lr / t.lr, 1.0)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return floor + (1 - floor) * max(0.0, 1.0 - budget_used(step))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@SCHEDULERS.register("none")
def constant(optimizer: torch.optim.Optimizer, t, budget_used=None):
    """train.lr throughout."""
    return None


def make_scheduler(optimizer: torch.optim.Optimizer, config, elapsed_s: Callable[[], float] = lambda: 0.0):
    """The scheduler `config.train.scheduler` names, for `optimizer`; ``elapsed_s()`` is the training time
    spent so far (the trainer's clock), read by schedules that follow a wall-time budget."""
    t = config.train

    def budget_used(step: int) -> float:
        used = step / t.max_steps
        if t.max_time_s:
            used = max(used, elapsed_s() / t.max_time_s)
        return min(used, 1.0)

    return SCHEDULERS.lookup(t.scheduler)(optimizer, t, budget_used)


def steps_per_update(scheduler) -> bool:
    """Whether the scheduler is stepped after every update (all but ReduceLROnPlateau, stepped per validation)."""
    return scheduler is not None and not isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
