"""YAML read within bounds: configs, study specs and --set values.

A YAML document can ask for far more than its size: a few lines of aliases to aliases (a "billion laughs" bomb)
build a tree of billions of values once anything walks it (attnmt copies and writes a config back), and a
10,000-deep nesting overflows the recursive parser. So before anything is built, `parse_yaml` reads the
document's events (a flat stream, whatever the nesting) and refuses, in one line naming the place, a text over
MAX_YAML_BYTES, a nesting deeper than MAX_YAML_DEPTH, or more than MAX_YAML_VALUES values once every alias is
expanded. Only then is it loaded, safely (plain values, lists and mappings; a tag is refused).

Both passes use libyaml's C parser (`yaml.CSafeLoader`) where PyYAML was built with it, as its wheels are: about
20 times faster than the pure-Python parser (0.4 ms against 8.6 ms for a 3 KB recipe), and configs are read at
every checkpoint load. A text the C parser refuses is read again by the pure-Python `SafeLoader`, so that an error
is named the one way (libyaml words its errors its own way and stops at a nesting of 1,000 before the depth check
sees it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from attnmt.errors import UserError

MAX_YAML_BYTES = 1 << 20  # the largest recipe is a few kilobytes
MAX_YAML_DEPTH = 64  # a config nests four levels (data.transforms[0].path)
MAX_YAML_VALUES = 100_000  # scalars, lists and mappings, every alias expanded
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _where(where: str, mark: Any) -> str:
    line = getattr(mark, "line", None)
    return f"{where}:{line + 1}" if line is not None and not where.startswith("--set") else where


def check_bounds(text: str, where: str) -> None:
    """A UserError naming ``where`` when ``text`` is over a bound: bytes, depth or values with aliases expanded.
    Bad syntax is left to the loader, which names it."""
    if len(text.encode("utf-8", "replace")) > MAX_YAML_BYTES:
        raise UserError(f"{where} is over {MAX_YAML_BYTES >> 20} MiB of YAML, far more than a config needs; "
                        "check that it is the right file")
    try:
        _with_either_loader(lambda loader: _check_events(yaml.parse(text, Loader=loader), where))
    except yaml.YAMLError:
        return  # the loader reports it, with its line


def _with_either_loader(read: Callable[[type], Any]) -> Any:
    """``read(loader)`` with libyaml's loader; when that raises a YAML error, again with the pure-Python one, whose
    result or error is the answer."""
    try:
        return read(_FAST_LOADER)
    except yaml.YAMLError:
        return read(yaml.SafeLoader)


def _check_events(events, where: str) -> None:
    counts: list[int] = [0]  # the values of each open collection, the document's at the bottom
    anchors: list[str | None] = []
    sizes: dict[str, int] = {}  # an anchored node's values, aliases expanded
    for event in events:
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(counts) > MAX_YAML_DEPTH:
                raise UserError(f"{_where(where, event.start_mark)} nests lists and mappings more than "
                                f"{MAX_YAML_DEPTH} levels deep; a config needs a few: flatten it")
            counts.append(1)
            anchors.append(event.anchor)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            size, anchor = counts.pop(), anchors.pop()
            if anchor is not None:
                sizes[anchor] = size
            counts[-1] += size
        elif isinstance(event, yaml.AliasEvent) and event.anchor in anchors:
            raise UserError(f"{_where(where, event.start_mark)}: the alias *{event.anchor} is inside the "
                            "value it names (a value that contains itself); write the values out")
        elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            size = 1 if isinstance(event, yaml.ScalarEvent) else sizes.get(event.anchor, 1)
            if isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
                sizes[event.anchor] = 1
            counts[-1] += size
        else:
            continue
        if sum(counts) > MAX_YAML_VALUES:
            raise UserError(f"{_where(where, event.start_mark)}: its aliases expand to more than "
                            f"{MAX_YAML_VALUES:,} values (an alias bomb?); write the values out, with fewer "
                            "aliases")


def parse_yaml(text: str, where: str) -> Any:
    """``text`` checked by `check_bounds`, then loaded with the safe constructors; YAML errors propagate."""
    check_bounds(text, where)
    return _with_either_loader(lambda loader: yaml.load(text, Loader=loader))  # noqa: S506 (both are safe loaders)


def read_yaml(path: Path, kind: str = "config", missing: str | None = None) -> Any:
    """A YAML file's plain values, lists and mappings, within the module's bounds; one clear line for a missing
    file, a file too large, too deep or an alias bomb, bad YAML or a tag.

    ``kind`` names the file in the messages ("config", "study"); ``missing`` is the line for a file
    that does not exist.
    """
    if not path.is_file():
        raise UserError(missing or f"config file not found: {path}; pass the path of a YAML config (see recipes/)")
    if path.stat().st_size > MAX_YAML_BYTES:
        raise UserError(f"{kind} {path} is over {MAX_YAML_BYTES >> 20} MiB, far more than a {kind} needs; check "
                        "that it is the right file")
    try:
        return parse_yaml(path.read_text(encoding="utf-8"), f"{kind} {path}") or {}
    except yaml.constructor.ConstructorError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f"{path}:{line + 1}" if line is not None else str(path)
        raise UserError(f"{kind} {where} uses a YAML tag that attnmt does not accept (only plain values, lists "
                        "and mappings); remove the tag") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f"{path}:{line + 1}" if line is not None else str(path)
        raise UserError(f"{kind} {where} is not valid YAML; fix the syntax ({type(e).__name__})") from None
