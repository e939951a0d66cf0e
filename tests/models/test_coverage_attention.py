"""The coverage score (model.score: additive_coverage; Tu et al. 2016, See et al. 2017):
e_ij = v^T tanh(W_s s + W_h h_j + W_c C_{i-1,j}), C_i = C_{i-1} + alpha_i, C_0 = 0."""

from __future__ import annotations

import pytest
import torch

from attnmt.data.vocab import BOS_ID, EOS_ID
from attnmt.decode.search import beam_search
from attnmt.decode.translator import load
from attnmt.models import build_model, model_config
from attnmt.models.attention import AdditiveAttention, CoverageAttention
from attnmt.train.trainer import train
from tests.conftest import tiny_config

SRC = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])
SRC_LEN = torch.tensor([5, 3])
TGT_IN = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 0]])


def coverage_model(decoder: str):
    torch.manual_seed(0)
    cfg = model_config("rnnsearch", emb_size=8, hidden_size=16, dropout=0.0, decoder=decoder,
                       score="additive_coverage", input_feeding=decoder == "luong", attn_size=12)
    model = build_model(cfg, 20, 30).eval()
    with torch.no_grad():  # a strong W_c and v, so that coverage visibly moves the attention
        model.decoder.attention.W_c.weight.normal_(0.0, 3.0)
        model.decoder.attention.v.weight.normal_(0.0, 3.0)
    return model


def test_the_score_is_the_formula_and_the_additive_score_at_zero_coverage():
    torch.manual_seed(1)
    cov = CoverageAttention(6, 5, 4)
    q, h, C = torch.randn(2, 6), torch.randn(2, 3, 5), torch.rand(2, 3) * 2
    W_s, W_h, W_c, v = cov.W_s.weight, cov.W_h.weight, cov.W_c.weight[:, 0], cov.v.weight[0]
    by_hand = torch.tanh((q @ W_s.T).unsqueeze(1) + h @ W_h.T + C.unsqueeze(-1) * W_c) @ v
    with torch.no_grad():
        torch.testing.assert_close(cov.score(q, cov.project_keys(h), C), by_hand, atol=1e-5, rtol=1e-5)
        plain = AdditiveAttention(6, 5, 4)
        plain.load_state_dict({k: w for k, w in cov.state_dict().items() if not k.startswith("W_c")})
        torch.testing.assert_close(cov.score(q, cov.project_keys(h), torch.zeros(2, 3)),
                                   plain.score(q, plain.project_keys(h)))
        # through forward: the coverage is passed on to the score; without it, the additive score
        mask = torch.ones(2, 3, dtype=torch.bool)
        _, alpha = cov(q, h, h, mask, coverage=C)
        torch.testing.assert_close(alpha, by_hand.softmax(-1), atol=1e-5, rtol=1e-5)
        assert CoverageAttention.uses_coverage and not AdditiveAttention.uses_coverage


@pytest.mark.parametrize("decoder", ["bahdanau", "luong"])
def test_the_decoder_keeps_the_coverage_and_attends_with_it(decoder):
    model = coverage_model(decoder)
    _, alpha = model(SRC, SRC_LEN, TGT_IN)
    enc = model.encode(SRC, SRC_LEN)
    state = model.init_state(enc)
    assert torch.equal(state["coverage"], torch.zeros(2, 5))
    with torch.no_grad():
        for i in range(TGT_IN.size(1)):
            before = {k: v.clone() for k, v in state.items()}
            _, state, alpha_i = model.decode_step(TGT_IN[:, i], state, enc)
            torch.testing.assert_close(alpha_i, alpha[:, i])
            torch.testing.assert_close(state["coverage"], alpha[:, : i + 1].sum(1))  # C_i = sum_{k<=i} alpha_k
            if i > 0:  # the same step with the coverage forgotten attends elsewhere: the score reads C_{i-1}
                forgotten = dict(before, coverage=torch.zeros_like(before["coverage"]))
                _, _, alpha_without = model.decode_step(TGT_IN[:, i], forgotten, enc)
                assert (alpha_without - alpha_i).abs().max() > 0.01
    assert torch.all(state["coverage"][1, 3:] == 0), "padding is never attended, so never covered"


def test_the_coverage_weights_are_learnt():
    """The loss reaches W_c through C_{i-1} = sum_{k<i} alpha_k, i.e. through the earlier steps' attention."""
    model = coverage_model("luong").train()
    logits, _ = model(SRC, SRC_LEN, TGT_IN)
    logits.log_softmax(-1)[:, -1].sum().backward()
    assert model.decoder.attention.W_c.weight.grad.abs().sum() > 0


def test_bahdanau_order_step_by_hand():
    """alpha_2 = softmax_j(v^T tanh(W_s s_1 + W_h h_j + W_c alpha_1j)): the query of step 2 is s_1."""
    model = coverage_model("bahdanau")
    enc = model.encode(SRC, SRC_LEN)
    with torch.no_grad():
        _, state, alpha_1 = model.decode_step(TGT_IN[:, 0], model.init_state(enc), enc)
        s_1 = model.decoder.rnn.top(state)
        _, _, alpha_2 = model.decode_step(TGT_IN[:, 1], state, enc)
        attention = model.decoder.attention
        e = attention.score(s_1, attention.project_keys(enc["h"]), alpha_1)
        expected = e.masked_fill(~enc["mask"], float("-inf")).softmax(-1)
    torch.testing.assert_close(alpha_2, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("decoder", ["bahdanau", "luong"])
def test_beam_search_carries_each_hypothesis_own_coverage(decoder):
    """Every hypothesis of a beam scores exactly as its own token path decoded alone: the coverage
    in the state follows its hypothesis when the beam reorders."""
    model = coverage_model(decoder)
    results = beam_search(model, SRC, SRC_LEN, beam_size=4, n_best=4, max_len_b=6)
    with torch.no_grad():
        for i, hyps in enumerate(results):
            assert len(hyps) == 4
            for h in hyps:
                enc = model.encode(SRC[i:i + 1], SRC_LEN[i:i + 1])
                state, prev, log_prob = model.init_state(enc), BOS_ID, 0.0
                for tok in h.tokens + [EOS_ID]:
                    lp, state, _ = model.decode_step(torch.tensor([prev]), state, enc)
                    log_prob += float(lp[0, tok])
                    prev = tok
                assert h.log_prob == pytest.approx(log_prob, abs=1e-4)


def test_a_coverage_model_trains_saves_loads_and_translates(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=20, valid_every=10)
    config.model.score = "additive_coverage"
    config.model.attn_size = 8
    train(config, tmp_path / "model", quiet=True)
    translator = load(tmp_path / "model")
    attention = translator.model.decoder.attention
    assert isinstance(attention, CoverageAttention)
    out = translator.translate(["a b c"], beam=3)[0]
    assert out.attention is not None
    torch.testing.assert_close(torch.tensor(out.attention).sum(-1), torch.ones(len(out.attention)),
                               atol=1e-5, rtol=1e-5)

