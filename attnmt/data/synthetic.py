"""The built-in synthetic language: parallel sentences of any length, with gold word alignments.

Why it exists: ``attnmt demo`` must *show by measurement* that a seq2seq model, which squeezes the
source into one fixed vector, degrades on long sentences while an attention model does not
(Bahdanau et al. 2014, Figure 2). That needs a corpus whose source lengths run evenly from a few
tokens to 80 and more, that a small RNN can learn in minutes on a CPU, and that needs no download.
Everything here is generated from a seed with :class:`random.Random`, so it is fully deterministic.

Vocabularies
------------
Words are pronounceable pseudo-words made of consonant-vowel syllables. Source syllables use the
consonants ``p t k b d g m n s l r``; every target syllable contains one of ``f v z h j w y c``
(onsets ``f v z h j w y ch sh th``), letters no source word contains, so the two vocabularies can
never share a word. Function words (determiners, prepositions, conjunctions, particles) are short.

Source grammar (about 300 words by default)::

    sentence := clause (CONJ clause)*
    clause   := NP VERB_intransitive [PP] [ADV]
              | NP VERB_transitive NP [PP] [ADV]
    NP       := (DET | NUM) ADJ{0,2} NOUN          (the adjectives of one NP are distinct)
    PP       := PREP NP

A clause has 3 to 15 tokens; clauses are chained with conjunctions until the sentence has exactly
the requested length, so any length >= 3 can be produced exactly.

Target language (the translation is a deterministic function of the source: :meth:`translate`)
----------------------------------------------------------------------------------------------
* every source word has a fixed translation, a tuple of 0, 1 or 2 target words (the lexicon);
  some nouns become ``stem + classifier`` and some verbs ``stem + auxiliary`` (two tokens), and
  some determiners (article-like) have no translation at all;
* inside a noun phrase the adjectives follow the noun, in their source order;
* a prepositional phrase becomes a postpositional one (``PREP NP`` -> ``NP' POSTP``);
* the verb moves to the end of its clause (SOV), after the objects, PPs and the adverb;
* conjunctions stay between the clauses, and the clauses keep their order.

All reordering is local to a clause and the lexicon is unambiguous, so a small attention model
learns it quickly; a fixed-vector model still has to remember the whole sentence.

Gold alignment
--------------
Every target token is linked to the one source word it translates; dropped source words are
unaligned. In memory the links are 0-based ``(src_index, tgt_index)`` pairs. On disk
(:func:`attnmt.data.synthetic_corpus.write_corpus`) they are Pharaoh-style ``i-j`` pairs, **1-based**
by default (``i`` the source position, ``j`` the target position), the numbering of the NAACL 2003
gold alignment files that attnmt's alignment scorer reads; pass ``one_based=False`` for the 0-based
fast_align convention.

Example (language seed 0; the categories are shown under each source word)::

    >>> import random
    >>> pair = SyntheticLanguage(seed=0).sentence(random.Random(10), 12)
    >>> print(" ".join(pair.src))
    mini pilupe nukatu ri labe gipuki podobi leno mini ruma pono gabo
    >>> print(" ".join(pair.tgt))
    vuvuzo we vi thowe vuthe shozi woche yoze jeshu vuchowo joho
    >>> from attnmt.data.pharaoh import format_links
    >>> print(format_links(pair.alignment))
    1-0 1-1 2-6 3-2 4-4 5-3 6-5 7-7 9-9 10-8 11-10

    source  mini pilupe  nukatu ri  labe gipuki podobi | leno | mini ruma pono gabo
            DET  NOUN    VERB_T DET ADJ  NOUN   ADV    | CONJ | DET  ADJ  NOUN VERB_I
    target  pilupe=vuvuzo we, ri=vi, gipuki=thowe, labe=vuthe, podobi=shozi, nukatu=woche |
            leno=yoze | pono=jeshu ruma=vuchowo gabo=joho

The determiner ``mini`` has no translation, the noun ``pilupe`` becomes two words (stem and
classifier), each adjective follows its noun and each verb ends its clause.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from typing import Sequence

from attnmt.errors import UserError

SOURCE_ONSETS = ("p", "t", "k", "b", "d", "g", "m", "n", "s", "l", "r")
TARGET_ONSETS = ("f", "v", "z", "h", "j", "w", "y", "ch", "sh", "th")
VOWELS = ("a", "e", "i", "o", "u")

# Word categories of the source language, in the order their words are invented (the order is
# part of what the seed determines, so do not reorder it).
DET, NUM, ADJ, NOUN, VERB_T, VERB_I, ADV, PREP, CONJ = (
    "determiner",
    "number",
    "adjective",
    "noun",
    "transitive_verb",
    "intransitive_verb",
    "adverb",
    "preposition",
    "conjunction",
)
CATEGORIES = (DET, NUM, ADJ, NOUN, VERB_T, VERB_I, ADV, PREP, CONJ)
FUNCTION_CATEGORIES = frozenset({DET, PREP, CONJ})

MAX_ADJECTIVES = 2  # per noun phrase
NUMBER_PROBABILITY = 0.15  # a noun phrase starts with a number instead of a determiner
FINISH_PROBABILITY = 0.5  # when the rest fits in one clause, stop splitting with this chance


@dataclass
class SyntheticPair:
    """One sentence pair with its gold alignment of 0-based ``(src_index, tgt_index)`` links."""

    src: list[str]
    tgt: list[str]
    alignment: list[tuple[int, int]]


@dataclass(frozen=True)
class _ClauseShape:
    """The shape of one clause: how many adjectives each noun phrase has, which parts exist."""

    subject_adjectives: int
    object_adjectives: int | None  # None: the verb is intransitive
    pp_adjectives: int | None  # None: no prepositional phrase
    adverb: bool

    @property
    def length(self) -> int:
        n = 2 + self.subject_adjectives + 1  # (DET|NUM) ADJ* NOUN VERB
        if self.object_adjectives is not None:
            n += 2 + self.object_adjectives
        if self.pp_adjectives is not None:
            n += 3 + self.pp_adjectives
        return n + int(self.adverb)


def _all_clause_shapes() -> list[_ClauseShape]:
    """Every clause shape of the grammar, sorted by length (shortest first)."""
    adjective_counts = range(MAX_ADJECTIVES + 1)
    optional_counts: list[int | None] = [None, *adjective_counts]
    shapes = [
        _ClauseShape(subject, obj, pp, adverb)
        for subject in adjective_counts
        for obj in optional_counts
        for pp in optional_counts
        for adverb in (False, True)
    ]
    return sorted(shapes, key=lambda s: s.length)


CLAUSE_SHAPES = _all_clause_shapes()
MIN_CLAUSE = CLAUSE_SHAPES[0].length  # 3: DET NOUN VERB
MAX_CLAUSE = CLAUSE_SHAPES[-1].length  # 15
# Lookups for generation (it runs per clause, so avoid rescanning the shapes).
_SHAPE_LENGTHS = [s.length for s in CLAUSE_SHAPES]
_SHAPES_OF_LENGTH = {n: [s for s in CLAUSE_SHAPES if s.length == n] for n in range(MIN_CLAUSE, MAX_CLAUSE + 1)}
MIN_SENTENCE = MIN_CLAUSE


def _invent_words(
    rng: random.Random,
    onsets: Sequence[str],
    count: int,
    syllables: tuple[int, int],
    taken: set[str],
) -> list[str]:
    """``count`` new distinct CV-syllable words, none of them in ``taken`` (which is updated)."""
    lo, hi = syllables
    words: list[str] = []
    misses = 0
    while len(words) < count:
        n = rng.randint(lo, hi)
        word = "".join(rng.choice(onsets) + rng.choice(VOWELS) for _ in range(n))
        if word in taken:
            misses += 1
            if misses > 100 + 20 * count:  # the space of short words is used up: allow longer ones
                hi, misses = hi + 1, 0
            continue
        taken.add(word)
        words.append(word)
    return words


class SyntheticLanguage:
    """A seeded source language, its target language and the lexicon between them.

    The constructor's ``seed`` fixes the vocabularies and the lexicon; sentences are drawn with a
    separate :class:`random.Random` passed to :meth:`sentence` or seeded in :meth:`generate`.
    """

    def __init__(
        self,
        seed: int = 0,
        n_nouns: int = 130,
        n_adjectives: int = 50,
        n_transitive_verbs: int = 40,
        n_intransitive_verbs: int = 24,
        n_adverbs: int = 20,
        n_numbers: int = 10,
        n_determiners: int = 6,
        n_prepositions: int = 10,
        n_conjunctions: int = 5,
        n_dropped_determiners: int = 2,
        two_word_fraction: float = 0.2,
        n_classifiers: int = 3,
        n_auxiliaries: int = 2,
    ) -> None:
        counts = {
            DET: n_determiners,
            NUM: n_numbers,
            ADJ: n_adjectives,
            NOUN: n_nouns,
            VERB_T: n_transitive_verbs,
            VERB_I: n_intransitive_verbs,
            ADV: n_adverbs,
            PREP: n_prepositions,
            CONJ: n_conjunctions,
        }
        for category, count in counts.items():
            if count < 1:
                raise UserError(f"synthetic language: the number of {category}s must be >= 1, got {count}")
        if n_adjectives < MAX_ADJECTIVES:  # a noun phrase takes up to this many distinct adjectives
            raise UserError(f"synthetic language: n_adjectives must be >= {MAX_ADJECTIVES}, got {n_adjectives}")
        if not 0 <= n_dropped_determiners < n_determiners:
            raise UserError(
                f"synthetic language: n_dropped_determiners must be in [0, {n_determiners - 1}], "
                f"got {n_dropped_determiners}"
            )
        if not 0.0 <= two_word_fraction <= 1.0:
            raise UserError(f"synthetic language: two_word_fraction must be in [0, 1], got {two_word_fraction}")
        if n_classifiers < 1 or n_auxiliaries < 1:
            raise UserError("synthetic language: n_classifiers and n_auxiliaries must be >= 1")

        self.seed = seed
        rng = random.Random(seed)
        source_taken: set[str] = set()
        self.words: dict[str, list[str]] = {}
        for category in CATEGORIES:
            syllables = (1, 2) if category in FUNCTION_CATEGORIES else (2, 3)
            self.words[category] = _invent_words(rng, SOURCE_ONSETS, counts[category], syllables, source_taken)
        self.category: dict[str, str] = {w: c for c, words in self.words.items() for w in words}
        self.lexicon: dict[str, tuple[str, ...]] = self._build_lexicon(
            rng, n_dropped_determiners, two_word_fraction, n_classifiers, n_auxiliaries
        )

    def _build_lexicon(
        self,
        rng: random.Random,
        n_dropped_determiners: int,
        two_word_fraction: float,
        n_classifiers: int,
        n_auxiliaries: int,
    ) -> dict[str, tuple[str, ...]]:
        """Map every source word to its 0-, 1- or 2-word translation; target words are all new."""
        taken: set[str] = set()
        # Second words of two-word translations are shared particles (like noun classifiers and
        # auxiliaries), so they are frequent and easy to learn; the stems are unique to each word.
        classifiers = _invent_words(rng, TARGET_ONSETS, n_classifiers, (1, 1), taken)
        auxiliaries = _invent_words(rng, TARGET_ONSETS, n_auxiliaries, (1, 1), taken)
        lexicon: dict[str, tuple[str, ...]] = {}
        for category in CATEGORIES:
            words = self.words[category]
            syllables = (1, 2) if category in FUNCTION_CATEGORIES else (2, 3)
            stems = _invent_words(rng, TARGET_ONSETS, len(words), syllables, taken)
            two_word: set[int] = set()
            if category == NOUN or category in (VERB_T, VERB_I):
                two_word = set(rng.sample(range(len(words)), round(two_word_fraction * len(words))))
            particles = classifiers if category == NOUN else auxiliaries
            for i, (word, stem) in enumerate(zip(words, stems)):
                if category == DET and i < n_dropped_determiners:
                    lexicon[word] = ()  # article-like: no translation
                elif i in two_word:
                    lexicon[word] = (stem, rng.choice(particles))
                else:
                    lexicon[word] = (stem,)
        return lexicon

    @property
    def source_vocab(self) -> set[str]:
        """Every source word."""
        return set(self.category)

    @property
    def target_vocab(self) -> set[str]:
        """Every word that some translation uses."""
        return {t for translation in self.lexicon.values() for t in translation}

    # ---------------------------------------------------------------- generation

    def sentence(self, rng: random.Random, length: int) -> SyntheticPair:
        """One random sentence pair whose source has exactly ``length`` tokens (``length >= 3``)."""
        if length < MIN_SENTENCE:
            raise UserError(f"synthetic language: sentences have at least {MIN_SENTENCE} tokens, asked for {length}")
        tokens: list[str] = []
        for k, shape in enumerate(self._clause_shapes(rng, length)):
            if k:
                tokens.append(rng.choice(self.words[CONJ]))
            tokens.extend(self._clause(rng, shape))
        assert len(tokens) == length, (len(tokens), length)
        return self.translate(tokens)

    def generate(self, n: int, min_len: int, max_len: int, seed: int) -> list[SyntheticPair]:
        """``n`` sentence pairs with source lengths spread evenly over ``[min_len, max_len]``.

        Lengths are stratified: every length in the range appears ``n // span`` times and the
        remainder are distinct lengths drawn at random, then the order is shuffled. So each
        sentence's length is uniform, and the histogram is flat even for small ``n``.
        """
        rng = random.Random(seed)
        return [self.sentence(rng, length) for length in stratified_lengths(rng, n, min_len, max_len)]

    def _clause_shapes(self, rng: random.Random, length: int) -> list[_ClauseShape]:
        """Clause shapes whose lengths plus one conjunction between each pair sum to ``length``."""
        shapes: list[_ClauseShape] = []
        remaining = length
        while True:
            can_split = remaining >= 2 * MIN_CLAUSE + 1
            if remaining <= MAX_CLAUSE and (not can_split or rng.random() < FINISH_PROBABILITY):
                shapes.append(rng.choice(_SHAPES_OF_LENGTH[remaining]))
                return shapes
            # Leave room for a conjunction and at least one more clause.
            fitting = bisect.bisect_right(_SHAPE_LENGTHS, remaining - 1 - MIN_CLAUSE)
            shape = rng.choice(CLAUSE_SHAPES[:fitting])
            shapes.append(shape)
            remaining -= shape.length + 1

    def _noun_phrase(self, rng: random.Random, n_adjectives: int) -> list[str]:
        head = NUM if rng.random() < NUMBER_PROBABILITY else DET
        return [
            rng.choice(self.words[head]),
            *rng.sample(self.words[ADJ], n_adjectives),
            rng.choice(self.words[NOUN]),
        ]

    def _clause(self, rng: random.Random, shape: _ClauseShape) -> list[str]:
        tokens = self._noun_phrase(rng, shape.subject_adjectives)
        if shape.object_adjectives is None:
            tokens.append(rng.choice(self.words[VERB_I]))
        else:
            tokens.append(rng.choice(self.words[VERB_T]))
            tokens += self._noun_phrase(rng, shape.object_adjectives)
        if shape.pp_adjectives is not None:
            tokens.append(rng.choice(self.words[PREP]))
            tokens += self._noun_phrase(rng, shape.pp_adjectives)
        if shape.adverb:
            tokens.append(rng.choice(self.words[ADV]))
        return tokens

    # ---------------------------------------------------------------- translation

    def translate(self, src: Sequence[str]) -> SyntheticPair:
        """The translation of a source sentence of this language, with its gold alignment.

        Raises ValueError if ``src`` is not a sentence of the grammar.
        """
        emitted: list[tuple[str, int]] = []  # (target token, index of its source word)

        def emit(i: int) -> None:
            emitted.extend((t, i) for t in self.lexicon[src[i]])

        def emit_noun_phrase(np: list[int]) -> None:
            head, *adjectives, noun = np
            for i in (head, noun, *adjectives):  # adjectives after the noun
                emit(i)

        for k, clause in enumerate(self._split_clauses(src)):
            if k:
                emit(clause[0] - 1)  # the conjunction before this clause
            subject, verb, obj, pp, adverb = self._parse_clause(src, clause)
            emit_noun_phrase(subject)
            if obj:
                emit_noun_phrase(obj)
            if pp:
                emit_noun_phrase(pp[1:])
                emit(pp[0])  # the preposition becomes a postposition
            if adverb is not None:
                emit(adverb)
            emit(verb)  # SOV: the verb ends its clause
        tgt = [t for t, _ in emitted]
        alignment = [(i, j) for j, (_, i) in enumerate(emitted)]
        return SyntheticPair(src=list(src), tgt=tgt, alignment=alignment)

    def _split_clauses(self, src: Sequence[str]) -> list[list[int]]:
        """The source indices of each clause (conjunctions excluded)."""
        clauses: list[list[int]] = [[]]
        for i, word in enumerate(src):
            if word not in self.category:
                raise ValueError(f"not a word of the synthetic language: {word!r} at position {i}")
            if self.category[word] == CONJ:
                clauses.append([])
            else:
                clauses[-1].append(i)
        if any(not c for c in clauses):
            raise ValueError(f"empty clause in {' '.join(src)!r}")
        return clauses

    def _parse_clause(
        self, src: Sequence[str], clause: list[int]
    ) -> tuple[list[int], int, list[int], list[int], int | None]:
        """Split a clause into (subject NP, verb, object NP, PP, adverb) source indices.

        The categories are disjoint, so one left-to-right pass with one token of lookahead parses
        the grammar; anything else raises ValueError naming the position.
        """
        categories = [self.category[src[i]] for i in clause]
        pos = 0

        def at(*expected: str) -> bool:
            return pos < len(clause) and categories[pos] in expected

        def take(*expected: str) -> int:
            nonlocal pos
            if not at(*expected):
                found = categories[pos] if pos < len(clause) else "the end of the clause"
                where = clause[min(pos, len(clause) - 1)]
                raise ValueError(
                    f"expected {' or '.join(expected)} near position {where}, found {found}: {' '.join(src)!r}"
                )
            pos += 1
            return clause[pos - 1]

        def noun_phrase() -> list[int]:
            np = [take(DET, NUM)]
            while at(ADJ):
                np.append(take(ADJ))
            return [*np, take(NOUN)]

        subject = noun_phrase()
        verb = take(VERB_T, VERB_I)
        obj = noun_phrase() if self.category[src[verb]] == VERB_T else []
        pp = [take(PREP), *noun_phrase()] if at(PREP) else []
        adverb = take(ADV) if at(ADV) else None
        if pos != len(clause):
            raise ValueError(f"unexpected {categories[pos]} at position {clause[pos]}: {' '.join(src)!r}")
        return subject, verb, obj, pp, adverb


def stratified_lengths(rng: random.Random, n: int, min_len: int, max_len: int) -> list[int]:
    """``n`` lengths in ``[min_len, max_len]``, each length as often as possible, shuffled."""
    check_lengths(min_len, max_len)
    if n < 0:
        raise UserError(f"synthetic language: the number of sentences must be >= 0, got {n}")
    span = list(range(min_len, max_len + 1))
    lengths = span * (n // len(span)) + rng.sample(span, n % len(span))
    rng.shuffle(lengths)
    return lengths


def check_lengths(min_len: int, max_len: int) -> None:
    if min_len < MIN_SENTENCE:
        raise UserError(f"synthetic language: min_len must be >= {MIN_SENTENCE}, got {min_len}")
    if max_len < min_len:
        raise UserError(f"synthetic language: max_len ({max_len}) must be >= min_len ({min_len})")
