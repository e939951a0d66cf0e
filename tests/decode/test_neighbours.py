"""Neighbours (attnmt.decode.neighbours) through the explore record: each decoder step's nearest decoder states,
and each source piece's nearest encoder states, among the model's training sentences (or, without them, its
held-out ones), by cosine similarity, with their sentences."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnmt.data.corpus import read_lines
from attnmt.decode.forced import eval_mode
from attnmt.decode.held_out import held_out_pairs
from attnmt.decode.neighbours import MAX_SENTENCES, decoder_states, encoder_states, index_pairs
from attnmt.decode.steps import explore
from attnmt.decode.translator import load
from attnmt.errors import UserError
from attnmt.models.seq2seq import Seq2Seq

SENTENCE = "gupo pelido duno gute"  # from the synthetic language the tiny models learned


@pytest.fixture(scope="module")
def translator(tiny_model):
    return load(tiny_model)


def state(translator, source: str, pieces: list[str], at: int) -> np.ndarray:
    src = translator.src.vocab.encode(translator.src.tokens(source))
    return decoder_states(translator, [src], [translator.tgt.vocab.encode(pieces)])[0][at]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_each_step_lists_the_nearest_training_states_with_their_sentences(translator):
    record = explore(translator, SENTENCE, neighbours=5)
    found = record["neighbours"]
    data = translator.config.data
    pairs = dict(zip(read_lines(data.train_src), read_lines(data.train_tgt)))
    assert found["from"] == "training" and 0 < found["states"]
    assert len(found["steps"]) == len(record["steps"])
    for i, near in enumerate(found["steps"]):
        assert len(near) == 5
        similarities = [n["similarity"] for n in near]
        assert similarities == sorted(similarities, reverse=True) and all(-1 <= s <= 1.0001 for s in similarities)
        for n in near[:2]:
            sentence = found["sentences"][n["sentence"]]
            assert sentence["pieces"] == translator.tgt.tokens(pairs[sentence["source"]])
            assert 0 <= n["at"] <= len(sentence["pieces"])
            # the similarity is the cosine of this step's state and that sentence's state at that position
            mine = state(translator, SENTENCE, record["output"]["pieces"], i)
            theirs = state(translator, sentence["source"], sentence["pieces"], n["at"])
            assert n["similarity"] == pytest.approx(cosine(mine, theirs), abs=2e-3)
    assert explore(translator, SENTENCE)["neighbours"] is None


def test_the_explored_sentence_is_not_its_own_neighbour(translator):
    source = index_pairs(translator)[1][0][0]
    found = explore(translator, source, neighbours=10)["neighbours"]
    assert source not in [s["source"] for s in found["sentences"]]
    assert found["states"] <= MAX_SENTENCES * 101


def test_without_the_training_files_the_held_out_pairs_are_the_index(tiny_model):
    translator = load(tiny_model)
    translator.config.data.train_src = None
    origin, pairs = index_pairs(translator)
    assert origin == "held-out" and pairs == [(s, r) for s, r in held_out_pairs(translator) if r is not None]
    found = explore(translator, SENTENCE, neighbours=3)["neighbours"]
    assert found["from"] == "held-out"
    assert {s["source"] for s in found["sentences"]} <= {s for s, _ in pairs}


def test_a_bad_count_is_one_clear_line(translator):
    with pytest.raises(UserError, match="neighbours=11 is out of range"):
        explore(translator, SENTENCE, neighbours=11)


def encoder_state(translator, source: str, at: int) -> np.ndarray:
    """The encoder's state of one source piece, read off the model's modules: an RNN encoder's output (the
    annotations h_j), a Transformer's final encoder LayerNorm."""
    model = translator.model
    ids = torch.tensor([translator.src.vocab.encode(translator.src.tokens(source))])
    seen = []
    with eval_mode(model), torch.inference_mode():
        if hasattr(model, "enc_ln"):
            handle = model.enc_ln.register_forward_hook(lambda module, args, output: seen.append(output))
            model.encode(ids, torch.tensor([ids.size(1)]))
            handle.remove()
        else:
            seen.append(model.encoder(ids, torch.tensor([ids.size(1)]))[0])
    return seen[0][0, at].float().numpy()


@pytest.mark.parametrize("model", ["rnnsearch", "transformer"])
def test_each_source_piece_lists_the_nearest_encoder_states_with_their_sentences(model, tiny_model, tiny_transformer):
    translator = load(tiny_model if model == "rnnsearch" else tiny_transformer)
    record = explore(translator, SENTENCE, neighbours=4)
    found = record["neighbours"]
    pieces = record["source"]["pieces"]
    assert found["from"] == "training" and 0 < found["source_states"]
    assert len(found["source"]) == len(pieces)
    for j, near in enumerate(found["source"]):
        assert len(near) == 4
        similarities = [n["similarity"] for n in near]
        assert similarities == sorted(similarities, reverse=True)
        for n in near[:2]:
            sentence = found["sentences"][n["sentence"]]
            assert sentence["source_pieces"] == translator.src.tokens(sentence["source"])
            assert 0 <= n["at"] < len(sentence["source_pieces"]) and sentence["source"] != SENTENCE
            mine = encoder_state(translator, SENTENCE, j)
            theirs = encoder_state(translator, sentence["source"], n["at"])
            assert n["similarity"] == pytest.approx(cosine(mine, theirs), abs=2e-3)
    # the same source piece elsewhere is among the nearest states of a source piece (the synthetic words recur)
    assert any(found["sentences"][n["sentence"]]["source_pieces"][n["at"]] == pieces[j]
               for j, near in enumerate(found["source"]) for n in near)


def test_a_model_without_a_state_per_source_piece_has_no_source_neighbours():
    model = Seq2Seq(10, 10, emb_size=8, hidden_size=8, enc_layers=1, dec_layers=1)
    assert encoder_states(SimpleNamespace(model=model, device=torch.device("cpu")), [[4, 5, 6]]) is None
