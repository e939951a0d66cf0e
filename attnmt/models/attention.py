"""PyTorch attention modules, numerically equal to the NumPy reference in ``attnmt.models.reference``.

Everything is batch-first. Masks are boolean with **True = a real position that may be attended**
(``nn.MultiheadAttention``'s ``key_padding_mask`` means the opposite; convert at that boundary).

Masking rule, shared by every module here: a masked position gets *exactly* zero weight, and a row
in which every position is masked gets all-zero weights and hence a zero context vector (never
NaN). That keeps a degenerate row (e.g. an empty source sentence) from poisoning a whole batch
through NaN gradients.
"""

from __future__ import annotations

import abc
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.models.dropout import Dropout
from attnmt.models.registry import register_score

__all__ = [
    "AdditiveAttention",
    "Attention",
    "CoverageAttention",
    "DotAttention",
    "GeneralAttention",
    "MultiHeadAttention",
    "causal_mask",
    "masked_softmax",
    "scaled_dot_product_attention",
]


def masked_softmax(e: Tensor, mask: Tensor | None, dim: int = -1) -> Tensor:
    """Softmax of scores ``e`` over the positions where ``mask`` is True (broadcastable to ``e``).

    Masked positions get exactly 0; a fully masked row gets all zeros (not NaN).
    """
    if mask is None:
        return torch.softmax(e, dim=dim)
    # A finite fill (not -inf) keeps a fully masked row finite: its softmax is uniform, and the
    # masked_fill below then zeroes it. In rows with a real position exp(min - max) underflows to 0,
    # so the real positions' weights equal a softmax over those positions alone.
    e = e.masked_fill(~mask, torch.finfo(e.dtype).min)
    return torch.softmax(e, dim=dim).masked_fill(~mask, 0.0)


def causal_mask(query_len: int, key_len: int | None = None, device: torch.device | None = None) -> Tensor:
    """[Tq, Tk] bool, True where query i may attend key j, i.e. j <= i + (Tk - Tq).

    The diagonal is aligned bottom-right, so the same mask serves a full sequence (Tq == Tk: the
    usual lower triangle) and incremental decoding, where the Tq queries are the *last* Tq
    positions of a sequence whose Tk keys are cached.
    """
    key_len = query_len if key_len is None else key_len
    # compared, not tril(key_len - query_len): tril's diagonal is a plain int, which torch.compile would fix to each
    # cache length (a graph per decoder step, attnmt.models.compiled); the comparison keeps the lengths symbolic
    i = torch.arange(query_len, device=device).unsqueeze(1) + (key_len - query_len)
    return torch.arange(key_len, device=device) <= i


def _additive_scores(query_term: Tensor, projected_keys: Tensor, v: Tensor) -> Tensor:
    """e_ij = v^T tanh(W_s s_i + W_h h_j) (Bahdanau eq. 6): query_term [B,A], projected_keys [B,S,A], v [A] -> [B,S].

    Computed as 2 v^T sigmoid(2 (W_s s_i + W_h h_j)) - sum(v), since tanh(x) = 2 sigmoid(2x) - 1: the
    [B,S,A] tensor is the largest of a decoder step, and PyTorch's sigmoid runs about 4x faster than its tanh
    on a CPU. Doubling is exact in floating point, so only sigmoid and the sum round differently from tanh.
    """
    z = torch.add(2 * query_term.unsqueeze(1), projected_keys, alpha=2)
    # In place: one copy of the [B,S,A] tensor is enough. v^T as a matrix-vector product: its backward is
    # cheaper than a one-column nn.Linear's.
    return torch.matmul(z.sigmoid_(), 2 * v) - v.sum()


def _context(alpha: Tensor, values: Tensor) -> Tensor:
    """c_i = sum_j alpha_ij h_j (Bahdanau eq. 5): alpha [B,S], values [B,S,Dv] -> [B,Dv]."""
    return torch.bmm(alpha.unsqueeze(1), values).squeeze(1)


