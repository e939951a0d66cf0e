"""The live translate loop: lines translated and written as they arrive (fairseq-interactive, Marian's decoder).

``attnmt translate`` reads a terminal or a pipe this way, so that it can sit behind another program:
each group of ``buffer`` lines (1 by default) is translated as soon as it is complete, and its output
is flushed before the next line is read. End of input (Ctrl-D on a terminal, the writer closing the
pipe) translates what is left and ends. A regular file on stdin (``< file``) is read whole and batched
by length instead, which is faster.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from attnmt.data.corpus import _GZIP_MAGIC, _clean
from attnmt.errors import UserError

__all__ = ["is_live", "live_lines", "in_groups"]

_BOM = "\ufeff"


def is_live(stream) -> bool:
    """Whether ``stream`` (a text or binary file object) is a terminal, pipe or socket, not a regular file."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # an in-memory stream
        return False
    return not stat.S_ISREG(mode)


def _decode(raw: bytes, name: str, number: int) -> str:
    if number == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"{name} is UTF-16 text; send UTF-8, e.g. iconv -f utf-16 -t utf-8")
    if number == 1 and raw.startswith(_GZIP_MAGIC):
        raise UserError(f"{name} is gzip data; the live translate loop reads plain UTF-8 lines: decompress it "
                        "(zcat FILE | attnmt translate ...) or pass --input FILE.gz")
    if b"\x00" in raw:
        raise UserError(f"{name}:{number} looks binary (NUL byte); send UTF-8 text, one sentence a line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{name}:{number} is not valid UTF-8 (byte 0x{raw[e.start]:02x} at byte column "
                        f"{e.start + 1}); convert the input to UTF-8, e.g. iconv -f latin1 -t utf-8") from None
    text = text[:-1] if text.endswith("\n") else text
    text = text[:-1] if text.endswith("\r") else text
    if number == 1 and text.startswith(_BOM):
        text = text[1:]
    return _clean(text)


def live_lines(stream: BinaryIO, name: str = "<stdin>") -> Iterator[str]:
    """The lines of a binary stream, each as soon as it is complete, checked as :func:`read_stream` checks."""
    for number, raw in enumerate(iter(stream.readline, b""), start=1):
        yield _decode(raw, name, number)


def in_groups(lines: Iterable[str], size: int, handle: Callable[[list[str], int], None]) -> int:
    """Call ``handle(group, index of its first line)`` for every ``size`` lines, and for the rest at the end.

    Returns the number of lines. A group is handled as soon as its last line has been read.
    """
    if size < 1:
        raise UserError(f"buffer={size} is out of range; allowed: 1 or more lines translated together")
    group: list[str] = []
    count = 0
    for line in lines:
        group.append(line)
        count += 1
        if len(group) == size:
            handle(group, count - size)
            group = []
    if group:
        handle(group, count - len(group))
    return count
