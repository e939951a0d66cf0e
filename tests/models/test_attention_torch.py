"""Tests of the PyTorch attention modules against the NumPy reference and against torch's own attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from attnmt.models import SCORES
from attnmt.models import reference as ref
from attnmt.models.attention import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    MultiHeadAttention,
    causal_mask,
    masked_softmax,
    scaled_dot_product_attention,
)

PROPERTY = settings(max_examples=25, deadline=None)
ATOL = 1e-5


def np_(t: Tensor) -> np.ndarray:
    return t.detach().double().numpy()


@st.composite
def problem(draw: st.DrawFn, same_size: bool = False) -> dict:
    """float32 inputs of random shapes for a query-keys-values module, with a random mask (rows may be fully masked)."""
    B, S = draw(st.integers(1, 4)), draw(st.integers(1, 7))
    Dq, Dv, attn = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    Dk = Dq if same_size else draw(st.integers(1, 6))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=B * S, max_size=B * S))).view(B, S)
    return {
        "sizes": (Dq, Dk, attn),
        "query": torch.randn(B, Dq, generator=g),
        "keys": torch.randn(B, S, Dk, generator=g),
        "values": torch.randn(B, S, Dv, generator=g),
        "mask": mask,
    }


def reference_context(e: np.ndarray, values: Tensor, mask: Tensor) -> tuple[np.ndarray, np.ndarray]:
    alpha = ref.softmax(e, mask=mask.numpy())
    return np.einsum("bs,bsd->bd", alpha, np_(values)), alpha


def check_weights(alpha: Tensor, mask: Tensor) -> None:
    """Masked positions exactly 0; rows with a real position sum to 1; fully masked rows all 0."""
    assert torch.all(alpha[~mask.expand_as(alpha)] == 0)
    real_rows = mask.expand_as(alpha).any(-1)
    torch.testing.assert_close(alpha.sum(-1)[real_rows], torch.ones_like(alpha.sum(-1)[real_rows]))
    assert torch.all(alpha[~real_rows] == 0)


# --- The scores: additive, dot, general -----------------------------------------------------------


@PROPERTY
@given(problem())
def test_additive_attention_equals_reference(p: dict) -> None:
    torch.manual_seed(0)
    module = AdditiveAttention(*p["sizes"])
    context, alpha = module(p["query"], p["keys"], p["values"], p["mask"])
    e = ref.additive_scores(
        np_(p["query"]), np_(p["keys"]), np_(module.W_s.weight), np_(module.W_h.weight), np_(module.v.weight[0])
    )
    expected_context, expected_alpha = reference_context(e, p["values"], p["mask"])
    np.testing.assert_allclose(np_(alpha), expected_alpha, atol=ATOL)
    np.testing.assert_allclose(np_(context), expected_context, atol=ATOL)
    check_weights(alpha, p["mask"])
    assert torch.isfinite(context).all()
    # The decoder's path: keys projected once per sentence, then reused at every step.
    context2, alpha2 = module(p["query"], p["keys"], p["values"], p["mask"], module.project_keys(p["keys"]))
    assert torch.equal(alpha, alpha2) and torch.equal(context, context2)


@PROPERTY
@given(problem(same_size=True), st.sampled_from(["dot", "general", "additive"]))
def test_luong_scores_equal_reference(p: dict, score: str) -> None:
    """Luong et al. (2015) eq. 8: dot, general, and concat (which is the additive score)."""
    torch.manual_seed(0)
    Dq, Dk, attn = p["sizes"]
    module = SCORES[score](Dq, Dk, attn)
    context, alpha = module(p["query"], p["keys"], p["values"], p["mask"])
    q, k = np_(p["query"]), np_(p["keys"])
    if score == "dot":
        e = ref.dot_scores(q, k)
    elif score == "general":
        e = ref.general_scores(q, k, np_(module.W_a.weight))
    else:  # concat: v_a^T tanh(W_a [q; k]) with W_a = [W_s | W_h]
        e = ref.additive_scores(q, k, np_(module.W_s.weight), np_(module.W_h.weight), np_(module.v.weight[0]))
    expected_context, expected_alpha = reference_context(e, p["values"], p["mask"])
    np.testing.assert_allclose(np_(alpha), expected_alpha, atol=ATOL)
    np.testing.assert_allclose(np_(context), expected_context, atol=ATOL)
    check_weights(alpha, p["mask"])
    context2, _ = module(p["query"], p["keys"], p["values"], p["mask"], module.project_keys(p["keys"]))
    assert torch.equal(context, context2)


def test_general_and_additive_allow_different_query_and_key_sizes() -> None:
    q, k, mask = torch.randn(2, 3), torch.randn(2, 4, 5), torch.ones(2, 4, dtype=torch.bool)
    for module in (GeneralAttention(3, 5), AdditiveAttention(3, 5, 6)):
        context, alpha = module(q, k, k, mask)
        assert context.shape == (2, 5) and alpha.shape == (2, 4)


def test_dot_score_needs_equal_sizes_and_registry_names_the_scores() -> None:
    with pytest.raises(ValueError, match="query_size == key_size"):
        DotAttention(4, 5)
    assert {"additive", "dot", "general"} <= set(SCORES)
    assert SCORES["dot"].same_size and not SCORES["general"].same_size


def test_older_luong_concat_weights_load_into_the_additive_score() -> None:
    """Model folders saved when Luong's concat score had its own module keep loading."""
    module = AdditiveAttention(3, 5, 6)
    old = {"W_q.weight": torch.randn(6, 3), "W_k.weight": torch.randn(6, 5), "v_a.weight": torch.randn(1, 6)}
    module.load_state_dict(dict(old))
    assert torch.equal(module.W_s.weight, old["W_q.weight"]) and torch.equal(module.v.weight, old["v_a.weight"])


