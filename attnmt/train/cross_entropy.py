"""Cross-entropy over the vocabulary, computed a few rows at a time on the CPU.

The training loss is ``-log softmax(z_t)[y_t]`` summed over the target tokens, where ``z`` are the
output layer's scores, ``[tokens, vocabulary]``. ``F.cross_entropy`` on the CPU materializes the
whole matrix several times: the fp32 copy of bf16 scores (under autocast), the log-probabilities,
then in the backward pass a zero-filled gradient and the softmax. For a batch of 2,000 target
tokens and 4,000 subwords each of those is 32 MB, larger than the caches, so the loss is bound by
memory traffic and takes about a third of a seq2seq training step (``benchmarks/cpu_training.py``).

:func:`cross_entropy_sum` computes the same sum (and the same gradient, ``softmax(z_t) - onehot(y_t)``
per row) over blocks of rows small enough to stay in the cache: each block is converted to fp32 and
exponentiated once, which gives both its log-sum-exp and, when the scores need a gradient, the block of
the gradient (for a loss gradient of 1), written out in the scores' dtype; the backward pass only scales
it by the loss's gradient. Only the scores themselves and their gradient are full-size, and the scores
are not kept for the backward. Label smoothing is
PyTorch's: with ``eps`` the loss of a row is ``(1 - eps) * nll + eps * mean_v(-log p_v)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# Rows per block: about 512 KB of fp32 scores, which fits a core's L2 cache.
BLOCK_BYTES = 512 * 1024


def block_rows(vocab: int) -> int:
    """Rows per block for a vocabulary of ``vocab`` entries (at least one)."""
    return max(1, BLOCK_BYTES // (4 * max(vocab, 1)))


class _BlockedCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of ``scores`` [N, V] against ``target`` [N], rows equal to
    ``ignore_index`` left out. When the scores need a gradient, the forward pass also writes it, block by block
    while the block's softmax is in the cache, for a loss gradient of 1; the backward pass only scales it."""

    @staticmethod
    def forward(ctx, scores: Tensor, target: Tensor, ignore_index: int, eps: float) -> Tensor:  # type: ignore[override]
        n, vocab = scores.shape
        rows = block_rows(vocab)
        total = torch.zeros((), dtype=torch.float32, device=scores.device)
        grad = torch.empty_like(scores) if ctx.needs_input_grad[0] else None
        for a in range(0, n, rows):
            z = scores[a:a + rows].float()
            t = target[a:a + rows]
            real = t != ignore_index
            block_max = z.amax(dim=1, keepdim=True)
            p = z.sub(block_max).exp_()  # softmax(z_t) times its sum, one exp of the block
            block_sum = p.sum(dim=1, keepdim=True)
            block_lse = block_max.squeeze(1) + block_sum.log().squeeze(1)
            nll = block_lse - z.gather(1, t.clamp(min=0).unsqueeze(1)).squeeze(1)
            if eps:
                nll = (1 - eps) * nll + eps * (block_lse - z.mean(dim=1))
            total += nll.masked_fill(~real, 0.0).sum()
            if grad is not None:  # softmax(z_t) - (1 - eps) onehot(y_t) - eps / V, rows of padding zero
                p.div_(block_sum)
                if eps:
                    p.sub_(eps / vocab)
                p.scatter_add_(1, t.clamp(min=0).unsqueeze(1), p.new_full((len(t), 1), -(1 - eps)))
                p.mul_(real.unsqueeze(1))
                grad[a:a + rows] = p
        ctx.save_for_backward(grad)
        return total

    @staticmethod
    def backward(ctx, grad_total: Tensor):  # type: ignore[override]
        (grad,) = ctx.saved_tensors
        # In place: the buffer is this function's alone and a training step's backward runs once (a second
        # backward through the same graph would need retain_graph, which training does not use). The scale is
        # applied in fp32 arithmetic (a Python float), as the older backward applied it before rounding to bf16.
        return grad.mul_(float(grad_total)), None, None, None


def cross_entropy_sum(scores: Tensor, target: Tensor, ignore_index: int, label_smoothing: float = 0.0) -> Tensor:
    """``F.cross_entropy(scores.float(), target, ignore_index=..., reduction="sum", label_smoothing=...)``
    for scores [N, V] of any float dtype, in fp32; computed in blocks of rows on the CPU (module
    docstring), by ``F.cross_entropy`` elsewhere."""
    if scores.device.type != "cpu":
        return F.cross_entropy(scores.float(), target, ignore_index=ignore_index, reduction="sum",
                               label_smoothing=label_smoothing)
    return _BlockedCrossEntropy.apply(scores, target, ignore_index, float(label_smoothing))
