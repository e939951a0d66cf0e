"""The synthetic language: determinism, even lengths, disjoint vocabularies, exact gold alignments."""

from __future__ import annotations

import doctest
import random
from collections import Counter

import pytest

from attnmt.align.link_sets import format_links, parse_links
from attnmt.data import synthetic
from attnmt.data.synthetic import (
    ADJ,
    CONJ,
    NOUN,
    SOURCE_ONSETS,
    VERB_I,
    VERB_T,
    SyntheticLanguage,
    SyntheticPair,
)
from attnmt.data.synthetic_corpus import make_splits, write_corpus
from attnmt.errors import UserError


@pytest.fixture(scope="module")
def language() -> SyntheticLanguage:
    return SyntheticLanguage(seed=0)


@pytest.fixture(scope="module")
def pairs(language: SyntheticLanguage) -> list[SyntheticPair]:
    return language.generate(400, 4, 80, seed=1)


def _target_positions(pair: SyntheticPair) -> dict[int, list[int]]:
    """Source index -> the target positions aligned to it."""
    positions: dict[int, list[int]] = {}
    for i, j in pair.alignment:
        positions.setdefault(i, []).append(j)
    return positions


def _clauses(language: SyntheticLanguage, src: list[str]) -> list[list[int]]:
    """Source indices of each clause, split at the conjunctions."""
    clauses: list[list[int]] = [[]]
    for i, word in enumerate(src):
        if language.category[word] == CONJ:
            clauses.append([])
        else:
            clauses[-1].append(i)
    return clauses


