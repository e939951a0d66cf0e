"""Reading parallel and monolingual text, and filtering sentence pairs by length.

Every reader returns whole lines as ``str``; problems with the input (missing file, invalid UTF-8,
a binary file, misaligned parallel files, a short TSV row) raise :class:`attnmt.errors.UserError`
with the file and line, so the user can fix the data instead of reading a traceback.

Files are read a line at a time, and no line may be longer than :data:`MAX_LINE_BYTES` (1 MiB): a
longer one is refused naming ``file:line`` and the limit (training data may drop it instead, and
count it: ``dropped``), so memory never grows with a line, even one that never ends (``/dev/zero``,
a file without newlines). :func:`iter_lines` and :func:`iter_parallel` stream; the ``read_*``
functions return lists.

Lines are split on ``\\n`` only, never with ``str.splitlines``: that also splits on ``\\v``,
``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, which occur inside real sentences and
would silently shift line *i* of one side against line *i* of the other.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import BinaryIO

from attnmt.errors import UserError

__all__ = ["MAX_LINE_BYTES", "FilterStats", "filter_pairs", "iter_lines", "iter_parallel", "read_lines",
           "read_parallel", "read_stream", "read_tsv"]

PathLike = str | Path

MAX_LINE_BYTES = 1 << 20  # the longest line a reader accepts, in bytes (1 MiB): a sentence is far shorter
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"
# C0/C1 control characters other than TAB, plus the Unicode line and paragraph separators. They are
# invisible, tokenizers treat them inconsistently (sentencepiece keeps them as unknown pieces), and
# Moses' remove-non-printing-char drops them too, so a reader turns each into a plain space.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def line_too_long(name: str, number: int, limit: int = MAX_LINE_BYTES) -> UserError:
    """The error for line `number` of `name` being longer than `limit` bytes."""
    return UserError(f"{name}:{number} is longer than {limit:,} bytes, the limit for one line; split it into "
                     "sentences, one a line (or check that this is a text file)")


def _binary(name: str, number: int) -> UserError:
    return UserError(f"{name}:{number} looks binary (NUL byte); give a UTF-8 text file, one sentence a line")


def decode_line(raw: bytes, name: str, number: int) -> str:
    """One raw line (with or without its LF or CR LF) as text, checked: UTF-16, NUL bytes, invalid UTF-8
    are one-line errors naming ``name:number``; a BOM at the start of line 1 is removed. Not cleaned."""
    if number == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"{name} is UTF-16 text; convert it to UTF-8, e.g. iconv -f utf-16 -t utf-8")
    if b"\x00" in raw:
        raise _binary(name, number)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        what = "the input" if name.startswith("<") else "the file"  # <stdin>
        raise UserError(f"{name}:{number} is not valid UTF-8 (byte 0x{raw[e.start]:02x} at byte column "
                        f"{e.start + 1}); convert {what} to UTF-8, e.g. iconv -f latin1 -t utf-8") from None
    # Strip one trailing CR: files written on Windows end lines in CR LF.
    text = text.removesuffix("\n").removesuffix("\r")
    return text.removeprefix(_BOM) if number == 1 else text


def raw_lines(f: BinaryIO, name: str, limit: int = MAX_LINE_BYTES,
              dropped: list[int] | None = None) -> Iterator[bytes | None]:
    """The raw lines of an open binary file, each with its line end, reading at most `limit` + 1 bytes at
    a time. A line longer than `limit` bytes is an error naming ``name:line``, or, when `dropped` is a
    list, skipped (its 0-based number appended to `dropped`) and given as None."""
    number = 0
    while True:
        raw = f.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        if b"\x00" in raw:  # a binary file, not a long line
            raise _binary(name, number)
        if dropped is None:
            raise line_too_long(name, number, limit)
        while (rest := f.readline(limit + 1)) and not rest.endswith(b"\n"):
            pass
        dropped.append(number - 1)
        yield None


@contextlib.contextmanager
def _reading(name: str, gzip_fix: str = "re-download it, or drop the .gz suffix if it is plain text"
             ) -> Iterator[None]:
    """I/O and gzip problems while reading `name` as UserError."""
    try:
        yield
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise UserError(f"{name} is not a valid gzip file ({e}); {gzip_fix}") from None
    except IsADirectoryError:
        raise UserError(f"{name} is a directory, not a text file; give the path of a file") from None
    except FileNotFoundError:
        raise UserError(f"file not found: {name}; check the path") from None
    except OSError as e:
        raise UserError(f"cannot read {name}: {e.strerror or e}; check the file") from None


@contextlib.contextmanager
def open_text(path: PathLike) -> Iterator[BinaryIO]:
    """A plain or ``.gz`` file opened for reading bytes (decompressed), with the problems of opening it,
    and gzip data under a name without .gz, as UserError."""
    path = Path(path)
    with _reading(str(path)):
        f = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    with f:
        if not path.name.endswith(".gz"):
            with _reading(str(path)):
                head = f.peek(2)[:2]
            if head == _GZIP_MAGIC:
                raise UserError(f"{path} is gzip-compressed but its name does not end in .gz; "
                                "rename it to end in .gz (or decompress it)")
        yield f


def _lines_of(f: BinaryIO, name: str, clean: bool, limit: int, dropped: list[int] | None,
              gzip_fix: str = "re-download it, or drop the .gz suffix if it is plain text") -> Iterator[str | None]:
    with _reading(name, gzip_fix):
        for number, raw in enumerate(raw_lines(f, name, limit, dropped), start=1):
            if raw is None:
                yield None
            else:
                text = decode_line(raw, name, number)
                yield _clean(text) if clean else text


def iter_lines(path: PathLike, clean: bool = True, limit: int = MAX_LINE_BYTES,
               dropped: list[int] | None = None) -> Iterator[str | None]:
    """The lines of a plain or ``.gz`` UTF-8 file, one at a time, as :func:`read_lines` gives them.

    With `dropped` a list, a line over `limit` bytes is given as None and its 0-based number appended
    to `dropped`, instead of being an error.
    """
    with open_text(path) as f:
        yield from _lines_of(f, str(path), clean, limit, dropped)


def lines_over(path: PathLike, count: int) -> bool:
    """Whether the regular file at ``path`` (plain or ``.gz``) has more than ``count`` lines, counted in blocks of
    bytes (milliseconds for a million lines) and only as far as line ``count + 1``. False for what is not a
    regular file (a FIFO is read once, by whoever reads its lines)."""
    if not Path(path).is_file():
        return False
    seen, last = 0, b"\n"
    with open_text(path) as f, _reading(str(path)):
        while block := f.read(1 << 20):
            seen += block.count(b"\n")
            last = block[-1:]
            if seen > count:
                return True
    return seen + (last != b"\n") > count


def _read_raw_lines(path: PathLike) -> list[str]:
    """Return the lines of a plain or ``.gz`` UTF-8 file, without line ends and without a BOM.

    A final newline does not start an extra empty line. Control characters are kept; see
    :func:`read_lines` for the cleaned version. Errors name the file and, where one is at fault,
    the line.
    """
    return list(iter_lines(path, clean=False))


def _clean(line: str) -> str:
    """Replace control characters (other than TAB) by spaces; see ``_CONTROL``."""
    return _CONTROL.sub(" ", line)


def read_lines(path: PathLike) -> list[str]:
    """Read a monolingual text file (plain, or gzip when the name ends in ``.gz``), one sentence a line.

    Line ends (LF or CR LF) and a UTF-8 BOM at the start are removed; control characters other than
    TAB become spaces. Raises UserError for a missing file, invalid UTF-8 (``file:line``), a NUL
    byte (a binary file) or a line longer than :data:`MAX_LINE_BYTES`.
    """
    return list(iter_lines(path))


class _Rejoined(io.RawIOBase):
    """A stream whose first bytes were already read: `head`, then the rest of `stream`."""

    def __init__(self, head: bytes, stream: BinaryIO):
        self.head, self.stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.head[:len(buffer)] if self.head else (getattr(self.stream, "read1", None)
                                                         or self.stream.read)(len(buffer))
        self.head = self.head[len(data):]
        buffer[:len(data)] = data
        return len(data)


def stream_lines(stream: BinaryIO, name: str = "<stdin>") -> Iterator[str]:
    """The lines of a binary stream (e.g. ``sys.stdin.buffer``), one at a time, as :func:`read_stream`
    gives them. Gzip data is decompressed, since a stream has no file name whose suffix could say so."""
    with _reading(name):
        head = stream.read(2)
    f: BinaryIO = io.BufferedReader(_Rejoined(head, stream))
    if head == _GZIP_MAGIC:
        f = gzip.GzipFile(fileobj=f, mode="rb")
    yield from _lines_of(f, name, True, MAX_LINE_BYTES, None, "send plain UTF-8 text instead")


def read_stream(stream: BinaryIO, name: str = "<stdin>") -> list[str]:
    """Read monolingual text from a binary stream (e.g. ``sys.stdin.buffer``), like :func:`read_lines`.

    ``name`` stands for the file in error messages. Gzip data is decompressed, since a stream has
    no file name whose suffix could say so.
    """
    return list(stream_lines(stream, name))


def iter_parallel(src_path: PathLike, tgt_path: PathLike,
                  dropped: list[int] | None = None) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of two line-aligned files, one at a time (see :func:`read_parallel`).

    With `dropped` a list, a pair with a side over :data:`MAX_LINE_BYTES` is given as ``("", "")`` and its
    0-based number appended to `dropped` (once), so that pair *i* stays line *i*.
    """
    long_src: list[int] | None = None if dropped is None else []
    long_tgt: list[int] | None = None if dropped is None else []
    sources, targets = iter_lines(src_path, dropped=long_src), iter_lines(tgt_path, dropped=long_tgt)
    n = 0
    missing = object()
    for src, tgt in zip_longest(sources, targets, fillvalue=missing):
        if src is missing or tgt is missing:
            rest = sum(1 for _ in (sources if tgt is missing else targets)) + 1
            lengths = (n + rest, n) if tgt is missing else (n, n + rest)
            raise UserError(
                f"parallel files differ in length: {src_path} has {lengths[0]} lines but {tgt_path} "
                f"has {lengths[1]}; line i of one must translate line i of the other, so realign them"
            )
        if src is None or tgt is None:
            dropped.append(n)
            src = tgt = ""
        n += 1
        yield src, tgt


