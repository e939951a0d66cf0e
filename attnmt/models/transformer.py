"""The Transformer of Vaswani et al. (2017), "Attention Is All You Need", for translation.

Read top to bottom it follows the paper: positional encodings (sec. 3.5), the position-wise
feed-forward network (sec. 3.3, eq. 2), the encoder and decoder layers (sec. 3.1) built on
:class:`attnmt.models.attention.MultiHeadAttention` (sec. 3.2.2), and the model, whose embeddings
are multiplied by sqrt(d_model) (sec. 3.4). One departure, now standard: layer normalisation is
applied *before* each sub-layer (pre-LN, Xiong et al. 2020), x + Sublayer(LayerNorm(x)), with a final
LayerNorm on the encoder and decoder outputs; it trains stably without a careful warmup.

It implements the model interface of docs/architecture.md. Every tensor of ``enc`` and of the
decoder state is batch-first, so beam search reorders them with ``index_select(0, ...)``:

  enc   = {"memory" [B,S,D], "mask" [B,S] (True = real), "ck{l}", "cv{l}" [B,H,S,dh] per decoder layer}
          (the cross-attention keys/values K W^K, V W^V of the memory, projected once per sentence)
  state = {"k{l}", "v{l}" [B,H,t,dh] per decoder layer (self-attention cache of the t tokens so far),
           "pos" [B] long (the position of the next token)}

Teacher forcing (:meth:`Transformer.forward`) and one decoding step (:meth:`Transformer.decode_step`)
run the same code: the decoder reads the new tokens at positions pos, pos+1, ... against the cached
keys/values of the earlier ones, so a step never recomputes the prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.config.bounds import MAX_HEADS, MAX_WIDTH
from attnmt.config.schema import ModelConfig
from attnmt.config.special import PAD_ID
from attnmt.config.typed import ranged
from attnmt.errors import UserError
from attnmt.models.attention import MultiHeadAttention
from attnmt.models.dropout import Dropout
from attnmt.models.registry import register_model

__all__ = ["Transformer", "TransformerConfig", "sinusoidal_encoding"]



def sinusoidal_encoding(positions: Tensor, d_model: int) -> Tensor:
    """Sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).

    positions: a long tensor of any shape [...]; returns float32 [..., d_model]. Computed on the fly,
    so there is no maximum length.
    """
    i = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)  # 2i
    angle = positions.unsqueeze(-1).float() * torch.exp(-math.log(10000.0) * i / d_model)
    # interleave sin (even dims) and cos (odd dims); an odd d_model drops the last cos
    return torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(-2)[..., :d_model]


class FeedForward(nn.Module):
    """Sec. 3.3, eq. 2: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alike."""

    def __init__(self, d_model: int, ff_size: int, dropout: float) -> None:
        super().__init__()
        self.W_1 = nn.Linear(d_model, ff_size)
        self.W_2 = nn.Linear(ff_size, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.W_2(self.dropout(F.relu(self.W_1(x))))


class EncoderLayer(nn.Module):
    """Sec. 3.1: multi-head self-attention, then the feed-forward network, each in a residual (pre-LN)."""

    def __init__(self, d_model: int, n_heads: int, ff_size: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, ff_size, dropout)
        self.dropout = Dropout(dropout)  # sec. 5.4, residual dropout

    def forward(self, x: Tensor, mask: Tensor, kept: list[Tensor] | None = None) -> Tensor:
        """x [B,S,D], mask [B,S] (True = real) -> [B,S,D]; padding is never attended. A list ``kept``
        receives the self-attention weights [B,H,S,S] (read by the explorer; training passes none)."""
        h = self.ln_1(x)
        out, weights = self.self_attn(h, h, h, key_mask=mask, need_weights=kept is not None)
        if kept is not None:
            kept.append(weights)
        x = x + self.dropout(out)
        return x + self.dropout(self.ffn(self.ln_2(x)))


class DecoderLayer(nn.Module):
    """Sec. 3.1: masked self-attention, attention over the encoder output, feed-forward; each pre-LN residual."""

    def __init__(self, d_model: int, n_heads: int, ff_size: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln_3 = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, ff_size, dropout)
        self.dropout = Dropout(dropout)

    def forward(self, y: Tensor, k: Tensor, v: Tensor, ck: Tensor, cv: Tensor, mask: Tensor,
                tgt_mask: Tensor | None = None, kept: list[Tensor] | None = None):
        """Read T new positions y [B,T,D] after the t cached ones (k, v [B,H,t,dh]).

        ck, cv [B,H,S,dh]: the memory's projected cross-attention keys/values; mask [B,S].
        Returns y [B,T,D], the grown cache k, v [B,H,t+T,dh] and the cross-attention weights [B,H,T,S].
        ``tgt_mask`` [B,T] (True = real) lifts the causal mask: every position sees every real target
        position, earlier or later (the full-context pass of guided alignment; no cache before it).
        A list ``kept`` receives the self-attention weights [B,H,T,t+T].
        """
        h = self.ln_1(y)
        k_new, v_new = self.self_attn.project_kv(h, h)
        k, v = torch.cat((k, k_new), dim=2), torch.cat((v, v_new), dim=2)
        # causal: position t+i sees keys 0..t+i (the mask is aligned with the last T keys)
        out, self_weights = self.self_attn.attend(h, k, v, key_mask=tgt_mask, causal=tgt_mask is None,
                                                  need_weights=kept is not None)
        if kept is not None:
            kept.append(self_weights)
        y = y + self.dropout(out)
        out, weights = self.cross_attn.attend(self.ln_2(y), ck, cv, key_mask=mask, need_weights=True)
        y = y + self.dropout(out)
        y = y + self.dropout(self.ffn(self.ln_3(y)))
        return y, k, v, weights


@dataclass
class TransformerConfig(ModelConfig):
    """model.type transformer (Vaswani et al. 2017), beside ModelConfig's keys."""

    type: str = "transformer"
    d_model: int = ranged(256, 1, MAX_WIDTH)
    n_heads: int = ranged(4, 1, MAX_HEADS)
    ff_size: int = ranged(1024, 1, MAX_WIDTH)
    share_embeddings: bool = False  # one embedding for source and target (needs a joint vocab)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_model % self.n_heads:
            raise UserError(
                f"config: model.d_model={self.d_model} is not divisible by model.n_heads={self.n_heads}; "
                "choose sizes with d_model % n_heads == 0"
            )


