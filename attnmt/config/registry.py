"""A registry: the names a config uses for a choice that users extend, mapped to their code.

attnmt keeps one registry per extensible choice: model types and attention scores
(:mod:`attnmt.models.registry`), learning-rate schedulers (:mod:`attnmt.train.schedulers`) and data
transforms (:mod:`attnmt.data.transforms`). A
registry is a dict with a decorator that adds to it and a lookup whose error names the closest
registered name, in the one-line style of every config error.
"""

from __future__ import annotations

import importlib
from typing import Callable, TypeVar

from attnmt.errors import UserError, closest

T = TypeVar("T")


class Registry(dict):
    """name -> registered object, for the config key `key` (e.g. "model.score")."""

    def __init__(self, kind: str, key: str, builtins: str | None = None):
        super().__init__()
        self.kind, self.key = kind, key
        self.builtins = builtins  # the module whose import registers the built-in entries

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: make the decorated class or function available as `KEY: NAME`."""

        def add(obj: T) -> T:
            if name in self and self[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is registered twice: {self[name]!r} and {obj!r}")
            self[name] = obj
            return obj

        return add

    def lookup(self, name: str):
        """The entry registered under `name`, or a UserError naming the closest registered name."""
        if self.builtins is not None:
            importlib.import_module(self.builtins)
        if name in self:
            return self[name]
        close = closest(str(name), list(self))
        hint = f"did you mean {close!r}? " if close else ""
        raise UserError(f"config: {self.key}={name!r} is unknown; {hint}allowed: {' | '.join(repr(n) for n in self)}")