def read_parallel(src_path: PathLike, tgt_path: PathLike, dropped: list[int] | None = None) -> list[tuple[str, str]]:
    """Read two line-aligned files into (source, target) pairs; line *i* translates line *i*.

    Same rules as :func:`read_lines` for each file; files with different numbers of lines raise
    UserError naming both files and both counts, because pairing them would misalign every line
    after the first missing one. `dropped`: as in :func:`iter_parallel`.
    """
    return list(iter_parallel(src_path, tgt_path, dropped))


def read_tsv(path: PathLike, src_col: int = 0, tgt_col: int = 1,
             dropped: list[int] | None = None) -> list[tuple[str, str]]:
    """Read one (source, target) pair per line from TAB-separated columns ``src_col`` and ``tgt_col``.

    Made for the Tatoeba / manythings.org Anki exports (``English<TAB>other[<TAB>attribution]``):
    extra columns are ignored, a BOM is removed and empty lines at the end of the file are skipped.
    An empty line elsewhere or a line with too few columns raises UserError with ``file:line``.
    `dropped`: as in :func:`iter_parallel`.
    """
    if src_col < 0 or tgt_col < 0 or src_col == tgt_col:
        raise UserError(
            f"bad TSV columns src_col={src_col}, tgt_col={tgt_col} for {path}; "
            "give two different column numbers counted from 0"
        )
    pairs: list[tuple[str, str]] = []
    blank: list[tuple[int, str]] = []  # blank lines since the last other line: skipped at the end of the file
    long: list[int] | None = None if dropped is None else []
    for number, line in enumerate(iter_lines(path, clean=False, dropped=long), start=1):
        if line is not None and not line.strip():
            blank.append((number, line))
            continue
        for row in [*blank, (number, line)]:
            pairs.append(_tsv_pair(path, *row, src_col, tgt_col, dropped))
        blank = []
    return pairs


