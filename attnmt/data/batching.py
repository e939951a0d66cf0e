"""Batches: which examples go together (length bucketing), and padding them into tensors.

Batch composition (:func:`token_batches`, :func:`batch_by_sentences`) works on lengths only and
returns lists of dataset positions; :func:`collate` turns the examples of one batch into a
:class:`Batch`. Both samplers order examples the way fairseq does: a random permutation, then a
*stable* sort by (source length, target length). Examples of equal lengths therefore meet in a
new random mix every epoch while each batch holds near-equal lengths, so padding stays small. The
batches are then shuffled as a whole. Everything random comes from one ``torch.Generator`` seeded
from (seed, epoch): the same pair gives the same batches in the same order, which exact resume
needs. With ``shuffle=False`` the order is fully sorted by length (ties by position) and the batches
come shortest first, which suits decoding; put outputs back in input order with ``Batch.index``.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from attnmt.errors import UserError

__all__ = [
    "Batch",
    "PaddingStats",
    "batch_by_sentences",
    "collate",
    "epoch_generator",
    "padding_stats",
    "token_batches",
]


@dataclass
class Batch:
    """Padded tensors of one batch; B examples, all ``torch.long``.

    The source is used as given (collate adds no BOS/EOS to it). The target is split for teacher
    forcing: ``tgt_in`` = BOS y1..yn and ``tgt_out`` = y1..yn EOS, both n+1 long. For source-only
    batches (translation) the three target fields are None.
    """

    src: Tensor  # [B, S], PAD after each sentence
    src_len: Tensor  # [B], >= 1
    tgt_in: Tensor | None  # [B, T], BOS y1..yn then PAD
    tgt_out: Tensor | None  # [B, T], y1..yn EOS then PAD
    tgt_len: Tensor | None  # [B], n + 1
    index: Tensor  # [B], position of each example in the dataset

    @property
    def size(self) -> int:
        """Number of examples B."""
        return self.src.size(0)

    @property
    def n_src_tokens(self) -> int:
        """Real (non-pad) source tokens."""
        return int(self.src_len.sum())

    @property
    def n_tgt_tokens(self) -> int:
        """Real target positions (each sentence's words + EOS): the tokens a loss is averaged over."""
        return 0 if self.tgt_len is None else int(self.tgt_len.sum())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """A copy with every tensor on ``device``."""

        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(device, non_blocking=non_blocking)

        return Batch(
            src=self.src.to(device, non_blocking=non_blocking),
            src_len=self.src_len.to(device, non_blocking=non_blocking),
            tgt_in=move(self.tgt_in),
            tgt_out=move(self.tgt_out),
            tgt_len=move(self.tgt_len),
            index=self.index.to(device, non_blocking=non_blocking),
        )


def collate(examples: Sequence[tuple[Sequence[int], Sequence[int] | None]], indices: Sequence[int]) -> Batch:
    """Pad ``examples`` = [(src_ids, tgt_ids or None), ...] into a :class:`Batch`.

    ``indices`` are the dataset positions of the examples (stored in ``Batch.index``). Target ids
    exclude BOS/EOS; either every target is None (source-only batch) or none is. An empty source
    is a ValueError: an RNN cannot pack a zero-length sequence, so filter or special-case it first.
    """
    if len(examples) != len(indices):
        raise ValueError(f"{len(examples)} examples but {len(indices)} indices")
    if not examples:
        raise ValueError("cannot collate an empty batch")
    has_tgt = [tgt is not None for _, tgt in examples]
    if any(has_tgt) and not all(has_tgt):
        raise ValueError("either all examples of a batch have a target or none has")
    for (source, _), index in zip(examples, indices, strict=True):
        if len(source) == 0:
            raise ValueError(f"empty source sequence (dataset position {index}); filter it out first")

    src, src_len = _pad([source for source, _ in examples])
    tgt_in = tgt_out = tgt_len = None
    if has_tgt[0]:
        targets, lengths = _pad([tgt for _, tgt in examples], extra=1)  # type: ignore[misc]
        # tgt_in is BOS followed by the target, tgt_out the target followed by EOS: one column wider each
        tgt_in = torch.cat([torch.full((len(examples), 1), BOS_ID, dtype=torch.long), targets[:, :-1]], dim=1)
        tgt_out = targets.scatter(1, lengths.unsqueeze(1), EOS_ID)
        tgt_len = lengths + 1
    return Batch(
        src=src,
        src_len=src_len,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        tgt_len=tgt_len,
        index=torch.tensor(list(indices), dtype=torch.long),
    )


def _pad(seqs: Sequence[Sequence[int]], extra: int = 0) -> tuple[Tensor, Tensor]:
    """[B, max_len + extra] long tensor padded with PAD_ID, and the [B] lengths: one array filled through a mask
    rather than a tensor per row."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    out = np.full((len(seqs), int(lengths.max()) + extra), PAD_ID, dtype=np.int64)
    out[np.arange(out.shape[1]) < lengths[:, None]] = np.fromiter(itertools.chain.from_iterable(seqs),
                                                                   dtype=np.int64, count=int(lengths.sum()))
    return torch.from_numpy(out), torch.from_numpy(lengths)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A CPU generator whose stream depends on both ``seed`` and ``epoch``.

    The pair is hashed rather than packed into one integer because torch's CPU generator (a
    Mersenne Twister) keeps only the low 32 bits of a seed: ``seed * 2**32 + epoch`` would make
    every seed share one stream.
    """
    digest = hashlib.sha256(f"attnmt-batches:{seed}:{epoch}".encode()).digest()
    generator = torch.Generator()
    generator.manual_seed(int.from_bytes(digest[:4], "little"))
    return generator


def _check_lengths(src_lengths: Sequence[int], tgt_lengths: Sequence[int] | None) -> None:
    if tgt_lengths is not None and len(tgt_lengths) != len(src_lengths):
        raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")


def _length_order(
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int] | None,
    shuffle: bool,
    generator: torch.Generator,
) -> list[int]:
    """Positions sorted by (src, tgt) length; ties in random order when shuffling, else by position."""
    n = len(src_lengths)
    order = torch.randperm(n, generator=generator).tolist() if shuffle else list(range(n))
    if tgt_lengths is None:
        return sorted(order, key=lambda i: src_lengths[i])  # sorted() is stable
    return sorted(order, key=lambda i: (src_lengths[i], tgt_lengths[i]))


