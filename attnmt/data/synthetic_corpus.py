"""Corpora of the synthetic language: train / valid / test splits with disjoint sentences, and files.

`make_splits` draws each split's sentence lengths stratified over the range asked for and keeps
every valid and test sentence out of training; `write_corpus` writes a split as ``.src``,
``.tgt`` and 1-based Pharaoh ``.align`` files (see :mod:`attnmt.data.synthetic` for the language).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from attnmt.data.synthetic import SyntheticLanguage, SyntheticPair, stratified_lengths
from attnmt.errors import UserError


def make_splits(
    n_train: int,
    n_valid: int,
    n_test: int,
    min_len: int = 4,
    max_len: int = 60,
    seed: int = 0,
    language: SyntheticLanguage | None = None,
) -> dict[str, list[SyntheticPair]]:
    """Train, valid and test pairs of ``language`` (default ``SyntheticLanguage(seed)``).

    No source sentence occurs twice anywhere, so valid and test never overlap train. Test is drawn
    first and valid second, each from its own seeded stream, so they do not change with ``n_train``.
    A duplicate is replaced by a fresh sentence of the same length, which keeps lengths uniform.
    """
    language = language if language is not None else SyntheticLanguage(seed=seed)
    seen: set[tuple[str, ...]] = set()
    splits: dict[str, list[SyntheticPair]] = {}
    for split, n in (("test", n_test), ("valid", n_valid), ("train", n_train)):
        rng = random.Random(f"attnmt.synthetic:{seed}:{split}")
        splits[split] = [
            _unseen_sentence(language, rng, length, seen) for length in stratified_lengths(rng, n, min_len, max_len)
        ]
    return {split: splits[split] for split in ("train", "valid", "test")}


def _unseen_sentence(
    language: SyntheticLanguage, rng: random.Random, length: int, seen: set[tuple[str, ...]]
) -> SyntheticPair:
    """A sentence of ``length`` tokens whose source is not in ``seen`` (then added to it)."""
    for _ in range(1000):
        pair = language.sentence(rng, length)
        key = tuple(pair.src)
        if key not in seen:
            seen.add(key)
            return pair
    raise UserError(f"synthetic language: ran out of distinct sentences of length {length}; ask for fewer")


def write_corpus(
    pairs: Sequence[SyntheticPair], directory: str | Path, split: str, one_based: bool = True
) -> dict[str, Path]:
    """Write ``{split}.src``, ``{split}.tgt`` and ``{split}.align`` into ``directory``.

    One sentence per line, tokens joined by single spaces; the ``.align`` lines are Pharaoh
    ``i-j`` links, 1-based unless ``one_based=False`` (see the module docstring). Returns the
    paths by suffix: ``{"src": ..., "tgt": ..., "align": ...}``.
    """
    from attnmt.data.pharaoh import format_links

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    lines = {
        "src": [" ".join(p.src) for p in pairs],
        "tgt": [" ".join(p.tgt) for p in pairs],
        "align": [format_links(p.alignment, one_based) for p in pairs],
    }
    paths = {}
    for suffix, content in lines.items():
        path = directory / f"{split}.{suffix}"
        path.write_text("".join(line + "\n" for line in content), encoding="utf-8")
        paths[suffix] = path
    return paths