class Attention(nn.Module, metaclass=abc.ABCMeta):
    """Attention over the annotations h_j with a pluggable score (Bahdanau et al. 2014, eq. 5-6):

        e_ij = score(s, h_j),   alpha_ij = softmax_j(e_ij),   c_i = sum_j alpha_ij h_j

    `s` is the decoder's query: s_{i-1} in Bahdanau's order, s_i in Luong's. A score subclass
    provides `project_keys` (the part of the score that does not depend on the query, computed once
    per sentence) and `score` (e for one query); registered with
    :func:`attnmt.models.registry.register_score`, it becomes `model.score: NAME`.
    """

    same_size = False  # True when the score needs the query exactly as wide as the keys
    # True when the score reads the coverage C_{i-1,j} = sum_{k<i} alpha_kj (the decoder then keeps it in its state)
    uses_coverage = False
    reads_attn_size = False  # True when the score has a layer of model.attn_size units

    def __init__(self, query_size: int, key_size: int, attn_size: int) -> None:
        super().__init__()

    def project_keys(self, keys: Tensor) -> Tensor:
        """The query-independent part of the score for all j: [B,S,Dk] -> [B,S,*]."""
        return keys

    @abc.abstractmethod
    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """e [B,S] for query [B,Dq] and the output of :meth:`project_keys` (every score defines it)."""

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor,
        projected_keys: Tensor | None = None,
        coverage: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Context c_i [B,Dv] and weights alpha_i [B,S] for a query [B,Dq].

        keys [B,S,Dk], values [B,S,Dv], mask [B,S] (True = real). Pass ``projected_keys`` from
        :meth:`project_keys` to skip recomputing the key side at every decoder step. ``coverage``
        [B,S] is read only by a score with ``uses_coverage``.
        """
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        e = self.score(query, projected_keys, coverage) if self.uses_coverage else self.score(query, projected_keys)
        alpha = masked_softmax(e, mask)
        return _context(alpha, values), alpha


@register_score("additive")
class AdditiveAttention(Attention):
    """Bahdanau et al. (2014), eq. 6: e_ij = v^T tanh(W_s s_{i-1} + W_h h_j).

    Luong et al. (2015) call the same score "concat": v_a^T tanh(W_a [h_t; h_s]), with W_a = [W_s | W_h].
    """

    reads_attn_size = True

    def __init__(self, query_size: int, key_size: int, attn_size: int) -> None:
        super().__init__(query_size, key_size, attn_size)
        # No biases, as in the paper (appendix A.1.2: W_a, U_a, v_a); the NumPy reference agrees.
        self.W_s = nn.Linear(query_size, attn_size, bias=False)
        self.W_h = nn.Linear(key_size, attn_size, bias=False)
        self.v = nn.Linear(attn_size, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        """W_h h_j for all j: [B,S,Dk] -> [B,S,A]. Independent of i, so compute it once per sentence."""
        return self.W_h(keys)

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return _additive_scores(self.W_s(query), projected_keys, self.v.weight[0])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Models saved when Luong's concat score had its own module name its weights W_q, W_k, v_a.
        for old, new in (("W_q", "W_s"), ("W_k", "W_h"), ("v_a", "v")):
            if prefix + old + ".weight" in state_dict:
                state_dict[prefix + new + ".weight"] = state_dict.pop(prefix + old + ".weight")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


@register_score("additive_coverage")
class CoverageAttention(AdditiveAttention):
    """The additive score told how much of each source word is already translated (Tu et al. 2016,
    "Modeling Coverage for Neural Machine Translation", eq. 8-9 with fertility 1; See et al. 2017, eq. 11):

        e_ij = v^T tanh(W_s s + W_h h_j + W_c C_{i-1,j}),   C_{i,j} = C_{i-1,j} + alpha_ij,   C_{0,j} = 0

    C_{i-1,j} is the attention that h_j has received before step i. With it the score can learn to turn
    away from words it has read (against repeating them) and towards words it has not (against
    dropping them). The decoder keeps C in its state, so beam search carries it like the RNN state.
    """

    uses_coverage = True

    def __init__(self, query_size: int, key_size: int, attn_size: int) -> None:
        super().__init__(query_size, key_size, attn_size)
        self.W_c = nn.Linear(1, attn_size, bias=False)  # w_c: C_{i-1,j} is one number per source word

    def score(self, query: Tensor, projected_keys: Tensor, coverage: Tensor | None = None) -> Tensor:
        if coverage is not None:
            projected_keys = projected_keys + self.W_c(coverage.to(projected_keys.dtype).unsqueeze(-1))
        return super().score(query, projected_keys)


@register_score("dot")
class DotAttention(Attention):
    """Luong et al. (2015), eq. 8: score(h_t, h_s) = h_t^T h_s (no parameters)."""

    same_size = True

    def __init__(self, query_size: int, key_size: int, attn_size: int | None = None) -> None:
        super().__init__(query_size, key_size, attn_size)
        if query_size != key_size:
            raise ValueError(f"the 'dot' score needs query_size == key_size, got {query_size} != {key_size}")

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return torch.bmm(projected_keys, query.unsqueeze(-1)).squeeze(-1)


@register_score("general")
class GeneralAttention(DotAttention):
    """Luong et al. (2015), eq. 8: score(h_t, h_s) = h_t^T W_a h_s."""

    same_size = False

    def __init__(self, query_size: int, key_size: int, attn_size: int | None = None) -> None:
        Attention.__init__(self, query_size, key_size, attn_size)
        self.W_a = nn.Linear(key_size, query_size, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        """W_a h_s for all s, once per sentence."""
        return self.W_a(keys)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    causal: bool = False,
    dropout: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """Vaswani et al. (2017), eq. 1: softmax(Q K^T / sqrt(d_k)) V, returning (output, weights).

    query [..., Tq, dk], key [..., Tk, dk], value [..., Tk, dv]; ``mask`` is bool, broadcastable to
    [..., Tq, Tk] (True = may attend); ``causal`` adds :func:`causal_mask`. ``dropout``, if given, is
    applied to the weights used for the output; the returned weights are the undropped distribution.
    """
    e = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if causal:
        c = causal_mask(query.size(-2), key.size(-2), device=query.device)
        mask = c if mask is None else mask & c
    weights = masked_softmax(e, mask)
    attn = weights if dropout is None else dropout(weights)
    return attn @ value, weights


def _fused_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, causal: bool, dropout_p: float
) -> Tensor:
    """The output of :func:`scaled_dot_product_attention` from torch's fused kernels, which skip the weights."""
    if causal and mask is None and query.size(-2) == key.size(-2):
        return F.scaled_dot_product_attention(query, key, value, dropout_p=dropout_p, is_causal=True)
    if causal:  # torch's is_causal aligns top-left; ours aligns bottom-right, so pass it as a mask
        c = causal_mask(query.size(-2), key.size(-2), device=query.device)
        mask = c if mask is None else mask & c
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
    if mask is None:
        return out
    # Backends disagree on a row with nothing to attend (0 or NaN); make it our zero.
    return out.masked_fill(~mask.any(-1, keepdim=True), 0.0)


