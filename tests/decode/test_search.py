"""Tests of attnmt.decode.search on small fake models that implement the model interface.

* TinyAttnModel: a random embedding + GRUCell + dot attention model (attention rows, padding).
* TableModel: log probs read from a table indexed by (sentence key, step, previous token), so that
  the exact answer can be found by enumerating every output sequence.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from attnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from attnmt.decode.search import Hypothesis, beam_search, greedy_search, length_penalty_factor, max_output_lengths
from attnmt.errors import UserError

# ------------------------------------------------------------------------------------- fake models


OUT_SCALE = 2.0
EOS_RAMP = 0.7


class TinyAttnModel(nn.Module):
    """Embedding + GRUCell decoder with dot attention over random encoder states."""

    def __init__(self, vocab: int = 11, hidden: int = 16, seed: int = 0, eos_bias: float = 0.0,
                 with_attention: bool = True, layout_sensitive: bool = False, ties: bool = False):
        super().__init__()
        torch.manual_seed(seed)
        self.src_emb = nn.Embedding(vocab, hidden)
        self.tgt_emb = nn.Embedding(vocab, hidden)
        self.pos_emb = nn.Embedding(64, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(2 * hidden, vocab)
        with torch.no_grad():
            self.out.weight.mul_(OUT_SCALE)
            self.out.bias[EOS_ID] += eos_bias
        self.with_attention = with_attention
        self.layout_sensitive = layout_sensitive  # non-contiguous enc/state; output depends on layout
        self.ties = ties  # logits rounded to halves: many words share a row's best score
        self.rows_per_step: list[int] = []
        self.modes: list[bool] = []

    def encode(self, src, src_len):
        mask = torch.arange(src.size(1)).unsqueeze(0) < src_len.unsqueeze(1)
        memory = torch.tanh(self.src_emb(src)) * mask.unsqueeze(-1)
        if self.layout_sensitive:
            memory = memory.transpose(0, 1).contiguous().transpose(0, 1)  # batch-first, not contiguous
        return {"memory": memory, "mask": mask}

    def init_state(self, enc):
        n = enc["mask"].sum(1, keepdim=True).float()
        h = torch.tanh(enc["memory"].sum(1) / n)
        if self.layout_sensitive:
            h = h.t().contiguous().t()
        return {"h": h, "t": torch.zeros(h.size(0), dtype=torch.long)}

    def decode_step(self, y_prev, state, enc):
        self.rows_per_step.append(y_prev.numel())
        self.modes.append(self.training)
        h = self.cell(self.tgt_emb(y_prev) + self.pos_emb(state["t"]), state["h"])
        energy = torch.einsum("bsh,bh->bs", enc["memory"], h) * 2.0
        alpha = torch.softmax(energy.masked_fill(~enc["mask"], float("-inf")), dim=-1)
        ctx = torch.einsum("bs,bsh->bh", alpha, enc["memory"])
        logits = self.out(torch.cat([h, ctx], dim=-1))
        logits[:, EOS_ID] += EOS_RAMP * state["t"]  # EOS grows likelier with the output length
        if self.layout_sensitive:  # like a kernel whose rounding depends on the memory layout
            logits[:, 4] += 1e-3 * enc["memory"].is_contiguous()
            logits[:, 5] += 1e-3 * state["h"].is_contiguous()
        if self.ties:
            logits = (logits * 2).round() / 2
        log_probs = torch.log_softmax(logits, dim=-1)
        return log_probs, {"h": h, "t": state["t"] + 1}, (alpha if self.with_attention else None)


class TableModel(nn.Module):
    """log_probs = table[key, step, y_prev]; the key of a sentence is its first source token."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = table  # [keys, steps, V (prev token), V]
        self.rows_per_step: list[int] = []

    def encode(self, src, src_len):
        mask = torch.arange(src.size(1)).unsqueeze(0) < src_len.unsqueeze(1)
        return {"key": src[:, 0].clone(), "mask": mask}

    def init_state(self, enc):
        return {"t": torch.zeros_like(enc["key"])}

    def decode_step(self, y_prev, state, enc):
        self.rows_per_step.append(y_prev.numel())
        t = state["t"].clamp(max=self.table.size(1) - 1)
        return self.table[enc["key"], t, y_prev], {"t": state["t"] + 1}, None


