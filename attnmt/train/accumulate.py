"""Gradient accumulation (train.accum_steps): one update from several batches.

OpenNMT-py ``accum_count``, fairseq ``--update-freq``, JoeyNMT ``batch_multiplier``, Marian
``--optimizer-delay``. The inner batches of an update are known before any of them runs, so their
target tokens are counted first and each inner loss is scaled by ``world size / tokens of the whole
update``: the summed gradient is then that of one batch holding all of them (summed loss over its
target tokens), to rounding. Under torchrun the gradients are all-reduced once, with the last inner
batch (``no_sync`` on the others).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.data.batching import Batch
from attnmt.runtime.distributed import World

__all__ = ["Accumulated", "accumulate_gradients"]


@dataclass
class Accumulated:
    """What the inner batches of one update gave (loss sums detached; ``loss`` the last scaled loss)."""

    loss_sum: Tensor  # summed translation loss over every inner batch of this process
    align_sum: Tensor | None  # summed alignment loss (guided alignment), or None
    tokens: int  # target tokens of the whole update, all processes
    loss: Tensor  # the scaled loss of the last inner batch run (the non-finite one when finite is False)
    finite: bool  # False: some process met a NaN / infinite loss; gradients are partial, zero them


def accumulate_gradients(trained: nn.Module, batches: Sequence[Batch],
                         loss_fn: Callable[[Batch], tuple[Tensor, Tensor | None]], world: World,
                         align_weight: float = 0.0, amp: torch.dtype | None = None,
                         device_type: str = "cpu") -> Accumulated:
    """Forward and backward of ``batches`` (this process's inner batches of one update) into ``.grad``.

    ``loss_fn(batch)`` gives the summed translation loss and the summed alignment loss (or None). Every
    process runs as many inner batches and checks each loss together, so that all skip together.
    """
    tokens = world.sum(sum(b.n_tgt_tokens for b in batches))
    loss_sum: Tensor | None = None
    align_sum: Tensor | None = None
    loss = torch.zeros(())
    for j, batch in enumerate(batches):
        last = j == len(batches) - 1
        # DDP all-reduces at every backward unless told not to: only the last inner batch's does
        sync = nullcontext() if last or not world.distributed else trained.no_sync()
        with sync:
            with torch.autocast(device_type, dtype=amp, enabled=amp is not None):
                part, align = loss_fn(batch)
            total = part if align is None else part + align_weight * align
            loss = total * world.size / tokens
            if world.sum(float(torch.isfinite(loss))) < world.size:
                return Accumulated(part.detach(), None, int(tokens), loss, False)
            loss.backward()
        loss_sum = part.detach() if loss_sum is None else loss_sum + part.detach()
        if align is not None:
            align_sum = align.detach() if align_sum is None else align_sum + align.detach()
    assert loss_sum is not None, "an update needs at least one batch"
    return Accumulated(loss_sum, align_sum, int(tokens), loss, True)
