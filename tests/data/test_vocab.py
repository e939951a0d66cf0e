"""Vocabulary: special ids, build order, min_freq / max_size, encode/decode, save/load."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.data.vocab import BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIALS, UNK, UNK_ID, Vocabulary
from attnmt.errors import UserError

DATA = [["b", "a", "c", "a"], ["c", "a", "d"], ["b", "e"]]  # a:3, b:2, c:2, d:1, e:1


def test_special_ids_are_fixed() -> None:
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert (PAD, UNK, BOS, EOS) == ("<pad>", "<unk>", "<s>", "</s>")
    assert Vocabulary.build([]).tokens == SPECIALS


def test_build_orders_by_frequency_then_alphabetically() -> None:
    vocab = Vocabulary.build(DATA)
    assert vocab.tokens == (*SPECIALS, "a", "b", "c", "d", "e")
    assert len(vocab) == 9
    assert "a" in vocab and "z" not in vocab


def test_build_is_independent_of_input_order() -> None:
    assert Vocabulary.build(DATA) == Vocabulary.build(reversed([list(reversed(t)) for t in DATA]))


def test_min_freq_and_max_size() -> None:
    assert Vocabulary.build(DATA, min_freq=2).tokens == (*SPECIALS, "a", "b", "c")
    assert Vocabulary.build(DATA, max_size=2).tokens == (*SPECIALS, "a", "b")
    assert Vocabulary.build(DATA, max_size=0).tokens == SPECIALS
    with pytest.raises(UserError):
        Vocabulary.build(DATA, min_freq=0)


def test_encode_decode() -> None:
    vocab = Vocabulary.build(DATA)
    ids = vocab.encode(["a", "zzz", "e"])
    assert ids == [4, UNK_ID, 8]
    assert vocab.decode(ids) == ["a", UNK, "e"]
    with pytest.raises(IndexError):
        vocab.decode([99])


def test_specials_in_text_are_not_counted_and_never_become_control_ids() -> None:
    vocab = Vocabulary.build([["<s>", "x", "</s>", "<pad>", "<unk>"]])
    assert vocab.tokens == (*SPECIALS, "x")
    assert vocab.encode(["<s>", "</s>", "<pad>", "<unk>", "x"]) == [UNK_ID] * 4 + [4]


def test_save_load_round_trip(tmp_path: Path) -> None:
    vocab = Vocabulary.build([["我", "爱", "你", "Straße", "a\x0bb"]])
    path = tmp_path / "sub" / "vocab.src"
    vocab.save(path)
    text = path.read_text(encoding="utf-8")
    assert text.split("\n")[:4] == list(SPECIALS) and text.endswith("\n")
    assert Vocabulary.load(path) == vocab


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        Vocabulary.load(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.txt:1 is not an attnmt vocabulary"):
        Vocabulary.load(bad)
    dup = tmp_path / "dup.txt"
    dup.write_text("\n".join([*SPECIALS, "x", "y", "x"]) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"dup\.txt:7 repeats the token 'x' of line 5"):
        Vocabulary.load(dup)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n".join([*SPECIALS, "x", "", "y"]) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"empty\.txt:6 is an empty token"):
        Vocabulary.load(empty)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(("\n".join(SPECIALS) + "\n").encode() + b"\xff\n")
    with pytest.raises(UserError, match=r"bin\.txt:5 is not valid UTF-8"):
        Vocabulary.load(binary)
