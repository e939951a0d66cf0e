"""The teacher-forced pass: a model reads a given translation instead of searching for one.

Validation losses, a study's perplexity and accuracy by position, word alignments read off the
attention, and the server's per-head attention all run the model on known (source, target)
pairs. They share this pass: the model in eval mode (restored afterwards), length-bucketed
batches of id pairs, and one forward pass per batch giving the logits and the attention.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.config.special import EOS_ID
from attnmt.data.batching import Batch, collate, token_batches
from attnmt.models.protocols import TranslationModel


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """The model in eval mode (no dropout) for the block, then back in the mode it was in."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@dataclass
class Forced:
    """One batch of the pass: which pairs it holds, the batch, and what the model computed."""

    index: list[int]  # positions of the pairs in the caller's lists
    batch: Batch
    logits: Tensor | None  # [B, T, V]: the scores of each next target token; None when not asked for
    attention: Tensor | None  # [B, T, S]; with heads=True, every decoder layer's and head's: [L, H, B, T, S]


def force(model: TranslationModel, batch: Batch, heads: bool = False,
          full_context: bool = False, logits: bool = True) -> tuple[Tensor | None, Tensor | None]:
    """The model's logits and attention under teacher forcing on ``batch`` (its ``tgt_in``).

    ``heads=True`` asks a model with heads (``model.has_heads``) for every layer's and head's
    cross-attention, [L, H, B, T, S], instead of the last layer's head average. ``full_context``
    takes that attention from the pass without the causal mask (``model.has_full_context``).
    ``logits=False`` lets a model with heads skip its output layer (the logits are then None).
    """
    if heads and getattr(model, "has_heads", False):
        extra = {"full_context": True} if full_context else {}
        return model.forward_with_heads(batch.src, batch.src_len, batch.tgt_in, logits=logits, **extra)
    return model(batch.src, batch.src_len, batch.tgt_in)


def forced_batches(model: TranslationModel, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]],
                   device: torch.device, batch_tokens: int = 4000, with_eos: bool = False,
                   heads: bool = False, full_context: bool = False, logits: bool = True,
                   in_order: bool = False) -> Iterator[Forced]:
    """Run the model with teacher forcing over id pairs, in eval mode and without gradients.

    Every source must be non-empty. ``with_eos`` feeds ``<s> y </s>``, one more input than the
    target has, so that the attention has a row after the last word (the shift alignment method).
    ``heads``, ``full_context`` and ``logits`` as in :func:`force`. The pairs run in batches of about
    ``batch_tokens`` grouped by length, or, ``in_order``, as one batch in the order given (for a setting of
    one per row, such as a pin per sentence: :class:`attnmt.decode.pinning.pinned`).
    """
    targets = [list(t) + [EOS_ID] if with_eos else list(t) for t in tgt_ids]
    batches = [list(range(len(targets)))] if in_order and targets else token_batches(
        [len(s) for s in src_ids], [len(t) for t in targets], batch_tokens, shuffle=False, seed=0, epoch=0)
    with eval_mode(model), torch.inference_mode():
        for index in batches:
            batch = collate([(src_ids[k], targets[k]) for k in index], index).to(device)
            scores, attention = force(model, batch, heads, full_context, logits)
            yield Forced(list(index), batch, scores, attention)
