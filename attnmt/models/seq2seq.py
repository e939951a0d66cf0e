"""The recurrent encoder-decoder models: Sutskever's seq2seq and Bahdanau's RNNsearch.

Both implement the model interface of docs/architecture.md:
  forward(src, src_len, tgt_in) -> (logits [B,T,V], alpha [B,T,S] or None)   teacher forcing
  encode(src, src_len) -> enc;  init_state(enc) -> state;
  decode_step(y_prev, state, enc) -> (log_probs [B,V], state, alpha [B,S] or None)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.config.bounds import MAX_WIDTH
from attnmt.config.schema import ModelConfig
from attnmt.config.typed import ranged
from attnmt.errors import UserError
from attnmt.models.decoders import BahdanauDecoder, FixedVectorDecoder, LuongDecoder
from attnmt.models.encoders import RNNEncoder
from attnmt.models.registry import SCORES, register_model, score_class


@dataclass
class RNNConfig(ModelConfig):
    """The keys of model.* that every recurrent model reads, beside ModelConfig's."""

    cell: Literal["lstm", "gru"] = "lstm"
    emb_size: int = ranged(256, 1, MAX_WIDTH)
    # decoder state; also the encoder's, per direction, unless enc_hidden_size is set
    hidden_size: int = ranged(256, 1, MAX_WIDTH)


@dataclass
class Seq2SeqConfig(RNNConfig):
    """model.type seq2seq (its decoder is as wide as the encoder: no enc_hidden_size)."""

    type: str = "seq2seq"
    reverse_source: bool = False  # feed the source backwards (Sutskever et al. 2014)
    # give the fixed vector c to every decoder step, s_i = f(s_{i-1}, y_{i-1}, c), as Cho et al. (2014)'s
    # RNN Encoder-Decoder (Bahdanau et al.'s RNNencdec) does, not only as the initial state.
    feed_context: bool = False


@dataclass
class RNNSearchConfig(RNNConfig):
    """model.type rnnsearch."""

    type: str = "rnnsearch"
    # encoder size per direction (OpenNMT's brnn halves hidden_size)
    enc_hidden_size: Optional[int] = ranged(None, 1, MAX_WIDTH)
    # The decoder's order. bahdanau: s_{i-1} queries the source before the state update (Bahdanau et al.
    # 2014); luong: s_i queries after it, and the attentional vector h~_i = tanh(W_c [c_i; s_i]) feeds the
    # output layer (Luong et al. 2015).
    decoder: Literal["bahdanau", "luong"] = "bahdanau"
    score: str = "additive"  # a name in attnmt.models.SCORES: additive | additive_coverage | dot | general
    attn_size: Optional[int] = ranged(None, 1, MAX_WIDTH)  # width of the additive score's layer (default hidden_size)
    input_feeding: bool = False  # decoder luong: feed the attentional vector to the next step
    # The older single key for decoder + score: bahdanau | luong_dot | luong_general | luong_concat.
    attention: Optional[str] = None

    def __post_init__(self) -> None:
        if self.attention is not None:
            _read_attention_alias(self)
        super().__post_init__()
        score = score_class(self.score)  # an unknown name: one line with the closest registered one
        if self.attn_size is not None and not score.reads_attn_size:
            readers = [name for name, other in SCORES.items() if other.reads_attn_size]
            raise UserError(f"config: model.attn_size applies to score {' and '.join(readers)}, not {self.score}: "
                            "remove it")
        if self.input_feeding and self.decoder != "luong":
            raise UserError("config: model.input_feeding applies to decoder luong, not bahdanau: remove it or set "
                            "model.decoder: luong")


# model.attention's values -> (model.decoder, model.score). Luong's "concat" score is Bahdanau's additive one.
ATTENTION_ALIASES = {"bahdanau": ("bahdanau", "additive"), "luong_dot": ("luong", "dot"),
                     "luong_general": ("luong", "general"), "luong_concat": ("luong", "additive")}


