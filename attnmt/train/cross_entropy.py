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

:func:`linear_cross_entropy_sum` is the output layer and the loss in one: from the features the output
layer reads, ``[tokens, d]``, its weight ``[vocabulary, d]`` and bias, it computes the scores of a block of
a few hundred tokens at a time, the block's loss and gradient as above, and at once the block's share of
the gradients of the features, the weight and the bias (Liger Kernel's fused linear cross-entropy, on the
CPU). No tensor of the size tokens x vocabulary is ever made: a training step of 3,000 target tokens and
10,000 subwords holds a block of scores and its gradient (about 8 MB each in bf16) instead of two 60 MB
matrices through the whole backward pass. Under autocast every product is taken in the autocast dtype, as
``nn.Linear``'s are; the gradients of the weight and the bias are summed over the blocks in fp32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# Rows per block: about 512 KB of fp32 scores, which fits a core's L2 cache.
BLOCK_BYTES = 512 * 1024
# Tokens per block of the fused output layer: about 16 MB of fp32 scores (419 tokens of a 10,000-word
# vocabulary), rows enough for an efficient matrix product, few enough that a block's scores are small beside
# the step's activations.
FUSED_BLOCK_BYTES = 16 * 1024 * 1024


def block_rows(vocab: int, block_bytes: int = BLOCK_BYTES) -> int:
    """Rows per block of ``block_bytes`` fp32 scores for a vocabulary of ``vocab`` entries (at least one)."""
    return max(1, block_bytes // (4 * max(vocab, 1)))


def _blocked_loss(scores: Tensor, target: Tensor, ignore_index: int, eps: float, grad: Tensor | None) -> Tensor:
    """The summed loss of ``scores`` [N, V] (fp32); with ``grad`` [N, V], the loss's gradient written into it
    (for a loss gradient of 1; rows of ``ignore_index`` zero), block by block while the block is in the cache."""
    n, vocab = scores.shape
    rows = block_rows(vocab)
    total = torch.zeros((), dtype=torch.float32, device=scores.device)
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
    return total


class _BlockedCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of ``scores`` [N, V] against ``target`` [N], rows equal to
    ``ignore_index`` left out. When the scores need a gradient, the forward pass also writes it, block by block
    while the block's softmax is in the cache, for a loss gradient of 1; the backward pass only scales it."""

    @staticmethod
    def forward(ctx, scores: Tensor, target: Tensor, ignore_index: int, eps: float) -> Tensor:  # type: ignore[override]
        grad = torch.empty_like(scores) if ctx.needs_input_grad[0] else None
        total = _blocked_loss(scores, target, ignore_index, eps, grad)
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


class _LinearCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of ``features @ weight.T + bias`` against ``target``, in blocks of tokens, the
    scores of each block in ``dtype``. The forward pass writes the gradients of the inputs that need one (for a
    loss gradient of 1); the backward pass only scales them."""

    @staticmethod
    def forward(ctx, features: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor,  # type: ignore[override]
                ignore_index: int, eps: float, dtype: torch.dtype) -> Tensor:
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        with torch.autocast(features.device.type, enabled=False):
            x, w = features.to(dtype), weight.to(dtype)
            b = bias.to(dtype) if bias is not None else None
            grad_x = torch.empty_like(features) if need_x else None
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
            grad_b = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_b else None
            rows = block_rows(weight.size(0), FUSED_BLOCK_BYTES)
            total = torch.zeros((), dtype=torch.float32, device=features.device)
            for a in range(0, x.size(0), rows):
                xb = x[a:a + rows]
                scores = F.linear(xb, w, b)
                grad = torch.empty_like(scores) if need_x or need_w or need_b else None
                total += _blocked_loss(scores, target[a:a + rows], ignore_index, eps, grad)
                if grad_x is not None:
                    grad_x[a:a + rows] = grad @ w
                if grad_w is not None:
                    grad_w += (grad.t() @ xb).float()  # the block's product in the scores' dtype, as nn.Linear's
                if grad_b is not None:
                    grad_b += grad.float().sum(dim=0)
        ctx.save_for_backward(grad_x, None if grad_w is None else grad_w.to(weight.dtype),
                              None if grad_b is None else grad_b.to(bias.dtype))
        return total

    @staticmethod
    def backward(ctx, grad_total: Tensor):  # type: ignore[override]
        scale = float(grad_total)
        grads = [g.mul_(scale) if g is not None else None for g in ctx.saved_tensors]  # in place, as above
        return *grads, None, None, None, None


def linear_cross_entropy_sum(features: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor,
                             ignore_index: int, label_smoothing: float = 0.0) -> Tensor:
    """``cross_entropy_sum(F.linear(features, weight, bias), target, ...)`` for features [N, d], weight [V, d],
    bias [V] or None, without the [N, V] scores (module docstring): the same value and gradients, each
    block's scores in the dtype autocast gives ``F.linear``. Rows of ``ignore_index`` are dropped first. On a
    device other than the CPU, ``cross_entropy_sum`` of the whole product."""
    if features.device.type != "cpu":
        return cross_entropy_sum(F.linear(features, weight, bias), target, ignore_index, label_smoothing)
    real = target != ignore_index
    features, target = features[real], target[real]
    device = features.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else features.dtype
    return _LinearCrossEntropy.apply(features, weight, bias, target, ignore_index, float(label_smoothing), dtype)
