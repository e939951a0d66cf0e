"""Batches: collate padding and BOS/EOS, token budgets, bucketing, (seed, epoch) reproducibility."""

from __future__ import annotations

import random

import pytest
import torch

from attnmt.data.batching import (
    Batch,
    batch_by_sentences,
    collate,
    padding_stats,
    token_batches,
)
from attnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from attnmt.errors import UserError


def lengths(n: int = 600, seed: int = 1) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    src = [rng.randint(1, 40) for _ in range(n)]
    tgt = [max(1, s + rng.randint(-5, 5)) for s in src]
    return src, tgt


def test_collate_pads_and_shifts_target() -> None:
    batch = collate([([5, 6, 7], [8, 9]), ([10], [11, 12, 13])], indices=[4, 1])
    assert batch.src.tolist() == [[5, 6, 7], [10, PAD_ID, PAD_ID]]
    assert batch.src_len.tolist() == [3, 1]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, 9, PAD_ID], [BOS_ID, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[8, 9, EOS_ID, PAD_ID], [11, 12, 13, EOS_ID]]
    assert batch.tgt_len.tolist() == [3, 4]
    assert batch.index.tolist() == [4, 1]
    assert batch.n_tgt_tokens == 7 and batch.n_src_tokens == 4 and batch.size == 2
    for t in (batch.src, batch.src_len, batch.tgt_in, batch.tgt_out, batch.tgt_len, batch.index):
        assert t.dtype == torch.long


def test_collate_source_only() -> None:
    batch = collate([([5, 6], None), ([7], None)], indices=[0, 1])
    assert batch.tgt_in is None and batch.tgt_out is None and batch.tgt_len is None
    assert batch.n_tgt_tokens == 0
    assert batch.to("cpu").src.tolist() == [[5, 6], [7, PAD_ID]]


def test_collate_empty_target_is_just_eos() -> None:
    batch = collate([([5], [])], indices=[0])
    assert batch.tgt_in.tolist() == [[BOS_ID]] and batch.tgt_out.tolist() == [[EOS_ID]]


def test_collate_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="empty source"):
        collate([([], [1])], indices=[3])
    with pytest.raises(ValueError, match="all examples"):
        collate([([1], [1]), ([1], None)], indices=[0, 1])
    with pytest.raises(ValueError):
        collate([([1], [1])], indices=[0, 1])


def test_batch_to_moves_every_tensor() -> None:
    batch = collate([([5, 6], [7])], indices=[0]).to(torch.device("cpu"))
    assert isinstance(batch, Batch) and batch.src.device.type == "cpu"


def test_token_budget_respected_and_every_example_once() -> None:
    src, tgt = lengths()
    for shuffle in (False, True):
        batches = token_batches(src, tgt, max_tokens=200, shuffle=shuffle, seed=3, epoch=0)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        for b in batches:
            cost = len(b) * max(max(src[i] for i in b), max(tgt[i] + 1 for i in b))
            assert cost <= 200


def test_padded_tensors_match_the_budget() -> None:
    src, tgt = lengths(100)
    examples = [([7] * s, [8] * t) for s, t in zip(src, tgt, strict=True)]
    for b in token_batches(src, tgt, max_tokens=150, shuffle=True, seed=0, epoch=0):
        batch = collate([examples[i] for i in b], b)
        assert batch.src.numel() <= 150 and batch.tgt_in.numel() <= 150


def test_overlong_example_gets_its_own_batch() -> None:
    batches = token_batches([3, 500, 4], [3, 2, 4], max_tokens=50, shuffle=False)
    assert [1] in batches and sorted(i for b in batches for i in b) == [0, 1, 2]


def test_padding_stays_small() -> None:
    src, tgt = lengths(2000)
    bucketed = token_batches(src, tgt, max_tokens=1000, shuffle=True, seed=0, epoch=0)
    assert padding_stats(bucketed, src, tgt).efficiency > 0.85
    # versus random batches of the same sizes
    perm = torch.randperm(len(src), generator=torch.Generator().manual_seed(0)).tolist()
    random_batches, k = [], 0
    for b in bucketed:
        random_batches.append(perm[k : k + len(b)])
        k += len(b)
    assert padding_stats(random_batches, src, tgt).efficiency < 0.7
    assert padding_stats(batch_by_sentences(src, tgt, 64, True, 0, 0), src, tgt).efficiency > 0.85


def test_same_seed_epoch_same_batches_other_epoch_other_order() -> None:
    src, tgt = lengths()
    a = token_batches(src, tgt, 300, shuffle=True, seed=7, epoch=2)
    assert a == token_batches(src, tgt, 300, shuffle=True, seed=7, epoch=2)
    assert a != token_batches(src, tgt, 300, shuffle=True, seed=7, epoch=3)
    assert a != token_batches(src, tgt, 300, shuffle=True, seed=8, epoch=2)
    s = batch_by_sentences(src, tgt, 64, shuffle=True, seed=7, epoch=2)
    assert s == batch_by_sentences(src, tgt, 64, shuffle=True, seed=7, epoch=2)
    assert s != batch_by_sentences(src, tgt, 64, shuffle=True, seed=7, epoch=3)


def test_unshuffled_is_sorted_by_length_and_ignores_seed() -> None:
    src, tgt = lengths()
    batches = token_batches(src, tgt, 300, shuffle=False, seed=1, epoch=1)
    assert batches == token_batches(src, tgt, 300, shuffle=False, seed=2, epoch=5)
    flat = [i for b in batches for i in b]
    assert flat == sorted(range(len(src)), key=lambda i: (src[i], tgt[i], i))


def test_source_only_lengths_and_sentence_cap() -> None:
    src, _ = lengths(300)
    batches = token_batches(src, None, 400, shuffle=False, max_sentences=8)
    assert all(len(b) <= 8 and len(b) * max(src[i] for i in b) <= 400 for b in batches)


def test_batch_by_sentences_sizes() -> None:
    src, tgt = lengths(150)
    batches = batch_by_sentences(src, tgt, batch_size=64, shuffle=False)
    assert [len(b) for b in batches] == [64, 64, 22]
    assert sorted(i for b in batches for i in b) == list(range(150))


def test_bad_settings() -> None:
    with pytest.raises(UserError):
        token_batches([1], [1], max_tokens=0, shuffle=False)
    with pytest.raises(UserError):
        batch_by_sentences([1], [1], batch_size=0, shuffle=False)
    with pytest.raises(ValueError):
        token_batches([1, 2], [1], max_tokens=10, shuffle=False)


def test_padding_stats_counts() -> None:
    stats = padding_stats([[0, 1]], src_lengths=[2, 4], tgt_lengths=[1, 1])
    # source: 6 real of 8; target (+EOS): 4 real of 4
    assert (stats.real_tokens, stats.padded_tokens) == (10, 12)
    assert "83.3% efficiency" in str(stats)
