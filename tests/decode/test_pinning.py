"""Attention you can edit (attnmt.decode.pinning) through the explore record: an RNN attention model's attention
pinned to chosen source pieces at the step after a forced prefix, and the translation it writes from there."""

from __future__ import annotations

import numpy as np
import pytest

from attnmt.decode.pinning import can_pin, check_pin
from attnmt.decode.steps import explore
from attnmt.decode.translator import load
from attnmt.errors import UserError
from attnmt.models.transformer import Transformer

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


def test_a_model_without_one_attention_per_step_cannot_be_pinned(translator):
    transformer = Transformer(10, 10, d_model=8, n_heads=2, ff_size=8, enc_layers=1, dec_layers=1)
    assert can_pin(translator.model) and not can_pin(transformer)
    with pytest.raises(UserError, match="cannot be pinned"):
        check_pin(transformer, [0], 3)
