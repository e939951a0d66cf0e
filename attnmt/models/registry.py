"""The registries of the choices users extend: model types and attention scores.

A model class is registered under the name that `model.type` uses, a score class under the name
that `model.score` uses::

    @register_model("rnnsearch")
    class RNNSearch(EncoderDecoder): ...

    @register_score("additive")
    class AdditiveAttention(Attention): ...

Config validation, `build_model`, align, study and serve look names up here; nothing else in the
package spells a model type or a score name. docs/extending.md walks through adding one.
"""

from __future__ import annotations

import difflib
from typing import Callable, TypeVar

from attnmt.errors import UserError

T = TypeVar("T", bound=type)

MODELS: dict[str, type] = {}  # model.type -> a class with from_config(cfg, src_vocab_size, tgt_vocab_size)
SCORES: dict[str, type] = {}  # model.score -> an attnmt.models.attention.Attention subclass


def _register(registry: dict[str, type], kind: str, name: str) -> Callable[[T], T]:
    def add(cls: T) -> T:
        if name in registry and registry[name] is not cls:
            raise ValueError(f"{kind} {name!r} is registered twice: {registry[name].__name__} and {cls.__name__}")
        registry[name] = cls
        return cls

    return add


def register_model(name: str) -> Callable[[T], T]:
    """Class decorator: make a model class available as `model.type: NAME`."""

    def add(cls: T) -> T:
        cls.model_type = name
        return _register(MODELS, "model type", name)(cls)

    return add


def register_score(name: str) -> Callable[[T], T]:
    """Class decorator: make an attention score available as `model.score: NAME`."""
    return _register(SCORES, "attention score", name)


def _known() -> None:
    import attnmt.models  # noqa: F401  (importing the package registers the built-in classes)


def lookup(registry: dict[str, type], key: str, name: str) -> type:
    """The class registered under `name`, or a UserError naming the closest registered name."""
    _known()
    if name in registry:
        return registry[name]
    close = difflib.get_close_matches(str(name), list(registry), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UserError(f"config: {key}={name!r} is unknown; {hint}allowed: {' | '.join(repr(n) for n in registry)}")


def model_class(name: str) -> type:
    return lookup(MODELS, "model.type", name)


def score_class(name: str) -> type:
    return lookup(SCORES, "model.score", name)
