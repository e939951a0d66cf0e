"""The models: Sutskever's seq2seq, Bahdanau's RNNsearch (and Luong's variants), the Transformer."""

from __future__ import annotations

from torch import nn

from attnmt.config import ModelConfig
from attnmt.errors import UserError
from attnmt.models.seq2seq import RNNSearch, Seq2Seq

MODEL_TYPES = ("seq2seq", "rnnsearch", "transformer")


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> nn.Module:
    """Instantiate the model a config describes (weights freshly initialised)."""
    common = dict(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
    try:
        if cfg.type == "seq2seq":
            return Seq2Seq(**common, emb_size=cfg.emb_size, hidden_size=cfg.hidden_size, enc_layers=cfg.enc_layers,
                           dec_layers=cfg.dec_layers, cell=cfg.cell, dropout=cfg.dropout,
                           reverse_source=cfg.reverse_source, tie_embeddings=cfg.tie_embeddings)
        if cfg.type == "rnnsearch":
            return RNNSearch(**common, emb_size=cfg.emb_size, hidden_size=cfg.hidden_size, enc_layers=cfg.enc_layers,
                             dec_layers=cfg.dec_layers, cell=cfg.cell, dropout=cfg.dropout, attention=cfg.attention,
                             attn_size=cfg.attn_size, input_feeding=cfg.input_feeding,
                             tie_embeddings=cfg.tie_embeddings, enc_hidden_size=cfg.enc_hidden_size)
        if cfg.type == "transformer":
            from attnmt.models.transformer import Transformer

            return Transformer.from_config(cfg, src_vocab_size, tgt_vocab_size)
    except ValueError as e:
        raise UserError(f"config: model: {e}") from None
    raise UserError(f"config: model.type={cfg.type!r} is unknown; allowed: {' | '.join(MODEL_TYPES)}")
