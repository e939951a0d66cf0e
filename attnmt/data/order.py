"""The order in which an epoch visits a token store's pairs, drawn window by window.

An epoch is a sequence of M store positions: every corpus of the store, or with data.train weights
round(N * weight / total weight) pairs of each (whole copies of the corpus, then a seeded random
subset of it). `EpochOrder` never builds that sequence. It cuts it into blocks of consecutive
entries (`block_size`: 4,096 at the default window), permutes the block numbers with the epoch
generator and deals them out, window // block of them per window; `positions(w)` computes one
window's store positions from its block numbers. An epoch that fits one window is one window that
holds the whole sequence in order, which the caller permutes as batching.token_batches does.

What it holds, per pair of the corpus: nothing. Per block it holds the block permutation (8 bytes
per block, so 8 bytes per 4,096 pairs at the default window), and per 4,096 pairs of a corpus that
gives a random subset, how many of them the subset takes (8 bytes). The positions of one window
(4 bytes a pair, 8 from 2**31 pairs) exist while the caller batches that window.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from attnmt.data.batching import epoch_generator

MAX_BLOCK = 4096  # epoch entries per block, at most; also the pairs per part of a random subset's draw


@dataclass
class Mix:
    """One corpus of a store: its pairs are store positions start..start+count-1."""

    name: str
    start: int
    count: int
    weight: float


def epoch_counts(corpora: list[Mix]) -> list[int]:
    """Pairs each corpus gives an epoch: round(N * weight / total weight), N = all pairs."""
    total = sum(c.count for c in corpora)
    weights = sum(c.weight for c in corpora)
    return [round(total * c.weight / weights) if c.count else 0 for c in corpora]


def block_size(window: int) -> int:
    """Epoch entries per block: at least 64 blocks per window, at most MAX_BLOCK entries each."""
    return max(1, min(MAX_BLOCK, window // 64))


def seeded_rng(*key) -> np.random.Generator:
    """A numpy generator whose stream is fixed by `key` (hashed, so nearby keys share nothing)."""
    digest = hashlib.sha256(":".join(map(str, key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


@dataclass
class _Part:
    """One corpus's stretch of the epoch: `whole` copies of its pairs, then `rest` of them drawn at random."""

    begin: int  # its first entry in the epoch
    start: int  # its first store position
    count: int
    whole: int
    rest: int
    key: tuple  # seeds the draw of the random subset
    taken: np.ndarray | None = None  # cumulative: pairs the subset takes from the corpus's first k blocks

    def __post_init__(self):
        if self.rest:  # a uniform random subset of `rest` pairs, split block by block (multivariate hypergeometric)
            sizes = np.full(-(-self.count // MAX_BLOCK), MAX_BLOCK, dtype=np.int64)
            sizes[-1] = self.count - MAX_BLOCK * (len(sizes) - 1)
            per_block = seeded_rng(*self.key).multivariate_hypergeometric(sizes, self.rest)
            self.taken = np.concatenate([[0], np.cumsum(per_block)])

    @property
    def end(self) -> int:
        return self.begin + self.whole * self.count + self.rest

    def positions(self, a: int, b: int, dtype) -> np.ndarray:
        """Store positions of this part's entries a..b-1 (counted from its begin)."""
        copies = self.whole * self.count
        pieces = []
        if a < copies and a // self.count == (min(b, copies) - 1) // self.count:  # within one copy
            first = a % self.count + self.start
            pieces.append(np.arange(first, first + min(b, copies) - a, dtype=dtype))
        elif a < copies:
            pieces.append((np.arange(a, min(b, copies), dtype=np.int64) % self.count + self.start).astype(dtype))
        r, stop = max(a, copies) - copies, b - copies
        k = int(np.searchsorted(self.taken, r, side="right")) - 1 if r < stop else 0
        while r < stop:  # the subset's entries r..stop-1, from the blocks that hold them
            first, last = int(self.taken[k]), int(self.taken[k + 1])
            if last > r:
                pieces.append(self._subset_of_block(k)[r - first:min(stop, last) - first].astype(dtype))
                r = min(stop, last)
            k += 1
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)

    def _subset_of_block(self, k: int) -> np.ndarray:
        """The store positions the random subset takes from the corpus's block k, ascending."""
        size = min(MAX_BLOCK, self.count - k * MAX_BLOCK)
        chosen = seeded_rng(*self.key, k).choice(size, int(self.taken[k + 1] - self.taken[k]), replace=False)
        return self.start + k * MAX_BLOCK + np.sort(chosen)


class EpochOrder:
    """The store positions of an epoch, window by window (see the module docstring)."""

    def __init__(self, corpora: list[Mix], seed: int, epoch: int, window: int, shuffle: bool):
        self.parts, begin = [], 0
        for k, (n, c) in enumerate(zip(epoch_counts(corpora), corpora)):
            if n:
                whole, rest = divmod(n, c.count)
                self.parts.append(_Part(begin, c.start, c.count, whole, rest, ("attnmt-mix", seed, epoch, k)))
                begin += n
        self.total = begin
        last = max((c.start + c.count for c in corpora), default=0)
        self.dtype = np.int32 if last < 2 ** 31 else np.int64
        self.single = self.total <= window  # one window: the whole sequence, as token_batches takes it
        self.block = max(1, self.total) if self.single else block_size(window)
        self.per_window = 1 if self.single else max(1, window // self.block)
        n_blocks = -(-self.total // self.block)
        if shuffle and not self.single:  # 8 bytes per block
            self.blocks = torch.randperm(n_blocks, generator=epoch_generator(seed, epoch)).numpy()
        else:
            self.blocks = np.arange(n_blocks, dtype=np.int64)
        self.n_windows = max(1, -(-n_blocks // self.per_window))

    def positions(self, w: int) -> np.ndarray:
        """Window w's store positions, block after block (each block in epoch order)."""
        blocks = self.blocks[w * self.per_window:(w + 1) * self.per_window].tolist()
        pieces = [self._entries(b * self.block, min((b + 1) * self.block, self.total)) for b in blocks]
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=self.dtype)

    def size(self, w: int) -> int:
        """Pairs in window w (without computing its positions)."""
        blocks = self.blocks[w * self.per_window:(w + 1) * self.per_window]
        short = self.block * len(self.blocks) - self.total  # the last block's missing entries
        return len(blocks) * self.block - (short if bool((blocks == len(self.blocks) - 1).any()) else 0)

    def _entries(self, a: int, b: int) -> np.ndarray:
        """The store positions of the epoch's entries a..b-1."""
        pieces = [p.positions(max(a, p.begin) - p.begin, min(b, p.end) - p.begin, self.dtype)
                  for p in self.parts if p.begin < b and a < p.end]
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