def _explicit_is_faster(query: Tensor) -> bool:
    """Whether :func:`scaled_dot_product_attention`'s matrix products beat torch's fused kernel: bfloat16 on a CPU.

    There torch's kernel runs its math in float32 (with dropout or a mask: casts, then fp32 products) or is a
    flash kernel slow at short sequences; the explicit products stay in bfloat16, 2-5x faster forward and backward
    at a Multi30k Transformer's shapes (benchmarks/bf16_profile.py)."""
    return query.device.type == "cpu" and query.dtype == torch.bfloat16


class MultiHeadAttention(nn.Module):
    """Vaswani et al. (2017), section 3.2.2: Concat(head_1..head_h) W^O, head_i = Attention(QW_i^Q, KW_i^K, VW_i^V)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        # One [D,D] matrix per role holds the h per-head projections side by side.
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def _split_heads(self, x: Tensor) -> Tensor:
        """[B,T,D] -> [B,H,T,dh]."""
        return x.unflatten(-1, (self.n_heads, self.d_head)).transpose(1, 2)

    def project_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Per-head K W^K and V W^V: [B,Tk,D] -> [B,H,Tk,dh] each. Cache these when decoding step by step."""
        return self._split_heads(self.W_k(key)), self._split_heads(self.W_v(value))

    def attend(
        self,
        query: Tensor,
        k: Tensor,
        v: Tensor,
        key_mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend with already projected per-head ``k``, ``v`` [B,H,Tk,dh] (from :meth:`project_kv`).

        query [B,Tq,D]; key_mask [B,Tk] (True = real). ``causal`` aligns the queries with the last
        Tq keys (see :func:`causal_mask`), so a one-step query against a growing cache just works.
        Returns out [B,Tq,D] and weights [B,H,Tq,Tk]; with ``need_weights=False`` the weights are None
        and torch's fused kernel computes the output (in bfloat16 on a CPU, the explicit products).
        """
        q = self._split_heads(self.W_q(query))
        mask = None if key_mask is None else key_mask[:, None, None, :]  # -> [B,1,1,Tk]
        weights: Tensor | None = None
        if need_weights or _explicit_is_faster(q):
            heads, weights = scaled_dot_product_attention(q, k, v, mask, causal, self.dropout)
            weights = weights if need_weights else None
        else:  # torch's fused kernel: faster, same output (tested)
            heads = _fused_attention(q, k, v, mask, causal, self.dropout.p if self.training else 0.0)
        return self.W_o(heads.transpose(1, 2).flatten(-2)), weights

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """out [B,Tq,D] and per-head weights [B,H,Tq,Tk]; query [B,Tq,D], key/value [B,Tk,D]."""
        k, v = self.project_kv(key, value)
        return self.attend(query, k, v, key_mask, causal, need_weights)

    @torch.no_grad()
    def load_from_torch(self, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of an ``nn.MultiheadAttention`` of the same size into this module; returns self."""
        if (mha.embed_dim, mha.num_heads) != (self.d_model, self.n_heads) or not mha._qkv_same_embed_dim:
            raise ValueError(
                "load_from_torch needs nn.MultiheadAttention(d_model, n_heads) with kdim == vdim == d_model"
            )
        if (mha.in_proj_bias is None) != (self.W_q.bias is None) or mha.bias_k is not None:
            raise ValueError("load_from_torch needs the same bias setting and no add_bias_kv")
        for i, linear in enumerate((self.W_q, self.W_k, self.W_v)):
            rows = slice(i * self.d_model, (i + 1) * self.d_model)
            linear.weight.copy_(mha.in_proj_weight[rows])
            if linear.bias is not None:
                linear.bias.copy_(mha.in_proj_bias[rows])
        self.W_o.weight.copy_(mha.out_proj.weight)
        if self.W_o.bias is not None:
            self.W_o.bias.copy_(mha.out_proj.bias)
        return self
