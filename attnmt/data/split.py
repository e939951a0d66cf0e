"""Held-out validation and test sets for a corpus that comes as one file (Tatoeba, Anki exports).

Tatoeba lists every translation of a sentence on its own line: "Got it?" appears three times with
three Chinese translations, and 你好。 translates both "Hi." and "Hello!". A random split by line
would put one of those lines in the test set and its siblings in the training set, and the test
would partly measure memorisation. :func:`split_held_out` therefore splits *groups*: two pairs are
in one group when they share a source or a target sentence (after whitespace normalisation and
case folding), directly or through a chain of other pairs, and a group is never divided.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from attnmt.data.tokenize import normalize_whitespace
from attnmt.errors import UserError

__all__ = ["split_held_out"]

Pair = tuple[str, str]


def _sharing_groups(pairs: Sequence[Pair]) -> list[list[int]]:
    """The pairs' indices grouped by shared sentences, in first-occurrence order.

    Union-find over sentences: the source and target of a pair are joined, so pairs that share
    either side end up with the same root.
    """
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def root(node: tuple[int, str]) -> tuple[int, str]:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    keys = [((0, _key(src)), (1, _key(tgt))) for src, tgt in pairs]
    for a, b in keys:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
    groups: dict[tuple[int, str], list[int]] = {}
    for i, (a, _) in enumerate(keys):
        groups.setdefault(root(a), []).append(i)
    return list(groups.values())


def split_held_out(pairs: Sequence[Pair], valid_size: int, test_size: int,
                   seed: int) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Split ``pairs`` into (train, valid, test) with ``valid_size`` and ``test_size`` pairs held out.

    Whole groups of pairs that share a sentence on either side (see the module docstring) go to one
    split, so no source or target sentence of the valid or test set occurs in the training set,
    and none occurs in both valid and test. Groups are visited in an order shuffled with ``seed``;
    each goes to the test set if it fits in what test still needs, else to the validation set if
    it fits there, else it stays in training. The sizes are therefore exact whenever enough small
    groups exist (on Tatoeba ~75% of the pairs are groups of one), otherwise at most the sizes
    asked for. Each split keeps the corpus order. The same pairs, sizes and seed always give the
    same split, on every machine (no hashing of strings, Python's own seeded generator).

    Raises UserError when a size is negative, or when the held-out sets would leave no training pair.
    """
    where = split_positions(pairs, valid_size, test_size, seed)
    train = [pair for pair, split in zip(pairs, where) if split == 0]
    valid = [pair for pair, split in zip(pairs, where) if split == 1]
    test = [pair for pair, split in zip(pairs, where) if split == 2]
    return train, valid, test


def split_positions(pairs: Sequence[Pair], valid_size: int, test_size: int, seed: int) -> list[int]:
    """Where each pair goes under `split_held_out`'s rule: 0 train, 1 valid, 2 test."""
    if valid_size < 0 or test_size < 0:
        raise UserError(f"held-out sizes must be >= 0 (valid_size={valid_size}, test_size={test_size})")
    if valid_size + test_size and valid_size + test_size >= len(pairs):
        raise UserError(f"cannot hold out {valid_size} validation and {test_size} test pairs of a corpus of "
                        f"{len(pairs)} pairs: nothing would be left to train on; lower data.valid_size / "
                        "data.test_size")
    if valid_size + test_size == 0:
        return [0] * len(pairs)
    groups = _sharing_groups(pairs)
    ordered = list(groups)  # first-occurrence order: independent of hashing
    random.Random(seed).shuffle(ordered)

    where = [0] * len(pairs)  # 0 train, 1 valid, 2 test
    need = {1: valid_size, 2: test_size}
    for members in ordered:
        if need[1] == 0 and need[2] == 0:
            break
        for split in (2, 1):
            if len(members) <= need[split]:
                need[split] -= len(members)
                for i in members:
                    where[i] = split
                break
    return where


def _key(sentence: str) -> str:
    """What makes two sentences "the same": equal up to whitespace and case."""
    return normalize_whitespace(sentence).casefold()


def write_held_out(folder: Path, valid: Sequence[Pair], test: Sequence[Pair]) -> None:
    """The held-out pairs as valid.src / valid.tgt and test.src / test.tgt (those that are not empty),
    for `attnmt evaluate --src MODEL/test.src --ref MODEL/test.tgt`."""
    for name, held in (("valid", valid), ("test", test)):
        if held:
            for side, k in (("src", 0), ("tgt", 1)):
                (folder / f"{name}.{side}").write_text("".join(p[k] + "\n" for p in held), encoding="utf-8")
