"""Reading parallel / TSV / monolingual text, its errors, and pair filtering."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from attnmt.data.corpus import FilterStats, filter_pairs, lines_over, read_lines, read_parallel, read_stream, read_tsv
from attnmt.errors import UserError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def write(path: Path, data: bytes) -> Path:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", ["t.txt", "t.txt.gz"])
@pytest.mark.parametrize("data, lines", [(b"", 0), (b"a", 1), (b"a\n", 1), (b"a\nb", 2), (b"a\r\nb\r\n", 2),
                                         (b"\n" * 3_000_000, 3_000_000)])
def test_lines_over_counts_the_lines_read_lines_gives(tmp_path: Path, name: str, data: bytes, lines: int) -> None:
    path = write(tmp_path / name, data)
    assert [lines_over(path, n) for n in (lines - 1, lines, lines + 1)] == [True, False, False]
    if lines < 10:
        assert len(read_lines(path)) == lines


def test_lines_over_leaves_a_fifo_unread(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert lines_over(fifo, 0) is False  # no open: a FIFO without a writer would block


def test_read_parallel_plain_and_gz(tmp_path: Path) -> None:
    src = write(tmp_path / "a.de.gz", "Ein Hund.\nZwei Männer.\n".encode())
    tgt = write(tmp_path / "a.en", b"A dog.\r\nTwo men.")  # CR LF, no final newline
    assert read_parallel(src, tgt) == [("Ein Hund.", "A dog."), ("Zwei Männer.", "Two men.")]


def test_bom_removed_on_first_line_only(tmp_path: Path) -> None:
    path = write(tmp_path / "x.txt", "\ufeffeins\n\ufeffzwei\n".encode())
    assert read_lines(path) == ["eins", "\ufeffzwei"]


def test_empty_lines_are_kept_as_pairs(tmp_path: Path) -> None:
    src = write(tmp_path / "s", b"a\n\nc\n")
    tgt = write(tmp_path / "t", b"x\ny\n\n")
    assert read_parallel(src, tgt) == [("a", "x"), ("", "y"), ("c", "")]


def test_missing_file_is_named(tmp_path: Path) -> None:
    tgt = write(tmp_path / "t.en", b"x\n")
    with pytest.raises(UserError, match=r"not found: .*nope\.de"):
        read_parallel(tmp_path / "nope.de", tgt)


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    src = write(tmp_path / "s.de", "gut\nschön\n".encode("latin-1"))
    tgt = write(tmp_path / "t.en", b"good\nnice\n")
    with pytest.raises(UserError, match=r"s\.de:2 is not valid UTF-8 \(byte 0xf6"):
        read_parallel(src, tgt)


def test_invalid_utf8_inside_gz_names_line(tmp_path: Path) -> None:
    path = write(tmp_path / "s.gz", b"ok\nok\n\xff\n")
    with pytest.raises(UserError, match=r"s\.gz:3 is not valid UTF-8"):
        read_lines(path)


def test_line_count_mismatch_gives_both_files_and_counts(tmp_path: Path) -> None:
    src = write(tmp_path / "s.de", b"a\nb\nc\n")
    tgt = write(tmp_path / "t.en", b"x\ny\n")
    with pytest.raises(UserError) as e:
        read_parallel(src, tgt)
    message = str(e.value)
    assert "s.de has 3 lines" in message and "t.en has 2" in message
    assert "\n" not in message


def test_nul_byte_is_binary(tmp_path: Path) -> None:
    path = write(tmp_path / "b.txt", b"fine\nbad\x00byte\n")
    with pytest.raises(UserError, match=r"b\.txt:2 looks binary \(NUL byte\)"):
        read_lines(path)


def test_gzip_data_without_gz_suffix(tmp_path: Path) -> None:
    path = tmp_path / "train.de"
    path.write_bytes(gzip.compress(b"hallo\n"))
    with pytest.raises(UserError, match=r"gzip-compressed but its name does not end in \.gz"):
        read_lines(path)


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "x.gz"
    path.write_bytes(b"plain text, not gzip\n")
    with pytest.raises(UserError, match=r"x\.gz is not a valid gzip file"):
        read_lines(path)


def test_utf16_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "u.txt", "hello\n".encode("utf-16"))
    with pytest.raises(UserError, match="UTF-16"):
        read_lines(path)


def test_control_characters_do_not_split_lines(tmp_path: Path) -> None:
    # \v, \f, \x1c, \x85 and U+2028 are line breaks for str.splitlines; here they stay inside the
    # line (as spaces), so both sides keep 2 lines and stay aligned. TAB is kept.
    src = write(tmp_path / "s", "a\vb\fc\x1cd\x85e\u2028f\x07g\tt\rh\nzwei\n".encode())
    tgt = write(tmp_path / "t", b"one\ntwo\n")
    pairs = read_parallel(src, tgt)
    assert pairs == [("a b c d e f g\tt h", "one"), ("zwei", "two")]


def test_read_stream_plain_and_gzip() -> None:
    assert read_stream(io.BytesIO("\ufeffeins\r\nzwei\n".encode())) == ["eins", "zwei"]
    assert read_stream(io.BytesIO(gzip.compress("我爱你\n".encode()))) == ["我爱你"]
    with pytest.raises(UserError, match=r"<stdin>:2 is not valid UTF-8"):
        read_stream(io.BytesIO(b"ok\n\xe4\n"))
    with pytest.raises(UserError, match=r"input:1 looks binary"):
        read_stream(io.BytesIO(b"a\x00"), "input")


def test_tsv_bom_extra_column_trailing_empty_line(tmp_path: Path) -> None:
    data = "\ufeffHi.\t嗨。\tCC-BY 2.0 (France) #1\nRun.\t你用跑的。\tCC-BY #2\n\n".encode()
    path = write(tmp_path / "cmn-eng.tsv.gz", data)
    assert read_tsv(path) == [("Hi.", "嗨。"), ("Run.", "你用跑的。")]
    assert read_tsv(path, src_col=1, tgt_col=0) == [("嗨。", "Hi."), ("你用跑的。", "Run.")]


def test_tsv_too_few_columns_names_line(tmp_path: Path) -> None:
    path = write(tmp_path / "p.tsv", b"a\tb\nc\nd\te\n")
    with pytest.raises(UserError, match=r"p\.tsv:2 has 1 column\(s\)"):
        read_tsv(path)


def test_tsv_empty_line_in_the_middle_names_line(tmp_path: Path) -> None:
    path = write(tmp_path / "p.tsv", b"a\tb\n\nd\te\n")
    with pytest.raises(UserError, match=r"p\.tsv:2 is empty"):
        read_tsv(path)


def test_tsv_bad_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "p.tsv", b"a\tb\n")
    with pytest.raises(UserError, match="two different column numbers"):
        read_tsv(path, src_col=1, tgt_col=1)


def test_filter_pairs_counts_and_indices() -> None:
    pairs = [
        (["a"], ["b"]),  # kept
        ([], ["b"]),  # empty source
        (["a"] * 4, ["b"]),  # too long
        (["a"] * 3, ["b"] * 3),  # kept: exactly max_len
        (["a"], []),  # empty target
        ([], ["b"] * 9),  # empty wins over too long
    ]
    kept, stats = filter_pairs(pairs, max_len=3)
    assert kept == [0, 3]
    assert stats == FilterStats(total=6, kept=2, empty=3, too_long=1)
    assert "kept 2 of 6" in str(stats)
    assert filter_pairs(pairs, max_len=None)[0] == [0, 2, 3]


def test_filter_pairs_rejects_bad_max_len() -> None:
    with pytest.raises(UserError):
        filter_pairs([], max_len=0)


@pytest.mark.skipif(not (SHARED / "tatoeba").is_dir(), reason="../shared/data/tatoeba not present")
def test_real_tatoeba_cmn_eng() -> None:
    pairs = read_tsv(SHARED / "tatoeba" / "cmn-eng.tsv.gz")
    assert len(pairs) == 29155  # the README's count: BOM and final empty line handled
    assert pairs[0] == ("Hi.", "嗨。")
    assert all(en and zh for en, zh in pairs)


@pytest.mark.skipif(not (SHARED / "multi30k").is_dir(), reason="../shared/data/multi30k not present")
def test_real_multi30k_val() -> None:
    pairs = read_parallel(SHARED / "multi30k" / "val.de.gz", SHARED / "multi30k" / "val.en.gz")
    assert len(pairs) == 1014
