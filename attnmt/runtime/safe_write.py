"""The one writer: every file attnmt writes (translations, reports, checkpoints, exports, configs) goes through
`open_output`, so that nothing the user had is lost or half-written.

What a path gets, by what is there:

* nothing, or a regular file: the bytes go to a temporary file in the same folder (``.NAME.<8 hex digits>.partial``),
  flushed and fsynced, then renamed over the name, so that a reader sees the old file or the new one and never half
  of one. An existing file is replaced only when the caller says so (``overwrite``, the commands' --overwrite); the
  new file keeps the old one's permissions.
* a FIFO, a character device (/dev/null, /dev/full, a terminal) or a path under /dev/ or /proc/ (/dev/stdout,
  /dev/fd/3): written to directly and never replaced. Renaming over it would put a regular file where the pipe or
  the device was, and /dev/stdout redirected to a file names the shell's file, which a rename would not reach.
* a symbolic link: written through to its target, which the rules above then apply to (a link to a regular file
  stays a link and its target is replaced atomically, with --overwrite; a link to /dev/null writes to /dev/null).
  A link whose target does not exist is refused: writing it would create a file at a place the command line does
  not name.
* a folder, a socket or a block device: refused. A folder of files written as one (an export) is filled
  beside its name and renamed into place at the end (`output_folder`).

A write that fails (a full disk, an I/O error, a read-only file system) removes the temporary file and is a
`WriteError`: one line naming the file and saying that what was there before is intact.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from attnmt.errors import UserError

# A path the process writes to as a stream, never replaced: its own standard streams and devices.
STREAM_PREFIXES = ("/dev/", "/proc/")
# The temporary files of writes under way; a killed process leaves them, `remove_temporaries` deletes them.
TEMPORARY = ".{name}.{token}.partial"
TEMPORARY_GLOBS = (".*.partial", ".*.pt.*.tmp")  # the second: checkpoints of earlier versions
# What to do about a failed write, by its errno (the reason itself is the system's words)
WHAT_TO_DO = {
    errno.ENOSPC: "free some space and run the command again",
    errno.EDQUOT: "free some space (the disk quota is reached) and run the command again",
    errno.EFBIG: "choose a file system that takes larger files",
    errno.EIO: "check the disk, or write to another one",
    errno.EROFS: "choose a folder on a file system that can be written",
    errno.EACCES: "choose a folder that can be written",
    errno.EPERM: "choose a folder that can be written",
}
# Errors of the written file itself when they come from inside the `with` block (the caller's writes)
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


class WriteError(UserError):
    """A file could not be written (`reason`: the system's words, e.g. No space left on device); what was there
    before is untouched (`kept` says so)."""

    def __init__(self, path: Path, reason: str, kept: str, todo: str):
        self.path, self.reason, self.kept = Path(path), reason, kept
        super().__init__(f"cannot write {path}: {reason}; {kept + '; ' if kept else ''}{todo}")


@dataclass(frozen=True)
class Target:
    """Where the bytes for a path go: ``path`` (a link's target), written directly (``stream``) or through a
    temporary file; ``exists``: a regular file is there."""

    path: Path
    stream: bool
    exists: bool


def resolve(path: str | Path) -> Target:
    """What writing ``path`` means (the module's rules); a folder, a socket, a block device or a link to nothing
    is a UserError naming it."""
    path = Path(path)
    if os.path.abspath(path).startswith(STREAM_PREFIXES):
        return Target(path, stream=True, exists=True)
    real = path
    if path.is_symlink():
        real = Path(os.path.realpath(path))
        if not os.path.lexists(real):
            raise UserError(f"{path} is a symbolic link to {real}, which does not exist; attnmt writes through a "
                            "link only to a file that is there: write to the target's path, or remove the link")
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return Target(real, stream=False, exists=False)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}; choose another output path") from None
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return Target(real, stream=True, exists=True)
    if stat.S_ISREG(mode):
        return Target(real, stream=False, exists=True)
    what = "a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "a block device"
    raise UserError(f"{path} is {what}; choose a file to write")


def check_output(path: str | Path, overwrite: bool) -> Target:
    """Before the work: refuse a path that cannot be written, or a regular file there without ``overwrite``
    (a FIFO or a device is written to, not replaced, and needs no --overwrite)."""
    target = resolve(path)
    if target.exists and not target.stream and not overwrite:
        link = f" (a link to {target.path})" if target.path != Path(path) else ""
        raise UserError(f"{path}{link} exists; choose another output path or pass --overwrite")
    return target


def _failure(path: Path, target: Target, e: OSError, kind: str = "file") -> WriteError:
    if target.stream:
        kept = ""
    elif target.exists:
        kept = f"{target.path.name} still holds its previous contents (the write went to a temporary {kind}, removed)"
    else:
        kept = "no file was left behind"
    return WriteError(path, e.strerror or str(e), kept, WHAT_TO_DO.get(e.errno, "choose another output path"))


@contextlib.contextmanager
def open_output(path: str | Path, mode: str = "w", overwrite: bool = False, **options) -> Iterator[IO]:
    """The file to write ``path`` with (``mode`` "w" or "wb"; ``options`` as open's: encoding, newline), by the
    module's rules; the file is complete under its name only once the block ends without an error. A failed
    write is a `WriteError`; any other error in the block leaves the path as it was."""
    if "b" not in mode:
        options.setdefault("encoding", "utf-8")
    path = Path(path)
    target = check_output(path, overwrite)
    opener = _write_stream if target.stream else _write_replacing
    try:
        with opener(target, mode, options) as f:
            yield f
    except OSError as e:
        if isinstance(e, BrokenPipeError) or (e.errno not in WRITE_ERRNOS and not getattr(e, "attnmt_own", False)):
            raise
        raise _failure(path, target, e) from None


def _own(e: OSError) -> OSError:
    e.attnmt_own = True  # raised by the writer's own steps, whatever its errno
    return e


@contextlib.contextmanager
def _write_stream(target: Target, mode: str, options: dict) -> Iterator[IO]:
    try:
        f = open(target.path, mode, **options)  # noqa: SIM115
    except OSError as e:
        raise _own(e) from None
    try:
        yield f
        try:
            f.flush()
        except OSError as e:
            raise _own(e) from None
    finally:
        with contextlib.suppress(OSError):  # a failed flush is already the error
            f.close()


@contextlib.contextmanager
def _write_replacing(target: Target, mode: str, options: dict) -> Iterator[IO]:
    final = target.path
    tmp = final.parent / TEMPORARY.format(name=final.name, token=secrets.token_hex(4))
    try:
        # 0o666 honours the umask (tempfile.mkstemp would make the file 0600)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        raise _own(e) from None
    try:
        with os.fdopen(fd, mode, **options) as f:
            yield f
            try:
                f.flush()
                os.fsync(f.fileno())
            except OSError as e:
                raise _own(e) from None
        try:
            if target.exists:
                os.chmod(tmp, stat.S_IMODE(os.stat(final).st_mode))
            os.replace(tmp, final)
        except OSError as e:
            raise _own(e) from None
        _sync_folder(final.parent)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # gone already once renamed


def _sync_folder(folder: Path) -> None:
    """The rename itself on disk (a crash right after it keeps the new name), where the file system allows it:
    the file is in place already, so a folder that cannot be synced is no reason to report a failed write."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_text(path: str | Path, text: str, overwrite: bool = False, **options) -> None:
    """``text`` written to ``path`` by `open_output` (UTF-8)."""
    with open_output(path, "w", overwrite=overwrite, **options) as f:
        f.write(text)


def write_bytes(path: str | Path, data: bytes, overwrite: bool = False) -> None:
    """``data`` written to ``path`` by `open_output`."""
    with open_output(path, "wb", overwrite=overwrite) as f:
        f.write(data)


@contextlib.contextmanager
def output_folder(path: str | Path) -> Iterator[Path]:
    """A folder of files written as one (an export): the block fills a temporary folder beside ``path``
    (``.NAME.<8 hex digits>.partial``), which takes ``path``'s place only once the block ends without an error; the
    folder there before (the caller has checked --overwrite) is removed after. A failure leaves ``path`` as
    it was and no temporary folder; a failed write is a `WriteError`."""
    final = Path(os.path.realpath(path))  # a link to a folder: its target is replaced, the link stays
    tmp = final.parent / TEMPORARY.format(name=final.name, token=secrets.token_hex(4))
    target = Target(final, stream=False, exists=final.is_dir())
    try:
        tmp.mkdir(parents=False)
        yield tmp
        old = final.parent / TEMPORARY.format(name=final.name, token=secrets.token_hex(4))
        if target.exists:
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as e:
        if isinstance(e, BrokenPipeError) or (e.errno not in WRITE_ERRNOS and e.errno not in WHAT_TO_DO):
            raise
        raise _failure(Path(path), target, e, "folder") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remove_temporaries(folder: Path) -> None:
    """Delete the temporary files that a killed process's writes left in ``folder``."""
    for pattern in TEMPORARY_GLOBS:
        for p in folder.glob(pattern):
            p.unlink(missing_ok=True)


def refuse_file_in_the_way(path: Path, what: str = "folder") -> None:
    """A UserError naming ``what`` (e.g. "model folder") if ``path`` or one of its parents is a file."""
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            where = "is a file" if part == path else f"is inside {part}, which is a file"
            raise UserError(f"{what} {path} {where}; choose a folder")


def make_folder(path: Path, what: str = "folder") -> None:
    """Create the folder ``path`` and its parents; a file in the way, or a folder that cannot be created,
    is a UserError naming ``what`` and the path."""
    refuse_file_in_the_way(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{what} {path} cannot be created ({e.strerror or e}); choose another folder") from None
