"""Training-data augmentation: teach a model input that the corpus never shows.

Tatoeba ends every sentence with its punctuation (。？！), so a model trained on it has never seen
input without, and users type 我爱你 as often as 我爱你。: `data.drop_final_punct` adds a fraction of
the training pairs a second time with the source's final punctuation removed (the target keeps its
own), as OpenNMT-py's `uppercase` transform adds upper-cased copies for input in capitals.
"""

from __future__ import annotations

import random
import re

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