VOCAB = 6  # PAD UNK BOS EOS 4 5
ALLOWED = [UNK_ID, 4, 5]  # tokens search may emit besides EOS (PAD and BOS are banned)


def random_table(keys: int, steps: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.log_softmax(torch.randn(keys, steps, VOCAB, VOCAB, generator=g) * 1.5, dim=-1)


def brute_force(table: torch.Tensor, key: int, max_len: int, alpha: float) -> list[tuple[float, list[int]]]:
    """Every output sequence of at most max_len tokens, (score, tokens), best first."""
    last = table.size(1) - 1  # TableModel repeats its last step's table
    results = []
    for n in range(max_len + 1):
        for seq in itertools.product(ALLOWED, repeat=n):
            prev, log_prob = BOS_ID, 0.0
            for t, tok in enumerate(seq):
                log_prob += float(table[key, min(t, last), prev, tok])
                prev = tok
            log_prob += float(table[key, min(n, last), prev, EOS_ID])
            results.append((log_prob / length_penalty_factor(n + 1, alpha), list(seq)))
    return sorted(results, key=lambda r: r[0], reverse=True)


def make_batch(lengths: list[int], vocab: int = 11, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), PAD_ID, dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src, torch.tensor(lengths)


LENGTHS = [5, 2, 7, 3, 1, 6, 4]


def same(a: list[list[Hypothesis]], b: list[list[Hypothesis]]) -> bool:
    """Exactly equal results (tokens, scores, log probs, attention)."""
    if len(a) != len(b):
        return False
    for ha, hb in zip(a, b):
        if len(ha) != len(hb):
            return False
        for x, y in zip(ha, hb):
            if (x.tokens, x.score, x.log_prob) != (y.tokens, y.score, y.log_prob):
                return False
            if (x.attention is None) != (y.attention is None):
                return False
            if x.attention is not None and not torch.equal(x.attention, y.attention):
                return False
    return True


# ---------------------------------------------------------------------------------------- helpers


def test_length_penalty_and_max_lengths():
    assert length_penalty_factor(7, 0.0) == 1.0
    assert length_penalty_factor(1, 1.0) == 1.0
    assert length_penalty_factor(7, 2.0) == pytest.approx(4.0)
    assert max_output_lengths([1, 4, 10], 1.5, 10) == [11, 16, 25]
    assert max_output_lengths([1, 4, 10], 1.5, 10, max_len_cap=12) == [11, 12, 12]
    assert max_output_lengths([3], 0.0, -5) == [0]


# ------------------------------------------------------------------------------- random GRU model


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("with_attention", [True, False])
def test_beam_size_1_is_exactly_greedy(alpha, with_attention):
    model = TinyAttnModel(seed=3, eos_bias=-2.0, with_attention=with_attention)
    src, src_len = make_batch(LENGTHS)
    greedy = greedy_search(model, src, src_len, max_len_a=1.0, max_len_b=3, length_penalty=alpha)
    beam = beam_search(model, src, src_len, beam_size=1, length_penalty=alpha, max_len_a=1.0, max_len_b=3)
    assert same(greedy, beam)
    assert all(len(h) == 1 for h in greedy)
    assert len({len(h[0].tokens) for h in greedy}) > 1  # sentences end at different steps


def test_beam_size_1_is_exactly_greedy_for_a_layout_sensitive_model():
    """Greedy hands the model tensors laid out as beam search does (a Transformer's cached keys are
    non-contiguous views, and kernels on them round differently)."""
    model = TinyAttnModel(seed=12, eos_bias=-2.0, layout_sensitive=True)
    src, src_len = make_batch(LENGTHS, seed=8)
    greedy = greedy_search(model, src, src_len, max_len_a=1.0, max_len_b=3)
    assert same(greedy, beam_search(model, src, src_len, beam_size=1, max_len_a=1.0, max_len_b=3))


def test_greedy_defaults_match_beam_defaults():
    model = TinyAttnModel(seed=4, eos_bias=-2.0)
    src, src_len = make_batch(LENGTHS, seed=2)
    assert same(greedy_search(model, src, src_len), beam_search(model, src, src_len, beam_size=1))


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_batch_equals_one_sentence_at_a_time(search):
    model = TinyAttnModel(seed=5, eos_bias=-2.0)
    src, src_len = make_batch(LENGTHS, seed=3)

    def run(s, n):
        if search == "greedy":
            return greedy_search(model, s, n, max_len_a=1.0, max_len_b=3)
        return beam_search(model, s, n, beam_size=4, n_best=3, length_penalty=1.0, max_len_a=1.0, max_len_b=3)

    batched = run(src, src_len)
    for i, n in enumerate(LENGTHS):
        alone = run(src[i:i + 1, :n], src_len[i:i + 1])[0]  # unpadded
        assert [h.tokens for h in batched[i]] == [h.tokens for h in alone]
        for hb, ha in zip(batched[i], alone):
            assert hb.score == pytest.approx(ha.score, abs=1e-5)
            assert hb.log_prob == pytest.approx(ha.log_prob, abs=1e-5)
            torch.testing.assert_close(hb.attention, ha.attention, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("search,ties", [("greedy", False), ("greedy", True), ("beam", False)])
def test_wide_vocabulary_batch_equals_one_sentence_at_a_time(search, ties):
    """A batch over a 3,000-word vocabulary takes the searches' fast path for wide rows (chunked maxima);
    one sentence alone takes torch's max / top-k. Greedy also keeps max's choice among equal scores."""
    model = TinyAttnModel(vocab=3000, seed=7, eos_bias=-3.0, ties=ties)
    lengths = [(i * 7) % 9 + 1 for i in range(48)]
    src, src_len = make_batch(lengths, vocab=3000, seed=5)

    def run(s, n):
        if search == "greedy":
            return greedy_search(model, s, n, max_len_a=1.0, max_len_b=3)
        return beam_search(model, s, n, beam_size=5, n_best=2, max_len_a=1.0, max_len_b=3)

    batched = run(src, src_len)
    assert len({len(h[0].tokens) for h in batched}) > 1
    for i, n in enumerate(lengths):
        alone = run(src[i:i + 1, :n], src_len[i:i + 1])[0]
        assert [h.tokens for h in batched[i]] == [h.tokens for h in alone]
        for hb, ha in zip(batched[i], alone):
            assert hb.score == pytest.approx(ha.score, abs=1e-5)


def test_beam_finds_at_least_greedy_score_without_length_penalty():
    model = TinyAttnModel(seed=6, eos_bias=-2.0)
    src, src_len = make_batch(LENGTHS, seed=4)
    greedy = greedy_search(model, src, src_len, max_len_a=1.0, max_len_b=3, length_penalty=0.0)
    beam = beam_search(model, src, src_len, beam_size=5, length_penalty=0.0, max_len_a=1.0, max_len_b=3)
    for g, b in zip(greedy, beam):
        assert b[0].score >= g[0].score - 1e-6
        assert b[0].score == b[0].log_prob
    assert any(b[0].score > g[0].score + 1e-4 for g, b in zip(greedy, beam))  # and sometimes better


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_max_length_is_respected_and_attention_shape(search):
    model = TinyAttnModel(seed=7, eos_bias=-6.0)  # EOS unlikely: outputs run to their maximum
    src, src_len = make_batch(LENGTHS, seed=5)
    kw = dict(max_len_a=0.5, max_len_b=1, max_len_cap=3)
    if search == "greedy":
        results = greedy_search(model, src, src_len, **kw)
    else:
        results = beam_search(model, src, src_len, beam_size=3, n_best=3, **kw)
    limits = max_output_lengths(LENGTHS, **kw)
    assert limits == [3, 2, 3, 2, 1, 3, 3]
    for hyps, limit, n in zip(results, limits, LENGTHS):
        assert hyps
        for h in hyps:
            assert len(h.tokens) <= limit
            assert all(t not in (PAD_ID, BOS_ID, EOS_ID) for t in h.tokens)
            assert h.attention.shape == (len(h.tokens) + 1, n)
            torch.testing.assert_close(h.attention.sum(1), torch.ones(len(h.tokens) + 1))
        assert len(hyps[0].tokens) == limit  # EOS was forced at the limit


def test_n_best_count_order_and_attention():
    model = TinyAttnModel(seed=8, eos_bias=-2.0)
    src, src_len = make_batch(LENGTHS, seed=6)
    results = beam_search(model, src, src_len, beam_size=5, n_best=3, length_penalty=1.0)
    for hyps, n in zip(results, LENGTHS):
        assert len(hyps) == 3
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 3
        for h in hyps:
            assert h.score == pytest.approx(h.log_prob / ((5 + len(h.tokens) + 1) / 6))
            assert h.attention.shape == (len(h.tokens) + 1, n)
            assert h.attention.device.type == "cpu" and not h.attention.is_inference()
            torch.testing.assert_close(h.attention.sum(1), torch.ones(len(h.tokens) + 1))


def test_log_prob_and_attention_match_teacher_forced_rescoring():
    """The reported log prob and attention rows are those of the hypothesis' own token path."""
    model = TinyAttnModel(seed=9, eos_bias=-2.0)
    src, src_len = make_batch(LENGTHS, seed=7)
    results = beam_search(model, src, src_len, beam_size=4, n_best=4, length_penalty=0.6)
    with torch.no_grad():
        for i, hyps in enumerate(results):
            for h in hyps:
                enc = model.encode(src[i:i + 1], src_len[i:i + 1])
                state, prev, log_prob, rows = model.init_state(enc), BOS_ID, 0.0, []
                for tok in h.tokens + [EOS_ID]:
                    lp, state, alpha = model.decode_step(torch.tensor([prev]), state, enc)
                    log_prob += float(lp[0, tok])
                    rows.append(alpha[0, :LENGTHS[i]])
                    prev = tok
                assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
                torch.testing.assert_close(h.attention, torch.stack(rows), atol=1e-5, rtol=1e-5)


def test_model_without_attention_gives_none():
    model = TinyAttnModel(seed=10, with_attention=False)
    src, src_len = make_batch(LENGTHS[:3])
    for results in (greedy_search(model, src, src_len), beam_search(model, src, src_len, n_best=2)):
        assert all(h.attention is None for hyps in results for h in hyps)


def test_eval_mode_during_search_and_mode_restored():
    model = TinyAttnModel(seed=11)
    model.train()
    src, src_len = make_batch(LENGTHS[:3])
    beam_search(model, src, src_len)
    greedy_search(model, src, src_len)
    assert model.training and not any(model.modes)


def test_bad_arguments_and_empty_batch():
    model = TinyAttnModel()
    src, src_len = make_batch([3])
    with pytest.raises(UserError, match="n_best"):
        beam_search(model, src, src_len, beam_size=2, n_best=3)
    with pytest.raises(UserError, match="beam_size"):
        beam_search(model, src, src_len, beam_size=0)
    empty = torch.empty(0, 4, dtype=torch.long), torch.empty(0, dtype=torch.long)
    assert greedy_search(model, *empty) == [] and beam_search(model, *empty) == []


# ------------------------------------------------------------------------------ table (exact) model


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0, -0.5])
def test_large_beam_equals_exhaustive_search(seed, alpha):
    """Beam wider than every step's candidate list: all sequences, in brute-force order."""
    table = random_table(keys=3, steps=4, seed=seed)
    src = torch.tensor([[0, 0, 0], [1, 1, 0], [2, 2, 2]])
    src_len = torch.tensor([1, 2, 3])  # max_len = src_len: 1, 2, 3 tokens
    model = TableModel(table)
    results = beam_search(model, src, src_len, beam_size=40, n_best=40, length_penalty=alpha,
                          max_len_a=1.0, max_len_b=0)
    best = beam_search(model, src, src_len, beam_size=40, n_best=1, length_penalty=alpha,
                       max_len_a=1.0, max_len_b=0)
    for key, max_len in enumerate([1, 2, 3]):
        expected = brute_force(table, key, max_len, alpha)
        assert len(results[key]) == len(expected) == sum(3 ** n for n in range(max_len + 1))
        assert [h.tokens for h in results[key]] == [tokens for _, tokens in expected]
        for h, (score, _) in zip(results[key], expected):
            assert h.score == pytest.approx(score, abs=1e-5)
        # n_best=1 settles sentences early with the bound, and must still find the optimum
        assert best[key][0].tokens == expected[0][1]
        assert best[key][0].score == pytest.approx(expected[0][0], abs=1e-5)


