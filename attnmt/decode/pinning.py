"""Attention you can edit (Strobelt et al. 2018, Seq2Seq-Vis): the decoder's attention at one step set by hand.

:func:`pinned` overrides the decoder's attention over the source at one decoder step: the weights are shared
equally by the chosen source pieces (all of it on one piece, or on the pieces of one word) and the context is
the weighted sum of those pieces' values; every other step attends as the model does. Decoding with it shows
what attention does: the word written at that step, and the rest of the translation, follow the context the
decoder was given. The explore record of a pinned decoding (:func:`attnmt.decode.steps.explore`'s ``pin``)
pins the step right after its forced prefix.

* An RNN attention model (rnnsearch, Luong): alpha_i of its one :class:`attnmt.models.attention.Attention`,
  and c_i = sum_j alpha_ij h_j of that alpha (a forward hook).
* A Transformer: the cross-attention of **every head of every decoder layer** at that step, each head's
  output then sum_j alpha_ij (V W^V)_j of that alpha. Every head and layer, not one picked: the heads of a
  layer and the layers above one another each read the source on their own, so a single pinned head is
  outvoted by the others and the translation seldom changes; pinned everywhere, the step sees the chosen word
  and nothing else of the source, which is what the RNN's pin means, and the page's attention (the last
  layer's mean over heads) shows the pinned row as it was set. The earlier steps' self-attention keys and
  values are untouched; the later steps read the pinned step's changed state through self-attention, as the
  RNN's later steps read its changed hidden state.

Both work the same way in a search (one call per step) and under teacher forcing (one call for every
step); training never sees them.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from attnmt.errors import UserError
from attnmt.models.attention import Attention, MultiHeadAttention

__all__ = ["can_pin", "check_pin", "pinned"]


def _module(model) -> Attention | None:
    module = getattr(getattr(model, "decoder", None), "attention", None)
    return module if isinstance(module, Attention) else None


def _cross_attention(model) -> list[MultiHeadAttention]:
    """A Transformer's cross-attention modules, one per decoder layer ([] for another model)."""
    layers = getattr(model, "decoder", None)
    if not isinstance(layers, torch.nn.ModuleList):
        return []
    found = [getattr(layer, "cross_attn", None) for layer in layers]
    return found if found and all(isinstance(m, MultiHeadAttention) for m in found) else []


def can_pin(model) -> bool:
    """Whether the model's attention over the source can be pinned: an RNN attention model's one attention,
    or a Transformer's cross-attention (every head of every decoder layer)."""
    return _module(model) is not None or bool(_cross_attention(model))


def check_pin(model, pin: Sequence[int], source_len: int) -> list[int]:
    """``pin`` as a list of source piece positions; a UserError for a model whose attention cannot be pinned, an
    empty pin, a repeated position or one outside the source's ``source_len`` pieces."""
    if not can_pin(model):
        raise UserError("pin: this model's attention cannot be pinned; pinning sets the attention over the source "
                        "of an RNN attention model (rnnsearch, luong) or a Transformer")
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
    """Within it, the model's decoder attends only to the chosen source pieces (equally) at decoder step ``step``
    (counted from 0 at each pass's first position). ``sources`` holds one pin (a list of source piece positions)
    per sentence of the batch, in the batch's order; a single pin given as ``[pin]`` serves every sentence. The
    rows of each pass are its sentences, or in a beam search each sentence's live hypotheses in turn, and no
    sentence may have left the batch before ``step`` (a forced prefix of ``step`` pieces sees to that). Enter it
    once per pass: a search, or a teacher-forced pass."""

    def __init__(self, model, step: int, sources: Sequence[Sequence[int]]) -> None:
        self.module = _module(model)
        self.cross = [] if self.module is not None else _cross_attention(model)
        self.step, self.sources = step, [list(source) for source in sources]
        self.calls = 0
        self.seen: list[int] = []

    def __enter__(self) -> "pinned":
        self.calls, self.seen = 0, [0] * len(self.cross)
        if self.module is not None:
            self.handle = self.module.register_forward_hook(self._hook, with_kwargs=True)
        for layer, module in enumerate(self.cross):
            module.attend = self._attend(layer, module.attend)  # an instance attribute over the method
        return self

    def __exit__(self, *exc) -> None:
        if self.module is not None:
            self.handle.remove()
        for module in self.cross:
            del module.attend

    def _chosen(self, like: Tensor) -> Tensor:
        """Weights shaped as ``like`` ([rows, S] or [rows, H, S]): each row's sentence's pin, shared equally."""
        rows, n = like.size(0), len(self.sources)
        if rows % n:
            raise RuntimeError(f"pinned: {rows} rows do not split into the {n} sentences that have a pin each")
        table = torch.zeros(n, like.size(-1), dtype=like.dtype, device=like.device)
        for sentence, source in enumerate(self.sources):
            table[sentence, source] = 1.0 / len(source)
        chosen = table.repeat_interleave(rows // n, dim=0)
        return chosen.view(rows, *[1] * (like.dim() - 2), -1).expand_as(like).contiguous()

    def _hook(self, module: Attention, args: tuple, kwargs: dict, output: tuple[Tensor, Tensor]):
        call, self.calls = self.calls, self.calls + 1
        if call != self.step:
            return None
        values, chosen = args[2], self._chosen(output[1])
        context = torch.bmm(chosen.unsqueeze(1).to(values.dtype), values).squeeze(1)
        return context.to(output[0].dtype), chosen

    def _attend(self, layer: int, attend):
        """``attend`` of one decoder layer's cross-attention with the pinned step's row (query position) set."""
        module = self.cross[layer]

        def pinned_attend(query: Tensor, k: Tensor, v: Tensor, key_mask: Tensor | None = None, causal: bool = False,
                          need_weights: bool = True):
            out, weights = attend(query, k, v, key_mask, causal, True)
            row = self.step - self.seen[layer]
            self.seen[layer] += query.size(1)
            if 0 <= row < query.size(1):
                chosen = self._chosen(weights[:, :, row])  # [B,H,S]
                heads = torch.matmul(chosen.unsqueeze(2).to(v.dtype), v)  # [B,H,1,dh]
                out, weights = out.clone(), weights.clone()
                out[:, row] = module.W_o(heads.transpose(1, 2).flatten(-2))[:, 0].to(out.dtype)
                weights[:, :, row] = chosen
            return out, weights if need_weights else None

        return pinned_attend
