"""attnmt's dropout (attnmt.models.dropout): nn.Dropout's contract with a cheaper mask on the CPU."""

from __future__ import annotations

import pytest
import torch

from attnmt.models.dropout import LEVELS, Dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_drops_a_share_p_and_keeps_the_expectation(p, dtype):
    torch.manual_seed(0)
    x = torch.ones(1000, 1003, dtype=dtype)  # not a multiple of the four elements per random word
    y = Dropout(p).train()(x).float()
    dropped = (y == 0).float().mean().item()
    assert dropped == pytest.approx(p, abs=0.003)  # 10^6 draws: 0.003 is more than six standard deviations
    kept = y[y != 0]
    assert kept.unique().numel() == 1  # one scale for every kept element
    assert y.mean().item() == pytest.approx(1.0, abs=0.01)


def test_every_bit_lane_is_used():
    """Each 64-bit word feeds four elements: every one of the four positions must drop some."""
    torch.manual_seed(1)
    mask = keep_mask(torch.Size([400_000]), 0.5).view(-1, 4)
    assert mask.float().mean(dim=0).sub(0.5).abs().max().item() < 0.01


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(50, 64, requires_grad=True)
    y = Dropout(0.2).train()(x)
    y.sum().backward()
    scale = LEVELS / (LEVELS - round(0.2 * LEVELS))
    expected = (y != 0).float() * scale
    assert torch.allclose(x.grad, expected)
    assert torch.allclose(y, x.detach() * expected)


def test_seeded_masks_repeat_and_eval_is_identity():
    x = torch.randn(30, 40)
    d = Dropout(0.5).train()
    torch.manual_seed(3)
    first = d(x)
    torch.manual_seed(3)
    assert torch.equal(first, d(x))
    assert torch.equal(d.eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert Dropout(1.0).train()(x).abs().max().item() == 0.0


def test_a_probability_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_masked_products_equal_where_bit_for_bit(dtype):
    """The forward and backward products by the mask give torch.where's values exactly (finite inputs)."""
    torch.manual_seed(3)
    x = torch.randn(37, 130, dtype=dtype, requires_grad=True)
    grad = torch.randn(37, 130, dtype=dtype)
    torch.manual_seed(4)
    y = Dropout(0.1).train()(x)
    y.backward(grad)
    torch.manual_seed(4)
    keep = keep_mask(x.shape, 0.1)
    scale = LEVELS / (LEVELS - round(0.1 * LEVELS))
    x_where = x.detach().clone().requires_grad_()
    expected = torch.where(keep, x_where * scale, 0.0)
    expected.backward(grad)
    assert y.dtype == dtype and torch.equal(y, expected)
    assert torch.equal(x.grad, x_where.grad)