A, B = 4, 5


def stopping_table() -> torch.Tensor:
    """Step 0: EOS -1.0 is the best candidate, A -1.2 the second; then A A EOS is almost sure."""
    table = torch.full((1, 3, VOCAB, VOCAB), -6.0)
    table[0, 0, BOS_ID, EOS_ID] = -1.0
    table[0, 0, BOS_ID, A] = -1.2
    table[0, 0, BOS_ID, B] = -2.0
    table[0, 0, BOS_ID, UNK_ID] = -2.5
    table[0, 1, A, A] = -0.01
    table[0, 2, :, EOS_ID] = -0.01  # step 2 and later
    return table


def test_stopping_rule_waits_for_live_hypotheses_that_can_still_win():
    """A naive rule ("stop when the top candidate is finished") returns the empty output here.

    With length penalty 1 the empty output scores -1.0 / lp(1) = -1.0 and "A A" scores
    -1.22 / lp(3) = -0.915. When EOS finishes at step 0, "A" (log prob -1.2) is live. Bounding it
    with the penalty of its shortest ending (-1.2 / lp(2) = -1.03 < -1.0) would also stop wrongly;
    the correct bound divides by the largest reachable penalty, -1.2 / lp(max_len + 1) = -0.6.
    """
    table = stopping_table()
    model = TableModel(table)
    src, src_len = torch.tensor([[0, 0]]), torch.tensor([2])
    kw = dict(max_len_a=0.0, max_len_b=6)
    # the premise: at the first step the best candidate is EOS (what a naive rule would return)
    first = table[0, 0, BOS_ID].clone()
    first[[PAD_ID, BOS_ID]] = float("-inf")
    assert int(first.argmax()) == EOS_ID
    naive_score = float(first[EOS_ID]) / length_penalty_factor(1, 1.0)
    assert float(first[A]) / length_penalty_factor(2, 1.0) < naive_score  # the too-tight bound

    result = beam_search(model, src, src_len, beam_size=2, length_penalty=1.0, **kw)[0][0]
    expected_score, expected_tokens = brute_force(table, 0, 6, 1.0)[0]
    assert result.tokens == expected_tokens == [A, A]
    assert result.score == pytest.approx(expected_score) == pytest.approx(-1.22 / (8 / 6))
    assert result.score > naive_score + 0.05
    # and it does not run to the maximum length: after step 2 no live hypothesis can win
    assert len(model.rows_per_step) == 3

    # without length penalty the empty output is optimal and the search stops after one step
    model = TableModel(table)
    result = beam_search(model, src, src_len, beam_size=2, length_penalty=0.0, **kw)[0][0]
    assert result.tokens == [] and result.score == pytest.approx(-1.0)
    assert len(model.rows_per_step) == 1


