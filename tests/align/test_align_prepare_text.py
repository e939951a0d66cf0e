"""align-prepare for training text such as the Canadian Hansards release, which spells French in ASCII: accents
folded the way it folds them (--fold-accents), every word kept where it was; training pairs dropped when a side
has a gold sentence's letters and digits; a held-out test set (--test); bad input refused in one line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from attnmt.cli import main as attnmt
from attnmt.data.pretokenize import fold_accents

ROOT = Path(__file__).resolve().parents[2]
HANSARDS = ROOT.parent / "shared" / "data" / "hansards"

# Accented French and how the Hansards release spells it (words seen in its text: ete, deja, Etat, coeur, ...)
SPELLED = [("été", "ete"), ("déjà", "deja"), ("très", "tres"), ("français", "francais"), ("façon", "facon"),
           ("hôpital", "hopital"), ("où", "ou"), ("Noël", "Noel"), ("naïf", "naif"), ("État", "Etat"),
           ("À", "A"), ("Ça", "Ca"), ("cœur", "coeur"), ("œuvre", "oeuvre"), ("sûr", "sur")]

# A made-up gold set, tokenized as the NAACL 2003 Hansards set is (French accents kept)
GOLD_EN = ["the summer was not bad .", "oh , oh !", "I rise on a point of order .", "..."]
GOLD_FR = ["le été ne a pas été « mauvais » .", "oh , oh !", "je invoque le Règlement .", "..."]


def test_folding_spells_french_as_the_hansards_release_does():
    for accented, spelled in SPELLED:
        assert fold_accents(accented) == spelled
    assert fold_accents("L'été n'a pas été « mauvais » , Ça !") == "L'ete n'a pas ete \" mauvais \" , Ca !"
    assert fold_accents("e\u0301te\u0301") == "ete"  # decomposed accents too


@pytest.mark.skipif(not (HANSARDS / "testing.f.gz").is_file(), reason="../shared/data/hansards is absent")
def test_the_folded_words_are_the_hansards_own_spelling():
    """Every folded sample word stands in the release's own French text; the accented ones never do."""
    with gzip.open(HANSARDS / "training.f.gz", "rt", encoding="utf-8") as f:
        words = set(f.read().split())
    assert {spelled for _, spelled in SPELLED} <= words
    assert not {accented for accented, _ in SPELLED} & words


def test_folding_never_drops_splits_or_joins_a_word():
    """Every character of planes 0-2 (all those with a canonical decomposition among them), each a word of its
    own: as many words after folding, none empty or split; a space stays a space."""
    chars = [chr(c) for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF]
    spaces = [c for c in chars if c.isspace()]
    words = [c for c in chars if not c.isspace()]
    folded = fold_accents(" ".join(words)).split(" ")
    assert len(folded) == len(words)
    assert all(len(w.split()) == 1 and w.split()[0] == w for w in folded)
    assert all(fold_accents(f"a{c}b").split() == ["a", "b"] for c in spaces)


def _write(root: Path, name: str, lines: list[str]) -> Path:
    path = root / name
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _gold(root: Path) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    return ["--gold-src", str(_write(root, "gold.en", GOLD_EN)), "--gold-tgt", str(_write(root, "gold.fr", GOLD_FR))]


def _prepare(root: Path, train: list[tuple[str, str]], *extra: str) -> int:
    root.mkdir(parents=True, exist_ok=True)
    corpus = _write(root, "train.tsv", [f"{en}\t{fr}" for en, fr in train])
    return attnmt(["align-prepare", "--src-lang", "en", "--tgt-lang", "fr", "--pretokenize", "hansards",
                   "--tsv", str(corpus), *_gold(root), "--no-links", "--out-dir", str(root / "out"), *extra])


def _written(out: Path) -> tuple[list[str], dict]:
    pairs = gzip.open(out / "train.tsv.gz", "rt", encoding="utf-8").read().splitlines()
    return pairs, json.loads((out / "align.json").read_text(encoding="utf-8"))


