"""Attention you can edit (attnmt.decode.pinning) through the explore record: an RNN attention model's attention,
and every head of every decoder layer of a Transformer's cross-attention, pinned to chosen source pieces at the
step after a forced prefix, and the translation it writes from there."""

from __future__ import annotations

import numpy as np
import pytest

from attnmt.decode.pinning import can_pin, check_pin
from attnmt.decode.steps import explore
from attnmt.decode.translator import load
from attnmt.errors import UserError
from attnmt.models.seq2seq import Seq2Seq

SENTENCE = "gupo pelido duno gute"  # from the synthetic language the tiny models learned


@pytest.fixture(scope="module")
def translator(tiny_model):
    return load(tiny_model)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_pinned_step_attends_to_the_chosen_pieces_and_the_decoder_goes_on_from_there(translator, beam):
    plain = explore(translator, SENTENCE, beam=beam)
    assert plain["pin"] is None
    step = 1
    prefix = plain["output"]["pieces"][:step]
    for j in range(len(plain["source"]["pieces"])):
        record = explore(translator, SENTENCE, beam=beam, prefix_tokens=prefix, pin=[j])
        assert record["pin"] == {"step": step, "source": [j]}
        assert record["output"]["pieces"][:step] == prefix
        rows = np.array(record["attention"]["pieces"]["mean"])
        assert rows[step].tolist() == [1.0 if k == j else 0.0 for k in range(len(rows[step]))]
        # one-hot alpha: the context vector is h_j itself
        assert record["steps"][step]["equation"]["c_norm"] == pytest.approx(record["source"]["annotations"]["norm"][j],
                                                                            abs=2e-3)
        np.testing.assert_allclose(rows[:step], np.array(plain["attention"]["pieces"]["mean"])[:step], atol=1e-4)
        if beam == 1:  # greedy: every step after the prefix wrote the top piece that the pinned pass gives
            assert all(s["top_k"][0]["piece"] == s["output"] for s in record["steps"][step:])


def test_two_pieces_share_the_attention_equally(translator):
    record = explore(translator, SENTENCE, beam=1, pin=[0, 2])
    assert record["attention"]["pieces"]["mean"][0][:3] == [0.5, 0.0, 0.5]


@pytest.mark.parametrize("pin, words", [([], "at least one"), ([0, 0], "repeats"), ([4], "outside the source"),
                                        ([-1], "outside the source")])
def test_a_bad_pin_is_one_clear_line(translator, pin, words):
    with pytest.raises(UserError, match=words):
        explore(translator, SENTENCE, pin=pin)


@pytest.fixture(scope="module")
def transformer(tiny_transformer):
    return load(tiny_transformer)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_transformers_cross_attention_is_pinned_in_every_layer_and_head(transformer, beam):
    plain = explore(transformer, SENTENCE, beam=beam)
    step = 1
    prefix = plain["output"]["pieces"][:step]
    S = len(plain["source"]["pieces"])
    changed = 0
    for j in range(S):
        record = explore(transformer, SENTENCE, beam=beam, prefix_tokens=prefix, pin=[j])
        assert record["pin"] == {"step": step, "source": [j]} and record["model"]["can_pin"]
        assert record["output"]["pieces"][:step] == prefix
        one_hot = [1.0 if k == j else 0.0 for k in range(S)]
        layers = np.array(record["attention"]["pieces"]["layers"])  # [L, H, T, S]
        assert all(head[step].tolist() == one_hot for layer in layers for head in layer)
        assert record["attention"]["pieces"]["mean"][step] == one_hot
        # the steps before the pinned one attend as they did
        np.testing.assert_allclose(layers[:, :, :step], np.array(plain["attention"]["pieces"]["layers"])[:, :, :step],
                                   atol=1e-3)
        if beam == 1:  # greedy: every step after the prefix wrote the top piece that the pinned pass gives
            assert all(s["top_k"][0]["piece"] == s["output"] for s in record["steps"][step:])
        changed += record["steps"][step]["top_k"] != plain["steps"][step]["top_k"]
    assert changed == S  # the pinned context changes what the step predicts, for every source piece


def test_a_transformers_pin_is_undone_after_the_pass(transformer):
    pinned_record = explore(transformer, SENTENCE, beam=1, pin=[0])
    again = explore(transformer, SENTENCE, beam=1)
    assert pinned_record["attention"]["pieces"]["mean"][0] != again["attention"]["pieces"]["mean"][0]
    assert again == explore(transformer, SENTENCE, beam=1)
    assert all("attend" not in layer.cross_attn.__dict__ for layer in transformer.model.decoder)


def test_a_model_without_attention_cannot_be_pinned(translator, transformer):
    seq2seq = Seq2Seq(10, 10, emb_size=8, hidden_size=8, enc_layers=1, dec_layers=1)
    assert can_pin(translator.model) and can_pin(transformer.model) and not can_pin(seq2seq)
    with pytest.raises(UserError, match="cannot be pinned"):
        check_pin(seq2seq, [0], 3)
