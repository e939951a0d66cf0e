"""The models: Sutskever's seq2seq, Bahdanau's RNNsearch (and Luong's variants), the Transformer.

Each model class is registered under its `model.type` name (:mod:`attnmt.models.registry`), owns
its config class (the `model.*` keys it reads, e.g. RNNSearchConfig) and builds itself from it
(`from_config`); what it can do (has_attention, has_heads, query_lag) is declared on the class, for
align, study and serve to ask.
"""

from __future__ import annotations

from torch import nn

from attnmt.config.model_size import check_size
from attnmt.config.schema import ModelConfig
from attnmt.errors import UserError
from attnmt.models import attention as _attention  # noqa: F401  (registers the attention scores)
from attnmt.models.registry import MODELS, SCORES, model_class, register_model, register_score
from attnmt.models.seq2seq import RNNSearch, RNNSearchConfig, Seq2Seq, Seq2SeqConfig
from attnmt.models.transformer import Transformer, TransformerConfig

__all__ = ["MODELS", "SCORES", "RNNSearch", "RNNSearchConfig", "Seq2Seq", "Seq2SeqConfig", "Transformer",
           "TransformerConfig", "build_model", "model_config", "register_model", "register_score"]


def model_config(model_type: str, **keys) -> ModelConfig:
    """The config of `model_type` (its class's `config_class`) from those of `keys` that it reads; the
    others are left out.

    For code that describes several model types with one set of sizes (the demo, tests); a config
    file that sets a key its model type does not read is refused instead.
    """
    cls = model_class(model_type)
    return cls.config_class(**{k: v for k, v in keys.items() if k in cls.config_keys and k != "type"})


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> nn.Module:
    """Instantiate the model a config describes (weights freshly initialised); one that would not fit in this
    machine's memory is a UserError naming the key to lower."""
    check_size(cfg, src_vocab_size, tgt_vocab_size)
    try:
        return model_class(cfg.type).from_config(cfg, src_vocab_size, tgt_vocab_size)
    except ValueError as e:
        raise UserError(f"config: model: {e}") from None
