"""Corpus files in chunks of whole lines, read and checked as attnmt.data.corpus reads whole files.

`raw_chunks` yields about a megabyte of raw bytes at a time, cut after a newline, with the number of
its first line; `decode_chunk` turns one into lines with the same rules and the same one-line errors
(file:line) as `corpus.read_lines`, and `split_tsv` takes a TSV line's columns as `corpus.read_tsv`
does. Memory stays at a chunk whatever the size of the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from attnmt.data.corpus import _BOM, MAX_LINE_BYTES, _binary, _clean, _reading, iter_parallel, line_too_long, open_text
from attnmt.errors import UserError

CHUNK_BYTES = 1 << 20


def raw_chunks(path: str | Path, size: int | None = None, long: list[int] | None = None,
               blank: bytes = b"") -> Iterator[tuple[int, bytes, bool]]:
    """(number of the chunk's first line counted from 0, bytes ending in a newline or the file's end, first?).

    A line longer than MAX_LINE_BYTES is never held whole: it is an error naming file:line, or, when `long`
    is a list, it comes as `blank` (an empty line; a TSV's empty columns) and its number (from 0) is
    appended to `long`, so that the lines of two parallel files stay paired (training drops the pair).
    """
    path, size = Path(path), size or CHUNK_BYTES
    line0, rest, first = 0, b"", True
    with open_text(path) as f, _reading(str(path)):
        while True:
            block = f.read(size)
            data = rest + block
            if first and line0 == 0 and not rest and data.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise UserError(f"{path} is UTF-16 text; convert it to UTF-8, e.g. iconv -f utf-16 -t utf-8")
            if not block:
                if data:
                    yield line0, data, first
                return
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data if len(data) <= MAX_LINE_BYTES else _skip_long_line(f, data, path, line0, size, long,
                                                                                 blank)
                continue
            chunk, rest = data[:cut], data[cut:]
            if len(chunk) > MAX_LINE_BYTES + 1:  # it may hold a line over the limit
                chunk = _blank_long_lines(chunk, path, line0, long, blank)
            yield line0, chunk, first
            line0 += chunk.count(b"\n")
            first = False


def _blank_long_lines(chunk: bytes, path: Path, line0: int, long: list[int] | None, blank: bytes) -> bytes:
    """The chunk with each line over MAX_LINE_BYTES made empty (numbers appended to `long`), or the error."""
    lines = chunk.split(b"\n")
    for k, line in enumerate(lines):
        if len(line) > MAX_LINE_BYTES:
            _too_long(line, path, line0 + k, long)
            lines[k] = blank
    return b"\n".join(lines)


def _too_long(data: bytes, path: Path, line: int, long: list[int] | None) -> None:
    """Line `line` (from 0) is over MAX_LINE_BYTES: the error, or its number appended to `long`."""
    if b"\x00" in data:
        raise _binary(str(path), line + 1)
    if long is None:
        raise line_too_long(str(path), line + 1)
    long.append(line)


def _skip_long_line(f, data: bytes, path: Path, line0: int, size: int, long: list[int] | None, blank: bytes) -> bytes:
    """Read past the rest of line `line0` (longer than MAX_LINE_BYTES): `blank` in its place, or the error."""
    _too_long(data, path, line0, long)
    while block := f.read(size):
        cut = block.find(b"\n")
        if cut >= 0:
            return blank + b"\n" + block[cut + 1:]
    return blank + b"\n"


def count_lines(path: str | Path, tsv: bool = False, progress=None, long: list[int] | None = None) -> int:
    """Lines of a file (a final newline starts no line); for a TSV, up to its last non-blank line.
    `long`: as in `raw_chunks` (an over-long line counts as a line, blank)."""
    n = 0
    for line0, data, _ in raw_chunks(path, long=long):
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        if tsv:
            stripped = data.rstrip()
            if stripped:
                n = line0 + stripped.count(b"\n") + 1
        else:
            n = line0 + lines
        if progress is not None:
            progress.update(lines)
    return n


def decode_chunk(data: bytes, path: str | Path, line0: int, first: bool, clean: bool = True) -> list[str]:
    """The lines of a chunk of `raw_chunks` (which refuses UTF-16; corpus.decode_line's rules); control
    characters cleaned when `clean`."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise _binary(str(path), line0 + data.count(b"\n", 0, nul) + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = line0 + data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise UserError(f"{path}:{line} is not valid UTF-8 (byte 0x{data[e.start]:02x} at byte column {column}); "
                        "convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8") from None
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if first and lines and lines[0].startswith(_BOM):
        lines[0] = lines[0][1:]
    lines = [line.removesuffix("\r") for line in lines]
    return [_clean(line) for line in lines] if clean else lines


def split_tsv(lines: list[str], path: str | Path, numbers: Iterable[int],
              cols: tuple[int, int]) -> list[tuple[str, str]]:
    """(source, target) of raw TSV lines whose 1-based line numbers are `numbers`."""
    src_col, tgt_col = cols
    need = max(src_col, tgt_col) + 1
    pairs = []
    for number, line in zip(numbers, lines):
        fields = line.split("\t")
        if len(fields) < need:
            what = "is empty" if not line.strip() else f"has {len(fields)} column(s)"
            raise UserError(f"{path}:{number} {what} but column {need - 1} is needed (src_col={src_col}, "
                            f"tgt_col={tgt_col}); each line needs TAB-separated source and target")
        pairs.append((_clean(fields[src_col]), _clean(fields[tgt_col])))
    return pairs


def tsv_blank(cols: tuple[int, int]) -> bytes:
    """An over-long TSV line's stand-in: every column empty."""
    return b"\t" * max(cols)


def iter_corpora(corpora: list[dict], counts: list[int], cols: tuple[int, int]) -> Iterator[tuple[str, str]]:
    """Every pair of the corpora ({src, tgt} files or a {tsv}, with their pair counts), one at a time, in
    line order; a pair with a line over MAX_LINE_BYTES reads as empty."""
    for corpus, n in zip(corpora, counts):
        if not corpus["tsv"]:
            yield from iter_parallel(corpus["src"], corpus["tgt"], dropped=[])
            continue
        for line0, data, first in raw_chunks(corpus["tsv"], long=[], blank=tsv_blank(cols)):
            lines = decode_chunk(data, corpus["tsv"], line0, first, clean=False)[: max(0, n - line0)]
            yield from split_tsv(lines, corpus["tsv"], range(line0 + 1, line0 + 1 + len(lines)), cols)
            if line0 + len(lines) >= n:
                break
