"""Word tokenization in the convention of the English-French Hansards gold alignments.

Word alignments are scored word by word, so a model or an aligner must see the gold set's words.
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

__all__ = ["tokenize"]

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
