"""The output layer fused with the loss (attnmt.train.cross_entropy.linear_cross_entropy_sum) against the two
taken apart: the same value and gradients for features, weight and bias, and a training step that never holds a
[tokens, vocabulary] tensor."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from attnmt.config.schema import Config, ModelConfig, TrainConfig
from attnmt.data.batching import Batch
from attnmt.data.vocab import PAD_ID
from attnmt.models import build_model
from attnmt.train.cross_entropy import FUSED_BLOCK_BYTES, block_rows, cross_entropy_sum, linear_cross_entropy_sum
from attnmt.train.loss import nll_loss, output_loss, step_loss


def _case(n: int, d: int, vocab: int, bias: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(vocab, d, generator=g) * d ** -0.5 * 3
    b = torch.randn(vocab, generator=g) if bias else None
    target = torch.randint(0, vocab, (n,), generator=g)
    target[::5] = PAD_ID  # padding rows: not counted, no gradient
    return x, w, b, target


def _grads(fused: bool, x, w, b, target, eps: float, amp: bool, scale: float):
    """The loss and the gradients of x, w (and b) of the fused path or of F.linear and cross_entropy_sum."""
    leaves = [t.detach().clone().requires_grad_() for t in (x, w) + ((b,) if b is not None else ())]
    bias = leaves[2] if b is not None else None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        loss = (linear_cross_entropy_sum(leaves[0], leaves[1], bias, target, PAD_ID, eps) if fused else
                cross_entropy_sum(F.linear(leaves[0], leaves[1], bias), target, PAD_ID, eps))
    (loss * scale).backward()
    return loss.detach(), [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("bias", [False, True])
def test_fp32_value_and_gradients_are_the_unfused_ones(eps, bias):
    vocab = 70_000  # several blocks of tokens, the last one partial
    rows = block_rows(vocab, FUSED_BLOCK_BYTES)
    x, w, b, target = _case(2 * rows + 7, 6, vocab, bias)
    (ref, ref_grads), (loss, grads) = (_grads(f, x, w, b, target, eps, amp=False, scale=0.25) for f in (False, True))
    assert loss.dtype == torch.float32 and loss.item() == pytest.approx(ref.item(), rel=1e-5)
    for grad, expected in zip(grads, ref_grads):
        assert grad.dtype == expected.dtype == torch.float32
        torch.testing.assert_close(grad, expected, atol=1e-5, rtol=1e-4)  # sums over 70,000 words
    assert grads[0][::5].abs().max().item() == 0.0  # the padding rows' features


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_bf16_autocast_gradients_are_the_unfused_ones_to_bf16_rounding(eps):
    """Under autocast both paths multiply in bf16: the fused one within bf16 rounding of the unfused one, its
    gradients in the parameters' dtype."""
    x, w, b, target = _case(600, 32, 4000, bias=True, seed=1)
    (ref, ref_grads), (loss, grads) = (_grads(f, x, w, b, target, eps, amp=True, scale=1 / 600) for f in (False, True))
    assert loss.item() == pytest.approx(ref.item(), rel=1e-3)
    for grad, expected in zip(grads, ref_grads):
        assert grad.dtype == expected.dtype
        assert (grad - expected).norm() / expected.norm() < 2e-2


def test_without_a_gradient_only_the_value():
    x, w, b, target = _case(50, 8, 300, bias=True)
    with torch.no_grad():
        value = linear_cross_entropy_sum(x, w, b, target, PAD_ID, 0.1)
    assert value.grad_fn is None
    assert value.item() == pytest.approx(cross_entropy_sum(F.linear(x, w, b), target, PAD_ID, 0.1).item(), rel=1e-5)
    every_row_padding = linear_cross_entropy_sum(x, w.requires_grad_(), b, torch.full((50,), PAD_ID), PAD_ID)
    every_row_padding.backward()
    assert every_row_padding.item() == 0.0 and w.grad.abs().max().item() == 0.0


MODELS = [dict(type="transformer", d_model=16, n_heads=2, ff_size=32, enc_layers=1, dec_layers=1, tie_embeddings=True),
          dict(type="rnnsearch", emb_size=8, hidden_size=16),
          dict(type="rnnsearch", emb_size=8, hidden_size=16, tie_embeddings=True),  # pre_output projects to emb_size
          dict(type="seq2seq", emb_size=8, hidden_size=16)]
SRC, SRC_LEN = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]]), torch.tensor([5, 3])
TGT_IN, TGT_OUT = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 0]]), torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])


@pytest.mark.parametrize("kw", MODELS, ids=lambda kw: kw["type"] + ("-tied" if kw.get("tie_embeddings") else ""))
def test_every_model_trains_the_same_through_its_features(kw):
    """forward(..., features=True) gives what model.output reads: the fused loss's gradients of every parameter
    (a tied output weight's included) are the logits path's."""
    torch.manual_seed(0)
    model = build_model(ModelConfig.of(dropout=0.0, **kw), 20, 30).eval()
    features, _ = model(SRC, SRC_LEN, TGT_IN, features=True)
    torch.testing.assert_close(model.output(features), model(SRC, SRC_LEN, TGT_IN)[0])
    grads = []
    for fused in (False, True):
        model.zero_grad()
        if fused:
            loss = output_loss(model, model(SRC, SRC_LEN, TGT_IN, features=True)[0], TGT_OUT, 0.1)
        else:
            loss = nll_loss(model(SRC, SRC_LEN, TGT_IN)[0], TGT_OUT, 0.1)
        loss.backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-6, rtol=1e-4, msg=name)


class _Largest(TorchDispatchMode):
    """The most elements of any tensor an operation returns while it is active."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
        return out


@pytest.mark.parametrize("amp", [False, True])
def test_a_training_step_never_holds_the_scores_of_the_whole_batch(amp):
    """The training loss, guided or not, and its backward make no tensor of [tokens, vocabulary]: fails when
    the loss is taken from the model's logits."""
    vocab, n = 20_000, 64 * 24
    cfg = ModelConfig.of(type="transformer", d_model=16, n_heads=2, ff_size=32, enc_layers=1, dec_layers=2,
                         dropout=0.0, tie_embeddings=True, share_embeddings=True)
    torch.manual_seed(0)
    model = build_model(cfg, vocab, vocab)
    tgt = torch.randint(4, vocab, (n // 24, 24))
    batch = Batch(torch.randint(4, vocab, (n // 24, 20)), torch.full((n // 24,), 20), tgt, tgt,
                  torch.full((n // 24,), 24), torch.arange(n // 24))
    config = Config(model=cfg, train=TrainConfig())
    assert block_rows(vocab, FUSED_BLOCK_BYTES) < n
    for guidance in (None, lambda indices: [[[0]] * 24 for _ in indices]):
        config.train.guided_alignment.weight = 0.0 if guidance is None else 1.0
        with _Largest() as largest:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                loss, align = step_loss(model, batch, guidance, config)
            (loss + (align if align is not None else 0)).backward()
        assert largest.numel <= block_rows(vocab, FUSED_BLOCK_BYTES) * vocab < n * vocab // 4, largest.numel
        assert all(p.grad is not None for p in model.parameters())
