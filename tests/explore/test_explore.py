"""The explore record (attnmt.decode.steps) and prefix-forced translation through the Python API, on the tiny
trained models: the record's steps are what the search saw, and its parts agree with each other."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnmt.decode.steps import FORMAT, explore, what_if
from attnmt.decode.translator import load
from attnmt.errors import UserError

SENTENCE = "gupo pelido duno gute"  # from the synthetic language the tiny models learned


@pytest.fixture(scope="module")
def models(tiny_model, tiny_seq2seq, tiny_transformer) -> dict[str, Path]:
    return {"rnnsearch": tiny_model, "seq2seq": tiny_seq2seq, "transformer": tiny_transformer}


@pytest.fixture(scope="module")
def translators(models):
    return {name: load(path) for name, path in models.items()}


@pytest.mark.parametrize("name", ["rnnsearch", "seq2seq", "transformer"])
def test_the_record_is_the_translation_and_its_steps(translators, name):
    translator = translators[name]
    record = explore(translator, SENTENCE, beam=3)
    plain = translator.translate(SENTENCE, beam=3)
    assert record["format"] == FORMAT and record["model"]["type"] == name
    assert record["output"]["pieces"] == plain.tgt_tokens and record["output"]["text"] == plain.text
    assert record["output"]["score"] == pytest.approx(plain.score, abs=1e-3)
    steps = record["steps"]
    assert [s["output"] for s in steps] == plain.tgt_tokens + ["</s>"]
    assert [s["input"] for s in steps] == ["<s>"] + plain.tgt_tokens
    for step in steps:
        probs = [c["p"] for c in step["top_k"]]
        assert len(probs) == 10 and probs == sorted(probs, reverse=True) and sum(probs) <= 1.0001
        assert step["p"] <= probs[0] + 1e-4
    json.dumps(record, allow_nan=False)  # plain JSON: no NaN, no infinity, no arrays
    if name == "seq2seq":
        assert record["attention"] is None and all(s["equation"] is None for s in steps)
    else:  # the teacher-forced rows are the search's own attention
        np.testing.assert_allclose(record["attention"]["pieces"]["mean"], plain.attention, atol=2e-4)


def test_an_rnn_attention_models_equation_parts_add_up(translators):
    record = explore(translators["rnnsearch"], SENTENCE)
    h = np.array(record["source"]["annotations"]["head"])
    assert h.shape == (len(record["source"]["pieces"]), 6)
    for step, alpha in zip(record["steps"], record["attention"]["pieces"]["mean"]):
        e = np.array(step["equation"]["e"])
        np.testing.assert_allclose(np.exp(e - e.max()) / np.exp(e - e.max()).sum(), alpha, atol=2e-3)  # softmax
        np.testing.assert_allclose(np.array(alpha) @ h, step["equation"]["c_head"], atol=2e-3)  # c_i = sum alpha h
        assert step["equation"]["c_norm"] > 0


def test_a_transformers_heads_and_their_average(translators):
    translator = translators["transformer"]
    record = explore(translator, SENTENCE)
    layers = np.array(record["attention"]["pieces"]["layers"])
    config = translator.config.model
    assert layers.shape == (config.dec_layers, config.n_heads, len(record["steps"]), len(record["source"]["pieces"]))
    np.testing.assert_allclose(layers[-1].mean(axis=0), record["attention"]["pieces"]["mean"], atol=2e-4)
    np.testing.assert_allclose(layers.sum(axis=-1), 1.0, atol=1e-3)
    assert record["model"]["layers"] == config.dec_layers and record["model"]["heads"] == config.n_heads
    assert explore(translator, SENTENCE, heads=False)["attention"]["pieces"]["layers"] is None


def test_a_transformers_self_attention_in_every_layer_and_head(translators):
    translator = translators["transformer"]
    record = explore(translator, SENTENCE)
    config = translator.config.model
    encoder = np.array(record["self_attention"]["encoder"])
    decoder = np.array(record["self_attention"]["decoder"])
    S, T = len(record["source"]["pieces"]), len(record["steps"])
    assert encoder.shape == (config.enc_layers, config.n_heads, S, S)
    assert decoder.shape == (config.dec_layers, config.n_heads, T, T)
    np.testing.assert_allclose(encoder.sum(axis=-1), 1.0, atol=3e-3)
    np.testing.assert_allclose(decoder.sum(axis=-1), 1.0, atol=3e-3)
    assert np.all(np.triu(decoder, 1) == 0)  # a decoder step reads the inputs up to its own
    assert explore(translator, SENTENCE, heads=False)["self_attention"] is None
    assert explore(translators["rnnsearch"], SENTENCE)["self_attention"] is None


def test_the_beam_tree_of_a_record(translators):
    record = explore(translators["rnnsearch"], SENTENCE, beam=4)
    tree = record["beam"]
    nodes = {n["id"]: n for n in tree["nodes"]}
    path = [nodes[i] for i in tree["best"]]
    assert path[0]["status"] == "root" and path[-1]["status"] == "finished"
    assert [n["piece"] for n in path[1:]] == record["output"]["pieces"] + ["</s>"]
    assert path[-1]["score"] == pytest.approx(record["output"]["score"], abs=1e-3)
    for step in range(len(record["steps"])):
        in_beam = [n for n in nodes.values() if n["step"] == step and n["status"] in ("kept", "finished")]
        assert len(in_beam) == 4 and sorted(n["rank"] for n in in_beam) == [0, 1, 2, 3]


def test_words_not_pieces_sum_the_attention_of_a_words_pieces(translators):
    """A word-level tokenizer: one piece per word, so the word grid equals the piece grid."""
    record = explore(translators["rnnsearch"], SENTENCE)
    assert record["source"]["words"] == SENTENCE.split() and record["source"]["piece_word"] == [0, 1, 2, 3]
    np.testing.assert_allclose(record["attention"]["words"]["mean"], record["attention"]["pieces"]["mean"])


@pytest.mark.parametrize("beam", [1, 3])
def test_a_forced_prefix_is_kept_and_the_rest_is_the_models_continuation(translators, beam):
    translator = translators["rnnsearch"]
    first = explore(translator, SENTENCE, beam=beam)
    other = next(c["piece"] for c in first["steps"][0]["top_k"] if c["piece"] not in (first["steps"][0]["output"],
                                                                                      "</s>"))
    record = explore(translator, SENTENCE, beam=beam, prefix_tokens=[other])
    assert record["prefix"] == [other] and record["output"]["pieces"][0] == other
    assert [s["forced"] for s in record["steps"]] == [True] + [False] * (len(record["steps"]) - 1)
    forced_tree = [n for n in record["beam"]["nodes"] if n["step"] == 0]
    assert [(n["piece"], n["forced"]) for n in forced_tree] == [(other, True)]
    # the Python API gives the same output with the prefix as text, and the continuation is what the search
    # finds on its own once the prefix is read: forcing the whole output changes nothing
    assert translator.translate(SENTENCE, beam=beam, prefix=other).tgt_tokens == record["output"]["pieces"]
    whole = " ".join(record["output"]["pieces"])
    assert translator.translate(SENTENCE, beam=beam, prefix=whole).tgt_tokens == record["output"]["pieces"]


def test_prefixes_for_a_list_of_sentences(translators):
    translator = translators["transformer"]
    out = translator.translate([SENTENCE, "gupo duno"], prefix=["zi zi", None])
    assert out[0].tgt_tokens[:2] == ["zi", "zi"]
    assert out[1].tgt_tokens == translator.translate("gupo duno").tgt_tokens
    with pytest.raises(UserError, match="a list of one str"):
        translator.translate([SENTENCE, "gupo duno"], prefix="zi")


@pytest.mark.parametrize("name", ["rnnsearch", "seq2seq", "transformer"])
def test_what_if_re_decodes_with_each_alternative_as_explore_does(translators, name):
    translator = translators[name]
    record = explore(translator, SENTENCE, beam=2, top_k=4)
    alternatives = what_if(translator, record, alternatives=2, beam=2)
    assert set(alternatives) <= {str(i) for i in range(len(record["steps"]))} and alternatives
    for step, records in alternatives.items():
        i = int(step)
        assert 1 <= len(records) <= 2
        for alt in records:
            assert alt["prefix"][:i] == record["output"]["pieces"][:i]
            assert alt["prefix"][i] not in (record["steps"][i]["output"], "</s>")
            # the batched re-decoding is the one explore makes of that prefix on its own
            alone = explore(translator, SENTENCE, beam=2, prefix_tokens=alt["prefix"], heads=False, tree=False)
            assert alt["output"] == {k: v for k, v in alone["output"].items() if k != "log_prob"}
            assert [(s["output"], s["output_word"], s["forced"]) for s in alt["steps"]] == [
                (s["output"], s["output_word"], s["forced"]) for s in alone["steps"]]
            if alone["attention"] is None:
                assert alt["attention"] is None
            for level in () if alone["attention"] is None else ("pieces", "words"):
                assert np.allclose(alt["attention"][level]["mean"], alone["attention"][level]["mean"], atol=2e-4)


@pytest.mark.parametrize("kwargs, words", [
    ({"prefix_tokens": ["</s>"]}, "prefix_tokens[0] '</s>' is not a piece"),
    ({"prefix_tokens": ["zi", "no-such-piece"]}, "prefix_tokens[1] 'no-such-piece'"),
    ({"prefix": "zi", "prefix_tokens": ["zi"]}, "not both"),
    ({"top_k": 0}, "top_k=0 is out of range"),
    ({"beam": 0}, "beam=0 is out of range"),
])
def test_bad_settings_are_one_clear_line(translators, kwargs, words):
    with pytest.raises(UserError, match=words.replace("[", r"\[").replace("]", r"\]")):
        explore(translators["rnnsearch"], SENTENCE, **kwargs)


@pytest.mark.parametrize("beam, limit", [(0, None), (101, None), (2.5, None), (None, 2)])
def test_explore_refuses_what_translate_refuses_in_the_same_words(models, beam, limit):
    translator = load(models["rnnsearch"])  # its own: max_src_tokens is changed
    translator.max_src_tokens = limit
    refusals = []
    for run in (lambda: translator.translate(SENTENCE, beam=beam), lambda: explore(translator, SENTENCE, beam=beam)):
        with pytest.raises(UserError) as refused:
            run()
        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1]
    assert refusals[0].startswith(f"beam={beam} " if limit is None else "sentence 1 has 4 tokens, more than the 2")


def test_a_prefix_that_no_repeat_ngram_forbids_is_refused(translators):
    translator = translators["rnnsearch"]
    with pytest.raises(UserError, match="repeats the 1-gram"):
        translator.translate(SENTENCE, prefix="zi zi", no_repeat_ngram=1)


def test_words_are_whitespace_words_and_each_piece_of_a_script_without_spaces(tmp_path):
    from attnmt.data.tokenize import train_tokenizer
    from attnmt.decode.steps import words_of

    texts = ["我爱你。", "你爱我吗？", "Die Frau liest ein Buch.", "我们 爱 读书", "the reader reads books"] * 20
    tokenizer = train_tokenizer("unigram", texts, 60, tmp_path, "sp")
    pieces = tokenizer.encode("我爱你。 Die Frau liest")
    words, piece_word = words_of(tokenizer, pieces)
    assert words[:4] == ["我", "爱", "你", "。"] and words[4:] == ["Die", "Frau", "liest"]
    assert len(piece_word) == len(pieces) and piece_word == sorted(piece_word)
    assert "".join(words) == "我爱你。DieFrauliest"
    # a word-start mark that is a piece of its own belongs to the word it starts, not a word of its own
    assert words_of(tokenizer, ["\u2581", "我", "爱", "\u2581the"]) == (["我", "爱", "the"], [0, 0, 1, 2])