def test_early_stopping_judges_live_hypotheses_at_their_current_length():
    """stopping="early" takes the bound that the exact rule rejects above: fewer steps, and here the
    shorter (worse) result."""
    table = stopping_table()
    model = TableModel(table)
    src, src_len = torch.tensor([[0, 0]]), torch.tensor([2])
    result = beam_search(model, src, src_len, beam_size=2, length_penalty=1.0, max_len_a=0.0, max_len_b=6,
                         stopping="early")[0][0]
    assert result.tokens == [] and result.score == pytest.approx(-1.0)
    assert len(model.rows_per_step) == 1


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_early_stopping_on_a_model(alpha):
    src, src_len = make_batch(LENGTHS * 3, seed=6)
    kw = dict(beam_size=4, n_best=2, length_penalty=alpha, max_len_a=1.0, max_len_b=3)
    exact_model, early_model = TinyAttnModel(seed=9, eos_bias=-1.0), TinyAttnModel(seed=9, eos_bias=-1.0)
    exact = beam_search(exact_model, src, src_len, **kw)
    early = beam_search(early_model, src, src_len, stopping="early", **kw)
    if alpha == 0:  # no length penalty: a hypothesis' score never rises, so both rules are the same
        assert same(exact, early) and exact_model.rows_per_step == early_model.rows_per_step
    else:
        assert sum(early_model.rows_per_step) < sum(exact_model.rows_per_step)
        # the exact search keeps searching only while something better may come
        assert all(x[0].score >= y[0].score - 1e-6 for x, y in zip(exact, early))
    with pytest.raises(UserError, match="stopping"):
        beam_search(exact_model, src, src_len, stopping="soon")


