"""The Hansards word convention (attnmt/data/pretokenize.py), checked against lines of the gold set."""

import pytest

from attnmt.data.pretokenize import tokenize
from tests.conftest import SHARED_DATA


@pytest.mark.parametrize("raw, expected", [
    ("Il a montré beaucoup d'habileté.", "il a montré beaucoup de habileté ."),
    ("C'est l'heure, aujourd'hui !", "ce est le heure , aujourd' hui !"),
    ("Montrez-nous les documents.", "montrez - nous les documents ."),
    ("Je vais au marché des fleurs du coin, aux Halles.",
     "je vais à le marché de les fleurs de le coin , à les halles ."),
    ("Qu’il vienne jusqu'à 3,5 km.", "que il vienne jusque à 3,5 km ."),
])
def test_french(raw, expected):
    assert tokenize(raw, "fr") == expected


@pytest.mark.parametrize("raw, expected", [
    ("I don't know.", "i do n't know ."),
    ("The minister's two-thirds, Mr. Smith!", "the minister 's two - thirds , mr. smith !"),
    ('"Hi," he said.', '" hi , " he said .'),
])
def test_english(raw, expected):
    assert tokenize(raw, "en") == expected


def test_unknown_language():
    with pytest.raises(ValueError, match="'en' or 'fr'"):
        tokenize("x", "de")


GOLD = SHARED_DATA / "alignment" / "enfr-hansards"


@pytest.mark.skipif(not GOLD.is_dir(), reason="the shared Hansards gold alignments are absent (../shared/data)")
def test_gold_text_is_a_fixed_point():
    """Tokenizing the gold set's own (already tokenized) lines changes nothing but the case."""
    for lang, name in (("en", "enfr.src"), ("fr", "enfr.tgt")):
        lines = (GOLD / name).read_text(encoding="utf-8").splitlines()
        same = sum(tokenize(line, lang) == line.lower() for line in lines)
        assert same == len(lines), (lang, same, len(lines))
