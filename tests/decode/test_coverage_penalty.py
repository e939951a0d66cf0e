"""GNMT's coverage penalty in beam search (Wu et al. 2016, eq. 14): the term, the search, the options."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from attnmt.data.vocab import BOS_ID, EOS_ID
from attnmt.decode.search import (
    COVERAGE_FLOOR,
    beam_search,
    coverage_penalty_term,
    greedy_search,
    length_penalty_factor,
)
from attnmt.decode.translator import load
from attnmt.errors import UserError
from tests.cli.test_cli import assert_user_error, run
from tests.decode.test_search import ALLOWED, LENGTHS, TinyAttnModel, make_batch, same, stopping_table

PEAK = 0.7  # the attention of output step t: PEAK on source word min(t, S - 1), the rest spread evenly


def attention_row(t: int, n_src: int) -> list[float]:
    if n_src == 1:
        return [1.0]
    rest = (1.0 - PEAK) / (n_src - 1)
    return [PEAK if j == min(t, n_src - 1) else rest for j in range(n_src)]


class AttendingTableModel(nn.Module):
    """log_probs = table[key, step, y_prev] (tests.decode.test_search.TableModel), and attention_row(step) over
    the sentence's real source words (0 on padding)."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = table
        self.rows_per_step: list[int] = []

    def encode(self, src, src_len):
        return {"key": src[:, 0].clone(), "src_len": src_len.clone(), "width": torch.zeros(src.shape)}

    def init_state(self, enc):
        return {"t": torch.zeros_like(enc["key"])}

    def decode_step(self, y_prev, state, enc):
        self.rows_per_step.append(y_prev.numel())
        t = state["t"].clamp(max=self.table.size(1) - 1)
        alpha = torch.zeros(enc["width"].shape)
        for r, (step, n) in enumerate(zip(state["t"].tolist(), enc["src_len"].tolist())):
            alpha[r, :n] = torch.tensor(attention_row(step, n))
        return self.table[enc["key"], t, y_prev], {"t": state["t"] + 1}, alpha


def brute_force(table, key: int, n_src: int, max_len: int, alpha: float, beta: float) -> list[tuple[float, list]]:
    """Every output of at most max_len tokens, scored by hand: log prob / lp + beta * sum_j log(min(cov_j, 1))."""
    last = table.size(1) - 1
    results = []
    for n in range(max_len + 1):
        for seq in itertools.product(ALLOWED, repeat=n):
            prev, log_prob = BOS_ID, 0.0
            for t, tok in enumerate((*seq, EOS_ID)):
                log_prob += float(table[key, min(t, last), prev, tok])
                prev = tok
            coverage = [sum(attention_row(t, n_src)[j] for t in range(n + 1)) for j in range(n_src)]
            cp = beta * sum(math.log(max(min(c, 1.0), COVERAGE_FLOOR)) for c in coverage)
            results.append((log_prob / length_penalty_factor(n + 1, alpha) + cp, list(seq)))
    return sorted(results, key=lambda r: r[0], reverse=True)


def test_the_term_by_hand():
    coverage = torch.tensor([[0.5, 1.5, 1.0], [0.25, 0.0, 1.0]])
    got = coverage_penalty_term(coverage, 0.2)
    assert got[0] == pytest.approx(0.2 * math.log(0.5))  # a word read more than once earns no more than 1
    assert got[1] == pytest.approx(0.2 * (math.log(0.25) + math.log(COVERAGE_FLOOR)))  # never read: the floor
    assert coverage_penalty_term(torch.ones(4), 0.2) == 0  # every word read at least once: no penalty
    assert coverage_penalty_term(coverage, 0.0).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("alpha, beta", [(0.0, 0.2), (1.0, 0.2), (0.6, 1.0)])
def test_large_beam_equals_exhaustive_search_with_coverage(seed, alpha, beta):
    """All sequences, in the order of scores worked out by hand; and n_best 1 (bounded stopping) finds the best."""
    g = torch.Generator().manual_seed(seed)
    table = torch.log_softmax(torch.randn(3, 4, 6, 6, generator=g) * 1.5, dim=-1)
    src = torch.tensor([[0, 4, 4], [1, 4, 0], [2, 4, 4]])
    src_len = torch.tensor([3, 2, 3])
    kw = dict(length_penalty=alpha, coverage_penalty=beta, max_len_a=0.0, max_len_b=3)
    every = beam_search(AttendingTableModel(table), src, src_len, beam_size=40, n_best=40, **kw)
    best = beam_search(AttendingTableModel(table), src, src_len, beam_size=40, n_best=1, **kw)
    for key, n_src in enumerate([3, 2, 3]):
        expected = brute_force(table, key, n_src, 3, alpha, beta)
        assert [h.tokens for h in every[key]] == [tokens for _, tokens in expected]
        for h, (score, _) in zip(every[key], expected):
            assert h.score == pytest.approx(score, abs=1e-5)
        assert best[key][0].tokens == expected[0][1]