def test_fully_masked_row_gives_zero_context_and_finite_gradients() -> None:
    torch.manual_seed(0)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    for module in (AdditiveAttention(3, 3, 4), DotAttention(3, 3), GeneralAttention(3, 3)):
        query = torch.randn(2, 3, requires_grad=True)
        keys = torch.randn(2, 3, 3, requires_grad=True)
        context, alpha = module(query, keys, keys, mask)
        assert torch.all(alpha[1] == 0) and torch.all(context[1] == 0)
        context.sum().backward()
        assert query.grad is not None and keys.grad is not None
        assert torch.isfinite(query.grad).all() and torch.isfinite(keys.grad).all()
        assert torch.all(query.grad[1] == 0)  # the empty row does not depend on its query


# --- scaled dot-product attention -----------------------------------------------------------------


@PROPERTY
@given(
    B=st.integers(1, 3),
    H=st.integers(1, 3),
    Tq=st.integers(1, 5),
    Tk=st.integers(1, 6),
    d=st.integers(1, 6),
    causal=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_scaled_dot_product_attention_equals_reference_and_torch(
    B: int, H: int, Tq: int, Tk: int, d: int, causal: bool, seed: int
) -> None:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(B, H, Tq, d, generator=g),
        torch.randn(B, H, Tk, d, generator=g),
        torch.randn(B, H, Tk, d, generator=g),
    )
    key_mask = torch.rand(B, 1, 1, Tk, generator=g) < 0.7
    out, w = scaled_dot_product_attention(q, k, v, key_mask, causal=causal)

    full_mask = key_mask & causal_mask(Tq, Tk) if causal else key_mask
    expected_out, expected_w = ref.scaled_dot_product_attention(np_(q), np_(k), np_(v), full_mask.numpy())
    np.testing.assert_allclose(np_(w), expected_w, atol=ATOL)
    np.testing.assert_allclose(np_(out), expected_out, atol=ATOL)
    check_weights(w, full_mask)

    # torch gives NaN (or garbage) for rows with nothing to attend; compare the others.
    torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=full_mask.expand(B, H, Tq, Tk))
    real_rows = full_mask.expand(B, H, Tq, Tk).any(-1)
    torch.testing.assert_close(out[real_rows], torch_out[real_rows], atol=ATOL, rtol=0)
    assert torch.all(out[~real_rows] == 0)


def test_causal_mask_matches_torch_is_causal_and_aligns_bottom_right() -> None:
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    out, w = scaled_dot_product_attention(q, k, v, causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert torch.all(w.triu(1) == 0)
    # The last 2 queries against all 5 keys: query 0 is position 3, so it sees keys 0..3.
    assert torch.equal(causal_mask(2, 5), torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool))


def test_masked_softmax_without_mask_is_softmax() -> None:
    x = torch.randn(3, 4)
    torch.testing.assert_close(masked_softmax(x, None), torch.softmax(x, -1))


# --- MultiHeadAttention -----------------------------------------------------------------------------


