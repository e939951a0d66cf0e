"""Messages that point the right way: the closest name to a misspelt one, a missing model folder named
as missing, attention heatmaps labelled by words."""

from __future__ import annotations

import numpy as np
import pytest

from attnmt.cli import main
from attnmt.errors import closest, edit_distance
from attnmt.viz.heatmap import merge_pieces


def test_edit_distance_counts_insertions_deletions_substitutions_and_swaps():
    assert edit_distance("lr_rate", "lr") == 5  # five deletions
    assert edit_distance("kitten", "sitting") == 3  # the textbook example
    assert edit_distance("trian", "train") == 1  # a swap of neighbours is one edit
    assert edit_distance("", "abc") == 3


@pytest.mark.parametrize("word, options, expected", [
    # lr, lr_decay and lr_patience are all five edits from lr_rate; lr is the one whose parts it contains
    ("lr_rate", ["lr_patience", "lr_decay", "lr", "min_lr"], "lr"),
    ("train_source", ["train", "train_src", "train_tsv"], "train_src"),  # 3 edits, not train's 7
    ("nan_polcy", ["nan_policy", "seed"], "nan_policy"),
    ("xyzzy", ["seed", "lr"], None),  # nothing is close
    ("learning_rate", ["lr", "seed"], None),
])
def test_closest_prefers_fewest_edits_then_a_name_made_of_the_words_parts(word, options, expected):
    assert closest(word, options) == expected
    assert closest("learning_rate", ["lr"], {"learning_rate": "lr"}) == "lr"  # an alias wins


def test_a_missing_model_folder_is_named_as_missing_with_the_closest_name(tmp_path, monkeypatch, capsys):
    models = tmp_path / "models"
    (models / "multi30k_de_en_rnnsearch").mkdir(parents=True)
    (models / "tatoeba_zh_en").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["translate", "--model", "models/multi30k_de_en_rnnsaerch"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "attnmt: error: no such folder: models/multi30k_de_en_rnnsaerch; did you mean "
        "models/multi30k_de_en_rnnsearch?"]
    assert main(["translate", "--model", "models/nope"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "attnmt: error: no such folder: models/nope; models holds multi30k_de_en_rnnsearch, tatoeba_zh_en"]
    assert main(["translate", "--model", "models/tatoeba_zh_en"]) == 2  # there, but not a model folder
    assert "no config.yaml" in capsys.readouterr().err


def test_piece_attention_becomes_word_attention_with_the_words_as_labels():
    # source ▁Ein ▁Hund e ▁rennt: words Ein, Hunde, rennt; target ▁A ▁dog s </s>: words A, dogs, </s>
    alpha = np.array([[0.7, 0.1, 0.1, 0.1],
                      [0.0, 0.5, 0.3, 0.2],
                      [0.1, 0.6, 0.2, 0.1],
                      [0.2, 0.2, 0.2, 0.4]])
    words, src, tgt = merge_pieces(alpha, ["▁Ein", "▁Hund", "e", "▁rennt"], ["▁A", "▁dog", "s", "</s>"],
                                   [0, 1, 1, 2], [0, 1, 1, 2])
    assert src == ["Ein", "Hunde", "rennt"] and tgt == ["A", "dogs", "</s>"]
    # a source word's pieces are summed, a target word's rows averaged (worked out by hand)
    expected = np.array([[0.7, 0.2, 0.1],
                         [0.05, 0.8, 0.15],
                         [0.2, 0.4, 0.4]])
    np.testing.assert_allclose(words, expected)
    np.testing.assert_allclose(words.sum(axis=1), 1.0)


def test_cjk_text_keeps_its_pieces_as_columns():
    alpha = np.full((2, 3), 1 / 3)
    words, src, tgt = merge_pieces(alpha, ["▁我", "爱", "你"], ["▁love", "</s>"], [0, 0, 0], [0, 1])
    assert src == ["我", "爱", "你"] and tgt == ["love", "</s>"] and words.shape == (2, 3)


def test_plot_attention_labels_words_by_default_and_pieces_on_request(tiny_corpus, tmp_path, monkeypatch, capsys):
    from attnmt.train.trainer import train
    from tests.conftest import tiny_config

    config = tiny_config(tiny_corpus, max_steps=4, valid_every=4, valid_bleu_sample=0)
    config.data.tokenizer, config.data.vocab_size = "bpe", 120
    train(config, tmp_path / "bpe", quiet=True)
    drawn = []
    monkeypatch.setattr("attnmt.viz.heatmap.plot_attention",
                        lambda alpha, src, tgt, path, title=None: drawn.append((np.asarray(alpha), src, tgt)))
    sentence = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[0]
    for extra in ([], ["--pieces"]):
        assert main(["plot-attention", "--model", str(tmp_path / "bpe"), sentence, "--out",
                     str(tmp_path / "a.png"), "--overwrite", *extra]) == 0
    (words, src_words, tgt_words), (pieces, src_pieces, _) = drawn
    assert src_words == sentence.split()  # one column per word, in the sentence's spelling
    assert len(src_pieces) > len(src_words) and any(p.startswith("▁") for p in src_pieces)
    assert tgt_words[-1] == "</s>" and not any("▁" in w for w in tgt_words)
    np.testing.assert_allclose(words.sum(axis=1), 1.0, rtol=1e-5)