def test_stopping_rule_with_negative_length_penalty():
    """alpha < 0 favours short outputs: a live hypothesis' best reachable divisor is its shortest."""
    table = torch.full((1, 2, VOCAB, VOCAB), -6.0)
    table[0, 0, BOS_ID, A] = -0.5
    table[0, 0, BOS_ID, EOS_ID] = -1.0
    table[0, 1, :, EOS_ID] = -0.01
    src, src_len = torch.tensor([[0, 0]]), torch.tensor([2])
    result = beam_search(TableModel(table), src, src_len, beam_size=2, length_penalty=-1.0,
                         max_len_a=0.0, max_len_b=6)[0][0]
    expected_score, expected_tokens = brute_force(table, 0, 6, -1.0)[0]
    assert result.tokens == expected_tokens == [A]
    assert result.score == pytest.approx(expected_score) == pytest.approx(-0.51 * 7 / 6)


def test_settled_sentences_leave_the_batch():
    table = torch.full((2, 1, VOCAB, VOCAB), -8.0)
    table[0, 0, :, EOS_ID] = -0.001  # sentence 0 ends at once
    table[1, 0, :, 4] = -0.001  # sentence 1 never chooses EOS before its maximum length, and
    table[1, 0, :, EOS_ID] = -20.0  # under the length penalty its longest output is also its best
    src, src_len = torch.tensor([[0, 0], [1, 1]]), torch.tensor([2, 2])

    model = TableModel(table)
    results = beam_search(model, src, src_len, beam_size=3, length_penalty=1.0, max_len_a=0.0, max_len_b=5)
    assert results[0][0].tokens == [] and results[1][0].tokens == [4] * 5
    assert model.rows_per_step == [2] + [3] * 5  # the first step expands one empty hypothesis per sentence

    model = TableModel(table)
    results = greedy_search(model, src, src_len, max_len_a=0.0, max_len_b=5)
    assert results[0][0].tokens == [] and results[1][0].tokens == [4] * 5
    assert model.rows_per_step == [2] + [1] * 5