def mha_reference_params(module: MultiHeadAttention) -> dict[str, np.ndarray]:
    params = {}
    for name in "qkvo":
        linear = getattr(module, f"W_{name}")
        params[f"W_{name}"] = np_(linear.weight)
        if linear.bias is not None:
            params[f"b_{name}"] = np_(linear.bias)
    return params


@PROPERTY
@given(
    B=st.integers(1, 3),
    Tq=st.integers(1, 5),
    Tk=st.integers(1, 6),
    heads_and_dh=st.sampled_from([(1, 4), (2, 3), (4, 2)]),
    bias=st.booleans(),
    causal=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_multi_head_attention_equals_reference(
    B: int, Tq: int, Tk: int, heads_and_dh: tuple[int, int], bias: bool, causal: bool, seed: int
) -> None:
    H, dh = heads_and_dh
    D = H * dh
    torch.manual_seed(seed)
    module = MultiHeadAttention(D, H, bias=bias)
    query, memory = torch.randn(B, Tq, D), torch.randn(B, Tk, D)  # the reference takes one X_kv
    key_mask = torch.rand(B, Tk) < 0.7
    out, w = module(query, memory, memory, key_mask, causal=causal)
    assert out.shape == (B, Tq, D) and w.shape == (B, H, Tq, Tk)

    mask = key_mask[:, None, :] & causal_mask(Tq, Tk) if causal else key_mask[:, None, :]
    expected_out, expected_w = ref.multi_head_attention(
        np_(query), np_(memory), mha_reference_params(module), H, mask.numpy()
    )
    np.testing.assert_allclose(np_(w), expected_w, atol=ATOL)
    np.testing.assert_allclose(np_(out), expected_out, atol=ATOL)
    check_weights(w, mask[:, None])
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("bias", [True, False])
def test_multi_head_attention_equals_torch_multihead_attention(bias: bool) -> None:
    torch.manual_seed(0)
    B, T, S, D, H = 3, 5, 6, 8, 2
    theirs = nn.MultiheadAttention(D, H, bias=bias, batch_first=True)
    ours = MultiHeadAttention(D, H, bias=bias).load_from_torch(theirs)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    key_mask = torch.arange(S) < torch.tensor([6, 4, 1])[:, None]  # every row keeps a real key

    # Cross-attention with key padding; torch's key_padding_mask is True at *padding*.
    out, w = ours(x, memory, memory, key_mask)
    t_out, t_w = theirs(x, memory, memory, key_padding_mask=~key_mask, average_attn_weights=False)
    torch.testing.assert_close(out, t_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(w, t_w, atol=ATOL, rtol=0)

    # Causal self-attention with padding; torch's bool attn_mask is True where attending is *forbidden*.
    self_mask = torch.arange(T) < torch.tensor([5, 3, 1])[:, None]
    out, w = ours(x, x, x, self_mask, causal=True)
    t_out, t_w = theirs(x, x, x, key_padding_mask=~self_mask, attn_mask=~causal_mask(T), average_attn_weights=False)
    torch.testing.assert_close(out, t_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(w, t_w, atol=ATOL, rtol=0)


def test_load_from_torch_rejects_a_different_shape() -> None:
    with pytest.raises(ValueError, match="d_model"):
        MultiHeadAttention(8, 2).load_from_torch(nn.MultiheadAttention(8, 4))
    with pytest.raises(ValueError, match="bias"):
        MultiHeadAttention(8, 2, bias=False).load_from_torch(nn.MultiheadAttention(8, 2))


def test_incremental_decoding_with_cached_keys_and_values_equals_the_full_pass() -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    key_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    full_out, full_w = module(x, x, x, key_mask, causal=True)
    assert full_w is not None

    k_cache, v_cache = module.project_kv(x[:, :0], x[:, :0])  # empty [B,H,0,dh] caches
    for t in range(5):
        k_t, v_t = module.project_kv(x[:, t : t + 1], x[:, t : t + 1])
        k_cache, v_cache = torch.cat([k_cache, k_t], dim=2), torch.cat([v_cache, v_t], dim=2)
        out_t, w_t = module.attend(x[:, t : t + 1], k_cache, v_cache, key_mask[:, : t + 1], causal=True)
        assert w_t is not None
        torch.testing.assert_close(out_t[:, 0], full_out[:, t], atol=ATOL, rtol=0)
        torch.testing.assert_close(w_t[:, :, 0], full_w[:, :, t, : t + 1], atol=ATOL, rtol=0)
    # The Transformer's path: the last 2 positions at once, no weights (torch's fused kernel).
    out_last, no_weights = module.attend(x[:, 3:], k_cache, v_cache, None, causal=True, need_weights=False)
    torch.testing.assert_close(out_last, module(x, x, x, causal=True)[0][:, 3:], atol=ATOL, rtol=0)
    assert no_weights is None


@PROPERTY
@given(
    Tq=st.integers(1, 5),
    Tk=st.integers(1, 6),
    causal=st.booleans(),
    use_mask=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_need_weights_false_fused_path_equals_the_explicit_path(
    Tq: int, Tk: int, causal: bool, use_mask: bool, seed: int
) -> None:
    torch.manual_seed(seed)
    module = MultiHeadAttention(8, 2)
    query, memory = torch.randn(3, Tq, 8), torch.randn(3, Tk, 8)
    key_mask = torch.rand(3, Tk) < 0.6
    key_mask[0] = False  # a row with nothing to attend
    mask = key_mask if use_mask else None
    explicit, _ = module(query, memory, memory, mask, causal=causal)
    fused, weights = module(query, memory, memory, mask, causal=causal, need_weights=False)
    assert weights is None
    torch.testing.assert_close(fused, explicit, atol=ATOL, rtol=0)


def test_multi_head_attention_fully_masked_row_dropout_and_need_weights() -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(4, 2, dropout=0.5)
    x = torch.randn(2, 3, 4, requires_grad=True)
    key_mask = torch.tensor([[True, True, False], [False, False, False]])

    module.eval()  # dropout off
    out, w = module(x, x, x, key_mask)
    assert w is not None and torch.all(w[1] == 0)
    torch.testing.assert_close(out[1], module.W_o.bias.expand(3, 4))  # zero heads -> only the output bias
    out.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()

    module.train()  # the returned weights are the distribution, before dropout
    out_train, w_train = module(x, x, x, key_mask)
    torch.testing.assert_close(w_train, w)
    assert not torch.allclose(out_train[0], out[0])
    fused_train, _ = module(x, x, x, key_mask, need_weights=False)  # dropout in the fused path too
    assert not torch.allclose(fused_train[0], out[0])
    fused_train.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(6, 4)


# --- gradients ----------------------------------------------------------------------------------------


def test_gradcheck_float64() -> None:
    # fast_mode compares the analytic and numerical Jacobians along random directions: 20x quicker
    # than the full Jacobians, and any wrong entry still shows (full mode passes too, just slowly).
    torch.manual_seed(0)
    B, S, D = 2, 4, 4
    mask = torch.tensor([[True, True, True, False], [True, False, True, False]])
    query = torch.randn(B, D, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(B, S, D, dtype=torch.float64, requires_grad=True)
    values = torch.randn(B, S, 3, dtype=torch.float64, requires_grad=True)
    modules = [AdditiveAttention(D, D, 5), DotAttention(D, D), GeneralAttention(D, D)]
    for module in modules:
        module.double()
        assert torch.autograd.gradcheck(
            lambda q, k, v, m=module: m(q, k, v, mask), (query, keys, values), fast_mode=True
        )

    mha = MultiHeadAttention(D, 2).double()
    x = torch.randn(B, S, D, dtype=torch.float64, requires_grad=True)
    for need_weights in (True, False):
        assert torch.autograd.gradcheck(
            lambda x, nw=need_weights: mha(x, x, x, mask, True, nw)[0], (x,), fast_mode=True
        )


def test_bf16_on_a_cpu_takes_the_explicit_products_without_weights() -> None:
    """Under bfloat16 autocast on a CPU, need_weights=False gives the explicit path's output (torch's fused
    kernel would do its math in float32 there), still without weights, in bfloat16 and close to float32's."""
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).eval()
    query, memory = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    key_mask = torch.rand(3, 7) < 0.7
    key_mask[0] = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        explicit, _ = module(query, memory, memory, key_mask)
        fast, weights = module(query, memory, memory, key_mask, need_weights=False)
    assert weights is None and fast.dtype == torch.bfloat16
    assert torch.equal(fast, explicit)
    full, _ = module(query, memory, memory, key_mask, need_weights=False)
    torch.testing.assert_close(fast.float(), full, atol=0.05, rtol=0.05)
