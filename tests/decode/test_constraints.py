"""--min-len and --no-repeat-ngram (attnmt.decode.constraints) in greedy and beam search, against brute force.

The table model's log probs depend on (sentence, step, previous token), so the exact answer under the
constraints is found by enumerating every output sequence of a 3-word vocabulary and keeping the ones
the constraints allow; greedy's answer by a plain step-by-step argmax over the allowed tokens.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from attnmt.data.vocab import BOS_ID, EOS_ID
from attnmt.decode.search import beam_search, greedy_search, length_penalty_factor
from attnmt.errors import UserError
from tests.decode.test_search import ALLOWED, LENGTHS, TableModel, TinyAttnModel, make_batch, random_table

MAX_LENS = [2, 3, 5]  # max_len_a 1 * the source length
SRC = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 0, 0], [2, 2, 2, 2, 2]])
SRC_LEN = torch.tensor(MAX_LENS)


def repeats(tokens: list[int], n: int) -> bool:
    """Whether an n-gram occurs twice in tokens (n 0: never)."""
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return n > 0 and len(grams) != len(set(grams))


def allowed(seq: list[int], max_len: int, min_len: int, n: int) -> bool:
    return len(seq) >= min(min_len, max_len) and not repeats(seq, n)


def sequence_log_prob(table, key: int, seq: list[int]) -> float:
    last = table.size(1) - 1
    prev, total = BOS_ID, 0.0
    for t, tok in enumerate(seq + [EOS_ID]):
        total += float(table[key, min(t, last), prev, tok])
        prev = tok
    return total


def brute_force(table, key, max_len, alpha, min_len, n):
    results = []
    for length in range(max_len + 1):
        for seq in itertools.product(ALLOWED, repeat=length):
            if allowed(list(seq), max_len, min_len, n):
                lp = sequence_log_prob(table, key, list(seq))
                results.append((lp / length_penalty_factor(length + 1, alpha), list(seq)))
    return sorted(results, key=lambda r: r[0], reverse=True)


def reference_greedy(table, key, max_len, min_len, n) -> list[int]:
    """Step by step: the most likely token among those the rules allow (EOS only at the maximum)."""
    last = table.size(1) - 1
    seq, prev = [], BOS_ID
    while True:
        t = len(seq)
        if t == max_len:
            return seq
        options = [EOS_ID] if t >= min(min_len, max_len) else []
        options += [tok for tok in ALLOWED if not repeats(seq + [tok], n)]
        best = max(options, key=lambda tok: float(table[key, min(t, last), prev, tok]))
        if best == EOS_ID:
            return seq
        seq.append(best)
        prev = best


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("min_len, n", [(0, 1), (0, 2), (0, 3), (2, 0), (3, 2), (4, 3), (4, 1), (3, 0)])
def test_beam_with_constraints_equals_exhaustive_search(seed, min_len, n):
    table = random_table(keys=3, steps=5, seed=seed)
    model = TableModel(table)
    results = beam_search(model, SRC, SRC_LEN, beam_size=364, n_best=364, length_penalty=0.6, max_len_a=1.0,
                          max_len_b=0, min_len=min_len, no_repeat_ngram=n)
    for key, max_len in enumerate(MAX_LENS):
        expected = brute_force(table, key, max_len, 0.6, min_len, n)
        assert [h.tokens for h in results[key]] == [tokens for _, tokens in expected]
        for h, (score, _) in zip(results[key], expected):
            assert h.score == pytest.approx(score, abs=1e-5)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_len, n", [(0, 0), (0, 1), (0, 2), (0, 3), (3, 0), (4, 2), (2, 1)])
def test_greedy_with_constraints_equals_a_step_by_step_argmax(seed, min_len, n):
    table = random_table(keys=3, steps=5, seed=10 + seed)
    results = greedy_search(TableModel(table), SRC, SRC_LEN, max_len_a=1.0, max_len_b=0, min_len=min_len,
                            no_repeat_ngram=n)
    for key, max_len in enumerate(MAX_LENS):
        expected = reference_greedy(table, key, max_len, min_len, n)
        assert results[key][0].tokens == expected
        assert results[key][0].log_prob == pytest.approx(sequence_log_prob(table, key, expected), abs=1e-5)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_constraints_hold_on_a_model_and_change_its_output(search):
    model = TinyAttnModel(seed=3, eos_bias=-4.0)
    src, src_len = make_batch(LENGTHS, seed=2)

    def run(**rules):
        if search == "greedy":
            return greedy_search(model, src, src_len, max_len_a=2.0, max_len_b=2, **rules)
        return beam_search(model, src, src_len, beam_size=4, n_best=4, max_len_a=2.0, max_len_b=2, **rules)

    free = run()
    assert any(repeats(h.tokens, 2) for hyps in free for h in hyps)  # the rule has something to do
    assert any(len(h.tokens) < 5 for hyps in free for h in hyps)
    for hyps, n in zip(run(no_repeat_ngram=2, min_len=5), LENGTHS):
        for h in hyps:
            assert not repeats(h.tokens, 2)
            assert len(h.tokens) >= min(5, 2 * n + 2)


def test_negative_values_are_refused():
    src, src_len = make_batch([3])
    with pytest.raises(UserError, match="min_len=-1"):
        greedy_search(TinyAttnModel(), src, src_len, min_len=-1)
    with pytest.raises(UserError, match="no_repeat_ngram=-2"):
        beam_search(TinyAttnModel(), src, src_len, no_repeat_ngram=-2)
