"""The live translate loop: lines translated and written as they arrive (fairseq-interactive, Marian's decoder).

``attnmt translate`` reads standard input in one of three ways, by what it is:

* a terminal: line by line, each translation written as soon as its line is typed;
* a pipe or socket: in groups of the lines that are ready (:func:`ready_groups`). The first line of a group is
  waited for; every further complete line already readable joins it, up to 1,000 lines; the group is
  translated (batched by length, as ``--input FILE``), written and flushed, and the next group begins. A
  program that writes one line and waits for its answer gets it at once; ``cat file |`` gives groups of up
  to 1,000 lines, as fast as ``--input FILE``. Readiness is asked of the file descriptor (``select`` with
  timeout 0) and the bytes read with ``os.read`` into a buffer of the reader's own, so that no Python
  buffer holds lines that ``select`` cannot see;
* a regular file (``< file``): 1,000 lines at a time, each group batched by length.

``--buffer N`` translates every N lines together, as soon as the N-th is read, whatever stdin is. End of input
(Ctrl-D on a terminal, the writer closing the pipe) translates what is left and ends. Lines are checked as a
file's are (:mod:`attnmt.data.corpus`): invalid UTF-8 or a NUL byte (naming the line), a line over 1 MiB; gzip
data on a terminal or pipe is refused with how to decompress it (a gzip file on stdin is decompressed).
"""

from __future__ import annotations

import io
import os
import select
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from attnmt.data.corpus import _GZIP_MAGIC, MAX_LINE_BYTES, _binary, _clean, decode_line, line_too_long, raw_lines
from attnmt.errors import UserError

__all__ = ["is_live", "live_lines", "in_groups", "ready_groups"]

def is_live(stream) -> bool:
    """Whether ``stream`` (a text or binary file object) is a terminal, pipe or socket, not a regular file."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # an in-memory stream
        return False
    return not stat.S_ISREG(mode)


def _gzip_refusal(name: str) -> UserError:
    return UserError(f"{name} is gzip data; the live translate loop reads plain UTF-8 lines: decompress it "
                     "(zcat FILE | attnmt translate ...) or pass --input FILE.gz")


def live_lines(stream: BinaryIO, name: str = "<stdin>") -> Iterator[str]:
    """The lines of a binary stream, each as soon as it is complete, checked as :func:`read_stream` checks
    (a line longer than MAX_LINE_BYTES too: memory never holds more than one line)."""
    for number, raw in enumerate(raw_lines(stream, name), start=1):
        if number == 1 and raw.startswith(_GZIP_MAGIC):
            raise _gzip_refusal(name)
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


def ready_groups(stream: BinaryIO, size: int, name: str = "<stdin>") -> Iterator[list[str]]:
    """Groups of the lines of a pipe or socket: each waits for its first line, then takes every further complete
    line already readable, up to ``size``. Lines are checked as :func:`live_lines` checks them."""
    reader = _ReadyReader(stream.fileno(), name)
    while True:
        group = reader.take(size)
        while not group and not reader.eof:
            reader.read(wait=True)
            group = reader.take(size)
        if not group:
            return
        while len(group) < size and reader.read(wait=False):
            group += reader.take(size - len(group))
        yield group


class _ReadyReader:
    """The bytes of a file descriptor in a buffer of its own, given as checked lines (:func:`ready_groups`)."""

    def __init__(self, fd: int, name: str):
        self.fd, self.name = fd, name
        self.buffer = bytearray()
        self.number = 0  # lines given so far
        self.eof = False

    def read(self, wait: bool) -> bool:
        """Read what is there (with ``wait``, block until something is); False if nothing was ready."""
        if self.eof or not wait and not select.select([self.fd], [], [], 0)[0]:
            return False
        data = os.read(self.fd, 1 << 16)
        self.eof = not data
        self.buffer += data
        return True

    def take(self, most: int) -> list[str]:
        """Up to ``most`` complete lines from the buffer (after the end of input, the unfinished last one too)."""
        if self.number == 0 and self.buffer.startswith(_GZIP_MAGIC):
            raise _gzip_refusal(self.name)
        lines, start = [], 0
        while len(lines) < most:
            end = self.buffer.find(b"\n", start)
            if end < 0:
                end = len(self.buffer) if self.eof and start < len(self.buffer) else -1
            if end < 0 or end - start > MAX_LINE_BYTES:
                self._check_unfinished(start, end)
                break
            self.number += 1
            lines.append(_clean(decode_line(bytes(self.buffer[start:end]), self.name, self.number)))
            start = end + 1
        del self.buffer[:start]
        return lines

    def _check_unfinished(self, start: int, end: int) -> None:
        """Refuse a line longer than MAX_LINE_BYTES, finished (``end``) or not yet, as :func:`raw_lines` does."""
        if (end if end >= 0 else len(self.buffer)) - start <= MAX_LINE_BYTES:
            return
        if b"\x00" in self.buffer[start:start + MAX_LINE_BYTES + 1]:
            raise _binary(self.name, self.number + 1)
        raise line_too_long(self.name, self.number + 1)
