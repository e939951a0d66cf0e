"""Tokenizers: training, round trips (incl. Chinese without spaces), word_ids, save/load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnmt.data.tokenize import (
    SentencePieceTokenizer,
    Tokenizer,
    WordTokenizer,
    load_tokenizer,
    normalize_whitespace,
    train_tokenizer,
)
from attnmt.errors import UserError

TEXTS = [
    "我爱你。",
    "你好！",  # noqa: RUF001 - fullwidth punctuation is normal in Chinese
    "我们爱北京。",
    "The cat sat on the mat.",
    "A dog runs in the park.",
    "Ça va ? Très bien, merci.",
    "我爱 Paris 和 Москва 2024",
    "Zwei junge Männer spielen Fußball.",
] * 4

SAMPLES = [
    "我爱你",
    "我爱你。",
    "The cat sat on the mat.",
    "  The   cat\tsat \n",
    "我爱 Paris 和 Москва 2024",
    "Ça va ?",
    "",
]


@pytest.fixture(scope="module")
def sp_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Tokenizer]:
    directory = tmp_path_factory.mktemp("tok")
    return {kind: train_tokenizer(kind, TEXTS, 80, directory, kind) for kind in ("bpe", "unigram")}


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
@pytest.mark.parametrize("text", SAMPLES)
def test_sentencepiece_round_trip(sp_models: dict[str, Tokenizer], kind: str, text: str) -> None:
    tok = sp_models[kind]
    assert tok.decode(tok.encode(text)) == normalize_whitespace(text)


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_chinese_without_spaces_is_one_word_of_several_pieces(
    sp_models: dict[str, Tokenizer], kind: str
) -> None:
    tok = sp_models[kind]
    pieces = tok.encode("我爱你")
    assert "".join(pieces).lstrip("▁") == "我爱你"
    assert tok.word_ids(pieces) == [0] * len(pieces)


def test_unseen_character_survives_decode(sp_models: dict[str, Tokenizer]) -> None:
    tok = sp_models["unigram"]
    assert tok.decode(tok.encode("鑫 cat")) == "鑫 cat"
    assert tok.decode(["▁the", "<unk>", "▁cat"]) == "the<unk> cat"


def test_word_ids_for_subword_pieces(sp_models: dict[str, Tokenizer]) -> None:
    assert WordTokenizer().word_ids(["a", "b", "c"]) == [0, 1, 2]
    tok = sp_models["bpe"]  # word_ids looks only at the pieces given
    pieces = ["▁The", "▁c", "at", "▁", "我", "爱", "▁s", "a", "t", "."]
    assert tok.word_ids(pieces) == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert tok.word_ids(["at", "▁x"]) == [0, 1]  # a first piece always starts word 0
    assert tok.word_ids([]) == []


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_word_ids_match_whitespace_words(sp_models: dict[str, Tokenizer], kind: str) -> None:
    tok = sp_models[kind]
    text = "Zwei junge Männer spielen 我爱你 Fußball."
    pieces = tok.encode(text)
    ids = tok.word_ids(pieces)
    assert ids[0] == 0 and ids[-1] == len(text.split()) - 1
    words = ["" for _ in text.split()]
    for piece, w in zip(pieces, ids, strict=True):
        words[w] += piece.replace("▁", "")
    assert words == text.split()


@pytest.mark.parametrize("kind", ["bpe", "unigram", "word"])
def test_save_load_round_trip(sp_models: dict[str, Tokenizer], tmp_path: Path, kind: str) -> None:
    tok = sp_models[kind] if kind != "word" else WordTokenizer(lowercase=True)
    tok.save(tmp_path / "m", "src")
    loaded = load_tokenizer(tmp_path / "m", "src")
    assert type(loaded) is type(tok) and loaded.kind == kind
    for text in SAMPLES:
        assert loaded.encode(text) == tok.encode(text)
    assert type(tok).load(tmp_path / "m", "src").encode("我爱你") == tok.encode("我爱你")
    assert Tokenizer.load(tmp_path / "m", "src").kind == kind


def test_files_on_disk(sp_models: dict[str, Tokenizer], tmp_path: Path) -> None:
    sp_models["bpe"].save(tmp_path, "tgt")
    assert (tmp_path / "tgt.model").is_file()
    assert json.loads((tmp_path / "tgt.json").read_text()) == {"kind": "bpe", "lowercase": False}
    train_tokenizer("word", [], 0, tmp_path, "w", lowercase=True)
    assert json.loads((tmp_path / "w.json").read_text()) == {"kind": "word", "lowercase": True}


def test_bare_sentencepiece_model_loads_without_json(sp_models: dict[str, Tokenizer], tmp_path: Path) -> None:
    sp_models["unigram"].save(tmp_path, "x")
    (tmp_path / "x.json").unlink()
    loaded = load_tokenizer(tmp_path, "x")
    assert loaded.kind == "unigram" and loaded.encode("我爱你") == sp_models["unigram"].encode("我爱你")


def test_training_is_deterministic(tmp_path: Path) -> None:
    for kind in ("bpe", "unigram"):
        train_tokenizer(kind, TEXTS, 60, tmp_path, f"{kind}1")
        train_tokenizer(kind, TEXTS, 60, tmp_path, f"{kind}2")
        assert (tmp_path / f"{kind}1.model").read_bytes() == (tmp_path / f"{kind}2.model").read_bytes()


def test_training_is_quiet(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    train_tokenizer("unigram", TEXTS, 60, tmp_path, "q")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_tiny_corpus_does_not_crash(tmp_path: Path) -> None:
    tok = train_tokenizer("bpe", ["ab", "abc"], 1000, tmp_path, "tiny")  # soft vocab limit
    assert tok.decode(tok.encode("abc ab")) == "abc ab"


def test_word_tokenizer() -> None:
    tok = WordTokenizer()
    assert tok.encode("  Hello\tbig  world ") == ["Hello", "big", "world"]
    assert tok.encode("   ") == []
    assert tok.decode(["Hello", "world"]) == "Hello world"
    # a no-break space is a character, not a word break (French "Va !")
    assert WordTokenizer(lowercase=True).encode("Va\xa0! OK") == ["va\xa0!", "ok"]


def test_lowercase_sentencepiece(tmp_path: Path) -> None:
    tok = train_tokenizer("bpe", TEXTS, 80, tmp_path, "lc", lowercase=True)
    assert tok.decode(tok.encode("The CAT")) == "the cat"
    assert load_tokenizer(tmp_path, "lc").lowercase is True


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown tokenizer kind 'char'"):
        train_tokenizer("char", TEXTS, 50, tmp_path, "x")
    with pytest.raises(UserError, match="no text to train"):
        train_tokenizer("bpe", ["", "  "], 50, tmp_path, "x")
    with pytest.raises(UserError, match=r"vocab_size 5 is below the \d+ distinct characters"):
        train_tokenizer("unigram", ["abcdefghij"], 5, tmp_path, "x")
    with pytest.raises(UserError, match="no tokenizer 'nope'"):
        load_tokenizer(tmp_path, "nope")
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(UserError, match=r"bad\.model is not a usable sentencepiece"):
        load_tokenizer(tmp_path, "bad")
    (tmp_path / "bad.json").write_text('{"kind": "bpe", "lowercase": false}')
    with pytest.raises(UserError, match=r"bad\.model is not a usable sentencepiece"):
        load_tokenizer(tmp_path, "bad")  # with the JSON, the model itself is still checked
    (tmp_path / "gone.json").write_text('{"kind": "unigram"}')
    with pytest.raises(UserError, match=r"model not found: .*gone\.model"):
        load_tokenizer(tmp_path, "gone")
    (tmp_path / "bad2.json").write_text("{not json")
    with pytest.raises(UserError, match=r"bad2\.json"):
        load_tokenizer(tmp_path, "bad2")
    WordTokenizer().save(tmp_path, "w")
    with pytest.raises(UserError, match="not a SentencePieceTokenizer"):
        SentencePieceTokenizer.load(tmp_path, "w")