def _read_attention_alias(cfg: RNNSearchConfig) -> None:
    """model.attention, the older key, written as model.decoder + model.score."""
    value = cfg.attention
    if value not in ATTENTION_ALIASES:
        raise UserError(f"config: model.attention={value!r} is unknown; allowed: {' | '.join(ATTENTION_ALIASES)} "
                        "(or write model.decoder and model.score)")
    decoder, score = ATTENTION_ALIASES[value]
    given = {"decoder": cfg.decoder, "score": cfg.score}
    for key, default, wanted in (("decoder", "bahdanau", decoder), ("score", "additive", score)):
        if given[key] not in (default, wanted):
            raise UserError(f"config: model.attention={value!r} means model.{key}: {wanted}, but model.{key} is "
                            f"{given[key]!r}; keep one of the two")
    cfg.decoder, cfg.score, cfg.attention = decoder, score, None
    if value != "bahdanau":
        print(f"note: model.attention: {value} is written model.decoder: {decoder} + model.score: {score} now",
              file=sys.stderr)


def reverse_padded(src: Tensor, src_len: Tensor) -> Tensor:
    """Reverse each sentence within its own length, leaving the padding at the end."""
    S = src.size(1)
    positions = torch.arange(S, device=src.device).unsqueeze(0)
    index = (src_len.unsqueeze(1) - 1 - positions).clamp(min=0)
    index = torch.where(positions < src_len.unsqueeze(1), index, positions)
    return src.gather(1, index)


class EncoderDecoder(nn.Module):
    """An encoder, a decoder and the output layer that turns the decoder's readout t_i into
    word scores: p(y_i | y_<i, x) = softmax(W_o t_i)."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module, tgt_vocab_size: int, tie_embeddings: bool):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        emb_size = decoder.embed.embedding_dim
        # Tying needs the readout in embedding space: project it there when the sizes differ.
        self.pre_output = (
            nn.Linear(decoder.output_size, emb_size, bias=False)
            if tie_embeddings and decoder.output_size != emb_size
            else nn.Identity()
        )
        self.output = nn.Linear(emb_size if tie_embeddings else decoder.output_size, tgt_vocab_size)
        if tie_embeddings:
            self.output.weight = decoder.embed.weight

    def logits(self, t: Tensor) -> Tensor:
        return self.output(self.pre_output(t))

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor,
                features: bool = False) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits [B,T,V] (``features=True``: what the output layer reads, instead) and alpha."""
        enc = self.encode(src, src_len)
        t, alpha = self.decoder(tgt_in, self.init_state(enc), enc)
        return self.pre_output(t) if features else self.logits(t), alpha

    def init_state(self, enc: dict[str, Tensor]) -> dict[str, Tensor]:
        return self.decoder.init_state(enc)

    def decode_step(self, y_prev: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor]):
        t_i, state, alpha = self.decoder.step(y_prev, state, enc)
        return F.log_softmax(self.logits(t_i).float(), dim=-1), state, alpha