@register_model("transformer")
class Transformer(nn.Module):
    """Vaswani et al. (2017): an encoder stack and a decoder stack of attention layers, no recurrence."""

    config_class = TransformerConfig  # its model.* keys (register_model derives config_keys from it)
    has_attention = True
    has_heads = True
    query_lag = 0  # position i's query has read its input y_{i-1} through the causal self-attention
    has_full_context = True  # can attend over the whole target in an extra pass (Garg et al. 2019)
    has_self_attention = True  # forward_with_self_attention gives the encoder's and decoder's self-attention

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 256, n_heads: int = 4,
                 ff_size: int = 1024, enc_layers: int = 3, dec_layers: int = 3, dropout: float = 0.1,
                 tie_embeddings: bool = False, share_embeddings: bool = False) -> None:
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary for both languages, but the source has "
                f"{src_vocab_size} entries and the target {tgt_vocab_size}; set data.joint_vocab: true "
                "or model.share_embeddings: false"
            )
        self.d_model, self.n_heads = d_model, n_heads
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=PAD_ID)
        # sec. 3.4: "we share the same weight matrix between the two embedding layers and the
        # pre-softmax linear transformation" -- both optional here
        self.src_embed = self.tgt_embed if share_embeddings else nn.Embedding(src_vocab_size, d_model,
                                                                               padding_idx=PAD_ID)
        self.dropout = Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, ff_size, dropout) for _ in range(enc_layers))
        self.enc_ln = nn.LayerNorm(d_model)
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, ff_size, dropout) for _ in range(dec_layers))
        self.dec_ln = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._init_weights()
        if tie_embeddings:
            self.output.weight = self.tgt_embed.weight

    @classmethod
    def from_config(cls, cfg: TransformerConfig, src_vocab_size: int, tgt_vocab_size: int) -> Transformer:
        """Build from its config."""
        return cls(src_vocab_size, tgt_vocab_size, d_model=cfg.d_model, n_heads=cfg.n_heads, ff_size=cfg.ff_size,
                   enc_layers=cfg.enc_layers, dec_layers=cfg.dec_layers, dropout=cfg.dropout,
                   tie_embeddings=cfg.tie_embeddings, share_embeddings=cfg.share_embeddings)

    @torch.no_grad()
    def _init_weights(self) -> None:
        """Xavier-uniform matrices, zero biases; embeddings N(0, d^-1/2), so that sqrt(d) E x has unit scale."""
        for name, p in self.named_parameters():
            if "embed" in name:
                nn.init.normal_(p, 0.0, self.d_model ** -0.5)
                p[PAD_ID].zero_()
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def embed(self, table: nn.Embedding, tokens: Tensor, positions: Tensor) -> Tensor:
        """Sec. 3.4-3.5: sqrt(d_model) E[token] + PE(position), then dropout (sec. 5.4)."""
        x = table(tokens) * math.sqrt(self.d_model)
        return self.dropout(x + sinusoidal_encoding(positions, self.d_model).to(x.dtype))

    # ------------------------------------------------------------------------------------ encoder

    def encode(self, src: Tensor, src_len: Tensor, kept: list[Tensor] | None = None) -> dict[str, Tensor]:
        """src [B,S], src_len [B] -> memory [B,S,D], mask [B,S] and each decoder layer's projected K/V.
        A list ``kept`` receives each encoder layer's self-attention weights [B,H,S,S]."""
        S = src.size(1)
        mask = torch.arange(S, device=src.device).unsqueeze(0) < src_len.to(src.device).unsqueeze(1)
        x = self.embed(self.src_embed, src, torch.arange(S, device=src.device).expand_as(src))
        for layer in self.encoder:
            x = layer(x, mask, kept)
        memory = self.enc_ln(x)
        enc = {"memory": memory, "mask": mask}
        for l, layer in enumerate(self.decoder):
            # K W^K and V W^V of the memory do not depend on the target: once per sentence
            enc[f"ck{l}"], enc[f"cv{l}"] = layer.cross_attn.project_kv(memory, memory)
        return enc

    # ------------------------------------------------------------------------------------ decoder

    def init_state(self, enc: dict[str, Tensor]) -> dict[str, Tensor]:
        """Empty self-attention caches [B,H,0,dh] per decoder layer and pos = 0 [B]."""
        memory = enc["memory"]
        B = memory.size(0)
        empty = memory.new_zeros(B, self.n_heads, 0, self.d_model // self.n_heads)
        state = {"pos": torch.zeros(B, dtype=torch.long, device=memory.device)}
        for l in range(len(self.decoder)):
            state[f"k{l}"], state[f"v{l}"] = empty, empty
        return state

    def _decode(self, tgt: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor], full_context: bool = False,
                n_layers: int | None = None, kept: list[Tensor] | None = None):
        """Run the decoder on T new tokens tgt [B,T] after the state's prefix.

        Returns the output y [B,T,D] (after the final LayerNorm), the new state and the list of
        every layer's cross-attention weights [B,H,T,S]. ``full_context`` drops the causal mask (every
        position sees the whole target but its padding; from an empty state) and ``n_layers`` stops
        after that many layers: the full-context pass of guided alignment needs no layer above its head.
        A list ``kept`` receives each layer's self-attention weights [B,H,T,t+T].
        """
        positions = state["pos"].unsqueeze(1) + torch.arange(tgt.size(1), device=tgt.device)
        y = self.embed(self.tgt_embed, tgt, positions)
        tgt_mask = tgt != PAD_ID if full_context else None
        new_state = {"pos": state["pos"] + tgt.size(1)}
        weights = []
        for l, layer in enumerate(self.decoder[:n_layers]):
            y, new_state[f"k{l}"], new_state[f"v{l}"], w = layer(
                y, state[f"k{l}"], state[f"v{l}"], enc[f"ck{l}"], enc[f"cv{l}"], enc["mask"], tgt_mask, kept)
            weights.append(w)
        return self.dec_ln(y), new_state, weights

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, layer: int = -1,
                head: int | None = None, full_context: bool = False, features: bool = False) -> tuple[Tensor, Tensor]:
        """Teacher forcing: logits [B,T,V] and one decoder layer's cross-attention [B,T,S]: the last
        layer's (or ``layer``'s), averaged over the heads (or ``head``'s alone).

        ``full_context`` takes that attention from a second decoder pass without the causal mask, up
        to ``layer``, in which every position sees the whole target (Garg et al. 2019: the
        aligner knows the words after the one it aligns). The logits always come from the causal pass.
        ``features=True`` gives what the output layer (``self.output``) reads, [B,T,D], instead of the logits.
        """
        enc = self.encode(src, src_len)
        y, _, weights = self._decode(tgt_in, self.init_state(enc), enc)
        if full_context:
            n_layers = layer % len(self.decoder) + 1
            weights = self._decode(tgt_in, self.init_state(enc), enc, full_context=True, n_layers=n_layers)[2]
            layer = n_layers - 1
        chosen = weights[layer]
        return y if features else self.output(y), chosen.mean(dim=1) if head is None else chosen[:, head]

    def decode_step(self, y_prev: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor]):
        """One token y_prev [B] -> float32 log p(y | y_<=prev, x) [B,V], the new state, alpha [B,S]."""
        y, state, weights = self._decode(y_prev.unsqueeze(1), state, enc)
        log_probs = F.log_softmax(self.output(y[:, 0]).float(), dim=-1)
        return log_probs, state, weights[-1][:, :, 0].mean(dim=1)

    def forward_with_heads(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, full_context: bool = False,
                           logits: bool = True) -> tuple[Tensor | None, Tensor]:
        """Teacher forcing: logits [B,T,V] and every decoder layer's and head's cross-attention [L,H,B,T,S]
        (with ``full_context``, the attention of the pass without the causal mask, as in :meth:`forward`).
        ``logits=False`` skips the output layer (None instead of logits): reading the attention alone, as
        word alignment does, then costs about half the pass."""
        enc = self.encode(src, src_len)
        y, _, weights = self._decode(tgt_in, self.init_state(enc), enc)
        if full_context:
            weights = self._decode(tgt_in, self.init_state(enc), enc, full_context=True)[2]
        return self.output(y) if logits else None, torch.stack(weights).transpose(1, 2)

    def forward_with_self_attention(self, src: Tensor, src_len: Tensor,
                                    tgt_in: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Teacher forcing: logits [B,T,V], every decoder layer's and head's cross-attention [L,H,B,T,S], and
        the self-attention of every encoder layer and head [L,H,B,S,S] and of every decoder layer and head
        [L,H,B,T,T] (causal: a row has no weight after its own position). What the explorer draws."""
        encoder: list[Tensor] = []
        decoder: list[Tensor] = []
        enc = self.encode(src, src_len, encoder)
        y, _, weights = self._decode(tgt_in, self.init_state(enc), enc, kept=decoder)
        return (self.output(y), torch.stack(weights).transpose(1, 2), torch.stack(encoder).transpose(1, 2),
                torch.stack(decoder).transpose(1, 2))
