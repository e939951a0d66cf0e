"""Pretokenizers: raw text split into the words a word-alignment gold set counts.

Word alignments are scored word by word, so a model or an aligner must see the gold set's words.
Five are registered in :data:`PRETOKENIZERS` (``attnmt align-prepare --pretokenize``, a model's
``data.pretokenize``), and :func:`gold_changes` lists the gold lines a pretokenizer would change (a gold
set's tokenization is a given: the training text must match it, not the other way round):

* ``words`` (any language): punctuation split off word edges; hyphens, apostrophes, periods and
  commas inside a word kept (``EU-Bürgern``, ``H-0252``, ``3,5``); the abbreviations of the
  language kept whole (``bzw.``, ``z.B.``, ``Mr.``; any word with an inner period, ``d.h.``); an
  apostrophe split as the language writes it: English before it (``do n't``, ``minister 's``),
  French and Italian after it (``l' heure``), other languages not at all. Case is kept.
* ``hansards`` (English and French only, :func:`tokenize`): the NAACL 2003 Hansards convention below.
* ``none``: the text is tokenized already (``--pretokenized``); only runs of spaces are collapsed.
* ``jieba`` (Chinese) and ``mecab`` (Japanese): the language's runs of Han characters (and kana) cut into
  words by a segmenter (:mod:`attnmt.data.segment`, an optional extra), the rest of the text (digits, Latin
  letters, punctuation: ``2024``, ``iPhone``, ``3.5 %``) split as ``words`` splits it
  (:func:`segmented_words`); the pair's other language is split as ``words`` splits it. The gold check
  segments a gold line as the language writes it, without the spaces between its words.

:func:`fold_accents` (``align-prepare --fold-accents``) writes accented text the way the Canadian Hansards
release spells French, in plain ASCII (``L'été n'a pas été`` -> ``L'ete n'a pas ete``), one character at a
time, so that every word stays where it was.

The NAACL 2003 English-French Hansards set (Mihalcea & Pedersen 2003) is lowercased at the start
of a sentence and tokenized as follows; :func:`tokenize` writes any English or French text the
same way, so that training text (Tatoeba, Multi30k) and the gold text agree:

* punctuation is a word of its own: ``oh , oh !``; so is a hyphen inside a word
  (``deux - tiers``, ``montrez - nous``) and a French elided article or pronoun is written out in
  full: ``l'heure`` -> ``le heure``, ``c'est`` -> ``ce est``, ``qu'il`` -> ``que il``
  (``aujourd'hui`` stays ``aujourd' hui``);
* French's contracted articles are split: ``au`` -> ``à le``, ``aux`` -> ``à les``, ``du`` -> ``de le``,
  ``des`` -> ``de les`` (the set does this mechanically, the indefinite ``des`` included);
* English clitics are split off as in the Penn Treebank: ``minister's`` -> ``minister 's``,
  ``don't`` -> ``do n't``.

Everything is lowercased here (the gold is mixed case; attnmt's ``data.lowercase`` lowercases it
when it is read, so both sides meet in lower case).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from attnmt.config.schema import DataConfig
from attnmt.data.segment import SEGMENTERS, Segmenter, cutter, language, script_runs, segmenter_for, unspaced
from attnmt.errors import UserError

__all__ = ["PRETOKENIZERS", "Pretokenizer", "check_pair", "fold_accents", "gold_changes", "model_pretokenizers",
           "pretokenizer", "segmented_sides", "segmented_words", "segmenter_hint", "segments", "tokenize",
           "words"]

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})
# French words that drop their final vowel before a vowel, and what they are written as in full.
_ELIDED = {"l": "le", "d": "de", "c": "ce", "qu": "que", "n": "ne", "j": "je", "s": "se", "m": "me", "t": "te",
           "jusqu": "jusque", "lorsqu": "lorsque", "puisqu": "puisque", "quoiqu": "quoique", "presqu": "presque"}
_CONTRACTED = {"au": "à le", "aux": "à les", "du": "de le", "des": "de les"}
_ENGLISH_CLITICS = re.compile(r"(?i)(n't|'s|'m|'re|'ve|'ll|'d)\b")
_ABBREVIATIONS = {"mr.", "mrs.", "ms.", "dr.", "st.", "hon.", "no.", "a.m.", "p.m.", "m.", "mme.", "mlle."}
# A word is a number (3,5 or 1960s), a run of letters and digits (pt7), a word with its elision mark
# (l'), or a run of one punctuation character (-- and ... stay whole); abbreviations are kept apart below.
_PIECES = re.compile(r"\.?\d+(?:[.,]\d+)*[^\W\d_]*|[^\W_]+'?|'|([^\w\s])\1*", re.UNICODE)


def _french_word(word: str, before_hyphen: bool) -> list[str]:
    if word.endswith("'") and len(word) > 1:
        stem = word[:-1]
        return [_ELIDED.get(stem, word)]
    if before_hyphen:  # au-dessus, aux-quels: part of a compound, not an article
        return [word]
    return _CONTRACTED.get(word, word).split()


def tokenize(text: str, lang: str) -> str:
    """``text`` lowercased and tokenized the Hansards way (see the module docstring); ``lang`` en or fr."""
    if lang not in ("en", "fr"):
        raise ValueError(f"tokenize: language {lang!r} has no Hansards convention; use 'en' or 'fr'")
    text = text.translate(_APOSTROPHES).lower()
    if lang == "en":
        text = _ENGLISH_CLITICS.sub(r" \1", text)
    pieces: list[str] = []
    for chunk in text.split():
        if chunk in _ABBREVIATIONS or (lang == "en" and _ENGLISH_CLITICS.fullmatch(chunk)):
            pieces.append(chunk)
        else:
            pieces.extend(m.group(0) for m in _PIECES.finditer(chunk))
    words: list[str] = []
    for k, piece in enumerate(pieces):
        if lang == "fr":
            words.extend(_french_word(piece, k + 1 < len(pieces) and pieces[k + 1] == "-"))
        elif piece.endswith("'") and len(piece) > 1:
            words.extend([piece[:-1], "'"])
        else:
            words.append(piece)
    return " ".join(words)


# Abbreviations each language keeps whole (lowercase; the final period is part of the word). A word with
# a period inside (d.h., z.b., u.s.a.) is kept whole in every language.
ABBREVIATIONS = {
    "de": set("""abb. abs. abt. bd. bsp. bspw. bzgl. bzw. ca. dr. evtl. ff. frl. gem. ggf. hr. hrsg. inkl. jh. jr.
              kap. mio. mrd. nr. prof. rd. s. sog. st. str. tel. u.a. usw. vgl. vs. z.b. z.t. zb. zzgl.""".split()),
    "en": {"mr.", "mrs.", "ms.", "dr.", "st.", "hon.", "no.", "nos.", "vs.", "etc.", "e.g.", "i.e.", "jr.", "sr.",
           "prof.", "art.", "p.", "pp.", "vol.", "fig.", "inc.", "ltd.", "co.", "corp.", "a.m.", "p.m."},
    "fr": {"hon.", "st.", "m.", "mm.", "mme.", "mmes.", "mlle.", "dr.", "etc.", "p.", "art.", "no.", "cf.", "av.",
           "bd."},
    "ro": {"dl.", "dna.", "dnei.", "dvs.", "etc.", "nr.", "art.", "alin.", "lit.", "pct.", "str."},
}
# Where an apostrophe inside a word splits it: before it (English clitics) or after it (elision).
_APOSTROPHE_SPLITS = {"en": "before", "fr": "after", "it": "after", "ca": "after"}
_INNER = set("-'.,")  # kept between letters or digits
_ENGLISH_NT = re.compile(r"(?i)^(.+)(n't)$")
_ENGLISH_CLITIC = re.compile(r"(?i)'(s|m|re|ve|ll|d)|n't")


def _is_punct(ch: str) -> bool:
    return not ch.isalnum()


def _edge_runs(text: str) -> list[str]:
    """``text`` (punctuation only) as runs of one repeated character: ``...`` and ``--`` stay whole."""
    return [m.group(0) for m in re.finditer(r"(.)\1*", text, re.DOTALL)]


def _split_inner(word: str) -> list[str]:
    """Punctuation inside a word that is not a kept inner mark (a/b, x+y) becomes a word of its own."""
    out, current = [], ""
    for k, ch in enumerate(word):
        inner = ch in _INNER and 0 < k < len(word) - 1 and word[k - 1].isalnum() and word[k + 1].isalnum()
        number = ch == "." and k == 0 and word[1:2].isdigit()  # .5
        if _is_punct(ch) and not (inner or number):
            out += [current] if current else []
            out.append(ch)
            current = ""
        else:
            current += ch
    return out + ([current] if current else [])


def _apostrophe(word: str, lang: str) -> list[str]:
    how = _APOSTROPHE_SPLITS.get(lang)
    if "'" not in word or how is None:
        return [word]
    if how == "after":  # l'heure -> l' heure
        head, _, tail = word.partition("'")
        return [head + "'", *_apostrophe(tail, lang)] if tail else [word]
    nt = _ENGLISH_NT.match(word)  # don't -> do n't, minister's -> minister 's
    if nt:
        return [nt.group(1), nt.group(2)]
    head, _, tail = word.rpartition("'")
    return [head, "'" + tail] if head else [word]


def _chunk(chunk: str, lang: str) -> list[str]:
    """One whitespace-separated chunk of text as words."""
    if chunk.lower() in ABBREVIATIONS.get(lang, ()) or (lang == "en" and _ENGLISH_CLITIC.fullmatch(chunk)):
        return [chunk]  # mr., bzw.; 's and n't as an English text tokenized already writes them
    start, end = 0, len(chunk)
    while start < end and _is_punct(chunk[start]) and not (chunk[start] == "." and chunk[start + 1:][:1].isdigit()):
        start += 1  # a period before a digit starts a number (.5)
    while end > start and _is_punct(chunk[end - 1]):
        end -= 1
    core, tail, keep = chunk[start:end], chunk[end:], ""
    # an abbreviation's period stays: a known one, or a word with a period inside (d.h., z.B.); an elided
    # word's apostrophe stays where the language elides (aujourd' hui)
    if tail.startswith(".") and core and (f"{core}.".lower() in ABBREVIATIONS.get(lang, ()) or "." in core[1:]):
        keep, tail = ".", tail[1:]
    elif tail.startswith("'") and core[-1:].isalpha() and _APOSTROPHE_SPLITS.get(lang) == "after":
        keep, tail = "'", tail[1:]
    words = _edge_runs(chunk[:start])
    pieces = _split_inner(core)
    for k, piece in enumerate(pieces):
        words += _apostrophe(piece + (keep if k == len(pieces) - 1 else ""), lang)
    return words + _edge_runs(tail)


def words(text: str, lang: str) -> str:
    """``text`` with punctuation split off word edges, for any language (see the module docstring)."""
    text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    return " ".join(w for chunk in text.split() for w in _chunk(chunk, lang))


# What canonical decomposition leaves whole, as the Hansards write it: the ligatures spelled out (oeuvre, coeur),
# and French quotation marks, which the Hansards drop, as a plain quote (a word of its own stays one).
_FOLDED_WHOLE = {"œ": "oe", "Œ": "OE", "æ": "ae", "Æ": "AE", "«": '"', "»": '"'}


class _Folding(dict):
    """str.translate's table of :func:`fold_accents`, filled as characters turn up: a character's canonical
    decomposition without its combining marks (é -> e, Ç -> C); the character itself where that would be
    empty or whitespace, so no word is ever dropped, split or joined."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        folded = _FOLDED_WHOLE.get(char)
        if folded is None:
            folded = "".join(c for c in unicodedata.normalize("NFD", char) if not unicodedata.combining(c))
            if not folded or any(c.isspace() for c in folded) != char.isspace():
                folded = char
        self[code] = folded
        return folded


