"""Alignment from attention, and the alignment error rate, on small cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from attnmt.align import (
    AlignmentScores,
    GoldAlignment,
    WordAttention,
    align_pairs,
    argmax_links,
    attention_matrices,
    diagonal_links,
    format_links,
    links_from_attention,
    mean_attention,
    parse_gold,
    read_gold,
    score_alignments,
    threshold_links,
    word_attention,
)
from attnmt.align.link_sets import parse_links
from attnmt.cli import main
from attnmt.errors import UserError


def gold(sure: set, possible: set = frozenset()) -> GoldAlignment:
    return GoldAlignment(frozenset(sure), frozenset(set(sure) | set(possible)))


# ---------------------------------------------------------------- gold files and formats


def test_parse_gold_sure_and_possible_links_are_one_based():
    g = parse_gold("1-1 2p3 3-2")
    assert g.sure == {(0, 0), (2, 1)}
    assert g.possible == {(0, 0), (2, 1), (1, 2)}  # S is a subset of P


def test_parse_gold_rejects_bad_links():
    for line in ("1-x", "12", "0-1"):
        with pytest.raises(ValueError):
            parse_gold(line)


def test_read_gold_names_file_and_line(tmp_path):
    path = tmp_path / "g.gold"
    path.write_text("1-1\n2-2 3:3\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"g\.gold:2: .*'3:3'"):
        read_gold(path)


def test_format_links_zero_based_by_default_and_round_trips():
    links = {(2, 1), (0, 0)}
    assert format_links(links) == "0-0 2-1"
    assert format_links(links, one_based=True) == "1-1 3-2"
    assert parse_links(format_links(links, one_based=True), one_based=True) == links


# ---------------------------------------------------------------- AER


def test_aer_with_possible_links_known_answer():
    # A = {0-0, 1-2, 2-2}; S = {0-0, 2-1}; P = S + {1-2}:
    # |A&S| = 1, |A&P| = 2, |A| = 3, |S| = 2 -> AER = 1 - 3/5.
    s = score_alignments([{(0, 0), (1, 2), (2, 2)}], [gold({(0, 0), (2, 1)}, {(1, 2)})])
    assert s.aer == pytest.approx(0.4)
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(1 / 2)
    assert (s.predicted, s.sure, s.possible, s.hits_sure, s.hits_possible) == (3, 2, 3, 1, 2)


def test_aer_is_zero_for_all_sure_links_plus_possible_ones():
    g = gold({(0, 0), (1, 1)}, {(0, 1)})
    assert score_alignments([{(0, 0), (1, 1)}], [g]).aer == 0.0
    assert score_alignments([{(0, 0), (1, 1), (0, 1)}], [g]).aer == 0.0  # possible links cost nothing
    assert score_alignments([set()], [g]).aer == 1.0


def test_aer_counts_links_over_the_corpus_not_per_sentence():
    s = score_alignments([{(0, 0)}, {(0, 0), (1, 1), (2, 2)}],
                         [gold({(0, 1)}), gold({(0, 0), (1, 1), (2, 2)})])
    # |A&S| = |A&P| = 3 of |A| = 4, |S| = 4: AER = 1 - 6/8 (a per-sentence mean would give 0.5).
    assert s.aer == pytest.approx(0.25)
    assert isinstance(s, AlignmentScores) and s.sentences == 2


def test_score_alignments_needs_equal_counts():
    with pytest.raises(ValueError):
        score_alignments([set()], [])


# ---------------------------------------------------------------- from attention to links


def test_word_attention_sums_source_pieces_and_averages_target_pieces():
    # Source: "un|believ|able cat" (pieces 0,0,0,1); target: "chat incroy|able" (pieces 0,1,1).
    alpha = np.array([
        [0.1, 0.1, 0.0, 0.8],  # "chat" looks at "cat"
        [0.5, 0.2, 0.2, 0.1],  # "incroy"
        [0.1, 0.3, 0.4, 0.2],  # "able"
    ])
    words = word_attention(alpha, [0, 0, 0, 1], [0, 1, 1])
    np.testing.assert_allclose(words, [[0.2, 0.8], [(0.9 + 0.8) / 2, (0.1 + 0.2) / 2]])
    np.testing.assert_allclose(words.sum(axis=1), 1.0)  # rows stay distributions
    assert argmax_links(words) == {(1, 0), (0, 1)}


def test_word_attention_checks_shapes():
    with pytest.raises(ValueError):
        word_attention(np.ones((2, 3)), [0, 1], [0, 1])


def test_argmax_and_threshold_links():
    words = np.array([[0.6, 0.4, 0.0], [0.1, 0.2, 0.7], [0.45, 0.1, 0.45]])
    assert argmax_links(words) == {(0, 0), (2, 1), (0, 2)}  # the first of a tie
    assert threshold_links(words, 0.4) == {(0, 0), (1, 0), (2, 1), (0, 2), (2, 2)}
    assert links_from_attention(words, "threshold", 0.65) == {(2, 1)}  # target word 0 and 2 stay unaligned
    with pytest.raises(ValueError):
        links_from_attention(words, "median")


def test_diagonal_links():
    assert diagonal_links(3, 3) == {(0, 0), (1, 1), (2, 2)}
    assert diagonal_links(4, 2) == {(1, 0), (3, 1)}  # the centre of each target word, scaled
    assert diagonal_links(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    assert diagonal_links(0, 3) == set()


# ---------------------------------------------------------------- running a model


class PairTokenizer:
    """Splits each word into two-character pieces: "abcde" -> "ab", "cd", "e"."""

    def encode(self, text: str) -> list[str]:
        return [w[k:k + 2] for w in text.split() for k in range(0, len(w), 2)]

    def word_ids(self, pieces):
        raise NotImplementedError  # set per sentence below


class FakeProcessor:
    def __init__(self):
        self.tokenizer = PairTokenizer()
        self.vocab = self
        self._ids: dict[str, int] = {}

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.encode(text)

    def encode(self, pieces):
        return [self._ids.setdefault(p, len(self._ids) + 4) for p in pieces]


class OneHotAttention(nn.Module):
    """Target piece t attends to the one source piece ``position(t, n)`` (n: the source's pieces)."""

    def __init__(self, position):
        super().__init__()
        self.position = position

    def forward(self, src, src_len, tgt_in):
        B, S = src.shape
        T = tgt_in.size(1)
        alpha = torch.zeros(B, T, S)
        for b in range(B):
            n = int(src_len[b])
            for t in range(T):
                alpha[b, t, self.position(t, n)] = 1.0
        return torch.zeros(B, T, 10), alpha


def reverse_attention() -> OneHotAttention:
    """Target piece t attends to source piece n-1-t (clipped): a known, reordering attention."""
    return OneHotAttention(lambda t, n: max(n - 1 - t, 0))


def diagonal_attention() -> OneHotAttention:
    """Target piece t attends to source piece t (clipped): the monotone opposite of reverse_attention."""
    return OneHotAttention(lambda t, n: min(t, n - 1))


def fake_translator(model: nn.Module):
    from types import SimpleNamespace

    src, tgt = FakeProcessor(), FakeProcessor()

    def word_ids(pieces):
        # Recover the word of each piece from a sentence-wide lookup set by the test.
        return word_ids.table[tuple(pieces)]

    word_ids.table = {}
    src.tokenizer.word_ids = tgt.tokenizer.word_ids = word_ids
    from attnmt.config.schema import Config

    return SimpleNamespace(model=model, src=src, tgt=tgt, device=torch.device("cpu"), model_type="fake",
                           config=Config()), word_ids


def test_attention_matrices_drop_eos_row_and_merge_pieces():
    translator, word_ids = fake_translator(reverse_attention())
    source, target = "abcd ef", "gh ijkl"  # source pieces ab cd | ef, target pieces gh | ij kl
    word_ids.table = {("ab", "cd", "ef"): [0, 0, 1], ("gh", "ij", "kl"): [0, 1, 1]}
    (m,) = attention_matrices(translator, [source], [target])
    # Pieces: target 0 -> source piece 2 ("ef"), 1 -> 1 ("cd"), 2 -> 0 ("ab"); the </s> row is gone.
    assert m.piece_weights.shape == (3, 3)
    np.testing.assert_allclose(m.weights, [[0.0, 1.0], [1.0, 0.0]])
    assert (m.src_words, m.tgt_words) == (["abcd", "ef"], ["gh", "ijkl"])
    assert argmax_links(m.weights) == {(1, 0), (0, 1)}


def test_attention_matrices_refuse_models_without_attention():
    class NoAttention(nn.Module):
        def forward(self, src, src_len, tgt_in):
            return torch.zeros(*tgt_in.shape, 10), None

    translator, word_ids = fake_translator(NoAttention())
    word_ids.table = {("ab",): [0]}
    with pytest.raises(UserError, match="no attention"):
        attention_matrices(translator, ["ab"], ["ab"])
    with pytest.raises(UserError, match="line-aligned"):
        attention_matrices(translator, ["ab"], [])


def test_align_command_on_tiny_model(tiny_model, tiny_corpus, tmp_path, capsys):
    out = tmp_path / "links.txt"
    args = ["align", "--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"), "--tgt",
            str(tiny_corpus / "test.tgt"), "--gold", str(tiny_corpus / "test.align"), "--baseline", "diagonal",
            "--out", str(out), "--json", str(tmp_path / "scores.json")]
    assert main(args) == 0
    table = capsys.readouterr().out
    for row in ("attention argmax", "attention threshold", "attention shift", "diagonal"):
        assert f"| {row} |" in table
    lines = out.read_text(encoding="utf-8").splitlines()
    targets = (tiny_corpus / "test.tgt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(targets)
    # argmax: exactly one 0-based link per target word.
    assert all(sorted(int(link.split("-")[1]) for link in line.split()) == list(range(len(t.split())))
               for line, t in zip(lines, targets))


def test_align_command_errors_are_one_line(tmp_path, capsys, tiny_corpus):
    assert main(["align", "--src", str(tiny_corpus / "test.src"), "--tgt", str(tiny_corpus / "test.tgt")]) == 2
    assert "--baseline diagonal" in capsys.readouterr().err
    bad = tmp_path / "bad.gold"
    bad.write_text("1-1\n" * 3, encoding="utf-8")
    assert main(["align", "--baseline", "diagonal", "--src", str(tiny_corpus / "test.src"),
                 "--tgt", str(tiny_corpus / "test.tgt"), "--gold", str(bad)]) == 2
    assert "lines" in capsys.readouterr().err


# ---------------------------------------------------------------- ensembles


def word_attention_of(weights) -> WordAttention:
    weights = np.asarray(weights, dtype=float)
    n_tgt, n_src = weights.shape
    return WordAttention([f"s{i}" for i in range(n_src)], [f"t{j}" for j in range(n_tgt)], weights,
                         [], [], weights, weights[::-1].copy())


def test_mean_attention_averages_the_members_word_matrices():
    a = word_attention_of([[1.0, 0.0], [0.0, 1.0]])
    b = word_attention_of([[0.0, 1.0], [0.5, 0.5]])
    (mean,) = mean_attention([[a], [b]])
    np.testing.assert_allclose(mean.weights, [[0.5, 0.5], [0.25, 0.75]])
    np.testing.assert_allclose(mean.shifted, [[0.25, 0.75], [0.5, 0.5]])  # the shift rows are averaged too
    assert mean_attention([[a]])[0] is a  # one member: that model, exactly
    with pytest.raises(ValueError, match="different numbers"):
        mean_attention([[a, a], [b]])


def ensemble_of(*models):
    """Fake translators over the pair "abcd ef" / "gh ijkl" (pieces ab cd | ef and gh | ij kl)."""
    translators = []
    for model in models:
        translator, word_ids = fake_translator(model)
        word_ids.table = {("ab", "cd", "ef"): [0, 0, 1], ("gh", "ij", "kl"): [0, 1, 1]}
        translators.append(translator)
    return translators


def test_an_ensemble_aligns_where_the_mean_of_its_members_attention_points():
    source, target = ["abcd ef"], ["gh ijkl"]
    # (source word, target word). diagonal_attention's word 1 ("ijkl") is half "abcd", half "ef": a tie,
    # which argmax gives to the first source word.
    reverse, diagonal = {(1, 0), (0, 1)}, {(0, 0), (0, 1)}
    assert align_pairs(ensemble_of(reverse_attention())[0], source, target) == [reverse]
    assert align_pairs(ensemble_of(diagonal_attention())[0], source, target) == [diagonal]
    # Two members against one: the mean follows the majority, word by word.
    assert align_pairs(ensemble_of(reverse_attention(), reverse_attention(), diagonal_attention()), source,
                       target) == [reverse]
    assert align_pairs(ensemble_of(reverse_attention(), diagonal_attention(), diagonal_attention()), source,
                       target) == [diagonal]


def test_an_ensemble_read_two_ways_by_default_asks_for_a_method():
    unguided, guided = ensemble_of(reverse_attention(), reverse_attention())
    guided.config.data.transforms = [{"name": "links", "path": "train.links"}]
    guided.config.train.guided_alignment.row = "shift"
    with pytest.raises(UserError, match="choose one with --method"):
        align_pairs([unguided, guided], ["abcd ef"], ["gh ijkl"])
    assert align_pairs([unguided, guided], ["abcd ef"], ["gh ijkl"], method="argmax") == [{(1, 0), (0, 1)}]


def test_align_command_with_the_same_model_twice_writes_the_models_links(tiny_model, tiny_corpus, tmp_path):
    files = ["--src", str(tiny_corpus / "test.src"), "--tgt", str(tiny_corpus / "test.tgt")]
    one, two = tmp_path / "one.links", tmp_path / "two.links"
    assert main(["align", "--model", str(tiny_model), *files, "--out", str(one)]) == 0
    assert main(["align", "--model", str(tiny_model), "--model", str(tiny_model), *files, "--out", str(two)]) == 0
    assert two.read_text(encoding="utf-8") == one.read_text(encoding="utf-8")
    assert one.read_text(encoding="utf-8").strip()
