"""Data transforms: what a config adds to the training pairs or attaches to them, by name.

A config lists them under ``data.transforms``, each a mapping with its registered ``name`` and
its own typed settings, run in the order given::

    data:
      transforms:
        - {name: joined_pairs, count: 20000, max_parts: 3}
        - {name: align_text, src: test.en, tgt: test.fr, copies: 1}
        - {name: drop_final_punct, fraction: 0.3}
        - {name: links, path: train.links}

Every transform works on a `Pairs` view of the training text (the corpus after data.valid_size /
data.test_size are held out, then what the transforms before it added) while `attnmt prepare` builds
the token store (attnmt/data/store_prepare.py): the store holds their output, and their settings and files
enter its staleness check. Training reads only the store, so there is one pipeline.

Each pair carries its *origin*: the corpus lines it is made of, each with the word at which that
line's words start (source, target), or None for text that no corpus line gives (added text, a
changed copy). A corpus pair's origin is ``((line, 0, 0),)``; a joined pair's lists its parts. The
``links`` transform names word links line-aligned with the corpus; the store keeps each pair's links,
its parts' links shifted (attnmt/data/store_links.py), and guided alignment (attnmt/train/guidance.py)
reads them with the pair.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from attnmt.config.registry import Registry
from attnmt.config.schema import DataConfig
from attnmt.config.typed import build
from attnmt.data.augment import choose_fraction, draw_joined, join_run, unpunctuated
from attnmt.errors import UserError

Pair = tuple[str, str]
Origin = Optional[tuple[tuple[int, int, int], ...]]  # (corpus line, source word, target word) per part

TRANSFORMS = Registry("data transform", "data.transforms[k].name", builtins="attnmt.data.transforms")
# The bounds of the transforms' counts: what they add is held in memory as text until it is encoded.
MAX_PAIRS = 10_000_000  # pairs one transform makes (synthetic train / valid, joined_pairs count)
MAX_COPIES = 1_000  # align_text copies
MAX_PARTS = 100  # joined_pairs max_parts: pairs joined into one
MAX_WORDS = 1_000  # synthetic min_len / max_len: words of a sentence


def register_transform(name: str):
    """Class decorator: make a transform (a dataclass of its settings) available as ``{name: NAME}``."""

    def add(cls):
        cls.name = name
        return TRANSFORMS.register(name)(cls)

    return add


class Pairs:
    """The training pairs as text: a base (a list, or a view over corpus files that reads only the
    pairs asked for) and the pairs the transforms added, each with its origin."""

    def __init__(self, base_len: int, take_base: Callable[[Sequence[int]], list[Pair]],
                 base_origin: Callable[[int], Origin]):
        self.base_len, self._take_base, self._base_origin = base_len, take_base, base_origin
        self.added: list[Pair] = []
        self.added_origins: list[Origin] = []

    @classmethod
    def of_list(cls, pairs: list[Pair], lines: Sequence[int] | None = None) -> Pairs:
        """Pairs in memory; ``lines``: each one's corpus line (without: they come from no corpus file)."""
        if lines is None:
            return cls(len(pairs), lambda idx: [pairs[i] for i in idx], lambda i: None)
        return cls(len(pairs), lambda idx: [pairs[i] for i in idx], lambda i: ((int(lines[i]), 0, 0),))

    def __len__(self) -> int:
        return self.base_len + len(self.added)

    def take(self, indices: Sequence[int]) -> list[Pair]:
        """The pairs at ``indices`` (any order, repeats allowed)."""
        indices = list(indices)
        if all(a < b for a, b in zip(indices, indices[1:])) and (not indices or indices[-1] < self.base_len):
            return self._take_base(indices)  # ascending, of the base only: as they are read
        wanted = sorted({i for i in indices if i < self.base_len})
        base = dict(zip(wanted, self._take_base(wanted)))
        return [base[i] if i < self.base_len else self.added[i - self.base_len] for i in indices]

    def origin(self, i: int) -> Origin:
        return self._base_origin(i) if i < self.base_len else self.added_origins[i - self.base_len]

    def add(self, pairs: list[Pair], origins: list[Origin] | None = None) -> None:
        self.added += pairs
        self.added_origins += origins if origins is not None else [None] * len(pairs)

    def all(self) -> list[Pair]:
        return self.take(range(len(self)))


