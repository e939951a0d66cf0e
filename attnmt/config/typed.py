"""Typed dataclass trees from YAML: the builder that training configs and study specs share.

`build(cls, raw, prefix)` turns a plain mapping (as YAML gives it) into an instance of the dataclass
`cls`, recursively: nested dataclasses, optional sections (`Optional[Section]`), lists (of values
or of sections) and free mappings. Every problem is one line naming the key: an unknown key with
the closest valid one (or the name other toolkits use for it), a wrong type or value with what is
allowed, a value out of range with its bounds. A numeric field declares its range beside its default
(``lr: float = ranged(1e-3, 0.0, 10.0, above=True)``), checked as the value is read and again by the
class's ``__post_init__`` (:func:`check_declared`); a float is never NaN or infinite, range or not.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any, Literal

import yaml

from attnmt.config.yaml_input import parse_yaml
from attnmt.errors import UserError, closest


def _bounds(low: Any, high: Any, inclusive_low: bool = True, inclusive_high: bool = True) -> str:
    def show(bound: Any) -> str:
        return f"{bound:,}" if isinstance(bound, int) and abs(bound) >= 10_000 else str(bound)

    parts = ([f"{'>=' if inclusive_low else '>'} {show(low)}"] if low is not None else []) + (
        [f"{'<=' if inclusive_high else '<'} {show(high)}"] if high is not None else [])
    return " and ".join(parts) or "any finite number"


def check_range(key: str, value: Any, low: Any, high: Any, inclusive_low: bool = True,
                inclusive_high: bool = True) -> None:
    """A UserError naming ``key`` unless ``value`` is a finite number within the bounds (None: unbounded)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"config: {key}={value!r} is not a finite number; allowed: "
                        f"{_bounds(low, high, inclusive_low, inclusive_high)}")
    too_low = low is not None and (value < low if inclusive_low else value <= low)
    too_high = high is not None and (value > high if inclusive_high else value >= high)
    if too_low or too_high:
        raise UserError(f"config: {key}={value!r} is out of range; allowed: "
                        f"{_bounds(low, high, inclusive_low, inclusive_high)}")


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric config key may take: from ``low`` to ``high`` (None: unbounded), each bound
    included unless ``above`` / ``below`` says it is excluded. Floats must also be finite."""

    low: Any = None
    high: Any = None
    above: bool = False  # low itself is not allowed
    below: bool = False  # high itself is not allowed

    def check(self, key: str, value: Any) -> None:
        check_range(key, value, self.low, self.high, not self.above, not self.below)

    def describe(self) -> str:
        return _bounds(self.low, self.high, not self.above, not self.below)


def ranged(default: Any = dataclasses.MISSING, low: Any = None, high: Any = None, *, above: bool = False,
           below: bool = False) -> Any:
    """A dataclass field with its allowed range declared beside it: ``lr: float = ranged(1e-3, 0.0, 10.0,
    above=True)``. :func:`check_declared` checks it (a None value of an Optional field is not checked)."""
    return dataclasses.field(default=default, metadata={"range": Range(low, high, above, below)})


def declared_range(cls: Any, name: str) -> Range | None:
    """The range that the field ``name`` of the dataclass ``cls`` declares, else None."""
    return next((f.metadata.get("range") for f in dataclasses.fields(cls) if f.name == name), None)


def check_declared(obj: Any, prefix: str) -> None:
    """Every field of the dataclass instance ``obj`` that declares a range (:func:`ranged`) checked, in
    order; the first one out of range (or not finite) is a UserError naming ``prefix`` + its name."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if "range" in f.metadata and value is not None:
            f.metadata["range"].check(f"{prefix}{f.name}", value)


def _allowed(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_allowed(a) for a in typing.get_args(tp))
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp))


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Check `value` against the annotation `tp`; ints are accepted where floats are."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return coerce(key, value, arg)
            except UserError:
                continue
    elif origin is Literal:
        if value in typing.get_args(tp):
            return value
    elif tp is type(None):
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 5e-4 (no dot) as a string
            try:
                number = float(value)
            except ValueError:
                pass
            else:
                return coerce(key, number, tp)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is list:
        if isinstance(value, list):
            return value
    raise UserError(f"config: {key}={value!r} has the wrong type or value; allowed: {_allowed(tp)}")


