"""The contracts of a model and of an attention score, as typing Protocols.

One greedy search, one beam search, sampling, ensembles, training and the teacher-forced pass
serve every model through `TranslationModel`; align, study and serve ask its capabilities
(`has_attention`, `has_heads`, `has_full_context`,
`has_self_attention`) instead of its type's name. A model with attention also says how
far its query lags behind its input (`AttentionModel.query_lag`, which the shift alignment reads).
An attention score (`AttentionScore`) is what `model.score` names. tests/models/test_models.py checks
that every registered model and score satisfies its protocol.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor, nn


@runtime_checkable
class TranslationModel(Protocol):
    """What search, training and translation rely on (tensors batch-first; enc["mask"] True = real)."""

    model_type: str  # the name it is registered under (model.type)
    config_keys: frozenset  # the model.* keys it reads; a config that sets another is refused
    has_attention: bool  # whether forward/decode_step give attention weights
    has_heads: bool  # whether forward_with_heads gives every layer's and head's cross-attention
    # whether forward/forward_with_heads take full_context=True: attention from a pass in which every target
    # position sees the whole target (guided alignment's train.guided_alignment.full_context)
    has_full_context: bool
    # whether forward_with_self_attention gives the encoder's and decoder's self-attention (the explorer's)
    has_self_attention: bool

    # the output layer, an nn.Linear: logits = output(features); training fuses it with the loss
    # (attnmt.train.cross_entropy.linear_cross_entropy_sum)
    output: nn.Linear

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor,
                features: bool = False) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits [B,T,V] (``features=True``: the output layer's input [B,T,d] instead) and
        attention alpha [B,T,S] (None without attention)."""
        ...

    def encode(self, src: Tensor, src_len: Tensor) -> dict[str, Tensor]:
        ...

    def init_state(self, enc: dict[str, Tensor]) -> dict[str, Tensor]:
        ...

    def decode_step(self, y_prev: Tensor, state: dict[str, Tensor],
                    enc: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor], Tensor | None]:
        """One target position: float32 log probs [B,V], the new state, alpha [B,S] or None."""
        ...


@runtime_checkable
class AttentionModel(TranslationModel, Protocol):
    """A model with attention: the target inputs its query has read lag its step's input by query_lag."""

    query_lag: int


@runtime_checkable
class AttentionScore(Protocol):
    """e_ij = score(s, h_j) for a query s and the annotations h_j (attnmt.models.attention.Attention)."""

    same_size: bool  # whether the query must be as wide as the keys
    uses_coverage: bool  # whether score() also takes the coverage C_{i-1} [B,S] (the decoder keeps it)
    reads_attn_size: bool  # whether the score has a layer of model.attn_size units

    def project_keys(self, keys: Tensor) -> Tensor:
        """The query-independent part of the score, once per sentence: [B,S,Dk] -> [B,S,*]."""
        ...

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """e [B,S] for query [B,Dq]."""
        ...