_FOLDING = _Folding()


def fold_accents(text: str) -> str:
    """``text`` with its accents folded to plain letters, as the Hansards release writes French (é è ê -> e,
    ç -> c, É -> E, œ -> oe, « and » -> "): the number and order of its whitespace-separated words never
    change. Decomposed accents (e + U+0301) are composed first."""
    return text if text.isascii() else unicodedata.normalize("NFC", text).translate(_FOLDING)


def _none(text: str, lang: str) -> str:
    return " ".join(text.split())


def segmented_words(text: str, lang: str, cut: Callable[[str], list[str]], segmenter: Segmenter) -> str:
    """``text`` as words: each run of the segmenter's script cut into words by ``cut``, everything else (digits,
    Latin letters, punctuation) split as :func:`words` splits it; existing spaces stay word boundaries."""
    text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    out: list[str] = []
    for chunk in text.split():
        for run, cut_it in script_runs(chunk, segmenter):
            out += [w for w in cut(run) if w.strip()] if cut_it else _chunk(run, lang)
    return " ".join(out)


class Pretokenizer(NamedTuple):
    """A registered pretokenizer: its function of (text, lang), the languages it knows (None: any), whether it
    lowercases, and the segmenter it cuts its language with (None: it splits at spaces and punctuation)."""

    function: Callable[[str, str], str]
    languages: tuple[str, ...] | None
    lowercases: bool
    segmenter: Segmenter | None = None


