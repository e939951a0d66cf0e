"""The registries of model types and attention scores.

A model class is registered under the name that `model.type` uses, a score class under the name
that `model.score` uses::

    @register_model("rnnsearch")
    class RNNSearch(EncoderDecoder): ...

    @register_score("additive")
    class AdditiveAttention(Attention): ...

Each model class owns its config class (`config_class`, a subclass of attnmt.config.schema.ModelConfig
with the `model.*` keys it reads); registering the model enters that class in
attnmt.config.schema.MODEL_CONFIGS, which builds a config's model section. `build_model`, align, study
and serve look names up here and ask the model class what it can do (`has_attention`, `has_heads`,
`config_keys`); nothing else in the package decides by a model type's name. docs/extending.md
walks through adding one.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, TypeVar

from attnmt.config.registry import Registry
from attnmt.config.schema import MODEL_CONFIGS, ModelConfig

T = TypeVar("T", bound=type)

# model.type -> a class with from_config(cfg, src_vocab_size, tgt_vocab_size) and config_class
MODELS = Registry("model type", "model.type", builtins="attnmt.models")
# model.score -> an attnmt.models.attention.Attention subclass
SCORES = Registry("attention score", "model.score", builtins="attnmt.models")


def register_model(name: str) -> Callable[[T], T]:
    """Class decorator: make a model class available as `model.type: NAME`.

    The class names its own config class (`config_class`: a dataclass subclass of
    attnmt.config.schema.ModelConfig whose `type` defaults to NAME); it is entered in MODEL_CONFIGS, so that
    a config's model section is built and checked as that class, and the model's `config_keys` are its fields.
    """

    def add(cls: T) -> T:
        config_class = getattr(cls, "config_class", None)
        if not (isinstance(config_class, type) and issubclass(config_class, ModelConfig)
                and dataclasses.is_dataclass(config_class)):
            raise ValueError(f"model type {name!r}: {cls.__name__}.config_class must be a dataclass subclass of "
                             "attnmt.config.schema.ModelConfig")
        fields = {f.name: f for f in dataclasses.fields(config_class)}
        if fields["type"].default != name:
            raise ValueError(f"model type {name!r}: {config_class.__name__}.type must default to {name!r}")
        if vars(config_class).get("model_class", cls) is not cls:  # its own, not one it inherits
            raise ValueError(f"model type {name!r}: {config_class.__name__} is already the config of "
                             f"{config_class.model_class.__name__}; give each model type its own config class")
        MODELS.register(name)(cls)
        MODEL_CONFIGS.register(name)(config_class)
        cls.model_type = name
        cls.config_keys = frozenset(fields)
        config_class.model_class = cls  # what config validation asks of the model (has_attention, has_heads, ...)
        return cls

    return add


def register_score(name: str) -> Callable[[T], T]:
    """Class decorator: make an attention score available as `model.score: NAME`."""
    return SCORES.register(name)


def model_class(name: str) -> type:
    return MODELS.lookup(name)


def score_class(name: str) -> type:
    return SCORES.lookup(name)
