"""The models: Sutskever's seq2seq, Bahdanau's RNNsearch (and Luong's variants), the Transformer.

Each model class is registered under its `model.type` name (:mod:`attnmt.models.registry`) and
builds itself from the config (`from_config`); what it can do (has_attention, has_heads,
query_lag) is declared on the class, for align, study and serve to ask.
"""

from __future__ import annotations

from torch import nn

from attnmt.config import ModelConfig
from attnmt.errors import UserError
from attnmt.models import attention as _attention  # noqa: F401  (registers the attention scores)
from attnmt.models.registry import MODELS, SCORES, model_class, register_model, register_score
from attnmt.models.seq2seq import RNNSearch, Seq2Seq
from attnmt.models.transformer import Transformer

__all__ = ["MODELS", "SCORES", "RNNSearch", "Seq2Seq", "Transformer", "build_model", "model_config",
           "register_model", "register_score"]


def model_config(model_type: str, **keys) -> ModelConfig:
    """A ModelConfig of `model_type` from those of `keys` that this type reads; the others are left out.

    For code that describes several model types with one set of sizes (the demo, tests); a config
    file that sets a key its model type does not read is refused instead.
    """
    reads = model_class(model_type).config_keys
    return ModelConfig(type=model_type, **{k: v for k, v in keys.items() if k in reads})


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> nn.Module:
    """Instantiate the model a config describes (weights freshly initialised)."""
    try:
        return model_class(cfg.type).from_config(cfg, src_vocab_size, tgt_vocab_size)
    except ValueError as e:
        raise UserError(f"config: model: {e}") from None
