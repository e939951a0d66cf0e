"""Cross-entropy over the vocabulary, computed a few rows at a time on the CPU.

The training loss is ``-log softmax(z_t)[y_t]`` summed over the target tokens, where ``z`` are the
output layer's scores, ``[tokens, vocabulary]``. ``F.cross_entropy`` on the CPU materializes the
whole matrix several times: the fp32 copy of bf16 scores (under autocast), the log-probabilities,
then in the backward pass a zero-filled gradient and the softmax. For a batch of 2,000 target
tokens and 4,000 subwords each of those is 32 MB, larger than the caches, so the loss is bound by
memory traffic and takes about a third of a seq2seq training step (``benchmarks/cpu_training.py``).

:func:`cross_entropy_sum` computes the same sum (and the same gradient, ``softmax(z_t) - onehot(y_t)``
per row) over blocks of rows small enough to stay in the cache: each block is converted to fp32,
reduced with ``logsumexp``, and in the backward pass turned into its gradient in place. Only the
scores themselves and their gradient (in the scores' dtype) are full-size. Label smoothing is
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
    ``ignore_index`` left out; the gradient is recomputed block by block in the backward pass."""

    @staticmethod
    def forward(ctx, scores: Tensor, target: Tensor, ignore_index: int, eps: float) -> Tensor:  # type: ignore[override]
        n, vocab = scores.shape
        rows = block_rows(vocab)
        lse = torch.empty(n, dtype=torch.float32, device=scores.device)
        total = torch.zeros((), dtype=torch.float32, device=scores.device)
        for a in range(0, n, rows):
            z = scores[a:a + rows].float()
            t = target[a:a + rows]
            lse[a:a + rows] = block_lse = torch.logsumexp(z, dim=1)
            nll = block_lse - z.gather(1, t.clamp(min=0).unsqueeze(1)).squeeze(1)
            if eps:
                nll = (1 - eps) * nll + eps * (block_lse - z.mean(dim=1))
            total += nll.masked_fill(t == ignore_index, 0.0).sum()
        ctx.save_for_backward(scores, target, lse)
        ctx.ignore_index, ctx.eps = ignore_index, eps
        return total

    @staticmethod
    def backward(ctx, grad_total: Tensor):  # type: ignore[override]
        scores, target, lse = ctx.saved_tensors
        n, vocab = scores.shape
        rows, eps = block_rows(vocab), ctx.eps
        grad = torch.empty_like(scores)
        for a in range(0, n, rows):
            t = target[a:a + rows]
            p = scores[a:a + rows].float().sub_(lse[a:a + rows, None]).exp_()  # softmax(z_t)
            if eps:
                p.sub_(eps / vocab)
            p.scatter_add_(1, t.clamp(min=0).unsqueeze(1), p.new_full((len(t), 1), -(1 - eps)))
            p.mul_((grad_total * (t != ctx.ignore_index)).unsqueeze(1))
            grad[a:a + rows] = p
        return grad, None, None, None


def cross_entropy_sum(scores: Tensor, target: Tensor, ignore_index: int, label_smoothing: float = 0.0) -> Tensor:
    """``F.cross_entropy(scores.float(), target, ignore_index=..., reduction="sum", label_smoothing=...)``
    for scores [N, V] of any float dtype, in fp32; computed in blocks of rows on the CPU (module
    docstring), by ``F.cross_entropy`` elsewhere."""
    if scores.device.type != "cpu":
        return F.cross_entropy(scores.float(), target, ignore_index=ignore_index, reduction="sum",
                               label_smoothing=label_smoothing)
    return _BlockedCrossEntropy.apply(scores, target, ignore_index, float(label_smoothing))
