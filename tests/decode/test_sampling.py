"""Sampling (attnmt.decode.sampling): the distribution it draws from, against an enumeration of every sequence.

The reference distribution of a step is computed here in plain Python from its definition (temperature,
then the k most likely tokens, then the fewest most likely tokens whose probability reaches p), not
with the module's tensors.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch

from attnmt.data.vocab import BOS_ID, EOS_ID
from attnmt.decode.sampling import Sampling, filter_logits, sample_search
from attnmt.decode.search import greedy_search, length_penalty_factor
from attnmt.errors import UserError
from tests.decode.test_constraints import repeats, sequence_log_prob
from tests.decode.test_search import ALLOWED, LENGTHS, TableModel, TinyAttnModel, make_batch, random_table


def step_distribution(log_probs: dict[int, float], t: float, k: int, p: float) -> dict[int, float]:
    """The sampling distribution over the allowed tokens, from its definition."""
    scaled = {tok: lp / t for tok, lp in log_probs.items()}
    ranked = sorted(scaled, key=lambda tok: -scaled[tok])
    if k:
        kth = scaled[ranked[min(k, len(ranked)) - 1]]
        ranked = [tok for tok in ranked if scaled[tok] >= kth]
    z = sum(math.exp(scaled[tok]) for tok in ranked)
    kept, mass = [], 0.0
    for tok in ranked:
        if kept and mass >= p:
            break
        kept.append(tok)
        mass += math.exp(scaled[tok]) / z
    z = sum(math.exp(scaled[tok]) for tok in kept)
    return {tok: math.exp(scaled[tok]) / z for tok in kept}


def sequence_distribution(table, max_len: int, t: float, k: int, p: float, min_len: int = 0,
                          n: int = 0) -> dict[tuple, float]:
    """Probability of every output sequence (EOS forced at max_len, banned before min_len; no repeated n-gram;
    PAD/BOS never drawn)."""
    last = table.size(1) - 1
    result = {}
    for length in range(max_len + 1):
        for seq in itertools.product(ALLOWED, repeat=length):
            prob, prev = 1.0, BOS_ID
            for step, tok in enumerate(list(seq) + [EOS_ID]):
                options = [EOS_ID] if step == max_len else [EOS_ID] * (step >= min_len) + [
                    o for o in ALLOWED if not repeats(list(seq[:step]) + [o], n)]
                dist = step_distribution({o: float(table[0, min(step, last), prev, o]) for o in options}, t, k, p)
                prob *= dist.get(tok, 0.0)
                prev = tok
            if prob > 0:
                result[seq] = prob
    return result


@pytest.mark.parametrize("t, k, p, min_len, ngram", [(1.0, 0, 1.0, 0, 0), (0.6, 2, 1.0, 0, 0), (1.5, 0, 0.7, 0, 0),
                                                    (2.0, 3, 0.8, 0, 0), (1.3, 0, 1.0, 2, 1), (1.0, 2, 0.9, 1, 2)])
def test_samples_follow_the_tempered_truncated_distribution(t, k, p, min_len, ngram):
    table = random_table(keys=1, steps=4, seed=4)
    n = 20000
    hyps = sample_search(TableModel(table), torch.tensor([[0, 0, 0]]), torch.tensor([3]), n_samples=n,
                         sampling=Sampling(top_k=k, top_p=p, temperature=t, seed=1), max_len_a=1.0, max_len_b=0,
                         min_len=min_len, no_repeat_ngram=ngram)[0]
    assert len(hyps) == n
    counts = Counter(tuple(h.tokens) for h in hyps)
    expected = sequence_distribution(table, 3, t, k, p, min_len, ngram)
    assert set(counts) <= set(expected)  # nothing outside the cut
    for seq, prob in expected.items():
        assert counts[seq] / n == pytest.approx(prob, abs=0.015), seq  # 4 standard deviations at most


def test_sample_scores_are_the_model_log_probs_best_first():
    table = random_table(keys=1, steps=4, seed=6)
    hyps = sample_search(TableModel(table), torch.tensor([[0, 0, 0]]), torch.tensor([3]), n_samples=50,
                         sampling=Sampling(temperature=1.7, seed=3), max_len_a=1.0, max_len_b=0,
                         length_penalty=0.6)[0]
    for h in hyps:
        assert h.log_prob == pytest.approx(sequence_log_prob(table, 0, h.tokens), abs=1e-5)
        assert h.score == pytest.approx(h.log_prob / length_penalty_factor(len(h.tokens) + 1, 0.6), abs=1e-6)
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_top_k_1_is_greedy_search():
    model = TinyAttnModel(seed=5, eos_bias=-2.0)
    src, src_len = make_batch(LENGTHS, seed=3)
    greedy = greedy_search(model, src, src_len, max_len_a=1.0, max_len_b=3)
    sampled = sample_search(model, src, src_len, n_samples=2, sampling=Sampling(top_k=1, temperature=3.0),
                            max_len_a=1.0, max_len_b=3)
    for g, s in zip(greedy, sampled):
        assert [h.tokens for h in s] == [g[0].tokens] * 2
        assert [h.log_prob for h in s] == [g[0].log_prob] * 2


def test_the_nucleus_is_the_fewest_tokens_that_reach_p():
    g = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(50, 9, generator=g) * 2, dim=1)
    for p in (0.05, 0.3, 0.5, 0.9, 0.999):
        kept = torch.isfinite(filter_logits(log_probs, Sampling(top_p=p))).tolist()
        for row, keep in zip(log_probs.tolist(), kept):
            expected = step_distribution(dict(enumerate(row)), 1.0, 0, p)
            assert {i for i, k in enumerate(keep) if k} == set(expected)


def test_seeded_samples_repeat_and_other_seeds_differ():
    model = TinyAttnModel(seed=7, eos_bias=-2.0)
    src, src_len = make_batch(LENGTHS, seed=4)

    def draw(seed):
        return [[h.tokens for h in hyps] for hyps in sample_search(model, src, src_len, n_samples=3,
                                                                    sampling=Sampling(seed=seed, temperature=1.5))]

    assert draw(11) == draw(11)
    assert draw(11) != draw(12)


def test_sampling_keeps_the_constraints():
    model = TinyAttnModel(seed=3, eos_bias=-4.0)
    src, src_len = make_batch(LENGTHS, seed=2)
    results = sample_search(model, src, src_len, n_samples=8, sampling=Sampling(temperature=1.5, seed=2),
                            max_len_a=2.0, max_len_b=2, min_len=4, no_repeat_ngram=1)
    assert all(len(hyps) == 8 for hyps in results)
    for hyps, n in zip(results, LENGTHS):
        for h in hyps:
            assert not repeats(h.tokens, 1) and len(h.tokens) >= min(4, 2 * n + 2)


@pytest.mark.parametrize("kwargs, fragment", [({"top_p": 1.5}, "top_p=1.5"), ({"top_p": 0.0}, "top_p=0.0"),
                                              ({"top_k": -1}, "top_k=-1"), ({"temperature": 0.0}, "temperature=0.0"),
                                              ({"seed": -3}, "seed=-3")])
def test_bad_sampling_values_are_refused(kwargs, fragment):
    with pytest.raises(UserError, match=fragment):
        Sampling(**kwargs)
