"""The registries of model types and attention scores.

A model class is registered under the name that `model.type` uses, a score class under the name
that `model.score` uses::

    @register_model("rnnsearch")
    class RNNSearch(EncoderDecoder): ...

    @register_score("additive")
    class AdditiveAttention(Attention): ...

Config validation, `build_model`, align, study and serve look names up here and ask the model
class what it can do (`has_attention`, `has_heads`, `config_keys`); nothing else in the package
decides by a model type's name. docs/extending.md walks through adding one.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from attnmt.registry import Registry

T = TypeVar("T", bound=type)

# model.type -> a class with from_config(cfg, src_vocab_size, tgt_vocab_size) and config_keys
MODELS = Registry("model type", "model.type", builtins="attnmt.models")
# model.score -> an attnmt.models.attention.Attention subclass
SCORES = Registry("attention score", "model.score", builtins="attnmt.models")


def register_model(name: str) -> Callable[[T], T]:
    """Class decorator: make a model class available as `model.type: NAME`."""

    def add(cls: T) -> T:
        cls.model_type = name
        return MODELS.register(name)(cls)

    return add


def register_score(name: str) -> Callable[[T], T]:
    """Class decorator: make an attention score available as `model.score: NAME`."""
    return SCORES.register(name)


def model_class(name: str) -> type:
    return MODELS.lookup(name)


def score_class(name: str) -> type:
    return SCORES.lookup(name)