@register_model("seq2seq")
class Seq2Seq(EncoderDecoder):
    """Sutskever, Vinyals & Le (2014): the source is read into one fixed vector, the encoder's
    final state, from which the decoder must produce the whole translation."""

    config_class = Seq2SeqConfig  # its model.* keys (register_model derives config_keys from it)
    has_attention = False  # capabilities that align, study and serve ask of a model
    has_heads = False
    has_full_context = False
    has_self_attention = False

    def __init__(self, src_vocab_size, tgt_vocab_size, emb_size, hidden_size, enc_layers, dec_layers,
                 cell="lstm", dropout=0.0, reverse_source=True, tie_embeddings=False, feed_context=False):
        if enc_layers != dec_layers:
            raise ValueError("seq2seq passes each encoder layer's final state to the same decoder layer: "
                             "enc_layers must equal dec_layers")
        encoder = RNNEncoder(src_vocab_size, emb_size, hidden_size, enc_layers, cell, False, dropout)
        decoder = FixedVectorDecoder(tgt_vocab_size, emb_size, hidden_size, dec_layers, cell, dropout, feed_context)
        super().__init__(encoder, decoder, tgt_vocab_size, tie_embeddings)
        self.reverse_source = reverse_source

    @classmethod
    def from_config(cls, cfg: Seq2SeqConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
        """Build from its config."""
        return cls(src_vocab_size, tgt_vocab_size, emb_size=cfg.emb_size, hidden_size=cfg.hidden_size,
                   enc_layers=cfg.enc_layers, dec_layers=cfg.dec_layers, cell=cfg.cell, dropout=cfg.dropout,
                   reverse_source=cfg.reverse_source, tie_embeddings=cfg.tie_embeddings, feed_context=cfg.feed_context)

    def encode(self, src: Tensor, src_len: Tensor) -> dict[str, Tensor]:
        if self.reverse_source:
            # "we found it extremely valuable to reverse the order of the words of the input sentence"
            src = reverse_padded(src, src_len)
        _, final = self.encoder(src, src_len)
        enc = {"mask": src != 0, "final_h": final["h"]}
        if "c" in final:
            enc["final_c"] = final["c"]
        return enc


@register_model("rnnsearch")
class RNNSearch(EncoderDecoder):
    """Bahdanau, Cho & Bengio (2014): a bidirectional encoder keeps one annotation h_j per source
    word, and the decoder attends over all of them at every target step.

    Two independent choices: the decoder's order (`decoder`: Bahdanau's s_{i-1} queries before the
    state update; Luong's s_i queries after it and feeds an attentional vector to the output) and
    the score (`score`: a name in attnmt.models.SCORES, e.g. additive, additive_coverage, dot, general).
    """

    config_class = RNNSearchConfig
    has_attention = True
    has_heads = False
    has_full_context = False
    has_self_attention = False

    def __init__(self, src_vocab_size, tgt_vocab_size, emb_size, hidden_size, enc_layers, dec_layers,
                 cell="lstm", dropout=0.0, decoder="bahdanau", score="additive", attn_size=None,
                 input_feeding=False, tie_embeddings=False, enc_hidden_size=None):
        # The annotations h_j = [->h_j; <-h_j] are 2 * enc_hidden_size wide; the decoder state need not match.
        encoder = RNNEncoder(src_vocab_size, emb_size, enc_hidden_size or hidden_size, enc_layers, cell, True, dropout)
        enc_size = encoder.output_size
        attn_size = attn_size or hidden_size
        # A score such as the dot product s^T h_j needs the decoder state as wide as the annotations.
        dec_hidden = enc_size if score_class(score).same_size else hidden_size
        if decoder == "bahdanau":
            if input_feeding:
                raise ValueError("input_feeding belongs to Luong's order (decoder: luong)")
            dec = BahdanauDecoder(tgt_vocab_size, emb_size, enc_size, dec_hidden, dec_layers, cell,
                                  dropout, attn_size, readout_size=emb_size, score=score)
        elif decoder == "luong":
            dec = LuongDecoder(tgt_vocab_size, emb_size, enc_size, dec_hidden, dec_layers, cell, dropout,
                               score, attn_size, input_feeding)
        else:
            raise ValueError(f"decoder={decoder!r} is unknown; allowed: bahdanau | luong")
        super().__init__(encoder, dec, tgt_vocab_size, tie_embeddings)

    @classmethod
    def from_config(cls, cfg: RNNSearchConfig, src_vocab_size: int, tgt_vocab_size: int) -> RNNSearch:
        """Build from its config."""
        return cls(src_vocab_size, tgt_vocab_size, emb_size=cfg.emb_size, hidden_size=cfg.hidden_size,
                   enc_layers=cfg.enc_layers, dec_layers=cfg.dec_layers, cell=cfg.cell, dropout=cfg.dropout,
                   decoder=cfg.decoder, score=cfg.score, attn_size=cfg.attn_size, input_feeding=cfg.input_feeding,
                   tie_embeddings=cfg.tie_embeddings, enc_hidden_size=cfg.enc_hidden_size)

    @property
    def query_lag(self) -> int:
        """How many target inputs the attention's query is behind its step's input (the decoder's order)."""
        return self.decoder.query_lag

    def encode(self, src: Tensor, src_len: Tensor) -> dict[str, Tensor]:
        h, final = self.encoder(src, src_len)
        # W_h h_j does not depend on i: computed once per sentence, not at every target step.
        enc = {"h": h, "mask": src != 0, "keys": self.decoder.project_keys(h), "final_h": final["h"]}
        return enc