def _tsv_pair(path: PathLike, number: int, line: str | None, src_col: int, tgt_col: int,
              dropped: list[int] | None) -> tuple[str, str]:
    if line is None:  # over-long, dropped
        dropped.append(number - 1)
        return "", ""
    # Split before cleaning: TAB separates the columns and is not a control character here.
    fields = line.split("\t")
    need = max(src_col, tgt_col) + 1
    if len(fields) < need:
        what = "is empty" if not line.strip() else f"has {len(fields)} column(s)"
        raise UserError(
            f"{path}:{number} {what} but column {need - 1} is needed (src_col={src_col}, "
            f"tgt_col={tgt_col}); each line needs TAB-separated source and target"
        )
    return _clean(fields[src_col]), _clean(fields[tgt_col])


@dataclass(frozen=True)
class FilterStats:
    """What :func:`filter_pairs` kept and why it dropped the rest (each pair counted once)."""

    total: int
    kept: int
    empty: int  # a side with no tokens: nothing to learn and a zero-length sequence for the RNN
    too_long: int  # a side longer than max_len tokens

    def __str__(self) -> str:
        return (
            f"kept {self.kept:,} of {self.total:,} pairs "
            f"(dropped {self.empty:,} with an empty side, {self.too_long:,} too long)"
        )


def filter_pairs(
    pairs_tokens: Sequence[tuple[Sequence[str], Sequence[str]]], max_len: int | None
) -> tuple[list[int], FilterStats]:
    """Select the pairs of token sequences worth training on.

    Drops a pair when either side is empty, or (with ``max_len`` not None) when either side has
    more than ``max_len`` tokens, counted before BOS/EOS are added. A pair with one side empty and
    the other too long counts as empty. Returns the indices of the kept pairs (so that the caller
    can select the matching raw text, ids, ... alike) and the counts.
    """
    if max_len is not None and max_len < 1:
        raise UserError(f"max_len must be at least 1 (got {max_len}); fix the data settings")
    kept: list[int] = []
    empty = too_long = 0
    for i, (src, tgt) in enumerate(pairs_tokens):
        if not src or not tgt:
            empty += 1
        elif max_len is not None and (len(src) > max_len or len(tgt) > max_len):
            too_long += 1
        else:
            kept.append(i)
    total = len(kept) + empty + too_long
    return kept, FilterStats(total=total, kept=len(kept), empty=empty, too_long=too_long)