# Names that other toolkits use for our keys: a better hint than string similarity.
ALIASES = {"learning_rate": "lr", "epochs": "max_epochs", "steps": "max_steps", "beam_size": "beam",
           "hidden": "hidden_size", "embedding_size": "emb_size", "embedding_dim": "emb_size", "rnn_type": "cell",
           "batch": "batch_tokens", "clip": "clip_grad_norm", "heads": "n_heads", "num_heads": "n_heads"}


def _optional_section(tp: Any) -> type | None:
    """The dataclass of an `Optional[Section]` annotation, else None."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    optional = typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1
    if optional and dataclasses.is_dataclass(args[0]):
        return args[0]
    return None


def build_value(tp: Any, value: Any, key: str) -> Any:
    """Validate one value against its annotation; sections become dataclass instances."""
    section = _optional_section(tp)
    if section is not None:
        return None if value is None else build_section(section, value, f"{key}.")
    if dataclasses.is_dataclass(tp):
        return build_section(tp, value or {}, f"{key}.")
    if tp is dict or typing.get_origin(tp) is dict:
        if not isinstance(value, dict):
            raise UserError(f"config: {key} must be a mapping of keys to values, got {value!r}")
        return value
    if typing.get_origin(tp) is list:
        if not isinstance(value, list):
            raise UserError(f"config: {key}={value!r} must be a list")
        (item_type,) = typing.get_args(tp)
        return [build_value(item_type, item, f"{key}[{n}]") for n, item in enumerate(value)]
    return coerce(key, value, tp)


def build_section(cls: type, raw: Any, prefix: str) -> Any:
    """A nested section: built by the class's own ``from_raw(raw, prefix)`` where it has one (a section
    whose keys depend on a value in it, as the model section's on model.type), else by :func:`build`."""
    from_raw = getattr(cls, "from_raw", None)
    return from_raw(raw, prefix) if from_raw is not None else build(cls, raw, prefix)


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of the dataclass `cls`: resolving them (strings, under ``from __future__ import
    annotations``) compiles each one, and a class's annotations stay as they are, so once per class."""
    return typing.get_type_hints(cls)


def build(cls: type, raw: Any, prefix: str = "") -> Any:
    """An instance of the dataclass `cls` from the mapping `raw`; `prefix` names its place ("model.")."""
    if not isinstance(raw, dict):
        where = prefix.rstrip(".") or "the top level"
        raise UserError(f"config: {where} must be a mapping of keys to values, got {raw!r}")
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in raw.items():
        full = f"{prefix}{key}"
        if key not in fields:
            close = closest(str(key), list(fields), ALIASES)
            hint = f"; did you mean '{prefix}{close}'?" if close else f"; valid keys: {', '.join(fields)}"
            raise UserError(f"config: unknown key '{full}'{hint}")
        kwargs[key] = build_value(hints[key], value, full)
        _check_number(full, kwargs[key], fields[key].metadata.get("range"))
    return cls(**kwargs)


def _check_number(key: str, value: Any, declared: Range | None) -> None:
    """A value as it is read: within its field's declared range, and never NaN or infinite."""
    if declared is not None and value is not None:
        declared.check(key, value)
    elif isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"config: {key}={value!r} is not a finite number; write a number")


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise UserError(f"--set {item!r}: expected key=value, e.g. --set train.lr=0.0005")
    key, text = item.split("=", 1)
    try:
        value = parse_yaml(text, f"--set {key.strip()}") if text.strip() else None
    except yaml.YAMLError:
        value = text
    return key.strip().split("."), value


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` strings (values parsed as YAML scalars) to a raw config dict."""
    for item in overrides:
        path, value = _parse_override(item)
        node = raw
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserError(f"--set {item!r}: '{part}' is not a section")
        node[path[-1]] = value
    return raw
