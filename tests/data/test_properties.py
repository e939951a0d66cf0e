"""Property-based tests (hypothesis) over what users feed attnmt: the corpus readers, the tokenizer
round trip and the translate command with arbitrary text. No crash, no hang, no lost line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from attnmt.cli import main
from attnmt.data.corpus import read_lines, read_parallel, read_stream, read_tsv
from attnmt.data.tokenize import WordTokenizer, normalize_whitespace, train_tokenizer
from attnmt.errors import UserError

pytestmark = pytest.mark.timeout(120)  # a hang fails instead of blocking the run

# Text as users have it: every code point but surrogates (which UTF-8 cannot hold), with the
# awkward ones over-represented: controls, zero-width and bidi marks, line separators, CR.
AWKWARD = "\x00\x01\x09\x0b\x0c\x0d\x1b\x1c\x7f\x85\xa0\u200b\u200c\u200d\u200e\u200f\u202a\u202e\u2028\u2029" \
          "\u3000\ufeff\ufffd"
chars = st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(AWKWARD), st.sampled_from(" \n\t"))
texts = st.text(chars, max_size=200)
CLEANED = set(chr(c) for c in [*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029])
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def expected_lines(data: bytes) -> int:
    """Lines of a file: split on \\n only, a final newline ends the last line rather than starting one."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- corpus readers ------------------------------------------------------------------------------

@FAST
@given(data=st.one_of(st.binary(max_size=300), texts.map(lambda t: t.encode("utf-8"))))
@example(data=b"\xef\xbb\xbfbom\r\nline\x85two\xe2\x80\xa8three\n")
@example(data=b"\xff\xfe\x00a")
def test_read_lines_keeps_every_line_or_says_which(tmp_path_factory, data):
    path = write(tmp_path_factory.mktemp("r"), "in.txt", data)
    try:
        lines = read_lines(path)
    except UserError as e:
        message = str(e)
        assert "\n" not in message and str(path) in message
        return
    assert len(lines) == expected_lines(data)
    assert not any(c in CLEANED for line in lines for c in line)  # controls became spaces
    with io.BytesIO(data) as stream:
        assert read_stream(stream, "<stdin>") == lines


def cleaned(line: str) -> str:
    """What a reader makes of one raw line: one CR of a CR LF dropped, control characters as spaces."""
    line = line[:-1] if line.endswith("\r") else line
    return "".join(" " if c in CLEANED else c for c in line)


@FAST
@given(src=st.lists(texts.filter(lambda t: "\n" not in t), max_size=8), data=st.data())
def test_read_parallel_keeps_line_i_with_line_i(tmp_path_factory, src, data):
    tgt = data.draw(st.lists(texts.filter(lambda t: "\n" not in t), min_size=len(src), max_size=len(src)))
    src = [f"{i}|{s}" for i, s in enumerate(src)]
    tgt = [f"{i}|{t}" for i, t in enumerate(tgt)]
    directory = tmp_path_factory.mktemp("p")
    a = write(directory, "a", "".join(s + "\n" for s in src).encode("utf-8"))
    b = write(directory, "b", "".join(t + "\n" for t in tgt).encode("utf-8"))
    try:
        pairs = read_parallel(a, b)
    except UserError as e:
        assert "\x00" in "".join(src + tgt) and "looks binary" in str(e)  # only a NUL byte is refused
        return
    assert pairs == [(cleaned(s), cleaned(t)) for s, t in zip(src, tgt)]


@FAST
@given(data=st.one_of(st.binary(max_size=200), texts.map(lambda t: t.encode("utf-8"))))
def test_read_tsv_returns_pairs_or_one_line_error(tmp_path_factory, data):
    path = write(tmp_path_factory.mktemp("t"), "in.tsv", data)
    try:
        pairs = read_tsv(path)
    except UserError as e:
        assert "\n" not in str(e) and str(path) in str(e)
        return
    assert all(isinstance(s, str) and isinstance(t, str) for s, t in pairs)
    assert len(pairs) <= expected_lines(data)


# --- tokenizers ----------------------------------------------------------------------------------

@FAST
@given(text=texts)
def test_word_tokenizer_round_trip(text):
    tok = WordTokenizer()
    pieces = tok.encode(text)
    assert tok.decode(pieces) == normalize_whitespace(text)
    assert all(p and " " not in p for p in pieces)
    assert tok.word_ids(pieces) == list(range(len(pieces)))


SP_TEXTS = ["The cat sat on the mat.", "Ça va ? Très bien, merci.", "我爱 Paris 和 Москва 2024",
            "שלום עולם", "zero\u200bwidth and \u200fmarks", "Zwei junge Männer spielen Fußball."] * 5


@pytest.fixture(scope="module")
def sp_tokenizers(tmp_path_factory):
    directory = tmp_path_factory.mktemp("sp")
    return {kind: train_tokenizer(kind, SP_TEXTS, 60, directory, kind) for kind in ("bpe", "unigram")}


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_sentencepiece_round_trip_on_any_text(sp_tokenizers, text):
    """Characters never seen in training still come back: they stay pieces of their own."""
    for tok in sp_tokenizers.values():
        pieces = tok.encode(text)
        assert tok.decode(pieces) == normalize_whitespace(text)
        ids = tok.word_ids(pieces)
        assert ids == sorted(ids) and (not ids or ids[0] == 0)


# --- the translate command -----------------------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(texts.filter(lambda t: "\n" not in t), max_size=6), final_newline=st.booleans())
@example(lines=["", "\u202eabc\u200b", "a\x0bb\x0cc\x1cd\x85e\u2028f", "\r"], final_newline=True)
def test_translate_command_on_any_text(tiny_model, tmp_path_factory, capsys, lines, final_newline):
    directory = tmp_path_factory.mktemp("tr")
    text = "\n".join(lines) + ("\n" if final_newline and lines else "")
    src = write(directory, "in.txt", text.encode("utf-8"))
    out = directory / "out.txt"
    code = main(["translate", "--model", str(tiny_model), "--input", str(src), "--output", str(out), "--beam", "2"])
    err = capsys.readouterr().err
    if "\x00" in text:  # a NUL byte: refused as a binary file, naming the line
        assert code == 2 and err.count("\n") == 1 and f"{src}:" in err and "looks binary" in err
        assert not out.exists()
        return
    assert code == 0, err
    assert err == ""
    written = out.read_text(encoding="utf-8")
    assert written.count("\n") == expected_lines(text.encode("utf-8"))


def test_translate_command_on_a_very_long_line_is_refused_quickly(tiny_model, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("a b\n" + "word " * 200_000 + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(tiny_model), "--input", str(src)]) == 2
    assert capsys.readouterr().err == (f"attnmt: error: {src}:2 has 200,000 tokens, more than the 512 this translator "
                                       "accepts; split long lines into sentences\n")
