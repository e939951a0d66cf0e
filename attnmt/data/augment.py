"""Training-data augmentation: teach a model input that the corpus never shows.

Tatoeba ends every sentence with its punctuation (。？！), so a model trained on it has never seen
input without, and users type 我爱你 as often as 我爱你。: the `drop_final_punct` transform adds a fraction of
the training pairs a second time with the source's final punctuation removed (the target keeps its
own), as OpenNMT-py's `uppercase` transform adds upper-cased copies for input in capitals.

A corpus of short sentences never shows a long one, nor a function word that stands three times in
one sentence: the `joined_pairs` transform adds pairs that join 2 to `max_parts` training pairs
drawn at random (sources with sources, targets with targets, in the same order), as the studies'
long test pairs are joined. Guided alignment carries each part's links over, shifted by the words
before it (the pair's origin, attnmt/data/transforms.py), so a joined pair is guided exactly as its
parts are.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

Pair = tuple[str, str]

# Sentence-final punctuation of Chinese, Japanese and Latin-script text (one or more, at the end).
FINAL_PUNCTUATION = re.compile(r"\s*[。！？!?.，,…~]+\s*$")


def strip_final_punctuation(text: str) -> str:
    """``text`` without the punctuation that ends it (我爱你。 -> 我爱你)."""
    return FINAL_PUNCTUATION.sub("", text)


def choose_fraction(n: int, fraction: float, seed: int) -> list[int]:
    """``fraction`` of the positions 0..n-1, chosen with ``seed``, ascending."""
    return sorted(random.Random(seed).sample(range(n), round(fraction * n)))


def unpunctuated(pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs with the source's final punctuation removed; those whose source has none, or nothing
    else, are left out."""
    copies = [(strip_final_punctuation(src), tgt) for src, tgt in pairs]
    return [copy for copy, (src, _) in zip(copies, pairs) if copy[0] and copy[0] != src]


def add_unpunctuated(pairs: list[Pair], fraction: float, seed: int) -> list[Pair]:
    """``pairs`` followed by copies of ``fraction`` of them (chosen with ``seed``) whose source lost its
    final punctuation; pairs whose source has none, or nothing else, are not copied."""
    return pairs + unpunctuated([pairs[i] for i in choose_fraction(len(pairs), fraction, seed)])


def join_run(run: Sequence[Pair]) -> Pair:
    """One pair from consecutive ``run`` pairs: the sources joined, and the targets, in order."""
    return " ".join(s for s, _ in run), " ".join(t for _, t in run)


def draw_joined(n: int, count: int, max_parts: int, seed: int) -> list[list[int]]:
    """``count`` draws of 2..``max_parts`` indices of ``n`` pairs, with ``seed``: the parts of joined pairs."""
    rng = random.Random(f"{seed}:joined")
    return [[rng.randrange(n) for _ in range(rng.randint(2, max_parts))] for _ in range(count)]


def add_joined(pairs: list[Pair], count: int, max_parts: int, seed: int) -> tuple[list[Pair], dict[Pair, list[Pair]]]:
    """``pairs`` followed by ``count`` pairs, each joining 2..``max_parts`` of them drawn with ``seed``
    (a repeated draw is kept once), and each joined pair's parts, for carrying links over."""
    parts_of: dict[Pair, list[Pair]] = {}
    for draw in draw_joined(len(pairs), count, max_parts, seed):
        parts = [pairs[i] for i in draw]
        parts_of.setdefault(join_run(parts), parts)
    return pairs + list(parts_of), parts_of
