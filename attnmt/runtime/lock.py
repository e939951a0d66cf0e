"""One process at a time writes a model folder: a lock per folder.

`lock_folder` takes an exclusive `fcntl.flock` on MODEL_DIR/.lock and writes the process id and the command
into it; a second train, resume, fine-tune, average or prepare of that folder is refused with one line naming the
process that holds it. The kernel releases the lock when the process ends, however it ends (a kill, a
crash), so a lock is never stale. The file may be removed by its holder (a run that leaves the folder as
it found it): a process that locked a file that has since been unlinked sees that its file is no longer the
folder's and tries again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from attnmt.errors import UserError

LOCK = ".lock"


class FolderLock:
    """A held lock on a folder; `release` (or the process's end) lets the next process in."""

    def __init__(self, folder: Path, fd: int):
        self.folder, self.fd = folder, fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the file releases the flock
            self.fd = -1


def _holder(fd: int) -> str:
    """Who holds the lock, as the holder wrote it: "attnmt train (process 1234)"."""
    try:
        pid, _, command = os.pread(fd, 200, 0).decode("utf-8", "replace").strip().partition(" ")
    except OSError:
        return "another process"
    return f"{command or 'another attnmt command'} (process {pid})" if pid.isdigit() else "another process"


def lock_folder(folder: Path, command: str) -> FolderLock:
    """Hold ``folder``'s lock for ``command`` (e.g. "attnmt train"); a folder that another process holds is a
    UserError naming that process. The folder must exist."""
    for _ in range(10):  # another try only when the file was removed between opening and locking it
        fd = _try_lock(folder, folder / LOCK)
        if fd is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
            return FolderLock(folder, fd)
    raise UserError(f"model folder {folder}: its lock file {LOCK} keeps being removed by another process; "
                    "run this command again once nothing else uses the folder")


def _try_lock(folder: Path, path: Path) -> int | None:
    """The locked file's descriptor, or None when the file was unlinked meanwhile."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise UserError(f"model folder {folder}: cannot create its lock file {LOCK} ({e.strerror or e}); choose a "
                        "folder that can be written") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise UserError(f"model folder {folder} is in use by {holder}; wait until it ends (or stop it), then run "
                        "this command again") from None
    try:
        current = os.stat(path).st_ino
    except FileNotFoundError:
        current = None
    if current != os.fstat(fd).st_ino:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def folder_locked(folder: Path, command: str) -> Iterator[FolderLock]:
    """`lock_folder` for the length of a block."""
    lock = lock_folder(folder, command)
    try:
        yield lock
    finally:
        lock.release()
