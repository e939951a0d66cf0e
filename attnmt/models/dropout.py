"""Dropout (Srivastava et al. 2014) with a mask drawn 15 random bits per element on the CPU.

``nn.Dropout`` on the CPU draws one Bernoulli sample per element, and in a small Transformer's
training step that takes nearly as long as all its matrix products (``benchmarks/cpu_training.py``).
Here each 64-bit random word that torch's generator makes feeds four elements: each 16-bit quarter,
its top bit cleared, is a uniform integer ``r`` in [0, 32768), and an element is kept when
``r >= round(p * 32768)``. The drop probability is thus ``p`` rounded to a multiple of 1/32768
(0.1 -> 0.100006), and the kept elements are scaled by one over the exact keep probability, so
the expected output is the input, as with ``nn.Dropout``. The random words come from torch's
default generator: ``torch.manual_seed`` makes the masks repeatable. On other devices, and
outside training, this is ``nn.Dropout``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LEVELS = 32768  # 15 bits per element


def keep_mask(shape: torch.Size, p: float) -> Tensor:
    """A boolean mask of ``shape``, False with probability round(p * LEVELS) / LEVELS."""
    n = shape.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_()  # uniform in [0, 2^63)
    r = words.view(torch.int16)[:n].bitwise_and(LEVELS - 1).view(shape)
    return r >= round(p * LEVELS)


def _as_dtype(keep: Tensor, dtype: torch.dtype) -> Tensor:
    """The boolean mask as 1 and 0 in ``dtype``, converted from its bytes: torch's CPU conversion of a bool tensor
    to bfloat16 is several times slower than that of the same bytes as uint8."""
    return keep.view(torch.uint8).to(dtype)


class _MaskedScale(torch.autograd.Function):
    """``torch.where(keep, x * scale, 0)`` and its gradient, each as a product by ``scale`` and an in-place product
    by the mask converted to x's dtype: the same values bit for bit for finite x (a product by 1 or 0 is exact; a
    dropped infinity or NaN becomes NaN, not 0), in half the time of ``where`` on a CPU (forward and backward;
    ``where`` took a tenth of a small Transformer's bf16 step). The mask is kept as booleans for the backward."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(scale).mul_(_as_dtype(keep, x.dtype))

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (keep,) = ctx.saved_tensors
        return grad.mul(ctx.scale).mul_(_as_dtype(keep, grad.dtype)), None, None


class Dropout(nn.Module):
    """``nn.Dropout(p)`` whose CPU mask is drawn as the module docstring says."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        dropped = round(self.p * LEVELS)
        if x.device.type != "cpu" or not 0 < dropped < LEVELS:
            return F.dropout(x, self.p, True)
        # The scale multiplies x in x's own arithmetic (not a rounded bf16 scale), the mask selects.
        return _MaskedScale.apply(x, keep_mask(x.shape, self.p), LEVELS / (LEVELS - dropped))

    def extra_repr(self) -> str:
        return f"p={self.p}"
