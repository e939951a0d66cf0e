"""Reading parallel and monolingual text, and filtering sentence pairs by length.

Every reader returns whole lines as ``str``; problems with the input (missing file, invalid UTF-8,
a binary file, misaligned parallel files, a short TSV row) raise :class:`attnmt.errors.UserError`
with the file and line, so the user can fix the data instead of reading a traceback.

Lines are split on ``\\n`` only, never with ``str.splitlines``: that also splits on ``\\v``,
``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, which occur inside real sentences and
would silently shift line *i* of one side against line *i* of the other.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from attnmt.errors import UserError

__all__ = ["FilterStats", "filter_pairs", "read_lines", "read_parallel", "read_stream", "read_tsv"]

PathLike = str | Path

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"
# C0/C1 control characters other than TAB, plus the Unicode line and paragraph separators. They are
# invisible, tokenizers treat them inconsistently (sentencepiece keeps them as unknown pieces), and
# Moses' remove-non-printing-char drops them too, so a reader turns each into a plain space.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _read_raw_lines(path: PathLike) -> list[str]:
    """Return the lines of a plain or ``.gz`` UTF-8 file, without line ends and without a BOM.

    A final newline does not start an extra empty line. Control characters are kept; see
    :func:`read_lines` for the cleaned version. Errors name the file and, where one is at fault,
    the line.
    """
    path = Path(path)
    data = _read_bytes(path)
    if not path.name.endswith(".gz") and data.startswith(_GZIP_MAGIC):
        raise UserError(
            f"{path} is gzip-compressed but its name does not end in .gz; "
            "rename it to end in .gz (or decompress it)"
        )
    return _decode_lines(data, str(path))


def _decode_lines(data: bytes, path: str) -> list[str]:
    """Split UTF-8 ``data`` into lines (see :func:`_read_raw_lines`); ``path`` names it in errors."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"{path} is UTF-16 text; convert it to UTF-8, e.g. iconv -f utf-16 -t utf-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise UserError(f"{path}:{line} looks binary (NUL byte); give a UTF-8 text file, one sentence a line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise UserError(
            f"{path}:{line} is not valid UTF-8 (byte 0x{data[e.start]:02x} at byte column {column}); "
            "convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8"
        ) from None
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":  # the newline that ends the last line
        lines.pop()
    if lines and lines[0].startswith(_BOM):
        lines[0] = lines[0][1:]
    # Strip one trailing CR per line: files written on Windows end lines in CR LF.
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _read_bytes(path: Path) -> bytes:
    """The (decompressed, for ``.gz``) bytes of ``path``, with I/O problems as UserError."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"file not found: {path}; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory, not a text file; give the path of a file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise UserError(
            f"{path} is not a valid gzip file ({e}); re-download it, or drop the .gz suffix "
            "if it is plain text"
        ) from None
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}; check the file") from None


def _clean(line: str) -> str:
    """Replace control characters (other than TAB) by spaces; see ``_CONTROL``."""
    return _CONTROL.sub(" ", line)


def read_lines(path: PathLike) -> list[str]:
    """Read a monolingual text file (plain, or gzip when the name ends in ``.gz``), one sentence a line.

    Line ends (LF or CR LF) and a UTF-8 BOM at the start are removed; control characters other than
    TAB become spaces. Raises UserError for a missing file, invalid UTF-8 (``file:line``) or a NUL
    byte (a binary file).
    """
    return [_clean(line) for line in _read_raw_lines(path)]


def read_stream(stream: BinaryIO, name: str = "<stdin>") -> list[str]:
    """Read monolingual text from a binary stream (e.g. ``sys.stdin.buffer``), like :func:`read_lines`.

    ``name`` stands for the file in error messages. Gzip data is decompressed, since a stream has
    no file name whose suffix could say so.
    """
    try:
        data = stream.read()
        if data.startswith(_GZIP_MAGIC):
            data = gzip.decompress(data)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise UserError(f"{name} is not valid gzip data ({e}); send plain UTF-8 text instead") from None
    except OSError as e:
        raise UserError(f"cannot read {name}: {e.strerror or e}; check the input") from None
    return [_clean(line) for line in _decode_lines(data, name)]


def read_parallel(src_path: PathLike, tgt_path: PathLike) -> list[tuple[str, str]]:
    """Read two line-aligned files into (source, target) pairs; line *i* translates line *i*.

    Same rules as :func:`read_lines` for each file; files with different numbers of lines raise
    UserError naming both files and both counts, because pairing them would misalign every line
    after the first missing one.
    """
    src = read_lines(src_path)
    tgt = read_lines(tgt_path)
    if len(src) != len(tgt):
        raise UserError(
            f"parallel files differ in length: {src_path} has {len(src)} lines but {tgt_path} "
            f"has {len(tgt)}; line i of one must translate line i of the other, so realign them"
        )
    return list(zip(src, tgt, strict=True))


def read_tsv(path: PathLike, src_col: int = 0, tgt_col: int = 1) -> list[tuple[str, str]]:
    """Read one (source, target) pair per line from TAB-separated columns ``src_col`` and ``tgt_col``.

    Made for the Tatoeba / manythings.org Anki exports (``English<TAB>other[<TAB>attribution]``):
    extra columns are ignored, a BOM is removed and empty lines at the end of the file are skipped.
    An empty line elsewhere or a line with too few columns raises UserError with ``file:line``.
    """
    if src_col < 0 or tgt_col < 0 or src_col == tgt_col:
        raise UserError(
            f"bad TSV columns src_col={src_col}, tgt_col={tgt_col} for {path}; "
            "give two different column numbers counted from 0"
        )
    lines = _read_raw_lines(path)
    while lines and not lines[-1].strip():
        lines.pop()
    need = max(src_col, tgt_col) + 1
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(lines, start=1):
        # Split before cleaning: TAB separates the columns and is not a control character here.
        fields = line.split("\t")
        if len(fields) < need:
            what = "is empty" if not line.strip() else f"has {len(fields)} column(s)"
            raise UserError(
                f"{path}:{number} {what} but column {need - 1} is needed (src_col={src_col}, "
                f"tgt_col={tgt_col}); each line needs TAB-separated source and target"
            )
        pairs.append((_clean(fields[src_col]), _clean(fields[tgt_col])))
    return pairs


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