def _shuffled(batches: list[list[int]], shuffle: bool, generator: torch.Generator) -> list[list[int]]:
    if not shuffle:
        return batches
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def token_batches(
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int] | None,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
    max_sentences: int | None = None,
) -> list[list[int]]:
    """Group dataset positions into batches of at most ``max_tokens`` padded tokens.

    A batch of B examples costs ``B * max(S, T)`` where S is its longest source and T its longest
    target *plus one* (the BOS/EOS that :func:`collate` adds), i.e. the size of its largest padded
    tensor. Lengths are token counts without BOS/EOS; ``tgt_lengths`` may be None for source-only
    data. An example longer than the budget forms a batch of its own rather than being lost.
    ``max_sentences`` optionally caps B as well. Ordering and shuffling: see the module docstring.
    """
    if max_tokens < 1:
        raise UserError(f"max_tokens must be at least 1 (got {max_tokens}); fix the batch settings")
    if max_sentences is not None and max_sentences < 1:
        raise UserError(f"max_sentences must be at least 1 (got {max_sentences}); fix the batch settings")
    _check_lengths(src_lengths, tgt_lengths)
    generator = epoch_generator(seed, epoch)
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in _length_order(src_lengths, tgt_lengths, shuffle, generator):
        size = max(src_lengths[i], tgt_lengths[i] + 1 if tgt_lengths is not None else 0)
        grown = max(longest, size)
        full = max_sentences is not None and len(current) >= max_sentences
        if current and (grown * (len(current) + 1) > max_tokens or full):
            batches.append(current)
            current, grown = [], size
        current.append(i)
        longest = grown
    if current:
        batches.append(current)
    return _shuffled(batches, shuffle, generator)


def batch_by_sentences(
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int] | None,
    batch_size: int,
    shuffle: bool,
    seed: int = 0,
    epoch: int = 0,
) -> list[list[int]]:
    """Group dataset positions into batches of ``batch_size`` sentences (the last may be smaller).

    Length-bucketed like :func:`token_batches`, so the 64-sentence batches of the RNNsearch
    recipe need little padding; same ordering and (seed, epoch) reproducibility.
    """
    if batch_size < 1:
        raise UserError(f"batch_size must be at least 1 (got {batch_size}); fix the batch settings")
    _check_lengths(src_lengths, tgt_lengths)
    generator = epoch_generator(seed, epoch)
    order = _length_order(src_lengths, tgt_lengths, shuffle, generator)
    batches = [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
    return _shuffled(batches, shuffle, generator)


@dataclass(frozen=True)
class PaddingStats:
    """Real versus padded token counts of a list of batches, both sides together."""

    n_batches: int
    real_tokens: int
    padded_tokens: int  # the tensor sizes: sum over batches of B*S (+ B*T with targets)

    @property
    def efficiency(self) -> float:
        """Fraction of the padded tensors that holds real tokens (1.0 = no padding)."""
        return self.real_tokens / self.padded_tokens if self.padded_tokens else 1.0

    def __str__(self) -> str:
        return (
            f"{self.n_batches:,} batches, {self.real_tokens:,} real of {self.padded_tokens:,} "
            f"padded tokens ({100 * self.efficiency:.1f}% efficiency)"
        )


def padding_stats(
    batches: Sequence[Sequence[int]],
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int] | None = None,
) -> PaddingStats:
    """How much of the collated tensors would be padding (targets counted with their BOS/EOS)."""
    _check_lengths(src_lengths, tgt_lengths)
    real = padded = 0
    for batch in batches:
        if not batch:
            continue
        src = [src_lengths[i] for i in batch]
        real += sum(src)
        padded += len(batch) * max(src)
        if tgt_lengths is not None:
            tgt = [tgt_lengths[i] + 1 for i in batch]
            real += sum(tgt)
            padded += len(batch) * max(tgt)
    return PaddingStats(n_batches=len(batches), real_tokens=real, padded_tokens=padded)