def test_fold_accents_folds_the_corpora_and_the_gold_sentences_alike(tmp_path):
    train = [("The summer is here.", "L'été est là."), ("A good heart.", "Un bon cœur.")]
    assert _prepare(tmp_path, train, "--fold-accents") == 0
    pairs, manifest = _written(tmp_path / "out")
    assert pairs == ["the summer is here .\tle ete est la .", "a good heart .\tun bon coeur ."]
    gold_fr = (tmp_path / "out" / "gold.fr").read_text(encoding="utf-8").splitlines()
    assert gold_fr == ['le ete ne a pas ete " mauvais " .', "oh , oh !", "je invoque le Reglement .", "..."]
    assert [len(line.split()) for line in gold_fr] == [len(line.split()) for line in GOLD_FR]
    assert manifest["fold_accents"] is True
    assert _prepare(tmp_path / "kept", train) == 0  # without the option: accents as given
    pairs, manifest = _written(tmp_path / "kept" / "out")
    assert pairs[0] == "the summer is here .\tle été est là ." and manifest["fold_accents"] is False
    assert (tmp_path / "kept" / "out" / "gold.fr").read_text(encoding="utf-8").splitlines() == GOLD_FR


def test_a_pair_is_dropped_when_a_side_has_a_gold_sentences_letters_and_digits(tmp_path):
    """Hansards-style raw text: a gold sentence with other punctuation, spacing, case or accents still leaves;
    a gold line without letters or digits (...) matches nothing."""
    train = [("The summer wasn't bad!", "L'ete n'a pas ete mauvais!"),  # French side: gold line 1, ASCII, "!"
             ("I RISE on a point of order", "Je me leve."),  # English side: gold line 3, case and period
             ("What...?", "..."),  # French side "..." as gold line 4, which has no letters or digits
             ("The summer was good.", "L'ete a ete bon.")]
    assert _prepare(tmp_path, train) == 0
    pairs, manifest = _written(tmp_path / "out")
    assert pairs == ["what ... ?\t...", "the summer was good .\tle ete a ete bon ."]
    assert manifest["pairs"] == {"read": 4, "empty": 0, "equal_to_gold": 2, "kept": 2}


def test_test_writes_the_first_pairs_prepared_as_the_training_pairs(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    en = _write(root, "test.e", ["Oh, oh!", "It is late.", "", "I said: \"Yes.\"", "Where?", "Why?"])
    fr = _write(root, "test.f", ["Oh, oh!", "Il est tard.", "Rien.", "J'ai dit: Oui.", "Où?", "Pourquoi?"])
    train = [("The summer is here.", "L'été est là.")]
    assert _prepare(tmp_path, train, "--fold-accents", "--test", str(en), str(fr), "--test-lines", "3") == 0
    out = tmp_path / "out"
    assert (out / "test.en").read_text(encoding="utf-8").splitlines() == ["it is late .", 'i said : " yes . "',
                                                                          "where ?"]
    assert (out / "test.fr").read_text(encoding="utf-8").splitlines() == ["il est tard .", "je ai dit : oui .",
                                                                          "ou ?"]
    test = json.loads((out / "align.json").read_text(encoding="utf-8"))["test"]
    assert test["files"] == ["test.en", "test.fr"]
    assert test["pairs"] == {"read": 5, "empty": 1, "equal_to_gold": 1, "kept": 3}


def _one_line_error(capsys, *words: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("attnmt: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


def test_bad_test_input_is_refused_in_one_line(tmp_path, capsys):
    root = tmp_path / "b"
    root.mkdir()
    train = [("The summer is here.", "L'été est là.")]
    three, two = _write(root, "three.e", ["a", "b", "c"]), _write(root, "two.f", ["a", "b"])
    assert _prepare(root, train, "--test", str(three), str(two)) == 2
    _one_line_error(capsys, "three.e", "two.f")
    assert _prepare(root, train, "--test", str(three), str(three), "--test-lines", "0") == 2
    _one_line_error(capsys, "--test-lines")
    assert _prepare(root, train, "--test-lines", "5") == 2
    _one_line_error(capsys, "--test-lines", "--test")
    gold = ["--src", str(root / "gold.en"), "--tgt", str(root / "gold.fr"), "--gold", str(_write(root, "g", ["1-1"]))]
    assert attnmt(["align-table", *gold, "--model", f"m={root}", "--test-src", str(three)]) == 2
    _one_line_error(capsys, "--test-src", "--test-tgt")
    assert attnmt(["align-table", *gold, "--model", f"m={root}", "--test-src", str(three), "--test-tgt",
                   str(two)]) == 2
    _one_line_error(capsys, "three.e", "two.f")
    assert attnmt(["align-table", *gold, "--baseline", "diagonal", "--test-src", str(three), "--test-tgt",
                   str(three)]) == 2
    _one_line_error(capsys, "--model")
    assert attnmt(["align-table", *gold, "--baseline", "diagonal", "--out", str(three)]) == 2
    _one_line_error(capsys, "three.e exists", "--overwrite")
