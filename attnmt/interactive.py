"""The live translate loop: lines translated and written as they arrive (fairseq-interactive, Marian's decoder).

``attnmt translate`` reads a terminal or a pipe this way, so that it can sit behind another program:
each group of ``buffer`` lines (1 by default) is translated as soon as it is complete, and its output
is flushed before the next line is read. End of input (Ctrl-D on a terminal, the writer closing the
pipe) translates what is left and ends. A regular file on stdin (``< file``) is read 1,000 lines at a
time instead, each group batched by length, which is faster.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from attnmt.data.corpus import _GZIP_MAGIC, _clean, decode_line, raw_lines
from attnmt.errors import UserError

__all__ = ["is_live", "live_lines", "in_groups"]

def is_live(stream) -> bool:
    """Whether ``stream`` (a text or binary file object) is a terminal, pipe or socket, not a regular file."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # an in-memory stream
        return False
    return not stat.S_ISREG(mode)


def live_lines(stream: BinaryIO, name: str = "<stdin>") -> Iterator[str]:
    """The lines of a binary stream, each as soon as it is complete, checked as :func:`read_stream` checks
    (a line longer than MAX_LINE_BYTES too: memory never holds more than one line)."""
    for number, raw in enumerate(raw_lines(stream, name), start=1):
        if number == 1 and raw.startswith(_GZIP_MAGIC):
            raise UserError(f"{name} is gzip data; the live translate loop reads plain UTF-8 lines: decompress it "
                            "(zcat FILE | attnmt translate ...) or pass --input FILE.gz")
        yield _clean(decode_line(raw, name, number))


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
