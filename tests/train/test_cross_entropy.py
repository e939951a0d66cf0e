"""The blocked cross-entropy (attnmt.train.cross_entropy) against torch's: the same sum, the same gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmt.data.vocab import PAD_ID
from attnmt.train.cross_entropy import block_rows, cross_entropy_sum
from attnmt.train.loss import nll_loss


def _case(n: int, vocab: int, dtype: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    scores = (torch.randn(n, vocab, generator=g) * 3).to(dtype)
    target = torch.randint(0, vocab, (n,), generator=g)
    target[::5] = PAD_ID  # padding rows: not counted, no gradient
    return scores, target


def _both(scores, target, eps: float, scale: float = 1.0):
    """(value, gradient) of torch's cross-entropy and of the blocked one, each scaled by ``scale``."""
    out = []
    for fn in (lambda s: F.cross_entropy(s.float(), target, ignore_index=PAD_ID, reduction="sum", label_smoothing=eps),
               lambda s: cross_entropy_sum(s, target, PAD_ID, eps)):
        s = scores.detach().clone().requires_grad_()
        loss = fn(s)
        (loss * scale).backward()
        out.append((loss.detach(), s.grad.float()))
    return out


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("n,vocab", [(37, 11), (23, 70_000)])  # one block; blocks of 1 row
def test_same_value_and_gradient_as_torch_fp32(n, vocab, eps):
    assert block_rows(70_000) == 1 and block_rows(11) > 37
    scores, target = _case(n, vocab, torch.float32)
    (ref_loss, ref_grad), (loss, grad) = _both(scores, target, eps, scale=0.25)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    assert torch.allclose(grad, ref_grad, atol=1e-6, rtol=1e-4)
    assert grad[::5].abs().max().item() == 0.0  # the padding rows


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_bf16_scores_as_torch_on_their_fp32_copy(eps):
    scores, target = _case(301, 4000, torch.bfloat16)  # several blocks, the last one partial
    assert 301 % block_rows(4000) != 0
    (ref_loss, ref_grad), (loss, grad) = _both(scores, target, eps)
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    # The gradient is bf16 like the scores: equal up to one bf16 rounding of torch's fp32 gradient.
    assert torch.allclose(grad, ref_grad.bfloat16().float(), atol=1e-6, rtol=1e-2)


def test_every_row_padding_gives_zero_loss_and_gradient():
    scores = torch.randn(4, 9, requires_grad=True)
    loss = cross_entropy_sum(scores, torch.full((4,), PAD_ID), PAD_ID)
    loss.backward()
    assert loss.item() == 0.0 and scores.grad.abs().max().item() == 0.0


def test_nll_loss_of_a_padded_batch_is_torchs():
    logits, target = _case(2 * 7, 13, torch.float32, seed=3)
    logits = logits.view(2, 7, 13)
    expected = F.cross_entropy(logits.reshape(-1, 13), target, ignore_index=PAD_ID, reduction="sum")
    assert nll_loss(logits, target.view(2, 7)).item() == pytest.approx(expected.item(), rel=1e-6)


def test_bf16_gradient_of_a_scaled_loss_and_the_value_without_a_gradient():
    """Training scales the summed loss by 1 / tokens: the forward's gradient (written for a scale of 1) is scaled in
    the backward, within a bf16 rounding of torch's. Without a gradient the value is the same and no gradient is
    kept."""
    scores, target = _case(301, 4000, torch.bfloat16, seed=5)
    (ref_loss, ref_grad), (loss, grad) = _both(scores, target, 0.1, scale=1 / 301)
    assert torch.allclose(grad, ref_grad.bfloat16().float(), atol=1e-7, rtol=2e-2)
    with torch.no_grad():
        value = cross_entropy_sum(scores, target, PAD_ID, 0.1)
    assert value.item() == loss.item() and value.grad_fn is None