# A segmenter splits its language into words and any other language (the pair's other side) as `words` does.
PRETOKENIZERS: dict[str, Pretokenizer] = {
    "words": Pretokenizer(words, None, False),
    "hansards": Pretokenizer(tokenize, ("en", "fr"), True),
    "none": Pretokenizer(_none, None, False),
    **{name: Pretokenizer(words, None, False, s) for name, s in SEGMENTERS.items()},
}


def segments(name: str, lang: str) -> bool:
    """Whether pretokenizer ``name`` cuts ``lang`` into words with a segmenter."""
    s = PRETOKENIZERS[name].segmenter if name in PRETOKENIZERS else None
    return s is not None and s.language == language(lang)


def pretokenizer(name: str, lang: str, user_dict: str | Path | None = None) -> Callable[[str], str]:
    """The pretokenizer ``name`` for ``lang`` (``user_dict``: a segmenter's user dictionary); UserError naming the
    choices when either does not fit, and naming the extra to install when a segmenter is missing."""
    if name not in PRETOKENIZERS:
        raise UserError(f"pretokenizer {name!r} is unknown; allowed: {' | '.join(PRETOKENIZERS)}")
    function, languages, _, segmenter = PRETOKENIZERS[name]
    if languages is not None and lang not in languages:
        raise UserError(f"the {name} pretokenizer knows {' and '.join(languages)} only, not {lang!r}; use "
                        "--pretokenize words (any language) or --pretokenized (text tokenized already)")
    if user_dict is not None and segmenter is None:
        raise UserError(f"--user-dict {user_dict}: a user dictionary belongs to a segmenter "
                        f"({' | '.join(SEGMENTERS)}), not to the {name} pretokenizer; leave it out")
    if segments(name, lang):
        cut = cutter(name, user_dict)
        return lambda text: segmented_words(text, lang, cut, segmenter)
    return lambda text: function(text, lang)