def test_the_penalty_turns_down_an_output_that_leaves_the_source_unread():
    """Without it the empty output wins (-1.0 against -1.22 for "A A"); it attends only to the first of
    three source words (its one row: 0.7, 0.15, 0.15), so beta 0.2 costs it 0.2 * (log 0.7 + 2 log 0.15), and
    "A A" reads all three."""
    table = stopping_table()
    src, src_len = torch.tensor([[0, 4, 4]]), torch.tensor([3])
    kw = dict(beam_size=2, length_penalty=0.0, max_len_a=0.0, max_len_b=6)
    plain = beam_search(AttendingTableModel(table), src, src_len, **kw)[0][0]
    assert plain.tokens == [] and plain.score == pytest.approx(-1.0)
    covered = beam_search(AttendingTableModel(table), src, src_len, coverage_penalty=0.2, **kw)[0][0]
    assert covered.tokens == [4, 4]
    assert covered.score == pytest.approx(covered.log_prob) == pytest.approx(-1.22, abs=1e-6)  # cp = 0
    # "early" judges the live "A" as if it ended at once (its coverage penalty as it stands): it stops
    # at the first step with the empty output, as it does without the penalty
    early = beam_search(AttendingTableModel(table), src, src_len, coverage_penalty=0.2, stopping="early", **kw)[0][0]
    assert early.tokens == []
    assert early.score == pytest.approx(-1.0 + 0.2 * (math.log(0.7) + 2 * math.log(0.15)))


def test_beta_0_and_models_without_attention_change_nothing():
    src, src_len = make_batch(LENGTHS, seed=3)
    model = TinyAttnModel(seed=2)
    assert same(beam_search(model, src, src_len, beam_size=3, coverage_penalty=0.0),
                beam_search(model, src, src_len, beam_size=3))
    blind = TinyAttnModel(seed=2, with_attention=False)
    assert same(beam_search(blind, src, src_len, beam_size=3, coverage_penalty=0.5),
                beam_search(blind, src, src_len, beam_size=3))
    # beam 1 keeps greedy's tokens; the score gains the penalty
    greedy = greedy_search(model, src, src_len)
    one = beam_search(model, src, src_len, beam_size=1, coverage_penalty=0.5)
    for g, o in zip(greedy, one):
        assert o[0].tokens == g[0].tokens
        expected = g[0].score + 0.5 * float(g[0].attention.sum(0).clamp(COVERAGE_FLOOR, 1).log().sum())
        assert o[0].score == pytest.approx(expected, abs=1e-5)
    with pytest.raises(UserError, match="coverage_penalty must be 0"):
        beam_search(model, src, src_len, coverage_penalty=-0.1)


def cp_of(translation, beta: float) -> float:
    return beta * float(torch.tensor(translation.attention).sum(0).clamp(COVERAGE_FLOOR, 1).log().sum())


def test_translate_and_the_cli(capsys, tiny_model, tiny_corpus, tmp_path):
    translator = load(tiny_model)
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:12]
    plain = translator.translate(sentences, beam=3)
    penalised = translator.translate(sentences, beam=3, coverage_penalty=0.4)
    same_output = [(p, c) for p, c in zip(plain, penalised) if p.text == c.text]
    assert same_output
    for p, c in same_output:  # the same hypothesis: its score gains exactly its coverage penalty
        assert c.score == pytest.approx(p.score + cp_of(c, 0.4), abs=1e-4)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(source), "--beam", "3",
                         "--coverage-penalty", "0.4", "--length-penalty", "0.6")
    assert code == 0, err
    assert out.splitlines() == [t.text for t in translator.translate(sentences, beam=3, coverage_penalty=0.4,
                                                                     length_penalty=0.6)]
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(source),
                       "--coverage-penalty", "-1")
    assert_user_error(code, err, "coverage_penalty=-1.0 is out of range")
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(source), "--sample",
                       "--coverage-penalty", "0.2")
    assert_user_error(code, err, "coverage_penalty with sampling")


def test_a_model_without_attention_refuses_the_penalty_it_is_asked_for(tiny_seq2seq):
    translator = load(tiny_seq2seq)
    with pytest.raises(UserError, match="has no attention to measure coverage with"):
        translator.translate(["a b"], beam=2, coverage_penalty=0.2)
    translator.config.decode.coverage_penalty = 0.2  # a config shared with attention models: not applied
    assert [t.text for t in translator.translate(["a b"], beam=2)] == \
           [t.text for t in translator.translate(["a b"], beam=2, coverage_penalty=0.0)]
