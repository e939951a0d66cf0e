"""Learning-rate schedulers, one registry (`train.scheduler: NAME`).

A scheduler is a function ``(optimizer, train_config) -> torch scheduler or None``, registered
with ``@SCHEDULERS.register("name")``. The training loop steps it after every update, except a
``ReduceLROnPlateau``, which it steps with each validation loss.
"""

from __future__ import annotations

import math

import torch

from attnmt.registry import Registry

SCHEDULERS = Registry("learning-rate scheduler", "train.scheduler", builtins="attnmt.schedulers")


@SCHEDULERS.register("plateau")
def plateau(optimizer: torch.optim.Optimizer, t):
    """Multiply the learning rate by train.lr_decay after train.lr_patience validations without improvement."""
    return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=t.lr_decay, patience=t.lr_patience,
                                                      min_lr=t.min_lr)


@SCHEDULERS.register("noam")
def noam(optimizer: torch.optim.Optimizer, t):
    """Vaswani et al. (2017), eq. 3, scaled so that the peak learning rate (at train.warmup_steps) is train.lr."""
    warmup = t.warmup_steps

    def factor(step: int) -> float:
        step = max(step, 1)
        return min(step ** -0.5, step * warmup ** -1.5) * warmup ** 0.5

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@SCHEDULERS.register("cosine")
def cosine(optimizer: torch.optim.Optimizer, t):
    """Linear warm-up, then half a cosine from train.lr down to train.min_lr at train.max_steps."""
    warmup, floor = t.warmup_steps, min(t.min_lr / t.lr, 1.0)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min((step - warmup) / max(t.max_steps - warmup, 1), 1.0)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@SCHEDULERS.register("none")
def constant(optimizer: torch.optim.Optimizer, t):
    """train.lr throughout."""
    return None


def make_scheduler(optimizer: torch.optim.Optimizer, config):
    """The scheduler `config.train.scheduler` names, for `optimizer`."""
    return SCHEDULERS.lookup(config.train.scheduler)(optimizer, config.train)


def steps_per_update(scheduler) -> bool:
    """Whether the scheduler is stepped after every update (all but ReduceLROnPlateau, stepped per validation)."""
    return scheduler is not None and not isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
