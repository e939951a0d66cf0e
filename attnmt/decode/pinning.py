"""Attention you can edit (Strobelt et al. 2018, Seq2Seq-Vis): the decoder's attention at one step set by hand.

:func:`pinned` overrides the attention distribution alpha_i of an RNN attention model at one decoder step:
alpha_i is shared equally by the chosen source pieces (all of it on one piece, or on the pieces of one word)
and the context vector is c_i = sum_j alpha_ij h_j of that alpha; every other step attends as the model does.
Decoding with it shows what attention does: the word written at that step, and the rest of the translation,
follow the context the decoder was given. The explore record of a pinned decoding
(:func:`attnmt.decode.steps.explore`'s ``pin``) pins the step right after its forced prefix.

The override is a forward hook on the model's :class:`attnmt.models.attention.Attention`, which the decoder
calls once per step both in a search and under teacher forcing; training never sees it.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from attnmt.errors import UserError
from attnmt.models.attention import Attention

__all__ = ["can_pin", "check_pin", "pinned"]


def _module(model) -> Attention | None:
    module = getattr(getattr(model, "decoder", None), "attention", None)
    return module if isinstance(module, Attention) else None


def can_pin(model) -> bool:
    """Whether the model's attention can be pinned: one attention over the source per decoder step (an RNN
    attention model's)."""
    return _module(model) is not None


def check_pin(model, pin: Sequence[int], source_len: int) -> list[int]:
    """``pin`` as a list of source piece positions; a UserError for a model whose attention cannot be pinned, an
    empty pin, a repeated position or one outside the source's ``source_len`` pieces."""
    if not can_pin(model):
        raise UserError("pin: this model's attention cannot be pinned; pinning sets the one attention of an RNN "
                        "attention model (rnnsearch)")
    pin = list(pin)
    if not pin:
        raise UserError("pin: give at least one source piece position to pin the attention to")
    if len(set(pin)) != len(pin):
        raise UserError(f"pin: {pin} repeats a position; give each source piece once")
    for j in pin:
        if not 0 <= j < source_len:
            raise UserError(f"pin: position {j} is outside the source, whose pieces are 0 to {source_len - 1}")
    return pin


class pinned:
    """Within it, the model's decoder attends only to the ``source`` pieces (equally) at decoder step ``step``
    (counted from 0 at each pass's first call). Enter it once per pass: a search, or a teacher-forced pass."""

    def __init__(self, model, step: int, source: Sequence[int]) -> None:
        self.module = _module(model)
        self.step, self.source = step, list(source)
        self.calls = 0

    def __enter__(self) -> "pinned":
        self.calls = 0
        self.handle = self.module.register_forward_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()

    def _hook(self, module: Attention, args: tuple, kwargs: dict, output: tuple[Tensor, Tensor]):
        call, self.calls = self.calls, self.calls + 1
        if call != self.step:
            return None
        values, alpha = args[2], output[1]
        chosen = torch.zeros_like(alpha)
        chosen[:, self.source] = 1.0 / len(self.source)
        context = torch.bmm(chosen.unsqueeze(1).to(values.dtype), values).squeeze(1)
        return context.to(output[0].dtype), chosen