class Transform:
    """A transform's settings are its dataclass fields; `apply` adds to the pairs and returns what to log."""

    name: ClassVar[str]
    repeatable: ClassVar[bool] = True  # it may be listed more than once
    source: ClassVar[bool] = False  # it gives the training pairs itself: no corpus files

    def check(self, where: str) -> None:
        """Ranges and combinations of the settings; ``where`` names the entry (data.transforms[k])."""

    def check_setting(self, where: str, key: str, low: float, high: float) -> None:
        """A UserError in one line, naming the entry, the key, this transform and the allowed range, unless the
        setting ``key`` is a number from ``low`` to ``high`` (NaN is not)."""
        value = getattr(self, key)
        if not low <= value <= high:
            raise UserError(f"config: {where}.{key}={value!r} is out of range for {self.name}; allowed: {low:,} to "
                            f"{high:,}")

    def files(self) -> list[str]:
        """The files it reads, whose changes make a prepared store stale."""
        return []

    def apply(self, pairs: Pairs, seed: int) -> dict | None:
        return None

    def valid_pairs(self, seed: int) -> list[Pair] | None:
        return None


@register_transform("synthetic")
@dataclass
class Synthetic(Transform):
    """The built-in synthetic language (attnmt/data/synthetic.py) as the training and validation pairs."""

    source: ClassVar[bool] = True
    train: int = 20000  # sentence pairs generated for training
    valid: int = 500  # and for validation
    min_len: int = 4
    max_len: int = 60

    def check(self, where: str) -> None:
        self.check_setting(where, "train", 1, MAX_PAIRS)
        self.check_setting(where, "valid", 0, MAX_PAIRS)
        self.check_setting(where, "min_len", 2, MAX_WORDS)
        self.check_setting(where, "max_len", self.min_len, MAX_WORDS)

    def splits(self, seed: int) -> dict[str, list[Pair]]:
        from attnmt.data.synthetic_corpus import make_splits

        splits = make_splits(self.train, self.valid, 0, self.min_len, self.max_len, seed=seed)
        return {name: [(" ".join(p.src), " ".join(p.tgt)) for p in pairs] for name, pairs in splits.items()}

    def apply(self, pairs: Pairs, seed: int) -> dict | None:
        pairs.add(self.splits(seed)["train"])
        return {"synthetic": self.train}

    def valid_pairs(self, seed: int) -> list[Pair] | None:
        return self.splits(seed)["valid"]


@register_transform("joined_pairs")
@dataclass
class JoinedPairs(Transform):
    """``count`` pairs that each join 2 to ``max_parts`` pairs drawn at random (attnmt/data/augment.py):
    sentences longer than the corpus has; each part's links are carried over."""

    count: int = 0
    max_parts: int = 3

    def check(self, where: str) -> None:
        self.check_setting(where, "count", 1, MAX_PAIRS)
        self.check_setting(where, "max_parts", 2, MAX_PARTS)

    def apply(self, pairs: Pairs, seed: int) -> dict | None:
        draws = draw_joined(len(pairs), self.count, self.max_parts, seed)
        wanted = sorted({i for draw in draws for i in draw})
        texts = dict(zip(wanted, pairs.take(wanted)))
        joined: dict[Pair, Origin] = {}
        for draw in draws:
            pair = join_run([texts[i] for i in draw])
            if pair not in joined:
                joined[pair] = joined_origin([(texts[i], pairs.origin(i)) for i in draw])
        pairs.add(list(joined), list(joined.values()))
        return {"joined_pairs": len(joined), "join_max_parts": self.max_parts}


def joined_origin(parts: list[tuple[Pair, Origin]]) -> Origin:
    """The origin of the pair that joins ``parts``: theirs, shifted by the words before each (None if
    a part has none: its links would be missing)."""
    out, src_offset, tgt_offset = [], 0, 0
    for (src, tgt), origin in parts:
        if origin is None:
            return None
        out += [(line, s + src_offset, t + tgt_offset) for line, s, t in origin]
        src_offset += len(src.split())
        tgt_offset += len(tgt.split())
    return tuple(out)


@register_transform("align_text")
@dataclass
class AlignText(Transform):
    """The sentence pairs of a word-alignment test set added to the training text, without links
    (statistical aligners always see the text they align); never held out."""

    src: str = ""
    tgt: str = ""
    copies: int = 1  # how many times they are added

    def check(self, where: str) -> None:
        if not self.src or not self.tgt:
            raise UserError(f"config: {where} needs src and tgt: the two line-aligned files of the text")
        self.check_setting(where, "copies", 1, MAX_COPIES)

    def files(self) -> list[str]:
        return [self.src, self.tgt]

    def apply(self, pairs: Pairs, seed: int) -> dict | None:
        from attnmt.data.corpus import read_parallel

        added = read_parallel(self.src, self.tgt)
        pairs.add(added * self.copies)
        return {"alignment_test_text": self.src, "pairs": len(added), "copies": self.copies}