def check_pair(name: str, src_lang: str, tgt_lang: str) -> None:
    """UserError for a segmenter that segments neither language of the pair (it would split both as words)."""
    segmenter = PRETOKENIZERS[name].segmenter if name in PRETOKENIZERS else None
    if segmenter is not None and not (segments(name, src_lang) or segments(name, tgt_lang)):
        raise UserError(f"--pretokenize {name} segments {segmenter.language_name} ({segmenter.language}), and the pair "
                        f"is {src_lang}-{tgt_lang}; give --src-lang or --tgt-lang {segmenter.language}, or use "
                        "--pretokenize words")


def segmenter_hint(name: str, lang: str) -> str | None:
    """A line for a language written without spaces that pretokenizer ``name`` would not segment, else None (also
    for ``none``: text tokenized already)."""
    segmenter = segmenter_for(lang)
    if segmenter is None or name == "none" or segments(name, lang):
        return None
    return (f"{lang} is written without spaces between words: --pretokenize {segmenter.name} segments it into words "
            f"({segmenter.install_hint()})")


def segmented_sides(data: DataConfig) -> tuple[bool, bool]:
    """Whether a model's source and target text was segmented into words (its data.pretokenize a segmenter of the
    side's language): their words are the whitespace-separated ones, in every script."""
    name = data.pretokenize
    return (False, False) if name is None else (segments(name, data.src_lang), segments(name, data.tgt_lang))


def model_pretokenizers(data: DataConfig) -> tuple[Callable[[str], str] | None, Callable[[str], str] | None]:
    """The pretokenizers of a model's source and target (its config's data.pretokenize, data.src_lang and
    data.tgt_lang, data.pretokenize_user_dict), which split raw input as its training text was split; None for a
    side the model reads as it is."""
    name = data.pretokenize
    if name is None or name == "none":
        return None, None
    user_dict = data.pretokenize_user_dict

    def side(lang: str) -> Callable[[str], str]:
        return pretokenizer(name, lang, user_dict if segments(name, lang) else None)

    try:
        return side(data.src_lang), side(data.tgt_lang)
    except UserError as e:
        raise UserError(f"the model's data.pretokenize {name}: {e}") from None


def gold_changes(lines: Sequence[str], name: str, lang: str,
                 user_dict: str | Path | None = None) -> list[tuple[int, str, str]]:
    """The gold lines that pretokenizer ``name`` would change, as (1-based line, line, pretokenized); a
    pretokenizer that lowercases is compared without case. A segmenter segments each line as the language
    writes it (:func:`attnmt.data.segment.unspaced`: without the gold's spaces between its words)."""
    tokenize_line = pretokenizer(name, lang, user_dict)
    lowercases = PRETOKENIZERS[name].lowercases
    as_written = unspaced if segments(name, lang) else (lambda line: line)
    changed = []
    for number, line in enumerate(lines, start=1):
        given = " ".join(line.split())
        after = tokenize_line(as_written(given))
        if after != (given.lower() if lowercases else given):
            changed.append((number, given, after))
    return changed
