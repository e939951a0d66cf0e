"""sacreBLEU scoring, BLEU by source-length bucket and the Markdown report tables."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import BLEU

from attnmt.decode.evaluate import (
    LengthBucket,
    Scores,
    bleu_by_length,
    corpus_scores,
    format_scores,
    format_table,
    length_edges,
)
from attnmt.errors import UserError

REFS = [
    "the cat sat on the mat .",
    "a dog barked at the postman this morning .",
    "it rained all day long and we stayed inside .",
    "she reads a book .",
]


def _sentences(lengths: list[int]) -> list[str]:
    """One distinct sentence of each length (word i of sentence k is ``wK_I``)."""
    return [" ".join(f"w{k}_{i}" for i in range(n)) for k, n in enumerate(lengths)]


def test_identical_text_scores_100_with_signatures() -> None:
    scores = corpus_scores(REFS, REFS)
    assert scores.bleu == pytest.approx(100.0)
    assert scores.chrf == pytest.approx(100.0)
    assert "tok:13a" in scores.bleu_signature and "nrefs:1" in scores.bleu_signature
    assert "version:" in scores.bleu_signature and "nc:6" in scores.chrf_signature
    assert "tok:none" in corpus_scores(REFS, REFS, tokenize="none").bleu_signature


def test_scores_agree_with_sacrebleu_and_lowercase_applies() -> None:
    hyps = ["the cat sat on a mat .", "a dog barked .", "it rained all day .", "he reads a book ."]
    expected = BLEU().corpus_score(hyps, [REFS]).score
    assert corpus_scores(hyps, REFS).bleu == pytest.approx(expected)
    upper = [r.upper() for r in REFS]
    assert corpus_scores(upper, REFS).bleu < 10
    assert corpus_scores(upper, REFS, lowercase=True).bleu == pytest.approx(100.0)


def test_empty_hypotheses_score_zero_and_an_empty_corpus_is_refused() -> None:
    scores = corpus_scores(["", "", "", ""], REFS)
    assert scores.bleu == 0.0 and scores.chrf == 0.0
    with pytest.raises(ValueError):
        corpus_scores([], [])
    with pytest.raises(ValueError):
        corpus_scores(REFS[:2], REFS)
    with pytest.raises(UserError):
        corpus_scores(REFS, REFS, tokenize="no-such-tokenizer")


def test_default_edges_are_ten_wide_and_aligned() -> None:
    # The first bucket starts at 1, not 0, where no length is 0: it holds 1-9, and says so.
    assert length_edges([4, 15, 80]) == [1, *range(10, 91, 10)]
    assert length_edges([12, 19]) == [10, 20]
    assert length_edges([4, 80], width=20) == [1, 20, 40, 60, 80, 100]
    assert length_edges([0, 5]) == [0, 10]
    assert length_edges([4, 5, 23], n_buckets=4) == [4, 9, 14, 19, 24]


def test_buckets_count_sentences_and_omit_empty_ones() -> None:
    lengths = [3, 5, 9, 10, 12, 31, 35]
    refs = _sentences(lengths)
    buckets = bleu_by_length(lengths, refs, refs, tokenize="none")
    assert [(b.lo, b.hi, b.n) for b in buckets] == [(1, 10, 3), (10, 20, 2), (30, 40, 2)]
    assert all(b.bleu == pytest.approx(100.0) for b in buckets)
    assert [b.label for b in buckets] == ["1-9", "10-19", "30-39"] and buckets[0].mid == 5.0
    assert "| 1-9 | 3 |" in format_table(buckets)
    explicit = bleu_by_length(lengths, refs, refs, edges=[0, 6, 36], tokenize="none")
    assert [(b.lo, b.hi, b.n) for b in explicit] == [(0, 6, 2), (6, 36, 5)]


def test_each_bucket_is_the_corpus_bleu_of_its_sentences() -> None:
    lengths = [7, 9, 10, 4]
    hyps = ["the cat sat on a mat .", "a dog barked .", "it rained all day .", "she reads a book ."]
    buckets = bleu_by_length(lengths, hyps, REFS)
    short = [0, 1, 3]
    expected = corpus_scores([hyps[k] for k in short], [REFS[k] for k in short]).bleu
    assert buckets[0].bleu == pytest.approx(expected)
    assert buckets[1].bleu == pytest.approx(corpus_scores([hyps[2]], [REFS[2]]).bleu)


def test_bucket_arguments_are_checked() -> None:
    refs = _sentences([3, 15])
    with pytest.raises(ValueError, match="outside"):
        bleu_by_length([3, 15], refs, refs, edges=[0, 10])
    with pytest.raises(ValueError):
        bleu_by_length([3, 15], refs, refs, edges=[0, 10, 20], n_buckets=2)
    with pytest.raises(ValueError):
        bleu_by_length([3, 15], refs, refs, edges=[10, 0])
    with pytest.raises(ValueError):
        bleu_by_length([3], refs, refs)


def test_bootstrap_interval_brackets_the_score_and_is_reproducible() -> None:
    lengths = list(range(4, 44))
    refs = _sentences(lengths)
    # Every third hypothesis loses its last word, so scores vary from sentence to sentence.
    hyps = [r if k % 3 else r.rsplit(" ", 1)[0] for k, r in enumerate(refs)]
    buckets = bleu_by_length(lengths, hyps, refs, tokenize="none", bootstrap=200, seed=1)
    for b in buckets:
        assert b.has_ci and b.ci_low <= b.bleu <= b.ci_high <= 100.0
    assert bleu_by_length(lengths, hyps, refs, tokenize="none", bootstrap=200, seed=1) == buckets
    perfect = bleu_by_length(lengths, refs, refs, tokenize="none", bootstrap=50)
    assert all(b.ci_low == pytest.approx(100.0) and b.ci_high == pytest.approx(100.0) for b in perfect)
    assert not any(b.has_ci for b in bleu_by_length(lengths, hyps, refs, tokenize="none"))


def test_format_table_has_a_row_per_bucket_and_a_column_per_model() -> None:
    seq2seq = [LengthBucket(0, 10, 5, 30.04), LengthBucket(10, 20, 4, 12.5)]
    attention = [LengthBucket(0, 10, 5, 31.0, 29.0, 33.0), LengthBucket(20, 30, 2, 28.0)]
    table = format_table({"seq2seq": seq2seq, "RNNsearch": attention})
    lines = table.strip().splitlines()
    assert lines[0] == "| Source length | n | seq2seq | RNNsearch |"
    assert lines[1] == "| --- | ---: | ---: | ---: |"
    assert lines[2] == "| 0-9 | 5 | 30.0 | 31.0 [29.0, 33.0] |"
    assert lines[3] == "| 10-19 | 4 | 12.5 | - |"
    assert lines[4] == "| 20-29 | 2 | - | 28.0 |"
    single = format_table([LengthBucket(0, 10, 5, 30.0)])
    assert "| Source length | n | BLEU |" in single
    varies = format_table({"a": [LengthBucket(0, 10, 5, 1.0)], "b": [LengthBucket(0, 10, 4, 2.0)]})
    assert "| 0-9 | varies | 1.0 (n=5) | 2.0 (n=4) |" in varies


def test_format_scores_lists_models_and_each_signature_once() -> None:
    scores = corpus_scores(REFS, REFS)
    other = Scores(50.0, 60.0, scores.bleu_signature, scores.chrf_signature)
    table = format_scores({"seq2seq": scores, "RNNsearch": other})
    assert "| seq2seq | 100.0 | 100.0 |" in table and "| RNNsearch | 50.0 | 60.0 |" in table
    assert table.count(scores.bleu_signature) == 1