def test_docstring_example_is_what_the_code_generates() -> None:
    result = doctest.testmod(synthetic, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_same_seeds_give_the_same_data_and_other_seeds_differ(language: SyntheticLanguage) -> None:
    again = SyntheticLanguage(seed=0)
    assert again.lexicon == language.lexicon
    assert again.generate(30, 4, 40, seed=5) == language.generate(30, 4, 40, seed=5)
    assert language.generate(30, 4, 40, seed=6) != language.generate(30, 4, 40, seed=5)
    assert SyntheticLanguage(seed=1).source_vocab != language.source_vocab


def test_vocabulary_has_a_few_hundred_words_in_disjoint_categories(language: SyntheticLanguage) -> None:
    sizes = {category: len(words) for category, words in language.words.items()}
    assert sum(sizes.values()) == len(language.source_vocab)  # no word in two categories
    assert 250 <= len(language.source_vocab) <= 350


def test_source_and_target_vocabularies_are_disjoint(language: SyntheticLanguage) -> None:
    assert not language.source_vocab & language.target_vocab
    # By construction: source words use only the source consonants (and vowels) ...
    source_letters = set("".join(SOURCE_ONSETS)) | set("aeiou")
    assert all(set(word) <= source_letters for word in language.source_vocab)
    # ... and every target word has a letter that no source word can contain.
    assert all(set(word) - source_letters for word in language.target_vocab)


def test_every_length_can_be_produced_exactly(language: SyntheticLanguage) -> None:
    rng = random.Random(0)
    for length in range(3, 121):
        assert len(language.sentence(rng, length).src) == length


def test_lengths_are_spread_evenly(language: SyntheticLanguage, pairs: list[SyntheticPair]) -> None:
    counts = Counter(len(p.src) for p in pairs)
    assert set(counts) <= set(range(4, 81))
    # 400 sentences over 77 lengths: stratified, so every length occurs 5 or 6 times.
    assert min(counts[n] for n in range(4, 81)) >= 5 and max(counts.values()) <= 6
    # The de-duplicated splits keep that: ten equal-width bands hold about a tenth each.
    train = make_splits(2000, 0, 0, min_len=4, max_len=83, seed=3)["train"]
    bands = Counter((len(p.src) - 4) // 8 for p in train)
    assert all(abs(bands[b] - 200) <= 2 for b in range(10)), bands


def test_alignment_links_every_target_token_to_the_word_it_translates(
    language: SyntheticLanguage, pairs: list[SyntheticPair]
) -> None:
    for pair in pairs:
        targets = [j for _, j in pair.alignment]
        assert sorted(targets) == list(range(len(pair.tgt)))  # each target token exactly once
        assert all(0 <= i < len(pair.src) for i, _ in pair.alignment)
        positions = _target_positions(pair)
        for i, word in enumerate(pair.src):
            # A word's aligned target tokens are its translation, in order; dropped words are unaligned.
            assert tuple(pair.tgt[j] for j in positions.get(i, [])) == language.lexicon[word]


def test_words_drop_and_split_into_two(language: SyntheticLanguage, pairs: list[SyntheticPair]) -> None:
    fertility = Counter(len(language.lexicon[w]) for p in pairs for w in p.src)
    assert fertility[0] > 0 and fertility[1] > 0 and fertility[2] > 0
    assert {len(t) for t in language.lexicon.values()} == {0, 1, 2}


def test_adjectives_follow_their_noun(language: SyntheticLanguage, pairs: list[SyntheticPair]) -> None:
    checked = 0
    for pair in pairs:
        positions = _target_positions(pair)
        for i, word in enumerate(pair.src):
            if language.category[word] != ADJ:
                continue
            noun = next(k for k in range(i + 1, len(pair.src)) if language.category[pair.src[k]] == NOUN)
            assert min(positions[i]) > max(positions[noun])
            checked += 1
    assert checked > 100


def test_verb_ends_its_clause(language: SyntheticLanguage, pairs: list[SyntheticPair]) -> None:
    moved = 0
    for pair in pairs:
        positions = _target_positions(pair)
        for clause in _clauses(language, pair.src):
            verb = next(i for i in clause if language.category[pair.src[i]] in (VERB_T, VERB_I))
            clause_targets = [j for i in clause for j in positions.get(i, [])]
            verb_targets = positions[verb]
            assert sorted(clause_targets)[-len(verb_targets) :] == verb_targets
            moved += verb != clause[-1]  # the verb was not already last in the source
    assert moved > 100


def test_conjunctions_stay_between_clauses_in_order(language: SyntheticLanguage, pairs: list[SyntheticPair]) -> None:
    for pair in pairs:
        positions = _target_positions(pair)
        conjunctions = [i for i, w in enumerate(pair.src) if language.category[w] == CONJ]
        # Conjunctions keep their order, and clause k's tokens sit before conjunction k.
        targets = [positions[i][0] for i in conjunctions]
        assert targets == sorted(targets)
        for clause, conjunction in zip(_clauses(language, pair.src), targets):
            assert max(j for i in clause for j in positions.get(i, [])) < conjunction


def test_translate_rejects_a_sentence_outside_the_grammar(language: SyntheticLanguage) -> None:
    noun = language.words[NOUN][0]
    with pytest.raises(ValueError):
        language.translate([noun, noun])
    with pytest.raises(ValueError):
        language.translate(["no-such-word"])


def test_invalid_lengths_are_user_errors(language: SyntheticLanguage) -> None:
    with pytest.raises(UserError):
        language.sentence(random.Random(0), 2)
    with pytest.raises(UserError):
        language.generate(5, 10, 9, seed=0)


def test_splits_are_disjoint_and_test_does_not_depend_on_train_size() -> None:
    splits = make_splits(300, 40, 50, min_len=4, max_len=12, seed=0)
    assert [len(splits[s]) for s in ("train", "valid", "test")] == [300, 40, 50]
    sources = {s: {tuple(p.src) for p in pairs} for s, pairs in splits.items()}
    assert sum(len(v) for v in sources.values()) == 390  # no sentence twice, within or across
    assert make_splits(10, 40, 50, min_len=4, max_len=12, seed=0)["test"] == splits["test"]


def test_pharaoh_format_round_trips() -> None:
    links = [(2, 0), (0, 1), (1, 1)]
    assert format_links(links, one_based=True) == "1-2 2-2 3-1"
    assert format_links(links) == "0-1 1-1 2-0"
    assert parse_links("1-2 2-2 3-1", one_based=True) == set(links)
    with pytest.raises(ValueError):
        parse_links("1:2")


def test_write_corpus_writes_three_parallel_files(tmp_path, language: SyntheticLanguage) -> None:
    pairs = language.generate(20, 4, 30, seed=2)
    paths = write_corpus(pairs, tmp_path / "data", "train")
    assert {p.name for p in paths.values()} == {"train.src", "train.tgt", "train.align"}
    src = paths["src"].read_text(encoding="utf-8").splitlines()
    tgt = paths["tgt"].read_text(encoding="utf-8").splitlines()
    align = paths["align"].read_text(encoding="utf-8").splitlines()
    assert len(src) == len(tgt) == len(align) == 20
    for pair, s, t, a in zip(pairs, src, tgt, align):
        assert s.split() == pair.src and t.split() == pair.tgt
        assert parse_links(a, one_based=True) == set(pair.alignment)
        assert min(int(x) for link in a.split() for x in link.split("-")) >= 1  # 1-based on disk
