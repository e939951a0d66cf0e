"""Training-data augmentation: teach a model input that the corpus never shows.

Tatoeba ends every sentence with its punctuation (。？！), so a model trained on it has never seen
input without, and users type 我爱你 as often as 我爱你。: `data.drop_final_punct` adds a fraction of
the training pairs a second time with the source's final punctuation removed (the target keeps its
own), as OpenNMT-py's `uppercase` transform adds upper-cased copies for input in capitals.

A corpus of short sentences never shows a long one, nor a function word that stands three times in
one sentence: `data.joined_pairs` adds pairs that join 2 to `data.join_max_parts` training pairs
drawn at random (sources with sources, targets with targets, in the same order), as the studies'
long test pairs are joined. Guided alignment carries each part's links over, shifted by the words
before it (`join_links`), so a joined pair is guided exactly as its parts are.
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


def add_unpunctuated(pairs: list[tuple[str, str]], fraction: float, seed: int) -> list[tuple[str, str]]:
    """``pairs`` followed by copies of ``fraction`` of them (chosen with ``seed``) whose source lost its
    final punctuation; pairs whose source has none, or nothing else, are not copied."""
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), round(fraction * len(pairs))))
    copies = [(strip_final_punctuation(src), tgt) for src, tgt in (pairs[i] for i in chosen)]
    return pairs + [copy for copy, i in zip(copies, chosen) if copy[0] and copy[0] != pairs[i][0]]


def join_run(run: Sequence[Pair]) -> Pair:
    """One pair from consecutive ``run`` pairs: the sources joined, and the targets, in order."""
    return " ".join(s for s, _ in run), " ".join(t for _, t in run)


def add_joined(pairs: list[Pair], count: int, max_parts: int, seed: int) -> tuple[list[Pair], dict[Pair, list[Pair]]]:
    """``pairs`` followed by ``count`` pairs, each joining 2..``max_parts`` of them drawn with ``seed``
    (a repeated draw is kept once), and each joined pair's parts, for carrying links over."""
    rng = random.Random(f"{seed}:joined")
    parts_of: dict[Pair, list[Pair]] = {}
    for _ in range(count):
        parts = [pairs[rng.randrange(len(pairs))] for _ in range(rng.randint(2, max_parts))]
        parts_of.setdefault(join_run(parts), parts)
    return pairs + list(parts_of), parts_of


def join_links(parts: Sequence[Pair], parts_links: Sequence[set[tuple[int, int]]]) -> set[tuple[int, int]]:
    """The word links (source i, target j, 0-based) of the pair that joins ``parts``: each part's own
    links, shifted by the source and target words of the parts before it."""
    joined: set[tuple[int, int]] = set()
    src_offset = tgt_offset = 0
    for (src, tgt), links in zip(parts, parts_links):
        joined |= {(i + src_offset, j + tgt_offset) for i, j in links}
        src_offset += len(src.split())
        tgt_offset += len(tgt.split())
    return joined