@register_transform("drop_final_punct")
@dataclass
class DropFinalPunct(Transform):
    """``fraction`` of the pairs added again with the source's final punctuation removed (the target
    keeps its own): for corpora whose sentences always end in punctuation, like Tatoeba."""

    fraction: float = 0.0

    def check(self, where: str) -> None:
        self.check_setting(where, "fraction", 0.0, 1.0)

    def apply(self, pairs: Pairs, seed: int) -> dict | None:
        added = unpunctuated(pairs.take(choose_fraction(len(pairs), self.fraction, seed)))
        pairs.add(added)
        return {"augmented_without_final_punctuation": len(added)}


@register_transform("links")
@dataclass
class Links(Transform):
    """Word links of the corpus pairs (0-based Pharaoh ``i-j``, one line per line of the training
    corpus; of the data.train corpora one after the other): guided alignment's supervision."""

    repeatable: ClassVar[bool] = False
    path: str = ""

    def check(self, where: str) -> None:
        if not self.path:
            raise UserError(f"config: {where} needs path: a file of Pharaoh links line-aligned with the corpus")

    def files(self) -> list[str]:
        return [self.path]


def transforms_of(cfg: DataConfig) -> list[Transform]:
    """data.transforms as transform objects, checked: one line naming the entry for any problem."""
    out: list[Transform] = []
    for k, raw in enumerate(cfg.transforms or []):
        where = f"data.transforms[{k}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise UserError(f"config: {where} must be a mapping with a name, e.g. {{name: drop_final_punct, "
                            f"fraction: 0.3}}, got {raw!r}")
        try:
            cls = TRANSFORMS.lookup(raw["name"])
        except UserError as e:  # the registry's line, naming the entry
            raise UserError(str(e).replace(TRANSFORMS.key, f"{where}.name")) from None
        transform = build(cls, {key: value for key, value in raw.items() if key != "name"}, f"{where}.")
        transform.check(where)
        if transform.source and k:
            raise UserError(f"config: {where} ({transform.name}) gives the training pairs: list it first")
        if transform.source and (cfg.train or cfg.train_tsv or cfg.train_src or cfg.train_tgt):
            raise UserError(f"config: {where} ({transform.name}) gives the training pairs, and corpus files are "
                            "given too (data.train*); use one or the other")
        if transform.source and (cfg.valid_size or cfg.test_size):
            raise UserError(f"config: data.valid_size / data.test_size hold out pairs of a corpus file; {where} "
                            f"({transform.name}) has its own validation pairs, so leave them at 0")
        if any(type(other) is type(transform) for other in out) and not transform.repeatable:
            raise UserError(f"config: {where} repeats {transform.name}; give it once")
        out.append(transform)
    if any(t.source for t in out) and any(isinstance(t, Links) for t in out):
        raise UserError("config: data.transforms links belong to a corpus file; the synthetic language has none: "
                        "remove them or train on files")
    return out


def links_transform(cfg: DataConfig) -> Links | None:
    return next((t for t in transforms_of(cfg) if isinstance(t, Links)), None)


def source_of(cfg: DataConfig) -> Transform | None:
    """The transform that gives the training pairs (synthetic), if any."""
    return next((t for t in transforms_of(cfg) if t.source), None)


def apply_transforms(cfg: DataConfig, pairs: Pairs, seed: int, log=None) -> list[dict]:
    """Run the transforms over ``pairs`` in order; what each reported (also logged as a data event)."""
    records = []
    for transform in transforms_of(cfg):
        record = transform.apply(pairs, seed)
        if record:
            records.append(record)
            if log is not None:
                log.event("data", split="train", **record)
    return records


def fingerprint_settings(cfg: DataConfig) -> list[dict[str, Any]]:
    """The settings of the transforms that decide what a token store holds."""
    import dataclasses

    return [{"name": t.name, **dataclasses.asdict(t)} for t in transforms_of(cfg)]


def transform_files(cfg: DataConfig) -> list[str]:
    return [f for t in transforms_of(cfg) for f in t.files()]
