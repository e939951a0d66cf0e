"""The one writer (attnmt/runtime/safe_write.py), through `attnmt translate --output`: a regular file replaced
atomically and only with --overwrite, a FIFO and a device node written to and never replaced, a symbolic link written
through to its target, a full disk or an I/O error leaving the old file whole and no temporary file.

Every special file is made by the test in its temporary folder; nothing outside it is written or replaced."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from attnmt.cli import main


def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.txt"
    path.write_text("a b\nc d e\n", encoding="utf-8")
    return path


def translate(model: Path, tmp_path: Path, output: Path, *extra: str) -> int:
    return main(["translate", "--model", str(model), "--input", str(source(tmp_path)), "--output", str(output),
                 "--beam", "1", *extra])


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


def test_overwrite_replaces_a_file_atomically_and_keeps_its_permissions(tiny_model, tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o640)
    before = out.stat().st_ino
    assert translate(tiny_model, tmp_path, out) == 2  # without --overwrite
    assert out.read_text(encoding="utf-8") == "old\n"
    assert translate(tiny_model, tmp_path, out, "--overwrite") == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2
    assert out.stat().st_ino != before  # a new file renamed into place, not the old one truncated
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("extra", [(), ("--overwrite",)])
def test_a_fifo_is_written_to_and_never_replaced(tiny_model, tmp_path, capsys, extra):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # its read end open before the command runs (non-blocking: no thread waits for a writer, so none can be left
    # waiting); the two lines fit the pipe's buffer, read once the command has closed its end
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert translate(tiny_model, tmp_path, fifo, *extra) == 0  # a pipe needs no --overwrite: nothing is replaced
        received = os.read(reader, 1 << 16)  # nothing if a file was put in the pipe's place
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe, not a regular file in its place
    assert len(received.decode("utf-8").splitlines()) == 2
    assert temporaries(tmp_path) == []


def device_node(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device of the memory driver (major 1: minor 3 is /dev/null's, 7 /dev/full's) made in tmp_path;
    the test is skipped where mknod is not permitted or the folder's file system does not open devices."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        with open(node, "wb"):
            pass
    except PermissionError as e:
        pytest.skip(f"cannot make or open a device node in {tmp_path} ({e.strerror}: mknod needs CAP_MKNOD, and "
                    "a file system mounted nodev opens none)")
    return node


def test_a_device_node_is_written_to_and_never_replaced(tiny_model, tmp_path, capsys):
    null = device_node(tmp_path, "null", 3)
    assert translate(tiny_model, tmp_path, null) == 0
    assert translate(tiny_model, tmp_path, null, "--overwrite") == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    full = device_node(tmp_path, "full", 7)  # every write: the kernel's ENOSPC
    assert translate(tiny_model, tmp_path, full) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnmt: error: cannot write {full}: No space left on device; free some space and run the command again"]
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    assert temporaries(tmp_path) == []


def test_a_symbolic_link_is_written_through_to_its_target(tiny_model, tmp_path, capsys):
    target, link = tmp_path / "target.txt", tmp_path / "link.txt"
    target.write_text("old\n", encoding="utf-8")
    link.symlink_to(target)
    assert translate(tiny_model, tmp_path, link) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnmt: error: {link} (a link to {target}) exists; choose another output path or pass --overwrite"]
    assert translate(tiny_model, tmp_path, link, "--overwrite") == 0
    assert link.is_symlink() and os.readlink(link) == str(target)  # the link stays a link
    assert len(target.read_text(encoding="utf-8").splitlines()) == 2


def test_a_link_to_nothing_is_refused(tiny_model, tmp_path, capsys):
    link = tmp_path / "dangling.txt"
    link.symlink_to(tmp_path / "elsewhere" / "missing.txt")
    assert translate(tiny_model, tmp_path, link, "--overwrite") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"attnmt: error: {link} is a symbolic link to {tmp_path / 'elsewhere' / 'missing.txt'}, "
                           "which does not exist")
    assert link.is_symlink() and not (tmp_path / "elsewhere").exists()


def test_a_folder_is_refused_before_the_work(tiny_model, tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    assert translate(tiny_model, tmp_path, tmp_path / "folder", "--overwrite") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnmt: error: {tmp_path / 'folder'} is a folder; choose a file to write"]


@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "No space left on device"), (errno.EIO, "Input/output error")])
def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tiny_model, tmp_path, monkeypatch, capsys,
                                                                      code, reason):
    import attnmt.runtime.safe_write as safe_write

    out = tmp_path / "out.txt"
    out.write_text("precious\n", encoding="utf-8")

    def fsync(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(safe_write.os, "fsync", fsync)
    assert translate(tiny_model, tmp_path, out, "--overwrite") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"attnmt: error: cannot write {out}: {reason}; out.txt still holds its previous contents")
    assert out.read_text(encoding="utf-8") == "precious\n"
    assert temporaries(tmp_path) == []


def test_dev_stdout_is_written_to_without_overwrite(tiny_model, tmp_path, capfd):
    """/dev/stdout names the process's standard output (here pytest's capture file): written to, never replaced,
    even though the link leads to a regular file."""
    assert translate(tiny_model, tmp_path, Path("/dev/stdout")) == 0
    assert len(capfd.readouterr().out.splitlines()) == 2
